//! A Go value's scalars into R0: the word at a place, narrowed to its size and sign;
//! a scalar value by its expression; a nil-able value's first word; `len` and `cap`.

use super::Place;
use crate::arch::abi::PieceAt;
use crate::bpf::insn::*;
use crate::check::ty::Ty;
use crate::gotypes::{TypeId, TypeKind};
use crate::lower::codegen::Gen;
use crate::lower::ir::{Arg, R};
use crate::lower::LowerError;
use crate::syntax::ast::*;

/// The byte size of a scalar Go type (1, 2, 4 or 8).
fn scalar_size(gen: &Gen, id: TypeId) -> u64 {
    gen.types.get(id).size.clamp(1, 8)
}

impl Gen<'_> {
    /// R0 = the `size`-byte scalar at `place`, sign- or zero-extended.
    pub fn read_scalar(&mut self, place: &Place, size: u64, signed: bool) -> Result<(), LowerError> {
        match place {
            Place::Regs { pieces, offset } => {
                let piece = pieces.iter().find(|p| p.offset <= *offset && *offset < p.offset + p.size.max(1));
                match piece {
                    Some(p) => {
                        let reg = p.reg;
                        let shift = (*offset - p.offset) * 8;
                        self.load_ctx_reg(R0, reg);
                        if shift > 0 {
                            self.b.emit(alu64_imm(AluOp::Rsh, R0, shift as i32));
                        }
                    }
                    // A zero-sized value, or a part no register holds.
                    None => self.b.emit(mov64_imm(R0, 0)),
                }
            }
            Place::Stack { slot, offset } => {
                let off = crate::lower::offset(Span::default(), *slot, *offset as usize)?;
                self.b.emit(load(Size::of_scalar(size), R0, R10, off));
            }
            Place::Mem { addr, offset } => {
                let at = self.b.vreg();
                self.b.load_stack(Size::DW, at, *addr);
                self.read_user_scalar(at, *offset, size)?;
            }
            Place::Carried { offset } => self.read_carried(*offset, size, Span::default())?,
            Place::Pieces { pieces, offset, name, span } => {
                let piece = pieces.iter().find(|p| p.offset <= *offset && *offset < p.offset + p.size.max(1));
                let within = piece.map_or(0, |p| *offset - p.offset);
                match piece.map(|p| &p.at) {
                    Some(PieceAt::Reg(reg)) => {
                        self.load_ctx_reg(R0, *reg);
                        if within > 0 {
                            self.b.emit(alu64_imm(AluOp::Rsh, R0, (within * 8) as i32));
                        }
                    }
                    Some(PieceAt::Stack { offset: at }) => {
                        let sp = self.b.vreg();
                        self.load_reg(sp, self.arch().stack_pointer());
                        self.read_user_scalar(sp, at + within as i64, size)?;
                    }
                    Some(PieceAt::Missing) | None => {
                        return Err(LowerError::OptimizedAway {
                            span: *span,
                            name: name.clone(),
                            offset: *offset,
                            size,
                        })
                    }
                }
            }
        }
        self.narrow(size, signed);
        Ok(())
    }

    /// R0 = the `size` bytes of target memory at `addr` + `offset` (zero when
    /// unreadable); `addr` a register the read may change.
    pub(in crate::lower) fn read_user_scalar(
        &mut self,
        addr: impl Into<R>,
        offset: i64,
        size: u64,
    ) -> Result<(), LowerError> {
        let addr = addr.into();
        let tmp = self.frame_slot(8)?;
        self.b.emit(store_imm(Size::DW, R10, tmp, 0));
        if offset != 0 {
            self.b.op(alu64_imm(AluOp::Add, R0, offset as i32), addr, R0);
        }
        self.read_target(&[Arg::Stack(tmp), Arg::Imm(size as i32), Arg::R(addr)])?;
        self.b.emit(load(Size::DW, R0, R10, tmp));
        Ok(())
    }

    /// Keeps the low `size` bytes of R0, sign-extending when `signed`.
    pub fn narrow(&mut self, size: u64, signed: bool) {
        if size < 8 {
            let shift = 64 - 8 * size as i32;
            self.b.emit(alu64_imm(AluOp::Lsh, R0, shift));
            self.b.emit(alu64_imm(if signed { AluOp::Arsh } else { AluOp::Rsh }, R0, shift));
        }
    }

    /// R0 = the scalar Go value `e` (an integer, bool, pointer or duration).
    pub fn go_scalar(&mut self, e: &Expr) -> Result<(), LowerError> {
        if self.paths.contains_key(&e.id) {
            return self.reused_path(e, Self::go_scalar);
        }
        let id = self.go_type_of(e).ok_or_else(|| LowerError::unsupported(e.span, "this value"))?;
        let size = scalar_size(self, id);
        let signed = self.facts.ty(e.id).is_signed();
        let mark = self.b.frame.mark();
        let place = self.place(e)?;
        self.read_scalar(&place, size, signed)?;
        self.b.frame.release(mark);
        Ok(())
    }

    /// R0 = the first word of a nil-able Go value (pointer, interface, slice, map, ...).
    pub fn first_word(&mut self, e: &Expr) -> Result<(), LowerError> {
        if matches!(self.facts.ty(e.id), Ty::Pointer { .. }) {
            return self.expr(e);
        }
        let mark = self.b.frame.mark();
        let place = self.place(e)?;
        self.read_scalar(&place, 8, false)?;
        self.b.frame.release(mark);
        Ok(())
    }

    /// R0 = len(e).
    pub fn length(&mut self, e: &Expr) -> Result<(), LowerError> {
        match (&e.kind, self.facts.ty(e.id).clone()) {
            (ExprKind::Str(s), _) => {
                self.b.emit(mov64_imm(R0, s.len() as i32));
                return Ok(());
            }
            (_, Ty::Str { max }) if !self.is_go_value(e) => {
                // A local, self variable or builtin string: its record holds the length.
                let mark = self.b.frame.mark();
                let buf = self.slot(8 + max, e.span)?;
                self.string_to(e, R10, buf, max)?;
                self.b.emit(load(Size::DW, R0, R10, buf));
                self.b.frame.release(mark);
                return Ok(());
            }
            _ => {}
        }
        let id = self.go_type_of(e).ok_or_else(|| LowerError::unsupported(e.span, "len of this"))?;
        let kind = self.types.get(id).kind.clone();
        let mark = self.b.frame.mark();
        match kind {
            TypeKind::Array { len, .. } => self.b.emit(mov64_imm(R0, len as i32)),
            TypeKind::String | TypeKind::Slice { .. } => {
                let p = self.place(e)?;
                self.read_scalar(&p.plus(8), 8, true)?;
            }
            // A map is a pointer to its header, whose first word is the count (hmap.count
            // before Go 1.24, maps.Map.used since); a channel a pointer to its hchan,
            // whose first word is qcount. Nil reads as 0.
            TypeKind::Map { .. } | TypeKind::Chan => self.header_word(e, 0)?,
            _ => return Err(LowerError::unsupported(e.span, "len of this")),
        }
        self.b.frame.release(mark);
        Ok(())
    }

    /// R0 = cap(e) of a slice, array or channel.
    pub fn capacity(&mut self, e: &Expr) -> Result<(), LowerError> {
        let id = self.go_type_of(e).ok_or_else(|| LowerError::unsupported(e.span, "cap of this"))?;
        let kind = self.types.get(id).kind.clone();
        let mark = self.b.frame.mark();
        match kind {
            TypeKind::Array { len, .. } => self.b.emit(mov64_imm(R0, len as i32)),
            TypeKind::Slice { .. } => {
                let p = self.place(e)?;
                self.read_scalar(&p.plus(16), 8, true)?;
            }
            // hchan.dataqsiz, the second word (unchanged from Go 1.17 to 1.27).
            TypeKind::Chan => self.header_word(e, 8)?,
            _ => return Err(LowerError::unsupported(e.span, "cap of this")),
        }
        self.b.frame.release(mark);
        Ok(())
    }

    /// R0 = the word at `offset` of the runtime header a map or channel points at, or 0
    /// when nil.
    fn header_word(&mut self, e: &Expr, offset: u64) -> Result<(), LowerError> {
        let p = self.place(e)?;
        self.read_scalar(&p, 8, false)?;
        let addr = self.address_place(e.span)?;
        self.read_scalar(&addr.plus(offset), 8, true)?;
        Ok(())
    }
}
