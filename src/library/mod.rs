//! Libraries: from one script to the one program the checker sees. `load` reads the
//! script and every library it names with `use` (from -I folders, the script's folder,
//! then the stdlib built into gtrace), merges their items into one `Script` with spans
//! into each file, gives every `param` its value (its default or `--set NAME=VALUE`),
//! and inlines every `fn` helper where it is called. What it returns holds only probes.
//!
//! The steps, one module each: `resolve` (finding and parsing files), `merge` (one table
//! of names, each defined once), `params` (values of the settings), `inline` (helpers
//! and params substituted into the probes), `stdlib` (the embedded libraries), `applies`
//! (whether a stdlib library run by name fits the program).

pub mod applies;
mod inline;
mod merge;
mod params;
mod resolve;
pub mod stdlib;
pub mod tracecontext;

use crate::diag::{Diagnostic, Diagnostics, Sources};
use crate::syntax::ast::Script;
use std::path::PathBuf;

/// The script gtrace was given: its name for diagnostics, its text, and the folder its
/// `use` lines look in after the -I folders (none for a stdlib library given by name).
pub struct Root {
    pub name: String,
    pub text: String,
    pub dir: Option<PathBuf>,
}

/// Where libraries are looked for and what the command line sets.
#[derive(Default)]
pub struct Options {
    /// `-I DIR`, searched first, in order.
    pub include: Vec<PathBuf>,
    /// `--set NAME=VALUE`, in order; a later one wins.
    pub sets: Vec<String>,
    /// `--otlp` is given: the predefined param `otlp` is true (else false).
    pub otlp: bool,
}

/// Reads `root` and the libraries it uses (each file added to `sources`, ExprIds from one
/// counter), and returns one script of probes with params and helpers substituted.
/// Every problem found goes into `diags`, each pointing into the file it is in; None
/// when one is an error.
pub fn load(root: Root, opts: &Options, sources: &mut Sources, diags: &mut Diagnostics) -> Option<Script> {
    match read_once(root, opts, sources) {
        Ok(script) => Some(script),
        Err(found) => {
            diags.items.extend(found);
            None
        }
    }
}

/// What `load` read last into empty sources, and from what.
struct Read {
    key: (String, String, Option<PathBuf>, Vec<PathBuf>, Vec<String>, bool),
    sources: Sources,
    script: Result<Script, Vec<Diagnostic>>,
}

thread_local! {
    static LAST_READ: std::cell::RefCell<Option<Read>> = const { std::cell::RefCell::new(None) };
}

/// `load_script`, or a copy of what it returned for the same root and options into
/// empty sources: a run reads its script up to three times (before the target is
/// opened, to say a syntax error as one; a stdlib library's check that it fits the
/// program; the compile), and parsing stdlib/http.gt took 3 ms each time on Caddy's
/// `gtrace http`. The copy is what reading again would give (the same files, the same
/// ids).
fn read_once(root: Root, opts: &Options, sources: &mut Sources) -> Result<Script, Vec<Diagnostic>> {
    if !sources.is_empty() {
        return load_script(root, opts, sources);
    }
    let key =
        (root.name.clone(), root.text.clone(), root.dir.clone(), opts.include.clone(), opts.sets.clone(), opts.otlp);
    let last =
        LAST_READ.with(|l| l.borrow().as_ref().filter(|r| r.key == key).map(|r| (r.sources.clone(), r.script.clone())));
    if let Some((read, script)) = last {
        *sources = read;
        return script;
    }
    let script = load_script(root, opts, sources);
    LAST_READ.with(|l| *l.borrow_mut() = Some(Read { key, sources: sources.clone(), script: script.clone() }));
    script
}

/// Drops what `load` kept of the last script it read (a trace that runs for days keeps
/// no copy of its script's syntax).
pub fn forget_reads() {
    LAST_READ.with(|l| l.borrow_mut().take());
}

fn load_script(root: Root, opts: &Options, sources: &mut Sources) -> Result<Script, Vec<Diagnostic>> {
    let mut next_id = 0u32;
    let files = resolve::load_all(root, &opts.include, sources, &mut next_id)?;
    let program = merge::merge(files)?;
    let mut values = params::values(&program.params, &opts.sets, sources, &mut next_id)?;
    params::predefine(&mut values, opts.otlp, sources, &mut next_id);
    inline::inline(program, &values, &mut next_id)
}

/// A library given by name on the command line (`gtrace gc -p PID`): its text, if
/// `name` is a stdlib library rather than a path.
pub fn root_from_stdlib(name: &str) -> Option<Root> {
    stdlib::get(name).map(|text| Root { name: format!("stdlib/{name}.gt"), text: text.to_string(), dir: None })
}

#[cfg(test)]
mod tests;
