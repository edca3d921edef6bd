//! Whole values as the records `print` and maps keep: an interface (its type, data word,
//! what the data points at, as a string if it is one), the Go call stack, and any value
//! by its type (`value_to`).

use super::Place;
use crate::arch::ReturnAddress;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::ty::Ty;
use crate::check::Name;
use crate::gotypes::TypeKind;
use crate::lower::codegen::Gen;
use crate::lower::ir::Arg;
use crate::lower::LowerError;
use crate::syntax::ast::*;

impl Gen<'_> {
    /// Writes the Go call stack at `base + off`: the probed instruction, the return
    /// address (at SP or in the link register: probes sit before the frame is set up, or
    /// after it is torn down), then the frame-pointer chain (Go keeps frame pointers).
    pub fn ustack_to(&mut self, base: Reg, off: i16, span: Span) -> Result<(), LowerError> {
        let depth = crate::plan::USTACK_DEPTH as i16;
        let mark = self.b.frame.mark();
        let fp = self.slot(8, span)?;
        let pair = self.slot(16, span)?;
        for i in 0..depth {
            self.b.emit(store_imm(Size::DW, base, off + 8 * i, 0));
        }
        self.load_ctx_reg(R0, self.arch().program_counter());
        self.b.emit(store_reg(Size::DW, base, off, R0));
        match self.arch().return_address() {
            ReturnAddress::AtStackPointer => {
                let sp = self.b.vreg();
                self.load_reg(sp, self.arch().stack_pointer());
                self.b.emit(store_imm(Size::DW, R10, pair, 0));
                self.b.call(BPF_FUNC_probe_read_user, &[Arg::Stack(pair), Arg::Imm(8), sp.into()]);
                self.b.emit(load(Size::DW, R0, R10, pair));
            }
            ReturnAddress::InRegister(reg) => self.load_ctx_reg(R0, reg),
        }
        self.b.emit(store_reg(Size::DW, base, off + 8, R0));
        self.load_ctx_reg(R0, self.arch().frame_pointer());
        self.b.emit(store_reg(Size::DW, R10, fp, R0));
        let done = self.b.new_label();
        for i in 2..depth {
            // [fp] is the caller's frame pointer, [fp + 8] its return address.
            let caller = self.b.vreg();
            self.b.load_stack(Size::DW, caller, fp);
            self.b.jmp_imm_to(JmpOp::Eq, caller, 0, done);
            self.b.emit(store_imm(Size::DW, R10, pair, 0));
            self.b.emit(store_imm(Size::DW, R10, pair + 8, 0));
            self.b.call(BPF_FUNC_probe_read_user, &[Arg::Stack(pair), Arg::Imm(16), caller.into()]);
            self.b.emit(load(Size::DW, R0, R10, pair + 8));
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, done);
            self.b.emit(store_reg(Size::DW, base, off + 8 * i, R0));
            self.b.emit(load(Size::DW, R0, R10, pair));
            self.b.emit(store_reg(Size::DW, R10, fp, R0));
        }
        self.b.bind(done);
        self.b.frame.release(mark);
        Ok(())
    }

    /// Writes an interface's record (see `plan::ValueType::Interface`) at `base + off`.
    pub fn interface_to(&mut self, e: &Expr, base: Reg, off: i16) -> Result<(), LowerError> {
        // The panic's value is an `any`.
        let empty = match self.go_type_of(e) {
            Some(id) => matches!(self.types.get(id).kind, TypeKind::Interface { empty: true }),
            None if matches!(self.facts.names.get(&e.id), Some(Name::Builtin(crate::check::Builtin::Panic))) => true,
            None => return Err(LowerError::unsupported(e.span, "this interface")),
        };
        let mark = self.b.frame.mark();
        let place = self.place(e)?;
        self.interface_from_place(&place, empty, base, off, e.span)?;
        self.b.frame.release(mark);
        Ok(())
    }

    pub fn interface_from_place(
        &mut self,
        place: &Place,
        empty: bool,
        base: Reg,
        off: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        // The type: the first word of an `any`; the itab's type (at 8) otherwise.
        self.read_scalar(place, 8, false)?;
        if !empty {
            let itab = self.slot(8, span)?;
            self.b.emit(store_reg(Size::DW, R10, itab, R0));
            self.read_scalar(&Place::Mem { addr: itab, offset: 8 }, 8, false)?;
        }
        self.b.emit(store_reg(Size::DW, base, off, R0));
        let data = self.slot(8, span)?;
        self.read_scalar(&place.clone().plus(8), 8, false)?;
        self.b.emit(store_reg(Size::DW, R10, data, R0));
        self.b.emit(store_reg(Size::DW, base, off + 8, R0));
        // What the data points at (zero when nil): a word, and a string if it is one.
        let pointee = Place::Mem { addr: data, offset: 0 };
        self.read_scalar(&pointee, 8, false)?;
        self.b.emit(store_reg(Size::DW, base, off + 16, R0));
        self.string_from_place(&pointee, base, off + 24, 64, span)?;
        self.b.frame.release(mark);
        Ok(())
    }

    /// Writes the value of `e` as its record (`Ty::record_size` bytes) at `base + off`.
    pub fn value_to(&mut self, e: &Expr, base: Reg, off: i16) -> Result<(), LowerError> {
        match self.facts.ty(e.id).clone() {
            Ty::Str { max } => self.string_to(e, base, off, max),
            ty @ (Ty::Interface | Ty::Stack) if self.stored_record_to(e, base, off, ty.record_size())? => Ok(()),
            Ty::Interface => self.interface_to(e, base, off),
            Ty::Stack => self.ustack_to(base, off, e.span),
            _ => {
                self.expr(e)?;
                self.b.emit(store_reg(Size::DW, base, off, R0));
                Ok(())
            }
        }
    }
}
