//! Whether a stdlib library run by name fits the program: `gtrace http` on a program
//! with no net/http server (a gRPC server, say) has none of the functions the library
//! probes. That is said as one sentence, what the program lacks, with the stdlib
//! libraries that do fit it, instead of an error for each probe of the library.

use super::{stdlib, Options};
use crate::diag::{Diagnostics, Sources};
use crate::gobin::Target;
use crate::syntax::ast::{Item, ProbeKind};
use std::path::PathBuf;

/// A stdlib library none of whose functions is in the program.
#[derive(Debug, thiserror::Error)]
#[error(
    "`gtrace {library}`: {} has no {needs}: none of the {functions} functions the library probes is in it",
    binary.display()
)]
pub struct NotApplicable {
    pub library: String,
    /// What a program must have for the library (`stdlib::needs`).
    pub needs: String,
    pub binary: PathBuf,
    pub functions: usize,
    /// The stdlib libraries of a package the program has: (name, what they need).
    pub fitting: Vec<(String, String)>,
}

impl NotApplicable {
    /// What to run instead.
    pub fn hint(&self) -> String {
        if self.fitting.is_empty() {
            return "`gtrace --list-libraries` lists the stdlib; `gtrace -l 'PATTERN'` lists the program's functions"
                .to_string();
        }
        let each: Vec<String> =
            self.fitting.iter().map(|(name, needs)| format!("for its {needs}: `gtrace {name}`")).collect();
        each.join("; ")
    }
}

/// Ok when `library` (a stdlib library with a `stdlib::needs`) has some function in
/// `target`, or needs nothing but the Go runtime.
pub fn check(library: &str, target: &Target) -> Result<(), NotApplicable> {
    let Some(needs) = stdlib::needs(library) else { return Ok(()) };
    let patterns = patterns(library);
    if patterns.is_empty() || patterns.iter().any(|p| found(p, target)) {
        return Ok(());
    }
    let fitting = stdlib::names()
        .filter(|&name| name != library)
        .filter_map(|name| stdlib::needs(name).map(|needs| (name, needs)))
        .filter(|(name, _)| patterns_of_all_found(name, target))
        .map(|(name, needs)| (name.to_string(), needs.to_string()))
        .collect();
    Err(NotApplicable {
        library: library.to_string(),
        needs: needs.to_string(),
        binary: target.path().to_path_buf(),
        functions: patterns.len(),
        fitting,
    })
}

/// Whether every function `library` probes is in `target`.
fn patterns_of_all_found(library: &str, target: &Target) -> bool {
    let patterns = patterns(library);
    !patterns.is_empty() && patterns.iter().all(|p| found(p, target))
}

fn found(pattern: &str, target: &Target) -> bool {
    !target.find(pattern).is_empty() || !target.find_inlined(pattern).is_empty()
}

/// The function patterns of a stdlib library's entry, return and panic probes (each once).
fn patterns(library: &str) -> Vec<String> {
    let Some(root) = super::root_from_stdlib(library) else { return Vec::new() };
    let (mut sources, mut diags) = (Sources::default(), Diagnostics::default());
    let Some(script) = super::load(root, &Options::default(), &mut sources, &mut diags) else { return Vec::new() };
    let mut out: Vec<String> = Vec::new();
    for item in &script.items {
        let Item::Probe(probe) = item else { continue };
        if let ProbeKind::Entry(ps) | ProbeKind::Return(ps) | ProbeKind::Panic(ps) = &probe.kind {
            for p in ps {
                if !out.contains(&p.text) {
                    out.push(p.text.clone());
                }
            }
        }
    }
    out
}
