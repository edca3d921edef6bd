//! The programs of a script, by kind: a probe instance's body, the frames of timed calls
//! pushed at their entries (for `elapsed` and `on panic`), and the freeing of `self`
//! variables at goroutine exit; gtrace's programs in the runtime are in
//! runtime_programs.rs, the plan around them (its maps, head and tail) in planning.rs.
//! Each is one prologue, a body and one epilogue (`program`); where it attaches goes
//! into the plan.

use super::accounting::{Layout, ProgramAcct, Settings};
use super::carry::EntryRecords;
use super::codegen::Gen;
use super::ir::IrError;
use super::loaded::{Call, DictAt, Loaded};
use super::maps::Maps;
use super::planning::{finish_plan, new_plan, plan_maps, timed_functions};
use super::{LowerError, Lowered, MAX_MAPS_PER_PROGRAM};
use crate::bpf::builder::{BuildError, Program};
use crate::check::binary::{BinaryFacts, GOEXIT0};
use crate::check::{Builtin, Checked, Facts, Instance, InstanceKind, Name};
use crate::diag::Sources;
use crate::plan::{AttachPoint, EventSpec, Plan, ProbeAttach, ProbeSpec, SiteRef};
use crate::syntax::ast::{Item, Script, Span};

/// The program that pushes the frames of timed calls at their entries.
pub(super) const ENTRY_TIMING: &str = "time_entries";
/// The program that frees a goroutine's `self` variables when it exits.
const SELF_CLEANUP: &str = "self_cleanup";
/// The program that learns a PIE's load bias at the ELF entry point.
use super::globals::LOAD_BIAS_PROGRAM as LOAD_BIAS;

/// Whether an instance needs a PIE's load bias: it reads package-level variables, or
/// names the instantiation a shape function was called with (its dictionary's address).
pub(super) fn reads_globals(inst: &Instance, hashing: bool) -> bool {
    inst.dictionary.is_some() || inst.facts.uses_link_addresses() || (hashing && inst.facts.map_index)
}

/// What every program of the script shares while it is lowered.
pub(super) struct Ctx<'a> {
    pub(super) script: &'a Script,
    pub(super) checked: &'a Checked,
    /// What the checker learned of the binary for lowering (`Checked::binary`).
    pub(super) binary: &'a BinaryFacts,
    pub(super) sources: &'a Sources,
    maps: &'a Maps,
    events: Vec<EventSpec>,
    pub(super) plan: Plan,
    programs: Vec<(String, Program)>,
    /// Programs at RETs: attached first (see `lower_all`).
    pub(super) return_programs: Vec<String>,
    /// gtrace's own counters and limits, laid out as programs need them.
    pub(super) layout: Layout,
    /// What each function's entry records for its return probes.
    records: &'a EntryRecords,
    /// The program that pushes each function's frames at its entry, by function.
    entry_programs: std::collections::HashMap<String, String>,
    /// The target is a PIE whose package variables are read: programs that read them
    /// add the process's load bias.
    biased: bool,
    /// The runtime's aeshash keys, when some body reads `m[k]` and gtrace hashes as the
    /// runtime does (maplookup.rs); their addresses are package variables'.
    aes: Option<crate::gobin::AesGlobals>,
    /// How much of a whole Go value `print` copies.
    bounds: crate::capture::Bounds,
    /// `--cgroup`: programs attached to the target check the current task's cgroup.
    cgroup: bool,
    /// The programs run in one process only (`Settings::one_process`).
    one_process: bool,
    /// Whole values cut for want of room (`Gen::notes`), from every program.
    notes: Vec<(Span, u32)>,
    /// The most bytes any program spilled to the spill map (ir::SPILL).
    spill: u32,
}

/// Which probe a program belongs to and how many functions it is attached at (0 for
/// the programs that run in gtrace itself: begin, end, interval).
#[derive(Clone, Copy)]
pub(super) struct Owner {
    pub(super) item: usize,
    pub(super) functions: usize,
}

pub(super) fn lower_all(
    script: &Script,
    checked: &Checked,
    sources: &Sources,
    settings: &Settings,
) -> Result<Lowered, LowerError> {
    let plan = new_plan(checked);
    let timed = timed_functions(checked);
    let records = EntryRecords::new(checked)?;
    let panics = checked.instances.iter().any(|i| i.kind == InstanceKind::Panic);
    let (mut maps, biased, learns_bias) = plan_maps(script, checked, settings, (&timed, &records, &plan));
    let (binary, aes) = (&checked.binary, checked.binary.aes);
    let mut cx = Ctx {
        script,
        checked,
        binary,
        sources,
        maps: &maps,
        events: Vec::new(),
        plan,
        programs: Vec::new(),
        return_programs: Vec::new(),
        layout: Layout::new(settings),
        records: &records,
        entry_programs: std::collections::HashMap::new(),
        biased,
        aes,
        bounds: settings.bounds,
        cgroup: settings.cgroup,
        one_process: settings.one_process,
        notes: Vec::new(),
        spill: 0,
    };
    for (i, inst) in checked.instances.iter().enumerate() {
        let Item::Probe(probe) = &script.items[inst.item] else { continue };
        match inst.kind {
            InstanceKind::Panic => cx.panic_programs(i, inst, probe)?,
            // Lowered into the functions' entry programs.
            _ if inst.reads_context() => {}
            _ => cx.probe_program(format!("p{i}"), inst, probe)?,
        }
    }
    if let Some((_, span)) = timed.first() {
        cx.entry_programs(&timed)?;
        cx.runtime_programs(panics, *span)?;
    }
    if let Some(var) = checked.self_vars.values().min_by_key(|v| v.index) {
        cx.self_cleanup_program(var.span)?;
    }
    if let Some(inst) = checked.instances.iter().find(|i| biased && reads_globals(i, aes.is_some())) {
        cx.load_bias_program(inst.span)?;
    } else if let Some(inst) = checked.instances.first().filter(|_| learns_bias) {
        cx.load_bias_program(inst.span)?;
    }
    cx.tie_dependent_sites();
    // When probes share an address (a function whose first instruction is its RET), the
    // kernel runs the one attached last first. Attach return probes first, so entry
    // probes and entry timing run before the return probes at the same instruction.
    let Ctx { mut plan, programs, return_programs, events, layout, notes, spill, .. } = cx;
    if spill > 0 {
        maps.add_spill(spill);
    }
    plan.probes.sort_by_key(|p| !return_programs.contains(&p.program));
    finish_plan(&mut plan, maps, layout, events, settings, checked);
    Ok(Lowered { programs, plan, notes })
}

impl Ctx<'_> {
    /// Generates a program: the prologue, `body`, the epilogue.
    pub(super) fn program(
        &mut self,
        name: &str,
        owner: Owner,
        comment: String,
        facts: &Facts,
        span: Span,
        body: impl FnOnce(&mut Gen) -> Result<(), LowerError>,
    ) -> Result<Program, LowerError> {
        let checked = self.checked;
        let mut gen =
            Gen::new(self.binary, facts, &checked.types, self.maps, &checked.self_vars, self.sources, &mut self.events);
        gen.bounds = self.bounds;
        gen.one_process = self.one_process;
        gen.acct = Some(ProgramAcct {
            layout: &mut self.layout,
            program: name.to_string(),
            item: owner.item,
            failed_reads: None,
        });
        gen.b.comment(comment);
        gen.prologue();
        if owner.functions > 0 {
            if self.cgroup {
                gen.cgroup_prologue(span)?;
            }
            gen.accounting_prologue(owner.functions, self.cgroup, span)?;
        }
        body(&mut gen)?;
        gen.epilogue()?;
        self.notes.append(&mut gen.notes);
        let finished = gen.b.finish_guarded(super::guard::unguarded).map_err(|source| match source {
            IrError::Build(BuildError::JumpOutOfRange { offset, .. }) => LowerError::ProgramTooLarge {
                span,
                detail: format!("a jump over {} instructions; eBPF jumps reach {}", offset.abs(), i16::MAX),
            },
            IrError::Build(BuildError::TooLong { len, max }) => {
                LowerError::ProgramTooLarge { span, detail: format!("{len} instructions, at most {max}") }
            }
            source => LowerError::Build { span, program: name.to_string(), source },
        })?;
        self.spill = self.spill.max(finished.spilled);
        let program = finished.program;
        let mut maps: Vec<&str> = program.relocations.iter().map(|r| r.map.as_str()).collect();
        maps.sort_unstable();
        maps.dedup();
        if maps.len() > MAX_MAPS_PER_PROGRAM {
            return Err(LowerError::TooManyMaps { span, maps: maps.len() });
        }
        Ok(program)
    }

    pub(super) fn add(&mut self, name: String, program: Program, attach: ProbeAttach, describe: String) {
        self.plan.probes.push(ProbeSpec {
            section: format!("uprobe/{name}"),
            program: name.clone(),
            attach,
            describe,
            source_lines: program.comments.clone(),
            maps: program
                .relocations
                .iter()
                .map(|r| r.map.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
        });
        self.programs.push((name, program));
    }

    /// The program that pushes `function`'s frames at its entry.
    pub(super) fn entry_program(&self, function: &str) -> Option<String> {
        self.entry_programs.get(function).cloned()
    }

    /// The index of `function` in the plan's functions (added if new).
    pub(super) fn function_index(&mut self, function: &str) -> usize {
        match self.plan.functions.iter().position(|f| f == function) {
            Some(i) => i,
            None => {
                self.plan.functions.push(function.to_string());
                self.plan.functions.len() - 1
            }
        }
    }

    /// Where `program` attaches to `function` at `addr`, with the function's cookie.
    pub(super) fn point(
        &mut self,
        program: &str,
        function: &str,
        addr: u64,
        span: Span,
    ) -> Result<AttachPoint, LowerError> {
        let file_offset = self.binary.file_offsets.get(&addr).copied().ok_or_else(|| LowerError::NoFileOffset {
            span,
            function: function.to_string(),
            addr,
        })?;
        let index = self.function_index(function);
        let cookie = self.layout.cookie(program, function, index);
        let trap = self.binary.trap_kinds.get(&addr).copied().unwrap_or_default();
        self.plan.trap_kinds.insert(addr, trap);
        Ok(AttachPoint { function: function.to_string(), address: addr, file_offset, cookie })
    }

    fn probe_program(
        &mut self,
        name: String,
        inst: &Instance,
        probe: &crate::syntax::ast::Probe,
    ) -> Result<(), LowerError> {
        let uses_g = inst.facts.uses_self || inst.facts.names.values().any(|n| *n == Name::Builtin(Builtin::Goid));
        let comment = self.sources.located_line(probe.span);
        let functions = match inst.kind {
            InstanceKind::Entry | InstanceKind::Return | InstanceKind::Line => inst.functions.len(),
            _ => 0,
        };
        let owner = Owner { item: inst.item, functions };
        let carried = match inst.functions.as_slice() {
            [f] => self.records.functions.get(&f.name).cloned().unwrap_or_default(),
            _ => Vec::new(),
        };
        let biased = self.biased && reads_globals(inst, self.aes.is_some());
        let aes = self.aes.filter(|_| biased || !self.binary.is_pie);
        let function_index = match inst.functions.as_slice() {
            [f] => self.plan.functions.iter().position(|n| *n == f.name).map(|i| i as u32),
            _ => None,
        };
        let spanned_call =
            inst.needs_entry() && matches!(inst.functions.as_slice(), [f] if self.records.spanned.contains(&f.name));
        let dictionary = inst.dictionary.clone().map(|at| match inst.kind {
            InstanceKind::Return => DictAt::Carried,
            _ => DictAt::Entry(at),
        });
        let only = match inst.functions.as_slice() {
            [f] if inst.dictionary.is_some() => f.dictionary,
            _ => None,
        };
        // `span(start: t0, parent: ctx)`: the SDK's layout, to find its span in ctx.
        let otel = inst.facts.spans.values().any(|s| s.parent_ctx).then(|| self.binary.otel.clone()).flatten();
        let program = self.program(&name, owner, comment, &inst.facts, probe.span, |gen| {
            gen.attached.index = function_index;
            gen.attached.dictionary = dictionary;
            gen.spans.spanned_call = spanned_call;
            gen.spans.otel = otel;
            let bias = if biased { Some(gen.load_bias(&name, probe.span)?) } else { None };
            gen.aes = aes;
            let call = if inst.needs_entry() {
                let mut returned = gen.pop_frame(probe.span)?;
                if !carried.is_empty() || inst.facts.spans_calls() {
                    gen.attached.carried = carried.clone();
                    returned.entry = Some(gen.load_carried(returned.at, probe.span)?);
                }
                Call::Returned(returned)
            } else if uses_g {
                Call::Goroutine { g: gen.load_g(None, probe.span)? }
            } else {
                Call::None
            };
            // The body reads what the prologue loaded, and nothing else.
            gen.loaded = Loaded { call, bias };
            if let Some(addr) = only {
                gen.only_dictionary(addr, probe.span)?;
            }
            gen.prepare_reads(&probe.body, probe.span)?;
            gen.block(&probe.body)
        })?;
        let attach = self.probe_attach(&name, inst, probe.span)?;
        self.add(name, program, attach, inst.describe.clone());
        Ok(())
    }

    /// Where an entry, line or return probe's program attaches (each function's entry,
    /// or each of its RETs), or when a program that runs in gtrace runs.
    fn probe_attach(&mut self, name: &str, inst: &Instance, span: Span) -> Result<ProbeAttach, LowerError> {
        Ok(match inst.kind {
            InstanceKind::Entry | InstanceKind::Line => ProbeAttach::Uprobe(
                inst.functions.iter().map(|f| self.point(name, &f.name, f.entry, span)).collect::<Result<_, _>>()?,
            ),
            InstanceKind::Return => {
                self.return_programs.push(name.to_string());
                let sites = inst.functions.iter().flat_map(|f| f.returns.iter().map(move |r| (&f.name, *r)));
                ProbeAttach::Uprobe(sites.map(|(f, r)| self.point(name, f, r, span)).collect::<Result<_, _>>()?)
            }
            InstanceKind::Begin => ProbeAttach::Begin,
            InstanceKind::End => ProbeAttach::End,
            InstanceKind::Interval { nanos } => ProbeAttach::Interval { nanos },
            InstanceKind::Panic => unreachable!("on panic probes are lowered by panic_programs"),
        })
    }

    /// The programs at the entries of timed functions (see `timed_functions`): one that
    /// pushes the frame of every function that carries no parameters, and one per
    /// function that does, which also keeps them (where its ABI puts them) for its
    /// returns under the frame.
    fn entry_programs(&mut self, timed: &[((String, u64), Span)]) -> Result<(), LowerError> {
        let size = self.records.size;
        let plain: Vec<_> = timed.iter().filter(|((f, _), _)| !self.records.functions.contains_key(f)).collect();
        if let Some((_, span)) = plain.first() {
            let (name, span) = (ENTRY_TIMING.to_string(), *span);
            let comment = "push the frame of every timed call (for elapsed and on panic)".to_string();
            let owner = Owner { item: usize::MAX, functions: plain.len() };
            let function_index = match plain.as_slice() {
                [((f, _), _)] => Some(self.function_index(f) as u32),
                _ => None,
            };
            let program = self.program(&name, owner, comment, &Facts::default(), span, |gen| {
                gen.attached.index = function_index;
                gen.push_frame(span).map(drop)
            })?;
            let points =
                plain.iter().map(|((f, addr), span)| self.point(&name, f, *addr, *span)).collect::<Result<_, _>>()?;
            for ((f, _), _) in &plain {
                self.entry_programs.insert(f.clone(), name.clone());
            }
            self.add(name, program, ProbeAttach::Uprobe(points), "entry times for elapsed".into());
        }
        let records = self.records;
        let checked = self.checked;
        for (k, (function, fields)) in records.carrying().enumerate() {
            let Some(((_, addr), span)) = timed.iter().find(|((f, _), _)| f == function) else { continue };
            let name = format!("entry{k}");
            let spanned = records.spanned.contains(function);
            let context = records.contexts.get(function).map(|i| &checked.instances[*i]);
            let no_facts = Facts::default();
            let facts = context.map_or(&no_facts, |i| &i.facts);
            let body = context.and_then(|i| match self.script.items.get(i.item) {
                Some(crate::syntax::ast::Item::Probe(p)) => Some(&p.body),
                _ => None,
            });
            let mut names: Vec<&str> = fields.iter().map(|(c, _)| c.name.as_str()).collect();
            if spanned {
                names.insert(0, "a span");
            }
            let comment = format!("the entry of {function}: its frame, and {} for its returns", names.join(", "));
            let owner = Owner { item: usize::MAX, functions: 1 };
            let function_index = Some(self.function_index(function) as u32);
            if context.is_some() {
                names.push("the program's trace context");
            }
            let span_ctx = records.span_ctx.get(function).cloned();
            let otel = if span_ctx.is_some() { self.binary.otel.clone() } else { None };
            let program = self.program(&name, owner, comment, facts, *span, |gen| {
                gen.attached.index = function_index;
                (gen.spans.otel, gen.spans.ctx) = (otel, span_ctx);
                if let Some(body) = body {
                    gen.read_context(body, *span)?;
                }
                gen.loaded = Loaded { call: Call::Entered(gen.push_frame(*span)?), bias: None };
                gen.store_carried(fields, size, spanned, *span)
            })?;
            let points = vec![self.point(&name, function, *addr, *span)?];
            self.entry_programs.insert(function.clone(), name.clone());
            let describe = format!("entry record of {function} (time, {})", names.join(", "));
            self.add(name, program, ProbeAttach::Uprobe(points), describe);
        }
        Ok(())
    }

    /// Deletes a goroutine's `self` variables when it exits: at runtime.goexit0, whose
    /// parameter is the exiting g.
    fn self_cleanup_program(&mut self, span: Span) -> Result<(), LowerError> {
        let binary = self.binary;
        let f = binary.runtime.get(GOEXIT0).ok_or(LowerError::NoGoexit { span })?;
        let name = SELF_CLEANUP.to_string();
        let comment = "free the self variables of the goroutine that exits".to_string();
        let owner = Owner { item: usize::MAX, functions: 1 };
        // gp, where the calling convention puts a pointer-sized first argument.
        let gp = f.args[0].clone();
        let program =
            self.program(&name, owner, comment, &Facts::default(), span, |gen| gen.free_self_vars(&gp, span))?;
        let points = vec![self.point(&name, &f.name, f.entry, span)?];
        self.add(name, program, ProbeAttach::Uprobe(points), "goroutine exit: free self variables".into());
        Ok(())
    }
}

impl Ctx<'_> {
    /// Learns the load bias of every process that runs the PIE: at the ELF entry point,
    /// the first instruction a process runs (see lower/globals.rs).
    fn load_bias_program(&mut self, span: Span) -> Result<(), LowerError> {
        let no_entry = || LowerError::unsupported(span, "package variables of a PIE without an entry point");
        let at = self.binary.entry_point.clone().ok_or_else(no_entry)?;
        let entry = at.addr;
        if let Some(refusal) = at.refusal {
            let why = format!("package variables of a PIE (the entry point cannot hold a uprobe: {refusal:?})");
            return Err(LowerError::unsupported(span, &why));
        }
        let function = at.function.unwrap_or_else(|| "the entry point".to_string());
        let name = LOAD_BIAS.to_string();
        let comment = "learn the load bias of each process at the entry point".to_string();
        let owner = Owner { item: usize::MAX, functions: 1 };
        let program =
            self.program(&name, owner, comment, &Facts::default(), span, |gen| gen.store_load_bias(entry, span))?;
        let points = vec![self.point(&name, &function, entry, span)?];
        self.add(
            name,
            program,
            ProbeAttach::Uprobe(points),
            "the load bias of each process of the PIE (for its types, frames and package variables)".into(),
        );
        Ok(())
    }

    /// Tells the budget which sites must be detached together: a return probe that uses
    /// `elapsed` or parameters with the program at its function's entries that records
    /// them (one without the other costs and measures nothing), and every program that
    /// reads or sets `self` variables, with their cleanup (a reader whose setter is gone
    /// would read stale values).
    fn tie_dependent_sites(&mut self) {
        let program_of = |i: usize| format!("p{i}");
        for (i, inst) in self.checked.instances.iter().enumerate() {
            if !inst.needs_entry() {
                continue;
            }
            for f in &inst.functions {
                let Some(entry) = self.entry_programs.get(&f.name).cloned() else { continue };
                let site = |program: String| SiteRef { program, function: Some(f.name.clone()) };
                self.layout.tie(vec![site(program_of(i)), site(entry)]);
            }
        }
        let mut selves: Vec<SiteRef> = (self.checked.instances.iter().enumerate())
            .filter(|(_, inst)| inst.facts.uses_self)
            .map(|(i, _)| SiteRef { program: program_of(i), function: None })
            .collect();
        if self.plan.probes.iter().any(|p| p.program == SELF_CLEANUP) {
            selves.push(SiteRef { program: SELF_CLEANUP.to_string(), function: None });
        }
        self.layout.tie(selves);
        // The programs that share a private map (`@_t0`: one writes, another reads and
        // deletes) go together: a writer whose reader is gone would fill it.
        for spec in self.maps.specs.iter().filter(|m| private_map(&m.role)) {
            let sharing: Vec<SiteRef> = (self.plan.probes.iter())
                .filter(|p| p.maps.contains(&spec.object_name))
                .map(|p| SiteRef { program: p.program.clone(), function: None })
                .collect();
            self.layout.tie(sharing);
        }
        // Readers of package variables in a PIE go with what learns the bias of new
        // processes.
        if self.biased {
            let mut readers: Vec<SiteRef> = (self.checked.instances.iter().enumerate())
                .filter(|(_, inst)| reads_globals(inst, self.aes.is_some()))
                .map(|(i, _)| SiteRef { program: program_of(i), function: None })
                .collect();
            readers.push(SiteRef { program: LOAD_BIAS.to_string(), function: None });
            self.layout.tie(readers);
        }
        self.tie_panic_sites();
        self.tie_context_pops();
    }
}

/// A user's private map (`@_name`).
fn private_map(role: &crate::plan::MapRole) -> bool {
    matches!(role, crate::plan::MapRole::User { .. }) && !role.is_shown_user()
}
