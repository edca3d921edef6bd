//! Reading Go values: where a parameter, field, element or pointee lives at the probe
//! (a `Place`: registers, or target memory at an address), and from there its scalars
//! (scalars.rs), strings (strings.rs) and the records of interfaces, call stacks and
//! whole values (records.rs), all read with `bpf_probe_read_user`. Nothing is ever
//! written to the target.

mod records;
mod scalars;
mod strings;

use super::codegen::Gen;
use super::LowerError;
use crate::arch::abi::{Location, Piece, RegPiece};
use crate::bpf::insn::*;
use crate::check::Name;
use crate::gotypes::{TypeId, TypeKind};
use crate::syntax::ast::*;

/// Where a Go value is at the probe.
#[derive(Clone, Debug)]
pub enum Place {
    /// In registers; `offset` is the byte offset within the value being addressed.
    Regs { pieces: Vec<RegPiece>, offset: u64 },
    /// In the target's memory at (the address held in stack slot `addr`) + `offset`.
    Mem { addr: i16, offset: i64 },
    /// In pieces (registers, the stack at SP + constant, or nowhere); `offset` as for
    /// `Regs`. `name` and `span` say whose pieces, for the error a missing one gives.
    Pieces { pieces: Vec<Piece>, offset: u64, name: String, span: Span },
    /// Carried from the call's entry: at `offset` in its entry record (see carry.rs).
    Carried { offset: u64 },
    /// Copied to the program's stack, at slot `slot` + `offset` (the panic's value).
    Stack { slot: i16, offset: u64 },
}

impl Place {
    pub fn plus(self, more: u64) -> Place {
        match self {
            Place::Regs { pieces, offset } => Place::Regs { pieces, offset: offset + more },
            Place::Mem { addr, offset } => Place::Mem { addr, offset: offset + more as i64 },
            Place::Pieces { pieces, offset, name, span } => Place::Pieces { pieces, offset: offset + more, name, span },
            Place::Carried { offset } => Place::Carried { offset: offset + more },
            Place::Stack { slot, offset } => Place::Stack { slot, offset: offset + more },
        }
    }
}

impl Gen<'_> {
    /// Does `e` denote a Go value (a parameter, field, element, pointee)?
    pub fn is_go_value(&self, e: &Expr) -> bool {
        self.facts.go_types.contains_key(&e.id)
    }

    pub fn go_type_of(&self, e: &Expr) -> Option<TypeId> {
        self.facts.go_types.get(&e.id).copied()
    }

    /// The place of the Go value `name` at this probe.
    pub fn location_place(&mut self, name: &str, location: &Location, span: Span) -> Result<Place, LowerError> {
        match location {
            Location::Pieces(pieces) => {
                Ok(Place::Pieces { pieces: pieces.clone(), offset: 0, name: name.to_string(), span })
            }
            Location::Regs(pieces) => Ok(Place::Regs { pieces: pieces.clone(), offset: 0 }),
            Location::Stack { offset } => {
                let slot = self.slot(8, span)?;
                self.load_ctx_reg(R0, self.arch().stack_pointer());
                self.b.emit(alu64_imm(AluOp::Add, R0, *offset as i32));
                self.b.emit(store_reg(Size::DW, R10, slot, R0));
                Ok(Place::Mem { addr: slot, offset: 0 })
            }
            Location::Empty => Ok(Place::Regs { pieces: Vec::new(), offset: 0 }),
            Location::Unreadable { reason } => Err(LowerError::unsupported(span, reason)),
        }
    }

    /// Keeps R0 (an address) in a new stack slot: the place of the value it points at.
    pub(in crate::lower) fn address_place(&mut self, span: Span) -> Result<Place, LowerError> {
        let slot = self.slot(8, span)?;
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        Ok(Place::Mem { addr: slot, offset: 0 })
    }

    /// Where the Go value `e` is.
    pub fn place(&mut self, e: &Expr) -> Result<Place, LowerError> {
        match self.facts.names.get(&e.id).cloned() {
            Some(Name::GoValue { name, at_entry: true, .. }) => return self.carried_place(&name, e.span),
            Some(Name::GoValue { name, location, escaped: true, .. }) => {
                // The local's address is where DWARF says: the value is behind it.
                let pointer = self.location_place(&name, &location, e.span)?;
                self.read_scalar(&pointer, 8, false)?;
                return self.address_place(e.span);
            }
            Some(Name::GoValue { name, location, .. }) => return self.location_place(&name, &location, e.span),
            Some(Name::Global { addr, .. }) => return self.global_place(addr, e.span),
            Some(Name::Builtin(crate::check::Builtin::Panic)) => {
                let p = self.loaded.call.panicked();
                let p = p.ok_or_else(|| LowerError::unsupported(e.span, "panic outside `on panic`"))?;
                return Ok(Place::Stack { slot: p.value, offset: 0 });
            }
            _ => {}
        }
        match &e.kind {
            ExprKind::Field { base, field } => self.field_place(e, base, field),
            // An interface's data word, if its dynamic type is the one asserted.
            ExprKind::Assert { base, .. } if self.facts.dynamic_asserts.contains_key(&e.id) => {
                self.checked_assert_place(e, base)
            }
            // A word read as a pointer: the same word, another type.
            ExprKind::Assert { base, .. } => self.place(base),
            // `string(b)` of a []byte: the slice's header begins as a string's (data, len).
            ExprKind::Call { func, args, .. } if func.name == "string" && args.len() == 1 => self.place(&args[0]),
            ExprKind::Unary { op: UnOp::Deref, operand } => {
                self.expr(operand)?;
                self.address_place(e.span)
            }
            ExprKind::Index { base, index } => self.index_place(e, base, index),
            _ => Err(LowerError::unsupported(e.span, "reading this Go value")),
        }
    }

    /// Where `base[index]` is: a map's element (gomap.rs), or a slice's or array's: its
    /// address, or 0 (which reads as zero) when `index` is out of range.
    fn index_place(&mut self, e: &Expr, base: &Expr, index: &Expr) -> Result<Place, LowerError> {
        let bid = self.go_type_of(base).ok_or_else(|| LowerError::unsupported(e.span, "indexing this"))?;
        if matches!(self.types.get(bid).kind, TypeKind::Map { .. }) {
            return self.map_elem_place(e, base, index);
        }
        let (elem, len) = match &self.types.get(bid).kind {
            TypeKind::Slice { elem } => (*elem, None),
            TypeKind::Array { elem, len } => (*elem, Some(*len)),
            _ => return Err(LowerError::unsupported(e.span, "indexing this")),
        };
        let size = self.types.get(elem).size;
        let bp = self.place(base)?;
        let idx = self.slot(8, e.span)?;
        self.expr(index)?;
        self.b.emit(store_reg(Size::DW, R10, idx, R0));
        // The element's address, or 0 (which reads as zero) when out of range.
        let (base_addr, bound) = match (len, &bp) {
            (None, _) => {
                let ptr = self.slot(8, e.span)?;
                self.read_scalar(&bp, 8, false)?;
                self.b.emit(store_reg(Size::DW, R10, ptr, R0));
                self.read_scalar(&bp.clone().plus(8), 8, false)?;
                self.b.emit(mov64_reg(R2, R0));
                (ptr, None)
            }
            (Some(n), Place::Mem { addr, offset }) => {
                let ptr = self.slot(8, e.span)?;
                self.b.emit(load(Size::DW, R0, R10, *addr));
                self.b.emit(alu64_imm(AluOp::Add, R0, *offset as i32));
                self.b.emit(store_reg(Size::DW, R10, ptr, R0));
                (ptr, Some(n))
            }
            (Some(_), Place::Regs { .. } | Place::Pieces { .. } | Place::Stack { .. }) => {
                return Err(LowerError::unsupported(e.span, "indexing an array held in registers"))
            }
            (Some(_), Place::Carried { .. }) => {
                return Err(LowerError::unsupported(e.span, "indexing an array parameter at a return"))
            }
        };
        let out = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, idx));
        self.b.emit(mov64_imm(R0, 0));
        match bound {
            None => self.b.jmp_reg_to(JmpOp::Ge, R1, R2, out),
            // A length past i32 (corrupt DWARF) bounds at the largest immediate.
            Some(n) => self.b.jmp_imm_to(JmpOp::Ge, R1, i32::try_from(n).unwrap_or(i32::MAX), out),
        }
        self.b.emit(mov64_reg(R0, R1));
        self.b.emit(alu64_imm(AluOp::Mul, R0, size as i32));
        self.b.emit(load(Size::DW, R1, R10, base_addr));
        self.b.emit(alu64_reg(AluOp::Add, R0, R1));
        self.b.bind(out);
        self.address_place(e.span)
    }
}
