//! `trace_context(s)`: the program's own trace, read at the entry of a call (the W3C
//! `traceparent` header of the net/http request being served, stdlib/tracecontext.gt):
//! lowered into the function's entry program, after the span (if any) is opened and
//! before the entry record is written (spans.rs). A valid `s` makes the call's record a
//! context: its trace id and span id are the header's, so the spans made below it on
//! the goroutine join the program's trace, their parent the header's span (remote). When
//! the function makes a span itself, the header becomes that span's parent instead.
//! Anything but a valid version-00 header (`00-` 32 hex digits `-` 16 `-` 2, ids not all
//! zero; a longer one is read by its first 55 bytes) leaves the call as it was.

use super::codegen::Gen;
use super::layout::{C_FLAGS, C_PARENT, C_SPAN, C_TRACE, FLAG_CHILD_REMOTE, FLAG_REMOTE_PARENT, FLAG_SAMPLED};
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::syntax::ast::{Expr, Span};

/// A version-00 traceparent's length.
pub const TRACEPARENT_LEN: u32 = 55;

impl Gen<'_> {
    /// `trace_context(arg)` in a function's entry program, before its entry record is
    /// built: the header parsed into the 32-byte slot `context_parsed` (trace id, parent
    /// id, flags, and at 25 a 1 when the header is valid), for `apply_trace_context`.
    pub(super) fn trace_context(&mut self, arg: &Expr, span: Span) -> Result<(), LowerError> {
        let parsed = match self.spans.context_parsed {
            Some(p) if self.spans.reading_context => p,
            _ => return Err(LowerError::unsupported(span, "trace_context() outside a function's entry")),
        };
        self.parse_traceparent(arg, parsed, span)
    }

    /// The traceparent `arg` parsed into the 32-byte slot `parsed` (zeroed by the caller):
    /// trace id, parent id, flags, and at 25 a 1 when the header is valid.
    pub(super) fn parse_traceparent(&mut self, arg: &Expr, parsed: i16, span: Span) -> Result<(), LowerError> {
        self.b.comment("the program's trace context: a W3C traceparent");
        let mark = self.b.frame.mark();
        let buf = self.slot(8 + 56, span)?;
        for i in 0..8 {
            self.b.emit(store_imm(Size::DW, R10, buf + 8 * i, 0));
        }
        self.string_to(arg, R10, buf, TRACEPARENT_LEN)?;
        let bad = self.b.new_label();
        let text = buf + 8;
        self.b.emit(load(Size::DW, R1, R10, buf));
        self.b.jmp_imm_to(JmpOp::Ne, R1, TRACEPARENT_LEN as i32, bad);
        for (at, want) in [(0, b'0'), (1, b'0'), (2, b'-'), (35, b'-'), (52, b'-')] {
            self.b.emit(load(Size::B, R1, R10, text + at));
            self.b.jmp_imm_to(JmpOp::Ne, R1, i32::from(want), bad);
        }
        for i in 0..16 {
            self.hex_byte(text + 3 + 2 * i, parsed + i, bad);
        }
        for i in 0..8 {
            self.hex_byte(text + 36 + 2 * i, parsed + 16 + i, bad);
        }
        self.hex_byte(text + 53, parsed + 24, bad);
        // All-zero ids are invalid.
        self.b.emit(load(Size::DW, R1, R10, parsed));
        self.b.emit(load(Size::DW, R2, R10, parsed + 8));
        self.b.emit(alu64_reg(AluOp::Or, R1, R2));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, bad);
        self.b.emit(load(Size::DW, R1, R10, parsed + 16));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, bad);
        self.b.emit(store_imm(Size::B, R10, parsed + 25, 1));
        self.b.bind(bad);
        self.b.emit(mov64_imm(R0, 0));
        self.b.frame.release(mark);
        Ok(())
    }

    /// A valid parsed header (slot `parsed`) into the entry record being built at
    /// `record`: the span's remote parent, or (no span) the context of the calls below.
    pub(super) fn apply_trace_context(
        &mut self,
        parsed: i16,
        record: i16,
        spanned: bool,
        span: Span,
    ) -> Result<(), LowerError> {
        let skip = self.b.new_label();
        self.b.emit(load(Size::B, R1, R10, parsed + 25));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, skip);
        let (to_span, flag) = if spanned {
            (C_PARENT, FLAG_REMOTE_PARENT)
        } else {
            self.mark_frame(record, span)?;
            (C_SPAN, FLAG_CHILD_REMOTE)
        };
        self.copy_ids((parsed, parsed + 16), record, (C_TRACE, to_span));
        self.b.emit(load(Size::B, R1, R10, parsed + 24));
        self.b.emit(alu64_imm(AluOp::And, R1, FLAG_SAMPLED));
        self.b.emit(alu64_imm(AluOp::Or, R1, flag));
        self.b.emit(store_reg(Size::DW, R10, record + C_FLAGS, R1));
        self.b.bind(skip);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// *(u8 *)(r10 + to) = the byte written as two lowercase hex digits at r10 + at;
    /// jumps to `bad` at any other character.
    fn hex_byte(&mut self, at: i16, to: i16, bad: Label) {
        for (k, reg) in [(0, R3), (1, R4)] {
            let digit = self.b.new_label();
            self.b.emit(load(Size::B, R1, R10, at + k));
            self.b.jmp_imm_to(JmpOp::Lt, R1, i32::from(b'0'), bad);
            self.b.jmp_imm_to(JmpOp::Le, R1, i32::from(b'9'), digit);
            self.b.jmp_imm_to(JmpOp::Lt, R1, i32::from(b'a'), bad);
            self.b.jmp_imm_to(JmpOp::Gt, R1, i32::from(b'f'), bad);
            self.b.bind(digit);
            // '0'..'9' → 0..9, 'a'..'f' → 10..15.
            self.b.emit(mov64_reg(R2, R1));
            self.b.emit(alu64_imm(AluOp::Rsh, R2, 6));
            self.b.emit(alu64_imm(AluOp::Mul, R2, 9));
            self.b.emit(alu64_imm(AluOp::And, R1, 0xf));
            self.b.emit(alu64_reg(AluOp::Add, R1, R2));
            self.b.emit(mov64_reg(reg, R1));
        }
        self.b.emit(alu64_imm(AluOp::Lsh, R3, 4));
        self.b.emit(alu64_reg(AluOp::Or, R3, R4));
        self.b.emit(store_reg(Size::B, R10, to, R3));
    }
}
