//! Copying a whole Go value into an event record, as `capture::plan` laid it out: the
//! value's own bytes from where it is (one `bpf_probe_read_user` from memory, or scalar by
//! scalar from registers), then, reading the addresses from the copy itself, the bytes of
//! its strings, slice elements, interface values and top-level pointee. Every copy is
//! bounded by the layout, so the verifier sees each size's maximum.

use super::codegen::Gen;
use super::ir::{Arg, VReg, R};
use super::values::Place;
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::capture::{Capture, IfaceElems, Node, NodeKind, IFACE_DATA};
use crate::gotypes::{TypeId, TypeKind};
use crate::syntax::ast::{Expr, Span};

impl Gen<'_> {
    /// Copies the Go value `e` into the record at R8 + `off` as `capture` says.
    pub fn capture_to(&mut self, e: &Expr, capture: &Capture, off: i16) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let place = self.place(e)?;
        let root = &capture.root;
        let at = super::offset(e.span, off, root.at as usize)?;
        self.copy_value(&place, root.ty, at, e.span)?;
        self.follow(root, off, e.span)?;
        self.b.frame.release(mark);
        Ok(())
    }

    /// The bytes of a value of type `ty` at `place`, to R8 + `dst`.
    fn copy_value(&mut self, place: &Place, ty: TypeId, dst: i16, span: Span) -> Result<(), LowerError> {
        let size = self.types.get(ty).size;
        if let Place::Mem { addr, offset } = place {
            let src = self.b.vreg();
            self.b.load_stack(Size::DW, src, *addr);
            if *offset != 0 {
                self.b.op(alu64_imm(AluOp::Add, R0, *offset as i32), src, R0);
            }
            return self.read_into(dst, size as i32, src, span);
        }
        for (offset, size) in scalars(self.types, ty, 0) {
            self.read_scalar(&place.clone().plus(offset), size, false)?;
            let at = super::offset(span, dst, offset as usize)?;
            self.b.emit(store_reg(Size::of_scalar(size), R8, at, R0));
        }
        Ok(())
    }

    /// `bpf_probe_read_user(R8 + dst, size, src)`; R0 its result.
    pub(super) fn read_into(&mut self, dst: i16, size: i32, src: impl Into<R>, span: Span) -> Result<(), LowerError> {
        super::offset(span, dst, size.max(0) as usize)?;
        self.read_target(&[Arg::at(R8, dst), Arg::Imm(size), Arg::R(src.into())])?;
        Ok(())
    }

    /// `reg` = the u64 at R8 + `at`.
    fn record_word(&mut self, reg: impl Into<R>, at: i16) {
        self.b.op(load(Size::DW, R0, R0, at), reg, R8);
    }

    /// Copies what the node's bytes (already in the record) point at, as planned.
    pub(super) fn follow(&mut self, node: &Node, off: i16, span: Span) -> Result<(), LowerError> {
        if !needs_following(node) {
            return Ok(());
        }
        let at = super::offset(span, off, node.at as usize)?;
        match &node.kind {
            NodeKind::Bytes | NodeKind::Cut => {}
            NodeKind::Struct { fields } => {
                for f in fields {
                    self.follow(f, off, span)?;
                }
            }
            NodeKind::Array { elems } => {
                for e in elems {
                    self.follow(e, off, span)?;
                }
            }
            NodeKind::Str { bytes, max } => {
                let bytes = super::offset(span, off, *bytes as usize)?;
                let src = self.b.vreg();
                self.record_word(src, at);
                self.record_word(R2, at + 8);
                self.bounded_read(bytes, *max, 1, src)?;
            }
            NodeKind::Slice { elems_at, elems } => {
                let elem = elems.first().map(|e| e.ty);
                let size = elem.map_or(0, |t| self.types.get(t).size as u32);
                let dst = super::offset(span, off, *elems_at as usize)?;
                let src = self.b.vreg();
                self.record_word(src, at);
                self.record_word(R2, at + 8);
                self.bounded_read(dst, elems.len() as u32, size, src)?;
                for (i, e) in elems.iter().enumerate().filter(|(_, e)| needs_following(e)) {
                    let skip = self.b.new_label();
                    self.record_word(R1, at + 8);
                    self.b.jmp_imm_to(JmpOp::Le, R1, i as i32, skip);
                    self.follow(e, off, span)?;
                    self.b.bind(skip);
                    self.b.emit(mov64_imm(R0, 0));
                }
            }
            NodeKind::Pointer { pointee: Some(p) } => {
                let skip = self.b.new_label();
                let ptr = self.b.vreg();
                self.record_word(ptr, at);
                self.b.jmp_imm_to(JmpOp::Eq, ptr, 0, skip);
                let size = self.types.get(p.ty).size as i32;
                self.read_into(super::offset(span, off, p.at as usize)?, size, ptr, span)?;
                self.follow(p, off, span)?;
                self.b.bind(skip);
                self.b.emit(mov64_imm(R0, 0));
            }
            NodeKind::Pointer { pointee: None } => {}
            NodeKind::Func { code } => {
                let skip = self.b.new_label();
                let func = self.b.vreg();
                self.record_word(func, at);
                self.b.jmp_imm_to(JmpOp::Eq, func, 0, skip);
                self.read_into(super::offset(span, off, *code as usize)?, 8, func, span)?;
                self.b.bind(skip);
                self.b.emit(mov64_imm(R0, 0));
            }
            NodeKind::Map { .. } => self.capture_map(node, off, span)?,
            NodeKind::Iface { empty, type_at, data_at, str_at, max, elems } => {
                let to = self.iface_offsets(off, (*type_at, *data_at, *str_at), span)?;
                self.iface(at, Empty::Known(*empty), to, *max, span)?;
                if let Some(elems) = elems {
                    self.iface_elems(elems, off, to, span)?;
                }
            }
        }
        Ok(())
    }

    /// The record offsets of an interface's parts.
    fn iface_offsets(&self, off: i16, parts: (u32, u32, u32), span: Span) -> Result<(i16, i16, i16), LowerError> {
        Ok((
            super::offset(span, off, parts.0 as usize)?,
            super::offset(span, off, parts.1 as usize)?,
            super::offset(span, off, parts.2 as usize)?,
        ))
    }

    /// An interface's dynamic type (the itab's `_type` for a non-empty one), the bytes its
    /// data word points at, and the string those bytes start with, if they do.
    fn iface(&mut self, at: i16, empty: Empty, to: (i16, i16, i16), max: u32, span: Span) -> Result<(), LowerError> {
        let (type_at, data_at, str_at) = to;
        let done = self.b.new_label();
        self.b.emit(store_imm(Size::DW, R8, type_at, 0));
        // The type word: the type itself, or an itab whose type is at 8.
        let word = self.b.vreg();
        self.record_word(word, at);
        self.b.jmp_imm_to(JmpOp::Eq, word, 0, done);
        match empty {
            Empty::Known(true) => self.b.op(store_reg(Size::DW, R0, type_at, R0), R8, word),
            Empty::Known(false) => {
                self.b.op(alu64_imm(AluOp::Add, R0, 8), word, R0);
                self.read_into(type_at, 8, word, span)?;
            }
            Empty::At(flag) => {
                let (itab, data) = (self.b.new_label(), self.b.new_label());
                self.record_word(R1, flag);
                self.b.jmp_imm_to(JmpOp::Eq, R1, 0, itab);
                self.b.op(store_reg(Size::DW, R0, type_at, R0), R8, word);
                self.b.ja_to(data);
                self.b.bind(itab);
                self.b.op(alu64_imm(AluOp::Add, R0, 8), word, R0);
                self.read_into(type_at, 8, word, span)?;
                self.b.bind(data);
            }
        }
        let data = self.b.vreg();
        self.record_word(data, at + 8);
        self.b.jmp_imm_to(JmpOp::Eq, data, 0, done);
        // A small value near the end of mapped memory: read less.
        let read = self.b.new_label();
        self.read_into(data_at, IFACE_DATA as i32, data, span)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, read);
        let data = self.b.vreg();
        self.record_word(data, at + 8);
        self.read_into(data_at, 8, data, span)?;
        self.b.bind(read);
        let s = self.b.vreg();
        self.record_word(s, data_at);
        self.record_word(R2, data_at + 8);
        self.bounded_read(str_at, max, 1, s)?;
        self.b.bind(done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// The elements of a slice of interfaces an interface holds (`to`: its parts, already
    /// copied): the dynamic type's kind and its element's read from the runtime's type
    /// descriptors; for a slice of interfaces, how many elements, then each one's own
    /// 16 bytes and what it points at, as an interface's.
    fn iface_elems(&mut self, e: &IfaceElems, off: i16, to: (i16, i16, i16), span: Span) -> Result<(), LowerError> {
        use crate::gobin::runtime_type as rt;
        let (type_at, data_at, _) = to;
        let head = super::offset(span, off, e.head_at as usize)?;
        let flag = head + 8;
        let (end, clear) = (self.b.new_label(), self.b.new_label());
        self.b.emit(store_imm(Size::DW, R8, head, 0));
        self.b.emit(store_imm(Size::DW, R8, flag, 0));
        // The dynamic type's kind: a slice?
        let desc = self.b.vreg();
        self.record_word(desc, type_at);
        self.b.jmp_imm_to(JmpOp::Eq, desc, 0, end);
        self.kind_is(desc, flag, rt::KIND_SLICE, clear, span)?;
        // Its element's: an interface? And an empty one?
        let desc = self.b.vreg();
        self.record_word(desc, type_at);
        self.b.op(alu64_imm(AluOp::Add, R0, rt::SLICE_ELEM), desc, R0);
        self.read_into(head, 8, desc, span)?;
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, clear);
        let desc = self.b.vreg();
        self.record_word(desc, head);
        self.b.jmp_imm_to(JmpOp::Eq, desc, 0, clear);
        self.kind_is(desc, flag, rt::KIND_INTERFACE, clear, span)?;
        let desc = self.b.vreg();
        self.record_word(desc, head);
        self.b.op(alu64_imm(AluOp::Add, R0, rt::INTERFACE_METHODS_LEN), desc, R0);
        self.read_into(flag, 8, desc, span)?;
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, clear);
        // flag = 1 for the empty interface (no methods), else 0.
        let (methods, flagged) = (self.b.new_label(), self.b.new_label());
        self.record_word(R1, flag);
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, methods);
        self.b.emit(store_imm(Size::DW, R8, flag, 1));
        self.b.ja_to(flagged);
        self.b.bind(methods);
        self.b.emit(store_imm(Size::DW, R8, flag, 0));
        self.b.bind(flagged);
        // The elements: min(len, copied) of 16 bytes from the slice's array.
        let n = e.elems.len() as u32;
        let elems_at = super::offset(span, off, e.elems_at as usize)?;
        let (counted, some) = (self.b.new_label(), self.b.new_label());
        self.record_word(R2, data_at + 8);
        self.b.jmp_imm_to(JmpOp::Le, R2, n as i32, counted);
        self.b.emit(mov64_imm(R2, n as i32));
        self.b.bind(counted);
        self.b.emit(store_reg(Size::DW, R8, head, R2));
        self.b.jmp_imm_to(JmpOp::Ne, R2, 0, some);
        self.b.ja_to(end);
        self.b.bind(some);
        let array = self.b.vreg();
        self.record_word(array, data_at);
        self.bounded_read(elems_at, n, 16, array)?;
        for (i, el) in e.elems.iter().enumerate() {
            let NodeKind::Iface { type_at, data_at, str_at, max, .. } = el.kind else { continue };
            let skip = self.b.new_label();
            self.record_word(R1, head);
            self.b.jmp_imm_to(JmpOp::Le, R1, i as i32, skip);
            let at = super::offset(span, off, el.at as usize)?;
            let to = self.iface_offsets(off, (type_at, data_at, str_at), span)?;
            self.iface(at, Empty::At(flag), to, max, span)?;
            self.b.bind(skip);
        }
        self.b.ja_to(end);
        self.b.bind(clear);
        self.b.emit(store_imm(Size::DW, R8, head, 0));
        self.b.bind(end);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Whether the runtime type descriptor at `desc` (which it moves) has kind `kind`: on
    /// to the next instruction if it does, to `otherwise` if not or unreadable
    /// (`scratch`: a record word it reads into).
    fn kind_is(&mut self, desc: VReg, scratch: i16, kind: i32, otherwise: Label, span: Span) -> Result<(), LowerError> {
        use crate::gobin::runtime_type as rt;
        self.b.op(alu64_imm(AluOp::Add, R0, rt::KIND_WORD), desc, R0);
        self.read_into(scratch, 8, desc, span)?;
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, otherwise);
        self.record_word(R1, scratch);
        self.b.emit(alu64_imm(AluOp::Rsh, R1, rt::KIND_SHIFT));
        self.b.emit(alu64_imm(AluOp::And, R1, rt::KIND_MASK));
        self.b.jmp_imm_to(JmpOp::Ne, R1, kind, otherwise);
        Ok(())
    }

    /// Reads min(R2, `max`) items of `size` bytes from the address `src` to R8 + `dst`
    /// (nothing when there are none). The count stays in R2, the register the verifier
    /// bounds and the call reads.
    fn bounded_read(&mut self, dst: i16, max: u32, size: u32, src: VReg) -> Result<(), LowerError> {
        let done = self.b.new_label();
        let clamped = self.b.new_label();
        if max == 0 || size == 0 {
            return Ok(());
        }
        self.b.jmp_imm_to(JmpOp::Le, R2, max as i32, clamped);
        self.b.emit(mov64_imm(R2, max as i32));
        self.b.bind(clamped);
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, done);
        if size > 1 {
            self.b.emit(alu64_imm(AluOp::Mul, R2, size as i32));
        }
        self.read_target(&[Arg::at(R8, dst), R2.into(), src.into()])?;
        self.b.bind(done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }
}

/// Whether an interface's dynamic type is the empty interface's or an itab's: known
/// when compiling, or read from a record word (1: empty) at run time.
#[derive(Clone, Copy)]
enum Empty {
    Known(bool),
    At(i16),
}

/// Whether anything of the node is read beyond its own bytes.
fn needs_following(node: &Node) -> bool {
    match &node.kind {
        NodeKind::Bytes | NodeKind::Cut | NodeKind::Pointer { pointee: None } => false,
        NodeKind::Struct { fields } => fields.iter().any(needs_following),
        NodeKind::Array { elems } => elems.iter().any(needs_following),
        _ => true,
    }
}

/// The scalars a value of type `ty` is made of, as (offset, size): what registers hold.
fn scalars(types: &crate::gotypes::Types, ty: TypeId, base: u64) -> Vec<(u64, u64)> {
    let t = types.get(ty);
    match &t.kind {
        TypeKind::Struct { fields } => fields.iter().flat_map(|f| scalars(types, f.ty, base + f.offset)).collect(),
        TypeKind::Array { elem, len } => {
            let size = types.get(*elem).size;
            (0..*len).flat_map(|i| scalars(types, *elem, base + i * size)).collect()
        }
        _ if t.size == 0 => Vec::new(),
        _ if t.size <= 8 => vec![(base, t.size.next_power_of_two().min(8))],
        // Strings, slices, interfaces, complex128: words.
        _ => (0..t.size.div_ceil(8)).map(|i| (base + 8 * i, 8)).collect(),
    }
}
