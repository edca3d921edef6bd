//! gtrace's own programs in the Go runtime, for the frames of timed calls (frames.rs,
//! unwind.rs): at runtime.copystack (the stack moved), runtime.recovery (a recovered
//! panic ended frames), runtime.Goexit and, with trace contexts, runtime.goexit0 (the
//! goroutine's frames end) and, with `on panic`
//! probes, runtime.fatalpanic and runtime.gopanic (Go 1.17 to 1.21); a program that pops
//! the frames of functions that `on panic` watches or whose entry reads a trace context
//! at their RETs when no `on return` probe does; and the programs of the `on panic`
//! probes themselves.

use super::programs::{Ctx, Owner, ENTRY_TIMING};
use super::unwind::Unwind;
use super::LowerError;
use crate::arch::abi::Location;
use crate::check::binary::{RuntimeFunction, GOEXIT0};
use crate::check::{Facts, Instance, InstanceKind};
use crate::gobin::PanicLayout;
use crate::plan::{ProbeAttach, SiteRef};
use crate::syntax::ast::{Probe, Span};

const STACK_MOVES: &str = "stack_moves";
const UNWIND: &str = "unwind";
const UNWIND_FATAL: &str = "unwind_fatal";
const PANIC_START: &str = "panic_start";
const FATAL_VALUE: &str = "fatal_value";
const GOEXIT: &str = "goexit";
const GOROUTINE_END: &str = "goexit0";
const FRAME_POPS: &str = "frame_pops";

impl<'a> Ctx<'a> {
    /// A runtime function, where its probe goes (after the stack check), and where its
    /// first `words` pointer-sized arguments are.
    /// None when the binary has none or a uprobe cannot go at its entry (the checker
    /// asked: `Checked::binary`).
    fn runtime_function(&self, name: &str, words: usize) -> Option<(&'a RuntimeFunction, u64, Vec<Location>)> {
        let f = self.binary.runtime.get(name).filter(|f| f.refusal.is_none())?;
        Some((f, f.entry, f.args[..words.min(f.args.len())].to_vec()))
    }

    /// A program of gtrace's own at the entry of runtime function `function`.
    fn runtime_program(
        &mut self,
        name: &str,
        function: &str,
        describe: &str,
        span: Span,
        body: impl FnOnce(&mut super::codegen::Gen, &[Location]) -> Result<(), LowerError>,
        words: usize,
    ) -> Result<bool, LowerError> {
        let Some((f, entry, args)) = self.runtime_function(function, words) else { return Ok(false) };
        let owner = Owner { item: usize::MAX, functions: 1 };
        let program =
            self.program(name, owner, describe.to_string(), &Facts::default(), span, |gen| body(gen, &args))?;
        let points = vec![self.point(name, &f.name, entry, span)?];
        self.add(name.to_string(), program, ProbeAttach::Uprobe(points), describe.to_string());
        Ok(true)
    }

    /// The programs in the runtime that keep the frames of timed calls true: stack
    /// copies, recovered panics, runtime.Goexit (called explicitly), runtime.goexit0 (every
    /// goroutine's end) when a trace context keeps frames, and with `on panic` probes
    /// (`panics`) the panics' values and the deaths of goroutines.
    pub(super) fn runtime_programs(&mut self, panics: bool, span: Span) -> Result<(), LowerError> {
        self.stack_programs(panics, span)?;
        self.goroutine_end_programs(panics, span)?;
        // Frames of calls no `on return` probe pops: popped at their RETs, whether or not
        // there are `on panic` probes (a trace context's frame left in flight would be
        // the parent of spans made after its call returned, or on a goroutine reusing
        // its g).
        self.frame_pops(span)?;
        match self.binary.panic_layout.filter(|_| panics) {
            Some(layout) => self.fatal_panic_programs(layout, span),
            None => Ok(()),
        }
    }

    /// Stack copies (always: without runtime.copystack no frame can be trusted) and
    /// recovered panics (when the binary's panic layout is known; `on panic` probes
    /// need it).
    fn stack_programs(&mut self, panics: bool, span: Span) -> Result<(), LowerError> {
        let moved = self.runtime_program(
            STACK_MOVES,
            "runtime.copystack",
            "stack copies (runtime.copystack): keep the frames of timed calls",
            span,
            |gen, args| gen.note_stack_move(&args[0], span),
            2,
        )?;
        if !moved {
            return Err(LowerError::NoRuntimeFunction { span, function: "runtime.copystack".into() });
        }
        match self.binary.panic_layout {
            Some(layout) => {
                self.runtime_program(
                    UNWIND,
                    "runtime.recovery",
                    "recovered panics (runtime.recovery): the frames they ended",
                    span,
                    |gen, args| gen.unwind(&Unwind::Recovery { gp: args[0].clone() }, layout, panics, span),
                    1,
                )?;
            }
            None if panics => return Err(LowerError::NoPanicLayout { span }),
            None => {}
        }
        Ok(())
    }

    /// The ends of goroutines: their frames go.
    fn goroutine_end_programs(&mut self, panics: bool, span: Span) -> Result<(), LowerError> {
        // A goroutine that runtime.Goexit ends has no call in flight: its frames go, so
        // that a goroutine reusing its g (the runtime reuses dead ones) finds none of
        // them below its own calls (a span's parent, an `elapsed`).
        self.runtime_program(
            GOEXIT,
            "runtime.Goexit",
            "runtime.Goexit: the frames it ends",
            span,
            |gen, _| gen.forget_frames(None, panics, span),
            0,
        )?;
        // Goroutines that return from their function end at runtime.goexit0(gp) (on g0),
        // never at runtime.Goexit: when trace contexts keep frames, a dead goroutine's
        // frames go there, so a goroutine given its g finds no stale context (nor one
        // whose RET was left unprobed while --budget cut between its entry and its RET).
        if self.checked.instances.iter().any(|i| i.reads_context()) {
            self.runtime_program(
                GOROUTINE_END,
                GOEXIT0,
                "runtime.goexit0: the frames of the goroutine that ends",
                span,
                |gen, args| gen.forget_frames(Some(&args[0]), panics, span),
                1,
            )?;
        }
        Ok(())
    }

    /// With `on panic` probes: the values of fatal panics, the frames of the goroutine
    /// they kill, and (Go 1.17 to 1.21) every panic's value at runtime.gopanic.
    fn fatal_panic_programs(&mut self, layout: PanicLayout, span: Span) -> Result<(), LowerError> {
        self.runtime_program(
            FATAL_VALUE,
            "runtime.preprintpanics",
            "panics that kill the program (runtime.preprintpanics): their values",
            span,
            |gen, args| gen.note_fatal_value(&args[0], layout.arg, span),
            1,
        )?;
        self.runtime_program(
            UNWIND_FATAL,
            "runtime.fatalpanic",
            "fatal panics (runtime.fatalpanic): the frames of the dying goroutine",
            span,
            |gen, args| gen.unwind(&Unwind::Fatal { msgs: args[0].clone() }, layout, true, span),
            1,
        )?;
        if matches!(layout.recovery, crate::gobin::Recovery::Sigcode { .. }) {
            self.runtime_program(
                PANIC_START,
                "runtime.gopanic",
                "panics (runtime.gopanic): their values",
                span,
                |gen, args| gen.note_panic([&args[0], &args[1]], span),
                2,
            )?;
        }
        Ok(())
    }

    /// Pops, at their RETs, the frames of functions that `on panic` watches or whose
    /// entry reads the program's trace context, but no `on return` probe with `elapsed`
    /// pops.
    fn frame_pops(&mut self, span: Span) -> Result<(), LowerError> {
        let popped = |i: &Instance| i.kind == InstanceKind::Return && i.needs_entry();
        let mut sites: Vec<(String, u64)> = Vec::new();
        for inst in self.checked.instances.iter().filter(|i| i.kind == InstanceKind::Panic || i.reads_context()) {
            for f in &inst.functions {
                let have = self
                    .checked
                    .instances
                    .iter()
                    .filter(|i| popped(i))
                    .any(|i| i.functions.iter().any(|g| g.name == f.name));
                if !have && !sites.iter().any(|(n, _)| *n == f.name) {
                    sites.extend(f.returns.iter().map(|r| (f.name.clone(), *r)));
                }
            }
        }
        if sites.is_empty() {
            return Ok(());
        }
        let name = FRAME_POPS.to_string();
        let mut functions: Vec<&String> = sites.iter().map(|(f, _)| f).collect();
        functions.dedup();
        let owner = Owner { item: usize::MAX, functions: functions.len() };
        let comment =
            "pop the frames of calls that on panic watches or that hold a trace context, at their RETs".to_string();
        let program =
            self.program(&name, owner, comment, &Facts::default(), span, |gen| gen.pop_frame(span).map(drop))?;
        let points = sites.iter().map(|(f, r)| self.point(&name, f, *r, span)).collect::<Result<_, _>>()?;
        self.return_programs.push(name.clone());
        self.add(
            name,
            program,
            ProbeAttach::Uprobe(points),
            "returns of calls on panic watches or with a trace context".into(),
        );
        Ok(())
    }

    /// The program of an `on panic` probe (instance `i`), at runtime.recovery and
    /// runtime.fatalpanic: it reports the ended calls of the functions its
    /// `PanicFunctions` map marks (`panic_functions_map`), however many; tied for the
    /// budget with everything that keeps their frames.
    pub(super) fn panic_programs(&mut self, i: usize, inst: &Instance, probe: &Probe) -> Result<(), LowerError> {
        let span = probe.span;
        let recovery = self.runtime_function("runtime.recovery", 1);
        let fatal = self.runtime_function("runtime.fatalpanic", 1);
        let (Some((rf, rentry, rargs)), Some((ff, fentry, _))) = (recovery, fatal) else {
            return Err(LowerError::NoRuntimeFunction { span, function: "runtime.recovery".into() });
        };
        let recovery_index = self.function_index(&rf.name) as u32;
        let name = format!("p{i}");
        let comment = self.sources.located_line(span);
        let owner = Owner { item: inst.item, functions: 2 };
        let gp = rargs[0].clone();
        let members = super::maps::panic_functions_name(i);
        let program = self.program(&name, owner, comment, &inst.facts, span, |gen| {
            gen.panic_frames(recovery_index, &gp, &members, span, |gen| gen.block(&probe.body))
        })?;
        let points = vec![self.point(&name, &rf.name, rentry, span)?, self.point(&name, &ff.name, fentry, span)?];
        self.add(name, program, ProbeAttach::Uprobe(points), inst.describe.clone());
        Ok(())
    }

    /// For the budget: an `on panic` probe's programs go with everything that keeps the
    /// frames they read (one without the other reports nothing, or wrong frames).
    pub(super) fn tie_panic_sites(&mut self) {
        let mut tie = Vec::new();
        for (i, inst) in self.checked.instances.iter().enumerate().filter(|(_, i)| i.kind == InstanceKind::Panic) {
            let own = format!("p{i}");
            for p in self.plan.probes.iter().filter(|p| p.program == own) {
                tie.push(SiteRef { program: p.program.clone(), function: None });
            }
            for f in &inst.functions {
                let entry = self.entry_program(&f.name).unwrap_or_else(|| ENTRY_TIMING.into());
                tie.push(SiteRef { program: entry, function: Some(f.name.clone()) });
            }
        }
        if tie.is_empty() {
            return;
        }
        // In the order --budget detaches a tied unit (see `budget::merge_tied`): the
        // probe's reports first, then the entries that push frames, then what keeps the
        // frames true (unwinding, stack moves, goroutine exits), the returns that pop them
        // last; so no frame outlives its call while an `on panic` can still report it.
        for program in [UNWIND, UNWIND_FATAL, FATAL_VALUE, PANIC_START, STACK_MOVES, GOEXIT, GOROUTINE_END, FRAME_POPS]
        {
            if self.plan.probes.iter().any(|p| p.program == program) {
                tie.push(SiteRef { program: program.into(), function: None });
            }
        }
        self.layout.tie(tie);
    }
}

impl Ctx<'_> {
    /// For the budget: the entry of a function that reads a trace context goes with what
    /// pops its frames at its RETs (`frame_pops`, or the `on return` probe with `elapsed`
    /// or carried parameters that pops there instead), entry first. A RET left unprobed
    /// while the entry pushes would leave the context's frame behind its call: the parent
    /// of spans made after the call, or on a goroutine given the same g.
    pub(super) fn tie_context_pops(&mut self) {
        let contexts: Vec<String> = self
            .checked
            .instances
            .iter()
            .filter(|i| i.reads_context())
            .flat_map(|i| i.functions.iter().map(|f| f.name.clone()))
            .collect();
        for f in contexts {
            let Some(entry) = self.entry_program(&f) else { continue };
            let site = |program: String| SiteRef { program, function: Some(f.clone()) };
            let mut tie = vec![site(entry)];
            tie.extend(self.poppers(&f).into_iter().map(site));
            if tie.len() > 1 {
                self.layout.tie(tie);
            }
        }
    }

    /// The programs that pop `function`'s frames at its RETs: `frame_pops`, or the
    /// return probes that need its entry.
    fn poppers(&self, function: &str) -> Vec<String> {
        let at = |p: &crate::plan::ProbeSpec| match &p.attach {
            ProbeAttach::Uprobe(points) => points.iter().any(|a| a.function == function),
            _ => false,
        };
        if self.plan.probes.iter().any(|p| p.program == FRAME_POPS && at(p)) {
            return vec![FRAME_POPS.to_string()];
        }
        let returns = self.checked.instances.iter().enumerate().filter(|(_, i)| {
            i.kind == InstanceKind::Return && i.needs_entry() && i.functions.iter().any(|g| g.name == function)
        });
        returns.map(|(i, _)| format!("p{i}")).collect()
    }
}
