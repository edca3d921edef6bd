//! Lowering: the checked script to eBPF programs and the `Plan` the runtime follows.
//!
//! Programs of three kinds (`programs`): one per probe instance (`check::Instance`),
//! attached at every site of its functions with the function's index as attach cookie;
//! one timing program at the entries of the functions whose return probes use
//! `elapsed`; one that frees a goroutine's `self` variables when it exits. Each counts
//! what it loses, and with accounting its hits (`accounting`). With `--cgroup`, each program
//! attached to the target first returns for a task outside the cgroup (`scope`).

pub mod accounting;
pub mod aeshash;
mod aeskeyfirst;
pub mod agg;
pub mod arith;
mod asserts;
mod capture;
pub mod carry;
mod coalesce;
pub mod codegen;
mod context;
mod counting;
pub mod events;
mod expr;
mod fields;
pub mod float;
pub mod frames;
pub mod generics;
pub mod globals;
pub mod gomap;
pub mod goroutine;
mod guard;
pub mod hashcheck;
pub mod ir;
pub mod layout;
pub mod loaded;
mod mapcapture;
mod maplookup;
pub mod mapops;
pub mod maps;
mod mapwalk;
mod memhash;
mod paths;
mod planning;
mod programs;
mod runtime_programs;
pub mod scope;
mod sdkcontext;
pub mod slotted;
pub mod spans;
mod stmts;
pub mod stored;
mod unread;
pub mod unwind;
pub mod values;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_goroutines;
#[cfg(test)]
mod tests_guard;
#[cfg(test)]
mod tests_hits;
#[cfg(test)]
mod tests_interleave;
#[cfg(test)]
mod tests_reads;
#[cfg(test)]
mod tests_slotted;

use crate::bpf::builder::Program;
use crate::check::Checked;
use crate::diag::{Diagnostic, Diagnostics, Sources};
use crate::plan::Plan;
use crate::syntax::ast::{Script, Span};

pub use accounting::Settings;

/// The compiled script: programs (by name) and the plan that says how to run them.
#[derive(Debug)]
pub struct Lowered {
    pub programs: Vec<(String, Program)>,
    pub plan: Plan,
    /// Whole values cut for want of room in their record: where, and how many parts.
    pub notes: Vec<(Span, u32)>,
}

#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    #[error("{what} cannot be compiled yet")]
    Unsupported { span: Span, what: String },
    #[error(
        "the probe needs {needed} bytes of stack for values live at once; gtrace allows {}",
        ir::frame::MAX_VIRTUAL
    )]
    Stack { span: Span, needed: i32 },
    #[error("internal error building program {program}: {source}")]
    Build { span: Span, program: String, source: ir::IrError },
    #[error("self variables need runtime.goexit0 and the layout of runtime.g (from DWARF) to be freed when a goroutine exits")]
    NoGoexit { span: Span },
    #[error(
        "`{function}` is not in the binary, or cannot hold a probe: gtrace needs it to follow calls that panics end"
    )]
    NoRuntimeFunction { span: Span, function: String },
    #[error("on panic needs to know where the runtime keeps its panics (runtime.g and runtime._panic): this binary has no DWARF, and its Go version is not one gtrace has measured")]
    NoPanicLayout { span: Span },
    #[error("m[k] needs the layout of this Go release's maps (runtime.hmap, or internal/runtime/maps since Go 1.24): this binary has no DWARF, and its Go version is not one gtrace has measured")]
    NoMapLayout { span: Span },
    #[error("no file offset for {function} at {addr:#x}")]
    NoFileOffset { span: Span, function: String, addr: u64 },
    #[error("this needs {bytes} bytes in one record; eBPF reaches at most {} bytes from its start", i16::MAX)]
    TooLarge { span: Span, bytes: usize },
    #[error("this probe compiles to more eBPF than one program can hold ({detail})")]
    ProgramTooLarge { span: Span, detail: String },
    #[error("the parameters this return probe reads take more than {} bytes in `{function}`, what gtrace carries from an entry to its return", carry::MAX_CARRIED)]
    TooMuchCarried { span: Span, function: String },
    #[error(
        "`{name}` is only partly kept here: the {size} bytes at offset {offset} that this reads are optimized away"
    )]
    OptimizedAway { span: Span, name: String, offset: u64, size: u64 },
    #[error("this probe uses {maps} maps; the kernel allows at most {MAX_MAPS_PER_PROGRAM} in one program")]
    TooManyMaps { span: Span, maps: usize },
}

/// The offset `off + add` as an instruction holds it (16 bits, signed); an error at
/// `span` when a record or literal reaches past that.
pub(crate) fn offset(span: Span, off: i16, add: usize) -> Result<i16, LowerError> {
    i64::try_from(add)
        .ok()
        .and_then(|add| i16::try_from(i64::from(off) + add).ok())
        .ok_or(LowerError::TooLarge { span, bytes: add })
}

/// How many maps one program may use (the kernel's MAX_USED_MAPS).
pub const MAX_MAPS_PER_PROGRAM: usize = 64;

impl LowerError {
    pub fn unsupported(span: Span, what: &str) -> LowerError {
        LowerError::Unsupported { span, what: what.to_string() }
    }

    /// The error as a diagnostic at the place in the script it comes from.
    pub fn diagnostic(&self) -> Diagnostic {
        let d = |span: &Span| Diagnostic::error(*span, self.to_string());
        match self {
            LowerError::Unsupported { span, .. } => d(span).label("not supported yet"),
            LowerError::Stack { span, .. } => {
                d(span).label("too much stack").hint("split the probe into several probes of the same function")
            }
            LowerError::Build { span, .. } => d(span)
                .label("in this probe")
                .hint("this is a bug in gtrace; please report it with the script and `--emit asm`"),
            LowerError::NoGoexit { span } => {
                d(span).label("a self variable").hint("keep the value in a map keyed by goid instead")
            }
            LowerError::TooLarge { span, .. } => d(span)
                .label("too large")
                .hint("use a shorter string literal, or print fewer or shorter values (--string-limit; for whole values --depth, --max-fields, --max-elems)"),
            LowerError::NoRuntimeFunction { span, .. } => d(span)
                .label("needs the Go runtime's panic functions")
                .hint("is this a Go program built by Go 1.17 or later?"),
            LowerError::NoPanicLayout { span } => d(span)
                .label("cannot follow panics in this binary")
                .hint("give its DWARF kept aside with --debug-file, or trace a build with DWARF"),
            LowerError::NoMapLayout { span } => d(span)
                .label("cannot read this map here")
                .hint("give its DWARF kept aside with --debug-file, or trace a build with DWARF"),
            LowerError::NoFileOffset { span, .. } => d(span)
                .label("probed here")
                .hint("the function's code is not in the file: was the binary modified after it was linked?"),
            LowerError::ProgramTooLarge { span, .. } => {
                d(span).label("too large").hint("split it into several probes of the same function, each doing part")
            }
            LowerError::TooManyMaps { span, .. } => {
                d(span).label("too many maps").hint("split it into several probes of the same function")
            }
            LowerError::TooMuchCarried { span, .. } => d(span)
                .label("too much to carry")
                .hint("read what you need of the large parameters at the entry, into self variables"),
            LowerError::OptimizedAway { span, .. } => d(span)
                .label("partly optimized away here")
                .hint("read a part the compiler keeps here, or probe a line where it keeps all of it"),
        }
    }
}

/// Lowers every instance of `checked`, with the limits and accounting `settings` asks
/// for. The first error is reported in `diags` and lowering stops there (later programs
/// could only repeat it).
pub fn lower(
    script: &Script,
    checked: &Checked,
    sources: &Sources,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<Lowered> {
    match programs::lower_all(script, checked, sources, settings) {
        Ok(lowered) => {
            for (span, parts) in &lowered.notes {
                diags.push(
                    Diagnostic::warning(*span, format!("this value is cut to fit one event record ({} bytes from the record's start): {parts} of its parts print as {{...}}", i16::MAX))
                        .label("cut for room")
                        .hint("print the fields you need (`print(r.Method, r.URL.Path)`), or show less of it: --depth, --max-fields, --max-elems, --string-limit"),
                );
            }
            Some(lowered)
        }
        Err(e) => {
            diags.push(e.diagnostic());
            None
        }
    }
}
