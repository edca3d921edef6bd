//! The OpenTelemetry Go SDK's span as the parent of a `span()`: at the entry of a
//! function with a span and a `context.Context` parameter, the probe walks the context
//! chain (at most `CTX_REACH` contexts: `*context.valueCtx`, and the cancel, timer,
//! without-cancel, after-func and stop contexts whose parent is their first field) to
//! the value stored under the trace API's key (`trace.ContextWithSpan`), a
//! `*sdk/trace.recordingSpan` or a `trace.nonRecordingSpan`, and reads its
//! `trace.SpanContext`: the span becomes the parent, its trace the span's. The same walk
//! gives an ended span's parent from any `context.Context` value (`span(start: t0,
//! parent: ctx)`, e.g. a gRPC client stream's context at its end). Every type
//! is known by its runtime descriptor and every offset from DWARF
//! (`target::OtelContext`). A span of the script below on the goroutine stays the parent
//! when it already descends from this same SDK span (its own parent); else the SDK's
//! span is nearer (made inside it) and wins. A span context the SDK marks remote
//! (`IsRemote`: extracted from another process's headers, `ContextWithRemoteSpanContext`)
//! makes a remote parent (OTLP's flags say so); the SDK's own spans, a local one.

use super::codegen::Gen;
use super::layout::{C_FLAGS, C_PARENT, C_TRACE, FLAG_REMOTE_PARENT, FLAG_SAMPLED};
use super::LowerError;
use crate::arch::abi::Location;
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::gobin::OtelContext;
use crate::plan::Counter;
use crate::syntax::ast::{Expr, Span};

/// Contexts of a chain looked at, at most.
pub const CTX_REACH: usize = 8;
/// The bytes of a `trace.SpanContext` read: its ids, flags, and `remote` (at 56 on a
/// 64-bit target).
const SC_READ: u64 = 64;
/// Where `parse_traceparent`'s form (context.rs) keeps, at its byte 26, whether the
/// span context found in a context is remote (a traceparent's parent is, always).
pub const PARSED_REMOTE: i16 = 26;

/// Where the span context's `remote` bool is, when it is read with the rest.
fn remote_at(otel: &OtelContext) -> Option<i16> {
    otel.remote.filter(|r| *r < SC_READ).map(|r| r as i16)
}

impl Gen<'_> {
    /// At the entry, after the span's parent on the goroutine was looked for: the SDK's
    /// span in the context parameter at `ctx`, made the parent where it is nearer.
    pub(super) fn sdk_parent(
        &mut self,
        otel: &OtelContext,
        ctx: &Location,
        record: i16,
        grand: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        self.b.comment("the program's own span: the OpenTelemetry SDK's, through the context chain");
        let cur = self.slot(16, span)?;
        for i in 0..2 {
            self.b.emit(store_imm(Size::DW, R10, cur + 8 * i, 0));
        }
        self.copy_at_entry(ctx, cur, 16, span)?;
        let (sc, none) = self.sdk_span_context(otel, cur, span)?;
        let (tid, sid, flags) = (sc + otel.trace_id as i16, sc + otel.span_id as i16, sc + otel.flags as i16);
        self.b.emit(load(Size::DW, R1, R10, grand));
        self.b.emit(load(Size::DW, R2, R10, sid));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, none);
        self.copy_ids((tid, sid), record, (C_TRACE, C_PARENT));
        self.b.emit(load(Size::B, R1, R10, flags));
        self.b.emit(alu64_imm(AluOp::And, R1, FLAG_SAMPLED));
        if let Some(r) = remote_at(otel) {
            self.b.emit(load(Size::B, R2, R10, sc + r));
            self.b.emit(alu64_imm(AluOp::And, R2, 1));
            self.b.emit(alu64_imm(AluOp::Lsh, R2, FLAG_REMOTE_PARENT.trailing_zeros() as i32));
            self.b.emit(alu64_reg(AluOp::Or, R1, R2));
        }
        self.b.emit(store_reg(Size::DW, R10, record + C_FLAGS, R1));
        self.b.bind(none);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// `span(start: t0, parent: ctx)`: the SDK's span in the `context.Context` value
    /// `ctx`, written into the 32-byte slot `parsed` (zeroed by the caller) as
    /// `parse_traceparent` writes a header: trace id, span id, flags, and at 25 a 1 when
    /// there is one. Without the SDK's layout (no SDK in the program, or no DWARF) there
    /// is none.
    pub(super) fn sdk_parent_of(&mut self, ctx: &Expr, parsed: i16, span: Span) -> Result<(), LowerError> {
        let Some(otel) = self.spans.otel.clone() else { return Ok(()) };
        self.b.comment("an ended span's parent: the OpenTelemetry SDK's span in a context");
        let mark = self.b.frame.mark();
        let place = self.place(ctx)?;
        let cur = self.slot(16, span)?;
        for k in [0, 8] {
            self.read_scalar(&place.clone().plus(k), 8, false)?;
            self.b.emit(store_reg(Size::DW, R10, cur + k as i16, R0));
        }
        let (sc, none) = self.sdk_span_context(&otel, cur, span)?;
        let (tid, sid, flags) = (sc + otel.trace_id as i16, sc + otel.span_id as i16, sc + otel.flags as i16);
        self.copy_ids((tid, sid), parsed, (0, 16));
        self.b.emit(load(Size::B, R1, R10, flags));
        self.b.emit(store_reg(Size::B, R10, parsed + 24, R1));
        self.b.emit(store_imm(Size::B, R10, parsed + 25, 1));
        if let Some(r) = remote_at(&otel) {
            self.b.emit(load(Size::B, R1, R10, sc + r));
            self.b.emit(store_reg(Size::B, R10, parsed + PARSED_REMOTE, R1));
        }
        self.b.bind(none);
        self.b.emit(mov64_imm(R0, 0));
        self.b.frame.release(mark);
        Ok(())
    }

    /// Walks the context chain from the interface value (type word, data word) in the
    /// 16-byte slot `cur` to the trace API's span: falls through with its
    /// `trace.SpanContext` in the returned slot (its span id not zero), or jumps to the
    /// returned label when there is none.
    fn sdk_span_context(&mut self, otel: &OtelContext, cur: i16, span: Span) -> Result<(i16, Label), LowerError> {
        let (ty, buf, sc) = (self.slot(8, span)?, self.slot(64, span)?, self.slot(SC_READ as u32, span)?);
        for i in 0..(SC_READ / 8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, sc + 8 * i, 0));
        }
        let (none, got) = (self.b.new_label(), self.b.new_label());
        let read = (otel.value_parent.max(otel.value_key).max(otel.value_val) + 16).min(64) as i32;
        for _ in 0..CTX_REACH {
            let (next, wrap, up) = (self.b.new_label(), self.b.new_label(), self.b.new_label());
            // The context's dynamic type: its itab's type.
            self.b.emit(load(Size::DW, R1, R10, cur));
            self.b.jmp_imm_to(JmpOp::Eq, R1, 0, none);
            self.b.emit(store_imm(Size::DW, R10, ty, 0));
            self.read_user(ty, R1, 8)?;
            self.b.emit(load(Size::DW, R1, R10, ty));
            for w in &otel.wrappers {
                self.b.emit2(ld_imm64(R2, *w));
                self.b.jmp_reg_to(JmpOp::Eq, R1, R2, wrap);
            }
            self.b.emit2(ld_imm64(R2, otel.value_ctx));
            self.b.jmp_reg_to(JmpOp::Ne, R1, R2, none);
            // A value context: the trace API's key holds the span.
            let value = self.b.vreg();
            self.b.load_stack(Size::DW, value, cur + 8);
            self.read_user_n(buf, read, value)?;
            self.b.emit(load(Size::DW, R1, R10, buf + otel.value_key as i16));
            self.b.emit2(ld_imm64(R2, otel.key));
            self.b.jmp_reg_to(JmpOp::Ne, R1, R2, up);
            self.b.emit(load(Size::DW, R1, R10, buf + otel.value_val as i16));
            for (t, off) in &otel.spans {
                let other = self.b.new_label();
                self.b.emit2(ld_imm64(R2, *t));
                self.b.jmp_reg_to(JmpOp::Ne, R1, R2, other);
                let context = self.b.vreg();
                self.b.load_stack(Size::DW, context, buf + otel.value_val as i16 + 8);
                self.b.op(alu64_imm(AluOp::Add, R0, *off as i32), context, R0);
                let end = otel.flags.max(remote_at(otel).map_or(0, |r| r as u64)) + 1;
                self.read_user_n(sc, end.min(SC_READ) as i32, context)?;
                self.b.ja_to(got);
                self.b.bind(other);
                self.b.emit(load(Size::DW, R1, R10, buf + otel.value_val as i16));
            }
            self.b.ja_to(none);
            self.b.bind(up);
            for k in [0, 8] {
                self.b.emit(load(Size::DW, R1, R10, buf + otel.value_parent as i16 + k));
                self.b.emit(store_reg(Size::DW, R10, cur + k, R1));
            }
            self.b.ja_to(next);
            // A wrapper: its parent is its first field.
            self.b.bind(wrap);
            let wrapper = self.b.vreg();
            self.b.load_stack(Size::DW, wrapper, cur + 8);
            self.read_user_n(cur, 16, wrapper)?;
            self.b.bind(next);
            self.b.emit(mov64_imm(R0, 0));
        }
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why =
                format!("a context chain was followed {CTX_REACH} contexts deep only: the SDK's span was not found");
            self.count(Counter::Skipped { program, why }, span)?;
        }
        self.b.ja_to(none);
        self.b.bind(got);
        self.b.emit(load(Size::DW, R1, R10, sc + otel.span_id as i16));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, none);
        Ok((sc, none))
    }
}
