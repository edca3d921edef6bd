//! Strings as records (a u64 length, then at most `max` bytes): a Go string read from
//! its place (pointer and length in one read), a literal, a local's or a stored string's
//! record, the thread's name; and a string compared with a literal (`==`, `hasPrefix`).

use super::Place;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::ty::Ty;
use crate::check::Name;
use crate::lower::codegen::Gen;
use crate::lower::ir::Arg;
use crate::lower::LowerError;
use crate::syntax::ast::*;

impl Gen<'_> {
    /// Writes the string `e` as a record (u64 length, then at most `max` bytes) at
    /// `base + off`, where `base` is R10 (the stack) or R8 (an event record).
    pub fn string_to(&mut self, e: &Expr, base: Reg, off: i16, max: u32) -> Result<(), LowerError> {
        if let ExprKind::Str(lit) = &e.kind {
            let bytes = &lit.as_bytes()[..lit.len().min(max as usize)];
            crate::lower::offset(e.span, off, 8 + bytes.len().next_multiple_of(8))?;
            self.b.emit(store_imm(Size::DW, base, off, bytes.len() as i32));
            for (i, chunk) in bytes.chunks(8).enumerate() {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                self.b.emit2(ld_imm64(R1, u64::from_le_bytes(word)));
                self.b.emit(store_reg(Size::DW, base, crate::lower::offset(e.span, off, 8 + 8 * i)?, R1));
            }
            return Ok(());
        }
        if matches!(self.facts.names.get(&e.id), Some(Name::Builtin(crate::check::Builtin::Comm))) {
            return self.comm_to(base, off, max);
        }
        if let Ty::Str { max: have } = self.facts.ty(e.id).clone() {
            // A string stored in a self variable or a map: its record (empty when unset).
            if self.stored_string_to(e, base, off, have, max)? {
                return Ok(());
            }
        }
        if !self.is_go_value(e) {
            // A local string: copy its record.
            let slot = self.local_slot(e)?;
            let Ty::Str { max: have } = self.facts.ty(e.id).clone() else {
                return Err(LowerError::unsupported(e.span, "this string"));
            };
            for i in 0..words_of(e.span, off, have.min(max))? {
                self.b.emit(load(Size::DW, R1, R10, slot + 8 * i));
                self.b.emit(store_reg(Size::DW, base, off + 8 * i, R1));
            }
            return Ok(());
        }
        let mark = self.b.frame.mark();
        let place = self.place(e)?;
        self.string_from_place(&place, base, off, max, e.span)?;
        self.b.frame.release(mark);
        Ok(())
    }

    /// Writes the Go string at `place` as a record at `base + off`.
    pub fn string_from_place(
        &mut self,
        place: &Place,
        base: Reg,
        off: i16,
        max: u32,
        span: Span,
    ) -> Result<(), LowerError> {
        if max == 0 {
            // Nothing to read (`hasPrefix(s, "")`): the kernel refuses a read of 0 bytes.
            self.b.emit(store_imm(Size::DW, base, off, 0));
            return Ok(());
        }
        let mark = self.b.frame.mark();
        let place = place.clone();
        let ptr = match place {
            // In the target's memory: its pointer and length in one read of 16 bytes (a
            // helper call is most of what reading a string costs).
            Place::Mem { addr, offset } => {
                let header = self.slot(16, span)?;
                self.b.emit(store_imm(Size::DW, R10, header, 0));
                self.b.emit(store_imm(Size::DW, R10, header + 8, 0));
                let src = self.b.vreg();
                self.b.load_stack(Size::DW, src, addr);
                if offset != 0 {
                    self.b.op(alu64_imm(AluOp::Add, R0, offset as i32), src, R0);
                }
                self.read_target(&[Arg::Stack(header), Arg::Imm(16), src.into()])?;
                self.b.emit(load(Size::DW, R0, R10, header + 8));
                header
            }
            _ => {
                let ptr = self.slot(8, span)?;
                self.read_scalar(&place, 8, false)?;
                self.b.emit(store_reg(Size::DW, R10, ptr, R0));
                self.read_scalar(&place.plus(8), 8, false)?;
                ptr
            }
        };
        let ok = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Le, R0, max as i32, ok);
        self.b.emit(mov64_imm(R0, max as i32));
        self.b.bind(ok);
        self.b.emit(store_reg(Size::DW, base, off, R0));
        let src = self.b.vreg();
        self.b.load_stack(Size::DW, src, ptr);
        self.read_target(&[Arg::at(base, off + 8), R0.into(), src.into()])?;
        self.b.frame.release(mark);
        Ok(())
    }

    /// Writes the current thread's name as a string record: bpf_get_current_comm, then
    /// its length up to the first NUL.
    fn comm_to(&mut self, base: Reg, off: i16, max: u32) -> Result<(), LowerError> {
        const COMM: i16 = 16;
        let mut buf_off = off + 8;
        let mark = self.b.frame.mark();
        // The helper writes 16 bytes: into the record when it has room, else a temporary.
        let tmp = if max < COMM as u32 { Some(self.frame_slot(COMM as u32)?) } else { None };
        let (buf_base, b_off) = match tmp {
            Some(t) => (R10, t),
            None => (base, off + 8),
        };
        self.b.call(BPF_FUNC_get_current_comm, &[Arg::at(buf_base, b_off), Arg::Imm(COMM as i32)]);
        let done = self.b.new_label();
        self.b.emit(mov64_imm(R0, COMM as i32));
        for i in 0..COMM {
            let next = self.b.new_label();
            self.b.emit(load(Size::B, R1, buf_base, b_off + i));
            self.b.jmp_imm_to(JmpOp::Ne, R1, 0, next);
            self.b.emit(mov64_imm(R0, i as i32));
            self.b.ja_to(done);
            self.b.bind(next);
        }
        self.b.bind(done);
        let ok = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Le, R0, max as i32, ok);
        self.b.emit(mov64_imm(R0, max as i32));
        self.b.bind(ok);
        self.b.emit(store_reg(Size::DW, base, off, R0));
        if tmp.is_some() {
            for i in 0..COMM.min(max.try_into().unwrap_or(COMM)) {
                self.b.emit(load(Size::B, R1, buf_base, b_off + i));
                self.b.emit(store_reg(Size::B, base, buf_off, R1));
                buf_off += 1;
            }
        }
        self.b.frame.release(mark);
        Ok(())
    }

    /// R0 = 1 when the string `e` equals `lit` (or, with `prefix`, starts with it);
    /// `lit_span` is the literal's place in the script.
    pub fn string_matches(&mut self, e: &Expr, lit: &str, lit_span: Span, prefix: bool) -> Result<(), LowerError> {
        // The string is copied to the stack with one byte more than the literal (for
        // equality, so a longer string's clamped length still differs).
        let needed = i32::try_from(lit.len().saturating_add(16)).unwrap_or(i32::MAX);
        let too_long = || LowerError::Stack { span: lit_span, needed };
        let n = u32::try_from(lit.len()).map_err(|_| too_long())?;
        let max = if prefix { n } else { n.saturating_add(1) };
        let words = max.div_ceil(8);
        if words > crate::lower::ir::frame::MAX_STACK as u32 / 8 {
            return Err(too_long());
        }
        let mark = self.b.frame.mark();
        let buf = self.slot(8 + 8 * words, lit_span)?;
        // The slot fits the stack, so every offset in it fits an instruction's.
        let words = words as i16;
        for i in 0..=words {
            self.b.emit(store_imm(Size::DW, R10, buf + 8 * i, 0));
        }
        self.string_to(e, R10, buf, max)?;
        let no = self.b.new_label();
        let end = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, buf));
        self.b.jmp_imm_to(JmpOp::Ne, R1, n as i32, no);
        for (i, chunk) in lit.as_bytes().chunks(8).enumerate() {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.b.emit(load(Size::DW, R1, R10, buf + 8 + 8 * i as i16));
            self.b.emit2(ld_imm64(R2, u64::from_le_bytes(word)));
            self.b.jmp_reg_to(JmpOp::Ne, R1, R2, no);
        }
        self.b.emit(mov64_imm(R0, 1));
        self.b.ja_to(end);
        self.b.bind(no);
        self.b.emit(mov64_imm(R0, 0));
        self.b.bind(end);
        self.b.frame.release(mark);
        Ok(())
    }
}

/// How many 8-byte words a string record of at most `max` bytes takes at `base + off`;
/// an error when its end is past what an instruction's offset reaches.
fn words_of(span: Span, off: i16, max: u32) -> Result<i16, LowerError> {
    let bytes = 8 + (max as usize).next_multiple_of(8);
    crate::lower::offset(span, off, bytes)?;
    Ok((bytes / 8) as i16)
}
