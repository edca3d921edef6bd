//! Lowering: the checked script to eBPF programs and the `Plan` the runtime follows.
//!
//! One program per probe instance (`check::Instance`), attached at every site of its
//! functions with the function's index as attach cookie; one timing program at the
//! entries of the functions whose return probes use `elapsed`.

pub mod agg;
pub mod codegen;
pub mod events;
pub mod frame;
pub mod goroutine;
pub mod mapops;
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
    #[error("self variables need runtime.goexit0 and the layout of runtime.g (from DWARF) to be freed when a goroutine exits")]
    NoGoexit,
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
            LowerError::Unsupported { span, .. } => {
                Some(Diagnostic::error(*span, self.to_string()).label("not supported yet"))
            }
            LowerError::Stack { span, .. } => Some(
                Diagnostic::error(*span, self.to_string())
                    .label("too much stack")
                    .hint("split the probe, or use fewer map keys"),
            ),
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
        let file_offset = target
            .file_offset(addr)
            .ok_or_else(|| LowerError::NoFileOffset { function: function.to_string(), addr })?;
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
    let mut maps = maps::Maps::new(&checked.maps, !timed.is_empty());
    if !checked.self_vars.is_empty() {
        maps.add_self_vars(checked.self_vars.values().map(|v| v.ty.record_size()).max().unwrap_or(8));
    }
    let maps = maps;
    let g = target.g_layout();
    let mut events = Vec::new();
    let mut programs = Vec::new();
    let mut return_programs: Vec<String> = Vec::new();

    for (i, inst) in checked.instances.iter().enumerate() {
        let Item::Probe(probe) = &script.items[inst.item] else { continue };
        let name = format!("p{i}");
        let mut gen = Gen::new(&inst.facts, &checked.types, &maps, &checked.self_vars, sources, &mut events);
        gen.b.comment(sources.located_line(probe.span));
        gen.prologue();
        let uses_goid = inst.facts.uses_self || inst.facts.names.values().any(|n| *n == Name::Builtin(Builtin::Goid));
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
        if inst.kind == InstanceKind::Return {
            return_programs.push(name.clone());
        }
        plan.probes.push(ProbeSpec { program: name.clone(), attach, describe: inst.describe.clone() });
        programs.push((name, program));
    }

    if !timed.is_empty() {
        let name = "time_entries".to_string();
        let facts = crate::check::Facts::default();
        let mut gen = Gen::new(&facts, &checked.types, &maps, &checked.self_vars, sources, &mut events);
        gen.b.comment("time the entry of every call whose return uses `elapsed`");
        gen.prologue();
        let span = Span::default();
        let key = gen.activation_key(g, span)?;
        gen.store_entry_time(key, span)?;
        gen.epilogue();
        let program = gen.b.finish().map_err(|source| LowerError::Build { program: name.clone(), source })?;
        let points = timed.iter().map(|(f, addr)| point(&plan, f, *addr)).collect::<Result<_, _>>()?;
        plan.probes.push(ProbeSpec {
            program: name.clone(),
            attach: ProbeAttach::Uprobe(points),
            describe: "entry times for elapsed".into(),
        });
        programs.push((name, program));
    }

    if !checked.self_vars.is_empty() {
        // A goroutine's `self` variables are deleted when it exits: at runtime.goexit0,
        // whose parameter is the exiting g.
        let Some(f) = target.find("runtime.goexit0").first().map(|f| (*f).clone()) else {
            return Err(LowerError::NoGoexit);
        };
        let g = g.ok_or(LowerError::NoGoexit)?;
        let sites = target.probe_sites(&f).map_err(|_| LowerError::NoGoexit)?;
        let name = "self_cleanup".to_string();
        let facts = crate::check::Facts::default();
        let mut gen = Gen::new(&facts, &checked.types, &maps, &checked.self_vars, sources, &mut events);
        gen.b.comment("free the self variables of the goroutine that exits");
        gen.prologue();
        gen.free_self_vars(g, Span::default())?;
        gen.epilogue();
        let program = gen.b.finish().map_err(|source| LowerError::Build { program: name.clone(), source })?;
        if !plan.functions.contains(&f.name) {
            plan.functions.push(f.name.clone());
        }
        let points = vec![point(&plan, &f.name, sites.entry)?];
        plan.probes.push(ProbeSpec {
            program: name.clone(),
            attach: ProbeAttach::Uprobe(points),
            describe: "goroutine exit: free self variables".into(),
        });
        programs.push((name, program));
    }

    // When probes share an address (a function whose first instruction is its RET), the
    // kernel runs the one attached last first. Attach return probes first, so entry
    // probes and entry timing run before the return probes at the same instruction.
    plan.probes.sort_by_key(|p| !return_programs.contains(&p.program));

    let mut maps = maps;
    maps.add_scratch(events.iter().map(|e| e.size).max().unwrap_or(8));
    plan.maps = maps.specs;
    plan.events = events;
    Ok(Lowered { programs, plan })
}
