//! Near fields of one object read in one `bpf_probe_read_user`: where a probe's body
//! reads two or more scalar or string fields of the struct a pointer path points at
//! (`w.req` and `w.status`; `w.req.Method`'s header and `w.req.URL`), the first of them
//! read in a run reads the span of the object that covers them all (at most `MAX_SPAN`
//! bytes) into a stack buffer, and every one of them is then taken from there. A helper
//! call is most of what a field costs, whatever its size.
//!
//! The span is read at most once a run, whichever branch reads first (a state slot, set
//! to `UNREAD` before the body, as paths.rs does for pointers). The object is read at
//! one moment, so its fields agree with each other.
//!
//! Failures are counted as they were with a read per field: the span's read itself
//! counts nothing; each field taken from it counts one failed read when the span's read
//! failed and the field's own address is past the nil page (unread.rs). The state slot
//! keeps what that needs: 0 when the read succeeded, else the span's address. A failed
//! read leaves zeros, so each field reads zero as its own failed read did. The span lies
//! within the struct, so it is readable whenever the object is: only a pointer to no
//! object at all (garbage) could fail for the span where a single field would not.

use super::codegen::Gen;
use super::unread::NIL_PAGE;
use super::values::Place;
use super::LowerError;
use crate::bpf::helpers::BPF_FUNC_probe_read_user;
use crate::bpf::insn::*;
use crate::gotypes::TypeKind;
use crate::lower::ir::Arg;
use crate::syntax::ast::*;
use std::collections::BTreeMap;

/// The longest span read for several fields (bytes): the stack it takes is live for the
/// whole run.
pub const MAX_SPAN: u64 = 128;

/// The most stack a program's spans take, their states included (bytes): past eBPF's
/// 512, a program's slots spill to a map, slower than the reads saved. Spans that save
/// more reads a byte are kept first.
pub const MAX_SPANS_STACK: u64 = 192;

/// The state of a span not yet read this run: 1, an address in the nil page (a failed
/// read there is not counted, so a span that failed at address 1 may be read again).
const UNREAD: i32 = 1;

/// A field taken from a span: the span's state and buffer slots, where the span starts
/// in the object and its length, and the field's offset in the span.
#[derive(Clone, Copy, Debug)]
pub(super) struct Coalesced {
    state: i16,
    buf: i16,
    start: u64,
    len: u64,
    within: u64,
}

/// A field read through a pointer: its offset in the struct, its size, its expression.
struct Candidate {
    offset: u64,
    size: u64,
    id: ExprId,
}

impl Gen<'_> {
    /// Finds the fields of one object that a body reads near each other (two or more
    /// distinct fields in `MAX_SPAN` bytes, among `fields`: what `fields_in_block`
    /// found in it), gives each span its slots and sets them (state `UNREAD`, buffer
    /// zero). Call before lowering the body, outside any temporary's scope.
    pub(super) fn coalesce_reads(&mut self, fields: &[&Expr], span: Span) -> Result<(), LowerError> {
        let mut objects: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
        for e in fields {
            if let Some((key, c)) = self.candidate(e) {
                objects.entry(key).or_default().push(c);
            }
        }
        let mut groups = Vec::new();
        for fields in objects.values_mut() {
            fields.sort_by_key(|c| c.offset);
        }
        for fields in objects.values() {
            groups.extend(clusters(fields));
        }
        // The reads saved a byte of stack, most first (a stable sort: ties in order).
        groups.sort_by(|a, b| (distinct(b) * stack(a)).cmp(&(distinct(a) * stack(b))));
        let mut used = 0;
        for group in groups {
            if used + stack(group) <= MAX_SPANS_STACK {
                used += stack(group);
                self.coalesce(group, span)?;
            }
        }
        Ok(())
    }

    /// The object `e` reads a field of (its pointer path's key) and the field, when `e`
    /// is a scalar or string field of a struct behind a pointer path.
    fn candidate(&self, e: &Expr) -> Option<(String, Candidate)> {
        let ExprKind::Field { base, field } = &e.kind else { return None };
        // A package's variable (`pkg.v`) is a name, not a field; a promoted field is
        // reached through embedded structs.
        if self.facts.names.contains_key(&e.id) || self.facts.promoted.get(&e.id).is_some_and(|p| !p.is_empty()) {
            return None;
        }
        let TypeKind::Pointer { elem } = self.types.get(self.go_type_of(base)?).kind else { return None };
        let (offset, ty) = self.struct_field(elem, &field.name)?;
        let size = match self.types.get(ty).kind {
            TypeKind::Int { .. } | TypeKind::Bool | TypeKind::Pointer { .. } | TypeKind::UnsafePointer => {
                self.types.get(ty).size
            }
            TypeKind::String => 16,
            _ => return None,
        };
        if !matches!(size, 1 | 2 | 4 | 8 | 16) || offset % size.min(8) != 0 || self.go_type_of(e) != Some(ty) {
            return None;
        }
        Some((self.path_key(base)?, Candidate { offset, size, id: e.id }))
    }

    /// One span's slots, set for the run, and its fields' entries.
    fn coalesce(&mut self, group: &[Candidate], span: Span) -> Result<(), LowerError> {
        let (start, end) = bounds(group);
        let len = end - start;
        let state = self.slot(8, span)?;
        let buf = self.slot(len as u32, span)?;
        self.b.emit(store_imm(Size::DW, R10, state, UNREAD));
        for word in 0..len.div_ceil(8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, buf + 8 * word, 0));
        }
        for c in group {
            self.coalesced.insert(c.id, Coalesced { state, buf, start, len, within: c.offset - start });
        }
        Ok(())
    }

    /// The place of a field taken from its span (`c`), reading the span first when this
    /// run has not; `base` is the pointer to the object.
    pub(super) fn coalesced_place(&mut self, base: &Expr, c: Coalesced) -> Result<Place, LowerError> {
        let have = self.b.new_label();
        let state = self.b.vreg();
        self.b.load_stack(Size::DW, state, c.state);
        self.b.jmp_imm_to(JmpOp::Ne, state, UNREAD, have);
        self.expr(base)?;
        let from = self.b.vreg();
        self.b.op(mov64_reg(R0, R0), from, R0);
        if c.start != 0 {
            self.b.op(alu64_imm(AluOp::Add, R0, c.start as i32), from, R0);
        }
        self.b.call(BPF_FUNC_probe_read_user, &[Arg::Stack(c.buf), Arg::Imm(c.len as i32), from.into()]);
        // The state: 0, or the span's address when the read failed (all ones & it).
        self.b.emit(alu64_imm(AluOp::Arsh, R0, 63));
        self.b.op(alu64_reg(AluOp::And, R0, R0), R0, from);
        self.b.emit(store_reg(Size::DW, R10, c.state, R0));
        self.b.bind(have);
        self.count_coalesced(c)?;
        Ok(Place::Stack { slot: c.buf, offset: c.within })
    }

    /// One failed read for this field when its span's read failed and the field's own
    /// address (the span's plus `within`) is past the nil page; nothing without
    /// accounting.
    fn count_coalesced(&mut self, c: Coalesced) -> Result<(), LowerError> {
        let Some(failed) = self.failed_reads()? else { return Ok(()) };
        let address = self.b.vreg();
        self.b.load_stack(Size::DW, address, c.state);
        if c.within != 0 {
            self.b.op(alu64_imm(AluOp::Add, R0, c.within as i32), address, R0);
        }
        // (NIL_PAGE - 1 - address) >> 63: 1 past the nil page (0, read well: 0 too).
        let counted = self.b.vreg();
        self.b.op(mov64_imm(R0, NIL_PAGE - 1), counted, R0);
        self.b.op(alu64_reg(AluOp::Sub, R0, R0), counted, address);
        self.b.op(alu64_imm(AluOp::Rsh, R0, 63), counted, R0);
        let n = self.b.vreg();
        self.b.load_slot(Size::DW, n, failed, 0);
        self.b.op(alu64_reg(AluOp::Add, R0, R0), n, counted);
        self.b.store_slot(Size::DW, failed, 0, n);
        Ok(())
    }
}

/// The first byte of the object a span of `group` reads, and its end.
fn bounds(group: &[Candidate]) -> (u64, u64) {
    let start = group[0].offset & !7;
    (start, group.iter().map(|c| c.offset + c.size).max().unwrap_or(start))
}

/// The stack a span of `group` takes: its buffer (whole words) and its state.
fn stack(group: &[Candidate]) -> u64 {
    let (start, end) = bounds(group);
    (end - start).div_ceil(8) * 8 + 8
}

/// How many distinct fields a span of `group` reads (the reads it saves, and one).
fn distinct(group: &[Candidate]) -> u64 {
    let mut offsets: Vec<u64> = group.iter().map(|c| c.offset).collect();
    offsets.dedup();
    offsets.len() as u64
}

/// The runs of `fields` (sorted by offset) that fit `MAX_SPAN` bytes from a start
/// aligned to 8, and hold two distinct fields or more: what is worth one read.
fn clusters(fields: &[Candidate]) -> Vec<&[Candidate]> {
    let mut out = Vec::new();
    let mut first = 0;
    for i in 1..=fields.len() {
        let start = fields[first].offset & !7;
        let fits = fields.get(i).is_some_and(|c| c.offset + c.size - start <= MAX_SPAN);
        if fits {
            continue;
        }
        let group = &fields[first..i];
        if distinct(group) > 1 {
            out.push(group);
        }
        first = i;
    }
    out
}
