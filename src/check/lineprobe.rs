//! The provider of `on line "FILE:LINE"` probes: the places the line starts (the target's
//! line table, see gobin/lines.rs), as probe sites named after the function the line is
//! in, or the error that says why there are none: no DWARF, no such file, a file name
//! that several files end with, a line without code (with the nearest lines that have
//! some). Sites whose instruction uprobes refuse are passed over like any other.

use super::probes::PassedOver;
use super::skips::SkipReason;
use super::FuncSite;
use crate::diag::{Diagnostic, Diagnostics};
use crate::gobin::{GoBinary, LineError};
use crate::syntax::ast::LineSpec;

/// The places where `spec`'s line starts; errors into `diags`.
pub fn sites(
    spec: &LineSpec,
    target: &dyn GoBinary,
    diags: &mut Diagnostics,
    passed_over: &mut Vec<PassedOver>,
) -> Vec<FuncSite> {
    if spec.line == 0 {
        return Vec::new(); // the parser said why
    }
    let found = match target.line_sites(&spec.file, spec.line) {
        Ok(sites) => sites,
        Err(e) => {
            diags.push(error(spec, target, e));
            return Vec::new();
        }
    };
    let inexact = found.iter().filter(|s| !s.exact).count();
    if inexact > 0 {
        diags.push(
            Diagnostic::warning(
                spec.span,
                format!(
                    "at {inexact} of the places where {}:{} starts, one run of the line can pass two of them",
                    spec.file, spec.line
                ),
            )
            .label("some runs of the line may be counted twice")
            .hint("the compiler spread this line over several paths that join; a line next to it may count exactly"),
        );
    }
    let mut out = Vec::new();
    for site in found {
        match target.uprobe_refusal(site.addr) {
            Some(r) => passed_over.push((site.frame.clone(), Some(site.addr), SkipReason::Refused(r))),
            None => out.push(FuncSite {
                name: site.frame.clone(),
                entry: site.addr,
                returns: Vec::new(),
                inlined: None,
                line: Some(site),
                dictionary: None,
            }),
        }
    }
    out
}

/// Why `spec` has no place to probe, said at the quoted line.
fn error(spec: &LineSpec, target: &dyn GoBinary, e: LineError) -> Diagnostic {
    let at = format!("{}:{}", spec.file, spec.line);
    match e {
        LineError::NoDwarf => Diagnostic::error(
            spec.span,
            format!("{} has no DWARF line table: line probes need one", target.path().display()),
        )
        .label("no line table")
        .hint("the binary was stripped (-ldflags=-s -w, or strip); give its DWARF with `--debug-file PATH` (kept aside with objcopy --only-keep-debug), or probe functions by name"),
        LineError::NoFile { close } => {
            let mut d = Diagnostic::error(spec.span, format!("no source file `{}` in the binary's line table", spec.file))
                .label("no such file");
            if !close.is_empty() {
                d = d.hint(format!("did you mean {}?", close.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")));
            }
            d.hint("FILE is the end of a source path as the binary was built: `main.go`, `server/handler.go`")
        }
        LineError::Ambiguous { candidates } => {
            let shown: Vec<String> = candidates.iter().take(5).map(|c| format!("`{c}`")).collect();
            let more = candidates.len().saturating_sub(5);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            Diagnostic::error(spec.span, format!("`{}` names {} files", spec.file, candidates.len()))
                .label("ambiguous")
                .hint(format!("they are {}{more}: write more of the path", shown.join(", ")))
        }
        LineError::NoCode { path, before, after } => {
            let near: Vec<String> = [before, after].into_iter().flatten().map(|l| format!("{}:{l}", spec.file)).collect();
            let d = Diagnostic::error(spec.span, format!("{at} has no code ({path})"))
                .label("no statement starts on this line");
            if near.is_empty() {
                d
            } else {
                d.hint(format!("the nearest lines with code: {}", near.join(", ")))
            }
        }
        LineError::Target(e) => {
            Diagnostic::error(spec.span, format!("cannot read the line table of {}: {e}", target.path().display()))
                .label("for this line")
        }
    }
}
