//! The compiler as a library: the order of the passes, from a script to a BPF object and
//! the plan the runtime follows.
//!
//!     library (use, fn, param) → check (against the target) → lower → object
//!
//! Every pass reports into one `Diagnostics` and returns `None` when it found an error;
//! `compile` stops between passes and returns what was found with the sources it points
//! into. Nothing here needs privileges: `--check` runs all of it.

use crate::bpf::builder::Program;
use crate::check;
use crate::diag::{Diagnostic, Diagnostics, Report, Sources};
use crate::gobin::GoBinary;
use crate::library::{self, Root};
use crate::lower::{self, Lowered};
use crate::object::{self, BpfObject, MapDef, ProgramCode};
use crate::plan::Plan;
use crate::syntax::ast::{Item, Script};
use std::path::PathBuf;

/// What the command line says about compiling.
#[derive(Clone, Debug)]
pub struct Options {
    /// `-I DIR`: where `use` looks for libraries first.
    pub include: Vec<PathBuf>,
    /// `--set NAME=VALUE`, in order.
    pub sets: Vec<String>,
    /// `--otlp` is given: the param `otlp` is true.
    pub otlp: bool,
    /// `--string-limit`: bytes read of a Go string.
    pub string_limit: u32,
    /// `--map-size`, `--rate`, and whether probes count their hits (`--stats`,
    /// `--budget`).
    pub lowering: lower::Settings,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            include: Vec::new(),
            sets: Vec::new(),
            otlp: false,
            string_limit: check::govalues::STRING_LIMIT,
            lowering: lower::Settings::default(),
        }
    }
}

/// A compiled script: the object's bytes and the plan (together, everything the runtime
/// needs), the programs as lowered (for `--emit asm`), and the warnings.
pub struct Compiled {
    pub plan: Plan,
    pub object: Vec<u8>,
    pub programs: Vec<(String, Program)>,
    /// Warnings, with the sources they point into (no errors: those fail the compile).
    pub warnings: Report,
    /// How many probes the script (with its libraries) has.
    pub script_probes: usize,
}

impl Compiled {
    /// How many uprobe sites the plan attaches to.
    pub fn uprobe_sites(&self) -> usize {
        self.plan.uprobe_points()
    }
}

/// Reads the script and its libraries into one script of probes.
pub fn parse(root: Root, opts: &Options) -> Result<(Sources, Script), Report> {
    let mut sources = Sources::default();
    let mut diags = Diagnostics::default();
    let lib = library::Options { include: opts.include.clone(), sets: opts.sets.clone(), otlp: opts.otlp };
    match library::load(root, &lib, &mut sources, &mut diags) {
        Some(script) if !diags.has_errors() => Ok((sources, script)),
        _ => Err(Report { sources, diagnostics: diags.items }),
    }
}

/// Compiles `root` (and the libraries it uses) against `target`.
pub fn compile(root: Root, target: &dyn GoBinary, opts: &Options) -> Result<Compiled, Report> {
    let (sources, script) = parse(root, opts)?;
    let Some(at) = library::tracecontext::first_span(&script) else {
        return compile_script(sources, &script, target, opts);
    };
    // With span(): the probes that read the program's trace context, where they
    // compile for this binary (else a warning, and spans of gtrace's own traces).
    let (mut with_sources, mut with_script) = (sources.clone(), script.clone());
    let has = |name: &str| !target.find(name).is_empty();
    let why = match library::tracecontext::add(&mut with_script, &mut with_sources, &has) {
        Ok(file) => match compile_script(with_sources, &with_script, target, opts) {
            Ok(compiled) => return Ok(compiled),
            Err(report) if report.diagnostics.iter().all(|d| d.span.file != file) => return Err(report),
            Err(report) => report.diagnostics.iter().find(|d| d.span.file == file).map(|d| d.message.clone()),
        },
        Err(found) => found.first().map(|d| d.message.clone()),
    };
    let mut compiled = compile_script(sources, &script, target, opts)?;
    let why = why.unwrap_or_default();
    compiled.warnings.diagnostics.push(library::tracecontext::left_out(at, &why));
    Ok(compiled)
}

/// The passes after parsing: check, lower, and the object.
pub fn compile_script(
    sources: Sources,
    script: &Script,
    target: &dyn GoBinary,
    opts: &Options,
) -> Result<Compiled, Report> {
    let mut diags = Diagnostics::default();
    let fail = |sources, diags: Diagnostics| Report { sources, diagnostics: diags.items };
    let Some(checked) = check::check(script, target, &mut diags, opts.string_limit) else {
        return Err(fail(sources, diags));
    };
    let Some(lowered) = lower::lower(script, &checked, &sources, &opts.lowering, &mut diags) else {
        return Err(fail(sources, diags));
    };
    let object = match object::write(&object_of(&lowered)) {
        Ok(bytes) => bytes,
        Err(e) => {
            let span = script.items.iter().find_map(|i| match i {
                Item::Probe(p) => Some(p.span),
                _ => None,
            });
            let span = span.unwrap_or_default();
            diags.push(
                Diagnostic::error(span, format!("internal error writing the BPF object: {e}"))
                    .hint("this is a bug in gtrace; please report it with the script"),
            );
            return Err(fail(sources, diags));
        }
    };
    let Lowered { programs, plan, .. } = lowered;
    let script_probes = script.items.iter().filter(|i| matches!(i, Item::Probe(_))).count();
    Ok(Compiled { plan, object, programs, warnings: fail(sources, diags), script_probes })
}

/// The object the lowered programs and maps make, each program in the section the plan
/// names for it.
fn object_of(lowered: &Lowered) -> BpfObject {
    let section = |name: &str| {
        lowered.plan.probes.iter().find(|p| p.program == name).map(|p| p.section.clone()).unwrap_or_default()
    };
    BpfObject {
        license: object::LICENSE.into(),
        maps: lowered.plan.maps.iter().map(MapDef::from).collect(),
        programs: lowered
            .programs
            .iter()
            .map(|(name, program)| ProgramCode { name: name.clone(), section: section(name), program: program.clone() })
            .collect(),
    }
}
