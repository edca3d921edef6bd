//! `span()`: OpenTelemetry spans made in the probes (docs/language.md, "Spans").
//!
//! At the entry of a function whose return (or panic) probe makes a span, the entry
//! program opens the span in the call's entry record (carry.rs: the `carried` map under
//! (g, frame index)): the frame's time, a trace id, a span id and the parent's span id,
//! and marks the call's frame (frames.rs) as one with a span. The parent is the nearest
//! marked frame below this call on the same goroutine (at most `PARENT_REACH` traced
//! calls down; beyond, a root span, counted): the child takes its trace id and its span
//! id as parent. With no parent, the trace is the program's own where it carries one
//! (`context.rs`), else a new one. Ids come from `bpf_get_prandom_u32`.
//!
//! At the return, `span(...)` sends one ring-buffer record: the header (entry and
//! return times in kernel nanoseconds, the ids, flags, the function) then the status (the
//! function's `error` result, or the panic's value) and the attributes, laid out as
//! `print` lays out its values (events.rs).

use super::codegen::Gen;
use super::ir::Arg;
use super::layout::{
    C_FLAGS, C_PARENT, C_SPAN, C_TIME, C_TRACE, EXEMPLAR, FLAG_CHILD_REMOTE, FLAG_REMOTE_PARENT, FLAG_SAMPLED, F_FUNC,
    F_TIME, H_END, H_FLAGS, H_FUNC, H_PARENT, H_SPAN, H_START, H_TRACE,
};
use super::loaded::{Record, Returned};
use super::{maps, LowerError};
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::plan::Counter;
use crate::syntax::ast::Span;

/// The half of a frame's function word that marks a call with an open span.
const F_SPANNED: i16 = F_FUNC + 4;
/// Traced calls below a new span searched for its parent.
pub const PARENT_REACH: usize = 8;

impl Gen<'_> {
    /// At the entry, after the frame is pushed: the span's context into the entry record
    /// being built at `record`, and the mark on the call's frame.
    pub fn open_span(&mut self, record: i16, span: Span) -> Result<(), LowerError> {
        let at = self.loaded.call.frame(span)?;
        self.b.comment("open a span: this call's frame is marked, its time kept");
        self.mark_frame(record, span)?;
        let found = self.b.new_label();
        let root = self.b.new_label();
        // The parent's own parent: which span of the program the parent is under.
        let grand = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, grand, 0));
        let mark = self.b.frame.mark();
        self.find_parent(at.record, record, (at.index, grand), found, root, span)?;
        self.b.frame.release(mark);
        self.b.bind(root);
        self.b.comment("no parent span on this goroutine: a new trace");
        self.random_u64(record + C_TRACE);
        self.random_u64(record + C_TRACE + 8);
        self.b.emit(store_imm(Size::DW, R10, record + C_PARENT, 0));
        self.b.emit(store_imm(Size::DW, R10, record + C_FLAGS, FLAG_SAMPLED));
        self.b.bind(found);
        self.b.emit(mov64_imm(R0, 0));
        if let (Some(otel), Some(ctx)) = (self.spans.otel.clone(), self.spans.ctx.clone()) {
            let mark = self.b.frame.mark();
            self.sdk_parent(&otel, &ctx, record, grand, span)?;
            self.b.frame.release(mark);
        }
        self.random_u64(record + C_SPAN);
        // An all-zero span id is invalid: 1 instead.
        let nonzero = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, record + C_SPAN));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, nonzero);
        self.b.emit(store_imm(Size::DW, R10, record + C_SPAN, 1));
        self.b.bind(nonzero);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Marks this call's frame as one with a span (or a context), and keeps its time in
    /// the entry record being built at `record`.
    pub(super) fn mark_frame(&mut self, record: i16, span: Span) -> Result<(), LowerError> {
        let at = self.loaded.call.frame(span)?;
        self.frame_addr(at.record, at.index, span)?;
        // The frame could not be pushed (counted there): no span, no return seen.
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
        self.b.emit(store_imm(Size::W, R0, F_SPANNED, 1));
        self.b.emit(load(Size::DW, R1, R0, F_TIME));
        self.b.emit(store_reg(Size::DW, R10, record + C_TIME, R1));
        Ok(())
    }

    /// Walks the frames below the one in slot `idx`, at most `PARENT_REACH`, to the first
    /// marked one whose entry record is its own: its trace id and span id go to
    /// `record`, its parent's span id to slot `grand` (jumps to `found`); none: jumps to
    /// `root` (counted when frames were left unsearched).
    fn find_parent(
        &mut self,
        goroutine: Record,
        record: i16,
        (idx, grand): (i16, i16),
        found: crate::bpf::builder::Label,
        root: crate::bpf::builder::Label,
        span: Span,
    ) -> Result<(), LowerError> {
        self.b.comment("the parent: the nearest call below with a span");
        let (j, key, time) = (self.slot(8, span)?, self.slot(16, span)?, self.slot(8, span)?);
        self.b.emit(load(Size::DW, R1, R10, idx));
        self.b.emit(store_reg(Size::DW, R10, j, R1));
        for _ in 0..PARENT_REACH {
            let next = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R10, j));
            self.b.jmp_imm_to(JmpOp::Eq, R1, 0, root);
            self.b.emit(alu64_imm(AluOp::Sub, R1, 1));
            self.b.emit(store_reg(Size::DW, R10, j, R1));
            self.frame_addr_keyed(goroutine, j, key);
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, root);
            self.b.emit(load(Size::W, R1, R0, F_SPANNED));
            self.b.emit(load(Size::DW, R2, R0, F_TIME));
            self.b.emit(store_reg(Size::DW, R10, time, R2));
            self.b.emit(mov64_imm(R0, 0));
            self.b.jmp_imm_to(JmpOp::Eq, R1, 0, next);
            self.key_at(goroutine.g, j, key);
            self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::CARRIED), Arg::Stack(key)]);
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, root);
            self.b.emit(load(Size::DW, R1, R0, C_TIME));
            self.b.emit(load(Size::DW, R2, R10, time));
            self.b.jmp_reg_to(JmpOp::Ne, R1, R2, root);
            for (from, to) in [(C_TRACE, C_TRACE), (C_TRACE + 8, C_TRACE + 8), (C_SPAN, C_PARENT)] {
                self.b.emit(load(Size::DW, R1, R0, from));
                self.b.emit(store_reg(Size::DW, R10, record + to, R1));
            }
            self.b.emit(load(Size::DW, R1, R0, C_PARENT));
            self.b.emit(store_reg(Size::DW, R10, grand, R1));
            // Sampled as the parent; a remote parent when the parent is a context.
            self.b.emit(load(Size::DW, R1, R0, C_FLAGS));
            self.b.emit(mov64_reg(R2, R1));
            self.b.emit(alu64_imm(AluOp::And, R1, FLAG_SAMPLED));
            self.b.emit(alu64_imm(AluOp::And, R2, FLAG_CHILD_REMOTE));
            self.b.emit(alu64_imm(AluOp::Rsh, R2, 1));
            self.b.emit(alu64_reg(AluOp::Or, R1, R2));
            self.b.emit(store_reg(Size::DW, R10, record + C_FLAGS, R1));
            self.b.ja_to(found);
            self.b.bind(next);
            self.b.emit(mov64_imm(R0, 0));
        }
        // Traced calls remain below, unsearched: a root span, counted.
        self.b.emit(load(Size::DW, R1, R10, j));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, root);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why = format!(
                "a span's parent was looked for in the {PARENT_REACH} traced calls below it only: it began a trace of its own"
            );
            self.count(Counter::Skipped { program, why }, span)?;
        }
        self.b.ja_to(root);
        Ok(())
    }

    /// *(u64 *)(r10 + to) = 64 random bits.
    fn random_u64(&mut self, to: i16) {
        self.b.call(BPF_FUNC_get_prandom_u32, &[]);
        self.b.emit(store_reg(Size::W, R10, to, R0));
        self.b.call(BPF_FUNC_get_prandom_u32, &[]);
        self.b.emit(store_reg(Size::W, R10, to + 4, R0));
    }

    /// At a return (or in `on panic`): keeps pointers to this call's frame and entry
    /// record in slots, checked to be the same call's; ends the program when the record
    /// is another call's (the entry's update was refused: counted there).
    pub(super) fn span_sources(&mut self, span: Span) -> Result<(i16, i16), LowerError> {
        let at = self.loaded.call.frame(span)?;
        let returned = self.loaded.call.returned().copied();
        let frame = match returned {
            Some(r) => r.frame,
            None => {
                let f = self.slot(8, span)?;
                self.frame_addr(at.record, at.index, span)?;
                self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
                self.b.emit(store_reg(Size::DW, R10, f, R0));
                f
            }
        };
        let record = match returned.and_then(|r| r.entry) {
            Some(r) => r,
            None => {
                let r = self.slot(8, span)?;
                let key = self.slot(16, span)?;
                self.key_at(at.record.g, at.index, key);
                self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::CARRIED), Arg::Stack(key)]);
                self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
                self.b.emit(store_reg(Size::DW, R10, r, R0));
                r
            }
        };
        let mine = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, frame));
        self.b.emit(load(Size::DW, R1, R1, F_TIME));
        self.b.emit(load(Size::DW, R2, R10, record));
        self.b.emit(load(Size::DW, R2, R2, C_TIME));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, mine);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why = "a span's entry record was another call's (its own was refused): no span".to_string();
            self.count(Counter::Skipped { program, why }, span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(mine);
        self.b.emit(mov64_imm(R0, 0));
        Ok((frame, record))
    }

    /// Writes the span record's header at R8: times, ids, flags, the function.
    pub(super) fn span_header(&mut self, frame: i16, record: i16, span: Span) -> Result<(), LowerError> {
        let elapsed = self.loaded.call.elapsed(span)?;
        self.b.emit(load(Size::DW, R1, R10, frame));
        self.b.emit(load(Size::DW, R2, R1, F_TIME));
        self.b.emit(store_reg(Size::DW, R8, H_START, R2));
        self.b.emit(load(Size::DW, R3, R10, elapsed));
        self.b.emit(alu64_reg(AluOp::Add, R2, R3));
        self.b.emit(store_reg(Size::DW, R8, H_END, R2));
        self.b.emit(load(Size::DW, R1, R10, record));
        for (from, to) in [(C_TRACE, H_TRACE), (C_TRACE + 8, H_TRACE + 8), (C_SPAN, H_SPAN), (C_PARENT, H_PARENT)] {
            self.b.emit(load(Size::DW, R2, R1, from));
            self.b.emit(store_reg(Size::DW, R8, to, R2));
        }
        self.b.emit(load(Size::DW, R2, R1, C_FLAGS));
        self.b.emit(store_reg(Size::DW, R8, H_FLAGS, R2));
        match self.loaded.call.panicked() {
            Some(p) => self.b.emit(load(Size::DW, R0, R10, p.func)),
            // The instantiation's name where `func` would give it.
            None => self.builtin(crate::check::Builtin::Func, span)?,
        }
        self.b.emit(store_reg(Size::DW, R8, H_FUNC, R0));
        Ok(())
    }
}

impl Gen<'_> {
    /// Writes an ended span's header at R8 (`span(start: t0)`): from the time in slot
    /// `start` to now, the probe's function; in the trace of the traceparent parsed in
    /// slot `parent` (context.rs; or the SDK's span found in a context, sdkcontext.rs,
    /// in the same form) when it is valid, its span the parent (remote when `remote`),
    /// else a new trace of its own.
    pub(super) fn ended_span_header(
        &mut self,
        start: i16,
        parent: Option<(i16, bool)>,
        span: Span,
    ) -> Result<(), LowerError> {
        self.b.comment("an ended span: from its start to now");
        self.b.emit(load(Size::DW, R1, R10, start));
        self.b.emit(store_reg(Size::DW, R8, H_START, R1));
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.emit(store_reg(Size::DW, R8, H_END, R0));
        for at in [H_TRACE, H_TRACE + 4, H_TRACE + 8, H_TRACE + 12, H_SPAN, H_SPAN + 4] {
            self.b.call(BPF_FUNC_get_prandom_u32, &[]);
            self.b.emit(store_reg(Size::W, R8, at, R0));
        }
        // An all-zero span id is invalid: 1 instead.
        let nonzero = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R8, H_SPAN));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, nonzero);
        self.b.emit(store_imm(Size::DW, R8, H_SPAN, 1));
        self.b.bind(nonzero);
        self.b.emit(store_imm(Size::DW, R8, H_PARENT, 0));
        self.b.emit(store_imm(Size::DW, R8, H_FLAGS, FLAG_SAMPLED));
        if let Some((parsed, remote)) = parent {
            let invalid = self.b.new_label();
            self.b.emit(load(Size::B, R1, R10, parsed + 25));
            self.b.jmp_imm_to(JmpOp::Eq, R1, 0, invalid);
            for (from, to) in [(0, H_TRACE), (8, H_TRACE + 8), (16, H_PARENT)] {
                self.b.emit(load(Size::DW, R1, R10, parsed + from));
                self.b.emit(store_reg(Size::DW, R8, to, R1));
            }
            self.b.emit(load(Size::B, R1, R10, parsed + 24));
            self.b.emit(alu64_imm(AluOp::And, R1, FLAG_SAMPLED));
            if remote {
                self.b.emit(alu64_imm(AluOp::Or, R1, FLAG_REMOTE_PARENT));
            } else {
                // The SDK's span context says whether it came from another process.
                self.b.emit(load(Size::B, R2, R10, parsed + super::sdkcontext::PARSED_REMOTE));
                self.b.emit(alu64_imm(AluOp::And, R2, 1));
                self.b.emit(alu64_imm(AluOp::Lsh, R2, FLAG_REMOTE_PARENT.trailing_zeros() as i32));
                self.b.emit(alu64_reg(AluOp::Or, R1, R2));
            }
            self.b.emit(store_reg(Size::DW, R8, H_FLAGS, R1));
            self.b.bind(invalid);
            self.b.emit(mov64_imm(R0, 0));
        }
        self.builtin(crate::check::Builtin::Func, span)?;
        self.b.emit(store_reg(Size::DW, R8, H_FUNC, R0));
        Ok(())
    }

    /// Copies a span context's ids, a trace id (16 bytes at frame offset `trace_from`) and
    /// a span id (at `span_from`), to `base + trace` and `base + span`: into an entry
    /// record (the span's trace and its parent), or into a parsed header's layout.
    pub(super) fn copy_ids(&mut self, (trace_from, span_from): (i16, i16), base: i16, (trace, span): (i16, i16)) {
        for (from, to) in [(trace_from, trace), (trace_from + 8, trace + 8), (span_from, span)] {
            self.b.emit(load(Size::DW, R1, R10, from));
            self.b.emit(store_reg(Size::DW, R10, base + to, R1));
        }
    }

    /// After a `hist()` update at the return of a call with a span: the value (slot
    /// `val`) and the span's ids, the exemplar of the key in slot `key` of `map`.
    pub(super) fn exemplar(&mut self, map: &str, key: i16, val: i16, span: Span) -> Result<(), LowerError> {
        let Some(Returned { frame, entry: Some(record), .. }) = self.loaded.call.returned().copied() else {
            return Ok(());
        };
        if !self.spans.spanned_call {
            return Ok(());
        }
        self.b.comment("the exemplar: this value, with the call's span");
        let skip = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, frame));
        self.b.emit(load(Size::DW, R1, R1, F_TIME));
        self.b.emit(load(Size::DW, R2, R10, record));
        self.b.emit(load(Size::DW, R2, R2, C_TIME));
        self.b.jmp_reg_to(JmpOp::Ne, R1, R2, skip);
        let mark = self.b.frame.mark();
        let ex = self.slot(EXEMPLAR, span)?;
        self.b.emit(load(Size::DW, R1, R10, val));
        self.b.emit(store_reg(Size::DW, R10, ex, R1));
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.emit(store_reg(Size::DW, R10, ex + 8, R0));
        self.b.emit(load(Size::DW, R1, R10, record));
        for (from, to) in [(C_TRACE, 16), (C_TRACE + 8, 24), (C_SPAN, 32)] {
            self.b.emit(load(Size::DW, R2, R1, from));
            self.b.emit(store_reg(Size::DW, R10, ex + to, R2));
        }
        self.b.call(BPF_FUNC_map_update_elem, &[Arg::Map(map), Arg::Stack(key), Arg::Stack(ex), Arg::Imm(BPF_ANY)]);
        self.count_refused_update(map, span)?;
        self.b.frame.release(mark);
        self.b.bind(skip);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }
}

/// The `hist()` maps that keep exemplars: those a return probe of a function whose calls
/// make spans aggregates into (by name; `""` for the bare `hist(x)`).
pub fn exemplar_maps(
    script: &crate::syntax::ast::Script,
    checked: &crate::check::Checked,
    records: &super::carry::EntryRecords,
) -> std::collections::BTreeSet<String> {
    use crate::syntax::ast::{ExprKind, Item, StmtKind};
    let mut out = std::collections::BTreeSet::new();
    let spanned = |i: &crate::check::Instance| {
        i.needs_entry() && !i.functions.is_empty() && i.functions.iter().all(|f| records.spanned.contains(&f.name))
    };
    for inst in checked.instances.iter().filter(|i| spanned(i)) {
        let Some(Item::Probe(p)) = script.items.get(inst.item) else { continue };
        p.body.walk_stmts(&mut |st| {
            let (map, value) = match &st.kind {
                StmtKind::AssignMap { map, value } => (map.name.name.clone(), value),
                StmtKind::Expr(e) => (String::new(), e),
                _ => return,
            };
            if matches!(&value.kind, ExprKind::Call { func, .. } if func.name == "hist") {
                out.insert(map);
            }
        });
    }
    out
}
