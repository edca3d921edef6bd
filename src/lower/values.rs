//! Reading Go values: where a parameter, field, element or pointee lives at the probe
//! (a `Place`: registers, or target memory at an address), and reading scalars,
//! strings and interfaces from there with `bpf_probe_read_user`. Nothing is ever written
//! to the target.

use super::codegen::Gen;
use super::LowerError;
use crate::arch::abi::{Location, Piece, PieceAt, RegPiece};
use crate::arch::ReturnAddress;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::ty::Ty;
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

/// The byte size of a scalar Go type (1, 2, 4 or 8).
fn scalar_size(gen: &Gen, id: TypeId) -> u64 {
    gen.types.get(id).size.clamp(1, 8)
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
    pub(super) fn address_place(&mut self, span: Span) -> Result<Place, LowerError> {
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
            ExprKind::Index { base, index } => {
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
            _ => Err(LowerError::unsupported(e.span, "reading this Go value")),
        }
    }

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
                let off = super::offset(Span::default(), *slot, *offset as usize)?;
                self.b.emit(load(Size::DW, R0, R10, off));
            }
            Place::Mem { addr, offset } => {
                self.b.emit(load(Size::DW, R3, R10, *addr));
                self.read_user_scalar(*offset, size)?;
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
                        self.load_ctx_reg(R3, self.arch().stack_pointer());
                        self.read_user_scalar(at + within as i64, size)?;
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

    /// R0 = the `size` bytes of target memory at R3 + `offset` (zero when unreadable).
    pub(super) fn read_user_scalar(&mut self, offset: i64, size: u64) -> Result<(), LowerError> {
        let tmp = self.frame_slot(8)?;
        self.b.emit(store_imm(Size::DW, R10, tmp, 0));
        if offset != 0 {
            self.b.emit(alu64_imm(AluOp::Add, R3, offset as i32));
        }
        self.b.emit(mov64_reg(R1, R10));
        self.b.emit(alu64_imm(AluOp::Add, R1, tmp as i32));
        self.b.emit(mov64_imm(R2, size as i32));
        self.b.emit(call(BPF_FUNC_probe_read_user));
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

    /// Writes the string `e` as a record (u64 length, then at most `max` bytes) at
    /// `base + off`, where `base` is R10 (the stack) or R8 (an event record).
    pub fn string_to(&mut self, e: &Expr, base: Reg, off: i16, max: u32) -> Result<(), LowerError> {
        if let ExprKind::Str(lit) = &e.kind {
            let bytes = &lit.as_bytes()[..lit.len().min(max as usize)];
            super::offset(e.span, off, 8 + bytes.len().next_multiple_of(8))?;
            self.b.emit(store_imm(Size::DW, base, off, bytes.len() as i32));
            for (i, chunk) in bytes.chunks(8).enumerate() {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                self.b.emit2(ld_imm64(R1, u64::from_le_bytes(word)));
                self.b.emit(store_reg(Size::DW, base, super::offset(e.span, off, 8 + 8 * i)?, R1));
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
                self.b.emit(load(Size::DW, R3, R10, addr));
                if offset != 0 {
                    self.b.emit(alu64_imm(AluOp::Add, R3, offset as i32));
                }
                self.b.emit(mov64_reg(R1, R10));
                self.b.emit(alu64_imm(AluOp::Add, R1, header as i32));
                self.b.emit(mov64_imm(R2, 16));
                self.b.emit(call(BPF_FUNC_probe_read_user));
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
        self.b.emit(mov64_reg(R2, R0));
        self.b.emit(load(Size::DW, R3, R10, ptr));
        self.b.emit(mov64_reg(R1, base));
        self.b.emit(alu64_imm(AluOp::Add, R1, off as i32 + 8));
        self.b.emit(call(BPF_FUNC_probe_read_user));
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
        self.b.emit(mov64_reg(R1, buf_base));
        self.b.emit(alu64_imm(AluOp::Add, R1, b_off as i32));
        self.b.emit(mov64_imm(R2, COMM as i32));
        self.b.emit(call(BPF_FUNC_get_current_comm));
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
                self.load_ctx_reg(R3, self.arch().stack_pointer());
                self.b.emit(store_imm(Size::DW, R10, pair, 0));
                self.b.emit(mov64_reg(R1, R10));
                self.b.emit(alu64_imm(AluOp::Add, R1, pair as i32));
                self.b.emit(mov64_imm(R2, 8));
                self.b.emit(call(BPF_FUNC_probe_read_user));
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
            self.b.emit(load(Size::DW, R3, R10, fp));
            self.b.jmp_imm_to(JmpOp::Eq, R3, 0, done);
            self.b.emit(store_imm(Size::DW, R10, pair, 0));
            self.b.emit(store_imm(Size::DW, R10, pair + 8, 0));
            self.b.emit(mov64_reg(R1, R10));
            self.b.emit(alu64_imm(AluOp::Add, R1, pair as i32));
            self.b.emit(mov64_imm(R2, 16));
            self.b.emit(call(BPF_FUNC_probe_read_user));
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
        if words > super::ir::frame::MAX_STACK as u32 / 8 {
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
    super::offset(span, off, bytes)?;
    Ok((bytes / 8) as i16)
}
