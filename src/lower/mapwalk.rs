//! The walk over a Go map's buckets or groups that `m[k]` (gomap.rs) and printing a map
//! (mapcapture.rs) share: where keys and elements are in a bucket or group (`Slots`),
//! and a bounded loop that visits each bucket (Go 1.17 to 1.23: the `buckets` array, each
//! overflow chain, the old buckets while the map grows) or group (Go 1.24 and later: the
//! one group of a small map, else each table of the directory once) with its address in
//! `cur`. Every word the loop carries from one step to the next is an address read from
//! the target, never a constant the program stores, so the verifier sees each step's
//! paths end in one state and walks the loop in linear time.

use super::codegen::Gen;
use super::ir::{Arg, Func as Builder, R};
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::gobin::MapLayout;
use crate::gotypes::{TypeId, TypeKind, Types};
use crate::syntax::ast::Span;

/// The longest string key `m[k]` compares (a mask: 2^n - 1).
pub const MAX_STRING_KEY: u32 = 63;
/// The bytes of a string key kept for comparing.
pub const STRING_KEY_BUF: u32 = MAX_STRING_KEY + 1;

/// What one lookup needs: the key (slot `key`: an integer, or a string's length and
/// bytes), its kind, and where keys and elements are.
pub(super) struct Key {
    pub key: i16,
    pub string: bool,
    pub size: u64,
    pub slots: Slots,
}

/// Keys and elements larger than this are kept behind a pointer (both layouts).
pub const MAX_INLINE: u64 = 128;
/// Slots in a bucket or a group.
pub const SLOTS: u64 = 8;
/// `minTopHash` of the bucket layout: smaller tophash values mark empty or evacuated
/// slots.
pub const MIN_TOP_HASH: i32 = 5;
/// `hashGrowing`'s flag of a same-size grow (`sameSizeGrow` in runtime/map.go).
const SAME_SIZE_GROW: i32 = 8;

/// Where keys and elements are in one bucket or group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slots {
    /// Offset of slot `i`'s key: `key + i * key_stride`.
    pub key: u64,
    pub key_stride: u64,
    /// Offset of slot `i`'s element: `elem + i * elem_stride`.
    pub elem: u64,
    pub elem_stride: u64,
    /// The element is kept behind a pointer.
    pub elem_indirect: bool,
    /// Bytes of one bucket or group.
    pub size: u64,
    /// Where a bucket's overflow pointer is (bucket layout only).
    pub overflow: u64,
}

/// The alignment of a Go type on a 64-bit target.
fn align_of(types: &Types, id: TypeId, depth: u32) -> u64 {
    let t = types.get(id);
    match &t.kind {
        TypeKind::Array { elem, .. } if depth < 16 => align_of(types, *elem, depth + 1),
        TypeKind::Struct { fields } if depth < 16 => {
            fields.iter().map(|f| align_of(types, f.ty, depth + 1)).max().unwrap_or(1)
        }
        TypeKind::Complex => (t.size / 2).clamp(1, 8),
        TypeKind::Int { .. } | TypeKind::Float | TypeKind::Bool => t.size.clamp(1, 8),
        _ => 8,
    }
}

/// Size and alignment of a key or element as a slot holds it (a pointer when large).
fn stored(types: &Types, id: TypeId) -> (u64, u64, bool) {
    let size = types.get(id).size;
    if size > MAX_INLINE {
        (8, 8, true)
    } else {
        (size, align_of(types, id, 0), false)
    }
}

/// The slots of a map with keys `key` and elements `elem` in `layout` (the compiler's
/// MapBucketType before Go 1.24, its swiss group type since).
pub fn slots(types: &Types, layout: &MapLayout, key: TypeId, elem: TypeId) -> Slots {
    let (ks, ka, _) = stored(types, key);
    let (es, ea, elem_indirect) = stored(types, elem);
    match layout {
        MapLayout::Buckets { .. } => {
            let elem_at = (8 + SLOTS * ks).next_multiple_of(ea.max(1));
            let overflow = (elem_at + SLOTS * es).next_multiple_of(8);
            Slots {
                key: 8,
                key_stride: ks,
                elem: elem_at,
                elem_stride: es,
                elem_indirect,
                size: overflow + 8,
                overflow,
            }
        }
        MapLayout::Swiss { .. } => {
            let elem_off = ks.next_multiple_of(ea.max(1));
            let stride = (elem_off + es).next_multiple_of(ka.max(ea).max(1));
            Slots {
                key: 8,
                key_stride: stride,
                elem: 8 + elem_off,
                elem_stride: stride,
                elem_indirect,
                size: 8 + SLOTS * stride,
                overflow: 0,
            }
        }
    }
}

/// The stack slots of one scan. Every word the loop carries from one step to the next
/// is an address read from the target (never a constant the program stores), so the
/// verifier sees each step's paths end in one state and walks the loop in linear time.
pub(super) struct Scan {
    /// The key: an integer (8 bytes) or a string record (length, then the bytes).
    pub key: i16,
    pub string_key: bool,
    pub key_size: u64,
    /// The bucket or group being looked at.
    pub cur: i16,
    /// Buckets or groups looked at so far.
    pub steps: i16,
    /// The element's address once found (0 while not).
    pub found: i16,
    /// The next bucket or group of the array or table at hand, and its end.
    pub next: i16,
    pub end: i16,
    /// Buckets: the overflow bucket of `cur`. Swiss: the table at hand.
    pub link: i16,
    /// Buckets: the old bucket array and its end. Swiss: the next directory entry and
    /// the directory's end.
    pub far: i16,
    pub far_end: i16,
    /// The control word of the bucket or group at hand.
    pub ctrl: i16,
    /// 16 bytes for a slot's key (and a word read from the target).
    pub tmp: i16,
    /// A string key's bytes as a slot holds them.
    pub bytes: i16,
    pub slots: Slots,
}

impl Gen<'_> {
    /// The stack slots of a walk; `key` (string or not, its size) for a lookup.
    pub(super) fn scan_slots(
        &mut self,
        slots: Slots,
        key: Option<(bool, u64)>,
        span: Span,
    ) -> Result<Scan, LowerError> {
        let mut w = || self.slot(8, span);
        let (cur, steps, found, next, end) = (w()?, w()?, w()?, w()?, w()?);
        let (link, far, far_end, ctrl) = (w()?, w()?, w()?, w()?);
        let tmp = self.slot(16, span)?;
        let (string_key, key_size) = key.unwrap_or((false, 8));
        let (key, bytes) = match key {
            Some((true, _)) => (self.slot(8 + STRING_KEY_BUF, span)?, self.slot(STRING_KEY_BUF, span)?),
            Some((false, _)) => (self.slot(8, span)?, 0),
            None => (0, 0),
        };
        Ok(Scan {
            key,
            string_key,
            key_size,
            cur,
            steps,
            found,
            next,
            end,
            link,
            far,
            far_end,
            ctrl,
            tmp,
            bytes,
            slots,
        })
    }

    /// From the map header whose address is in `cur`: the walk's start, then its loop's
    /// head (a step more than `max_steps` jumps to `bound`; a walk past the last bucket
    /// or group to `l.done`) and the next bucket or group into `cur`. What follows is
    /// the step's body, ended by `walk_step_end`.
    pub(super) fn walk_start(
        &mut self,
        s: &Scan,
        layout: &MapLayout,
        l: &Labels,
        max_steps: i32,
        bound: Label,
    ) -> Result<(), LowerError> {
        self.b.emit(store_imm(Size::DW, R10, s.steps, 0));
        match *layout {
            MapLayout::Buckets { flags, b, buckets, oldbuckets, .. } => {
                self.buckets_start(s, [flags, b, buckets, oldbuckets], l.done)?
            }
            MapLayout::Swiss { dir_ptr, dir_len, .. } => self.swiss_start(s, dir_ptr, dir_len, l.done)?,
        }
        self.b.bind(l.head);
        self.b.emit(load(Size::DW, R1, R10, s.steps));
        self.b.jmp_imm_to(JmpOp::Sge, R1, max_steps, bound);
        self.b.emit(alu64_imm(AluOp::Add, R1, 1));
        self.b.emit(store_reg(Size::DW, R10, s.steps, R1));
        match *layout {
            MapLayout::Buckets { .. } => self.buckets_next(s, l)?,
            MapLayout::Swiss { groups_data, groups_mask, .. } => self.swiss_next(s, l, groups_data, groups_mask)?,
        }
        self.b.bind(l.scan);
        Ok(())
    }

    /// The end of a step's body: a bucket's overflow pointer kept, back to the head.
    pub(super) fn walk_step_end(&mut self, s: &Scan, layout: &MapLayout, l: &Labels) -> Result<(), LowerError> {
        if let MapLayout::Buckets { .. } = layout {
            self.word_at(s, s.cur, s.slots.overflow as u32, 8)?;
            self.b.emit(store_reg(Size::DW, R10, s.link, R0));
        }
        self.b.ja_to(l.head);
        Ok(())
    }

    /// `size` bytes of target memory at `src` into stack slot `dst` (zeros when
    /// unreadable).
    pub(super) fn read_user_n(&mut self, dst: i16, size: i32, src: impl Into<R>) -> Result<(), LowerError> {
        self.read_target(&[Arg::Stack(dst), Arg::Imm(size), Arg::R(src.into())])?;
        Ok(())
    }

    /// R0 = the `size`-byte word at `at` + `offset` of target memory (zero-extended),
    /// where stack slot `at` holds an address.
    pub(super) fn word_at(&mut self, s: &Scan, at: i16, offset: u32, size: u64) -> Result<(), LowerError> {
        self.b.emit(store_imm(Size::DW, R10, s.tmp, 0));
        let src = self.b.vreg();
        self.b.load_stack(Size::DW, src, at);
        self.b.op(alu64_imm(AluOp::Add, R0, offset as i32), src, R0);
        self.read_user_n(s.tmp, size as i32, src)?;
        self.b.emit(load(Size::DW, R0, R10, s.tmp));
        Ok(())
    }

    /// The bucket walk from the header at `cur`: `next`..`end` the buckets array
    /// (1 << B buckets), `far`..`far_end` the old buckets while the map grows (half as
    /// many, as many in a same-size grow; `far` is 0 when not growing), `link` the
    /// overflow bucket of the bucket just looked at.
    fn buckets_start(
        &mut self,
        s: &Scan,
        [flags, b, buckets, oldbuckets]: [u32; 4],
        absent: Label,
    ) -> Result<(), LowerError> {
        let size = s.slots.size as i32;
        self.b.emit(load(Size::DW, R1, R10, s.cur));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, absent);
        // far_end = the size of the bucket array in bytes, for now.
        self.word_at(s, s.cur, b, 1)?;
        self.b.emit(alu64_imm(AluOp::And, R0, 63));
        self.b.emit(mov64_imm(R1, size));
        self.b.emit(alu64_reg(AluOp::Lsh, R1, R0));
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R1));
        self.word_at(s, s.cur, flags, 1)?;
        self.b.emit(store_reg(Size::DW, R10, s.link, R0));
        self.word_at(s, s.cur, oldbuckets, 8)?;
        self.b.emit(store_reg(Size::DW, R10, s.far, R0));
        self.word_at(s, s.cur, buckets, 8)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, absent);
        self.b.emit(store_reg(Size::DW, R10, s.next, R0));
        self.b.emit(load(Size::DW, R1, R10, s.far_end));
        self.b.emit(alu64_reg(AluOp::Add, R0, R1));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        let same = self.b.new_label();
        self.b.emit(load(Size::DW, R2, R10, s.link));
        self.b.jmp_imm_to(JmpOp::Set, R2, SAME_SIZE_GROW, same);
        self.b.emit(alu64_imm(AluOp::Rsh, R1, 1));
        self.b.bind(same);
        self.b.emit(load(Size::DW, R0, R10, s.far));
        self.b.emit(alu64_reg(AluOp::Add, R1, R0));
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R1));
        self.b.emit(store_imm(Size::DW, R10, s.link, 0));
        Ok(())
    }

    /// The next bucket into `cur`: the overflow bucket of the one before, else the next
    /// of the array, else the first old bucket (once), else absent.
    fn buckets_next(&mut self, s: &Scan, l: &Labels) -> Result<(), LowerError> {
        let (array, old) = (self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R0, R10, s.link));
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, array);
        self.b.emit(store_reg(Size::DW, R10, s.cur, R0));
        self.b.ja_to(l.scan);
        self.b.bind(array);
        self.b.emit(load(Size::DW, R1, R10, s.next));
        self.b.emit(load(Size::DW, R2, R10, s.end));
        self.b.jmp_reg_to(JmpOp::Ge, R1, R2, old);
        self.b.emit(store_reg(Size::DW, R10, s.cur, R1));
        self.b.emit(alu64_imm(AluOp::Add, R1, s.slots.size as i32));
        self.b.emit(store_reg(Size::DW, R10, s.next, R1));
        self.b.ja_to(l.scan);
        // The array is done: the old buckets next, unless there are none or they were
        // the array just done.
        self.b.bind(old);
        self.b.emit(load(Size::DW, R3, R10, s.far));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, l.done);
        self.b.emit(load(Size::DW, R4, R10, s.far_end));
        self.b.jmp_reg_to(JmpOp::Eq, R2, R4, l.done);
        self.b.emit(store_reg(Size::DW, R10, s.end, R4));
        self.b.emit(store_reg(Size::DW, R10, s.cur, R3));
        self.b.emit(alu64_imm(AluOp::Add, R3, s.slots.size as i32));
        self.b.emit(store_reg(Size::DW, R10, s.next, R3));
        Ok(())
    }

    /// The swiss walk from the header at `cur`: `next`..`end` the groups of the table
    /// at hand, `far`..`far_end` the directory's entries, `link` the table at hand. A
    /// small map (dirLen 0) is a table of one group at dirPtr with no directory.
    fn swiss_start(&mut self, s: &Scan, dir_ptr: u32, dir_len: u32, absent: Label) -> Result<(), LowerError> {
        self.b.emit(load(Size::DW, R1, R10, s.cur));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, absent);
        self.word_at(s, s.cur, dir_len, 8)?;
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R0));
        self.word_at(s, s.cur, dir_ptr, 8)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, absent);
        self.b.emit(store_reg(Size::DW, R10, s.far, R0));
        self.b.emit(store_reg(Size::DW, R10, s.next, R0));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        self.b.emit(store_reg(Size::DW, R10, s.link, R0));
        let (dir, done) = (self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R1, R10, s.far_end));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, dir);
        // Small: one group, no directory (its end at its start).
        self.b.emit(alu64_imm(AluOp::Add, R0, s.slots.size as i32));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        self.b.emit(load(Size::DW, R0, R10, s.far));
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R0));
        self.b.ja_to(done);
        // A directory of far_end tables: no group at hand yet (next == end).
        self.b.bind(dir);
        self.b.emit(alu64_imm(AluOp::Lsh, R1, 3));
        self.b.emit(alu64_reg(AluOp::Add, R1, R0));
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R1));
        self.b.bind(done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// The next group into `cur`: of the table at hand while its groups last, else of
    /// the next distinct table of the directory (an entry repeating the table before
    /// it, or nil, is a step of its own), else absent.
    fn swiss_next(&mut self, s: &Scan, l: &Labels, data: u32, mask: u32) -> Result<(), LowerError> {
        let size = s.slots.size as i32;
        let table = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, s.next));
        self.b.emit(load(Size::DW, R2, R10, s.end));
        self.b.jmp_reg_to(JmpOp::Ge, R1, R2, table);
        self.b.emit(store_reg(Size::DW, R10, s.cur, R1));
        self.b.emit(alu64_imm(AluOp::Add, R1, size));
        self.b.emit(store_reg(Size::DW, R10, s.next, R1));
        self.b.ja_to(l.scan);
        self.b.bind(table);
        self.b.emit(load(Size::DW, R3, R10, s.far));
        self.b.emit(load(Size::DW, R2, R10, s.far_end));
        self.b.jmp_reg_to(JmpOp::Ge, R3, R2, l.done);
        self.b.emit(mov64_reg(R1, R3));
        self.b.emit(alu64_imm(AluOp::Add, R1, 8));
        self.b.emit(store_reg(Size::DW, R10, s.far, R1));
        self.b.emit(store_imm(Size::DW, R10, s.tmp, 0));
        self.read_user_n(s.tmp, 8, R3)?;
        self.b.emit(load(Size::DW, R1, R10, s.tmp));
        self.b.emit(load(Size::DW, R2, R10, s.link));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, l.head);
        self.b.emit(store_reg(Size::DW, R10, s.link, R1));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, l.head);
        self.word_at(s, s.link, mask, 8)?;
        self.b.emit(alu64_imm(AluOp::Add, R0, 1));
        self.b.emit(alu64_imm(AluOp::Mul, R0, size));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        self.word_at(s, s.link, data, 8)?;
        self.b.emit(load(Size::DW, R1, R10, s.end));
        self.b.emit(alu64_reg(AluOp::Add, R1, R0));
        self.b.emit(store_reg(Size::DW, R10, s.end, R1));
        self.b.emit(store_reg(Size::DW, R10, s.cur, R0));
        self.b.emit(alu64_imm(AluOp::Add, R0, size));
        self.b.emit(store_reg(Size::DW, R10, s.next, R0));
        Ok(())
    }
}

/// Where a scan goes next.
pub(super) struct Labels {
    pub head: Label,
    pub scan: Label,
    /// Every bucket or group seen (`m[k]`: the key is absent).
    pub done: Label,
    /// `m[k]`: a slot's key equals the key.
    pub hit: Label,
}

impl Labels {
    pub fn new(b: &mut Builder) -> Labels {
        Labels { head: b.new_label(), scan: b.new_label(), done: b.new_label(), hit: b.new_label() }
    }
}
