//! Lowering: the checked script to eBPF programs and the `Plan` the runtime follows.
//!
//! One program per probe instance (`check::Instance`), attached at every site of its
//! functions with the function's index as attach cookie; one timing program at the
//! entries of the functions whose return probes use `elapsed`.

pub mod agg;
pub mod codegen;
pub mod frame;
pub mod maps;
pub mod values;

use crate::bpf::builder::{BuildError, Program};
use crate::check::{Builtin, Checked, InstanceKind, Name};
use crate::diag::{Diagnostic, Sources};
use crate::plan::{AttachPoint, Plan, ProbeAttach, ProbeSpec};
use crate::syntax::ast::{Item, Script, Span};
use crate::target::Target;
use codegen::Gen;

/// The compiled script: programs (by name) and the plan that says how to run them.
#[derive(Debug)]
pub struct Lowered {
    pub programs: Vec<(String, Program)>,
    pub plan: Plan,
}

#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    #[error("{what} cannot be compiled yet")]
    Unsupported { span: Span, what: String },
    #[error("the probe needs {needed} bytes of stack; eBPF allows 512")]
    Stack { span: Span, needed: i32 },
    #[error("internal error building program {program}: {source}")]
    Build { program: String, source: BuildError },
    #[error("no file offset for {function} at {addr:#x}")]
    NoFileOffset { function: String, addr: u64 },
}

impl LowerError {
    pub fn unsupported(span: Span, what: &str) -> LowerError {
        LowerError::Unsupported { span, what: what.to_string() }
    }

    /// The error as a diagnostic, when it points into the script.
    pub fn diagnostic(&self) -> Option<Diagnostic> {
        match self {
            LowerError::Unsupported { span, .. } => Some(Diagnostic::error(*span, self.to_string()).label("not supported yet")),
            LowerError::Stack { span, .. } => {
                Some(Diagnostic::error(*span, self.to_string()).label("too much stack").hint("split the probe, or use fewer map keys"))
            }
            _ => None,
        }
    }
}

pub fn lower(script: &Script, checked: &Checked, target: &Target, sources: &Sources) -> Result<Lowered, LowerError> {
    let mut plan = Plan { binary: target.path().to_path_buf(), ..Plan::default() };
    for inst in &checked.instances {
        for f in &inst.functions {
            if !plan.functions.contains(&f.name) {
                plan.functions.push(f.name.clone());
            }
        }
    }
    let cookie = |plan: &Plan, name: &str| plan.functions.iter().position(|f| f == name).unwrap_or(0) as u64;
    let point = |plan: &Plan, function: &str, addr: u64| -> Result<AttachPoint, LowerError> {
        let file_offset = target.file_offset(addr).ok_or_else(|| LowerError::NoFileOffset { function: function.to_string(), addr })?;
        Ok(AttachPoint { function: function.to_string(), address: addr, file_offset, cookie: cookie(plan, function) })
    };

    // Functions whose entries must be timed for `elapsed`.
    let mut timed: Vec<(String, u64)> = Vec::new();
    for inst in checked.instances.iter().filter(|i| i.uses_elapsed) {
        for f in &inst.functions {
            if !timed.iter().any(|(n, _)| *n == f.name) {
                timed.push((f.name.clone(), f.entry));
            }
        }
    }
    let maps = maps::Maps::new(&checked.maps, !timed.is_empty());
    let g = target.g_layout();
    let mut events = Vec::new();
    let mut programs = Vec::new();

    for (i, inst) in checked.instances.iter().enumerate() {
        let Item::Probe(probe) = &script.items[inst.item] else { continue };
        let name = format!("p{i}");
        let mut gen = Gen::new(&inst.facts, target.types(), &maps, sources, &mut events);
        gen.b.comment(format!("{}", sources.line_text(probe.span)));
        gen.prologue();
        let uses_goid = inst.facts.names.values().any(|n| *n == Name::Builtin(Builtin::Goid));
        if inst.uses_elapsed || uses_goid {
            let key = gen.activation_key(g, probe.span)?;
            if inst.uses_elapsed {
                gen.load_elapsed(key, probe.span)?;
            }
        }
        gen.block(&probe.body)?;
        gen.epilogue();
        let program = gen.b.finish().map_err(|source| LowerError::Build { program: name.clone(), source })?;
        let attach = match inst.kind {
            InstanceKind::Entry => ProbeAttach::Uprobe(
                inst.functions.iter().map(|f| point(&plan, &f.name, f.entry)).collect::<Result<_, _>>()?,
            ),
            InstanceKind::Return => ProbeAttach::Uprobe(
                inst.functions
                    .iter()
                    .flat_map(|f| f.returns.iter().map(move |r| (f, *r)))
                    .map(|(f, r)| point(&plan, &f.name, r))
                    .collect::<Result<_, _>>()?,
            ),
            InstanceKind::Begin => ProbeAttach::Begin,
            InstanceKind::End => ProbeAttach::End,
            InstanceKind::Interval { nanos } => ProbeAttach::Interval { nanos },
        };
        plan.probes.push(ProbeSpec { program: name.clone(), attach, describe: inst.describe.clone() });
        programs.push((name, program));
    }

    if !timed.is_empty() {
        let name = "time_entries".to_string();
        let facts = crate::check::Facts::default();
        let mut gen = Gen::new(&facts, target.types(), &maps, sources, &mut events);
        gen.b.comment("time the entry of every call whose return uses `elapsed`");
        gen.prologue();
        let span = Span::default();
        let key = gen.activation_key(g, span)?;
        gen.store_entry_time(key, span)?;
        gen.epilogue();
        let program = gen.b.finish().map_err(|source| LowerError::Build { program: name.clone(), source })?;
        let points = timed.iter().map(|(f, addr)| point(&plan, f, *addr)).collect::<Result<_, _>>()?;
        plan.probes.push(ProbeSpec { program: name.clone(), attach: ProbeAttach::Uprobe(points), describe: "entry times for elapsed".into() });
        programs.push((name, program));
    }

    let mut maps = maps;
    maps.add_scratch(events.iter().map(|e| e.size).max().unwrap_or(8));
    plan.maps = maps.specs;
    plan.events = events;
    Ok(Lowered { programs, plan })
}
