//! `m[k]` of a Go map with integer or string keys, read in the probe. The runtime finds a
//! key by its hash (aeshash seeded per map or per process), which eBPF cannot compute;
//! the probe scans instead: every bucket (Go 1.17 to 1.23: the `buckets` array, each
//! bucket's overflow chain, and while the map grows the `oldbuckets` not yet evacuated)
//! or every group (Go 1.24 and later: the one group of a small map, else each table of
//! the directory once), comparing the keys of full slots with `k`. The element's address
//! becomes the place of `m[k]`, 0 when the key is absent, which reads as Go's zero value.
//!
//! The scan visits at most `MAX_GROUPS` buckets or groups (a loop the verifier walks
//! through, each step bounded). A key not found within them in a bigger map, or a
//! string key longer than `MAX_STRING_KEY` bytes, ends the hit as skipped
//! (`Counter::Skipped`), said at exit: never a silent zero.

use super::codegen::Gen;
use super::values::Place;
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::gotypes::{TypeId, TypeKind, Types};
use crate::plan::Counter;
use crate::syntax::ast::*;
use crate::target::MapLayout;

/// Buckets (with overflow buckets) or groups one `m[k]` looks at, at most.
pub const MAX_GROUPS: i32 = 512;
/// The longest string key `m[k]` compares (a mask: 2^n - 1).
pub const MAX_STRING_KEY: u32 = 63;
/// The bytes of a string key kept for comparing.
const STRING_KEY_BUF: u32 = MAX_STRING_KEY + 1;
/// Keys and elements larger than this are kept behind a pointer (both layouts).
const MAX_INLINE: u64 = 128;
/// Slots in a bucket or a group.
const SLOTS: u64 = 8;
/// `minTopHash` of the bucket layout: smaller tophash values mark empty or evacuated
/// slots.
const MIN_TOP_HASH: i32 = 5;
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
struct Scan {
    /// The key: an integer (8 bytes) or a string record (length, then the bytes).
    key: i16,
    string_key: bool,
    key_size: u64,
    /// The bucket or group being looked at.
    cur: i16,
    /// Buckets or groups looked at so far.
    steps: i16,
    /// The element's address once found (0 while not).
    found: i16,
    /// The next bucket or group of the array or table at hand, and its end.
    next: i16,
    end: i16,
    /// Buckets: the overflow bucket of `cur`. Swiss: the table at hand.
    link: i16,
    /// Buckets: the old bucket array and its end. Swiss: the next directory entry and
    /// the directory's end.
    far: i16,
    far_end: i16,
    /// The control word of the bucket or group at hand.
    ctrl: i16,
    /// 16 bytes for a slot's key (and a word read from the target).
    tmp: i16,
    /// A string key's bytes as a slot holds them.
    bytes: i16,
    slots: Slots,
}

impl Gen<'_> {
    /// The place of `m[k]` (`e`): target memory at the element's address, 0 when absent.
    pub fn map_elem_place(&mut self, e: &Expr, base: &Expr, index: &Expr) -> Result<Place, LowerError> {
        let bid = self.go_type_of(base).ok_or_else(|| LowerError::unsupported(e.span, "indexing this map"))?;
        let TypeKind::Map { key: Some(key), elem: Some(elem) } = self.types.get(bid).kind else {
            return Err(LowerError::unsupported(e.span, "indexing a map of unknown key or element type"));
        };
        let layout = self.map_layout.ok_or(LowerError::NoMapLayout { span: e.span })?;
        let kt = self.types.get(key);
        let (string_key, key_size) = (matches!(kt.kind, TypeKind::String), kt.size.clamp(1, 8));
        let slots = slots(self.types, &layout, key, elem);
        let mut w = || self.slot(8, e.span);
        let (cur, steps, found, next, end) = (w()?, w()?, w()?, w()?, w()?);
        let (link, far, far_end, ctrl) = (w()?, w()?, w()?, w()?);
        let tmp = self.slot(16, e.span)?;
        let (key, bytes) = if string_key {
            (self.slot(8 + STRING_KEY_BUF, e.span)?, self.slot(STRING_KEY_BUF, e.span)?)
        } else {
            (self.slot(8, e.span)?, 0)
        };
        let s = Scan {
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
        };
        self.scan_key(&s, index)?;
        // The map's header: its address is the value of `m`.
        let mp = self.place(base)?;
        self.read_scalar(&mp, 8, false)?;
        self.b.emit(store_reg(Size::DW, R10, s.cur, R0));
        self.b.emit(store_imm(Size::DW, R10, s.found, 0));
        self.b.emit(store_imm(Size::DW, R10, s.steps, 0));
        let l = Labels {
            head: self.b.new_label(),
            scan: self.b.new_label(),
            absent: self.b.new_label(),
            hit: self.b.new_label(),
        };
        let skipped = self.b.new_label();
        match layout {
            MapLayout::Buckets { flags, b, buckets, oldbuckets } => {
                self.buckets_start(&s, [flags, b, buckets, oldbuckets], l.absent)?
            }
            MapLayout::Swiss { dir_ptr, dir_len, .. } => self.swiss_start(&s, dir_ptr, dir_len, l.absent)?,
        }
        self.b.bind(l.head);
        self.b.emit(load(Size::DW, R1, R10, s.steps));
        self.b.jmp_imm_to(BPF_JSGE, R1, MAX_GROUPS, skipped);
        self.b.emit(alu64_imm(BPF_ADD, R1, 1));
        self.b.emit(store_reg(Size::DW, R10, s.steps, R1));
        match layout {
            MapLayout::Buckets { .. } => self.buckets_next(&s, &l)?,
            MapLayout::Swiss { groups_data, groups_mask, .. } => self.swiss_next(&s, &l, groups_data, groups_mask)?,
        }
        self.b.bind(l.scan);
        self.scan_group(&s, &l, matches!(layout, MapLayout::Buckets { .. }))?;
        if let MapLayout::Buckets { .. } = layout {
            self.word_at(&s, s.cur, s.slots.overflow as u32, 8)?;
            self.b.emit(store_reg(Size::DW, R10, s.link, R0));
        }
        self.b.ja_to(l.head);
        self.b.bind(skipped);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why = format!("m[k] looked at {MAX_GROUPS} buckets or groups of a bigger map without finding the key");
            self.count(Counter::Skipped { program, why }, e.span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(l.hit);
        let picked = self.b.new_label();
        self.pick_slot(&s, picked);
        self.b.bind(picked);
        if slots.elem_indirect {
            self.b.emit(load(Size::DW, R3, R10, s.found));
            self.read_user_n(s.found, 8)?;
        }
        self.b.bind(l.absent);
        self.b.emit(mov64_imm(R0, 0));
        Ok(Place::Mem { addr: s.found, offset: 0 })
    }

    /// The key into its slot: an integer cut to the key's size, or a string record
    /// (zero-padded); a string longer than `MAX_STRING_KEY` ends the hit as skipped.
    fn scan_key(&mut self, s: &Scan, index: &Expr) -> Result<(), LowerError> {
        if !s.string_key {
            self.expr(index)?;
            self.narrow(s.key_size, false);
            self.b.emit(store_reg(Size::DW, R10, s.key, R0));
            return Ok(());
        }
        for i in 0..(8 + STRING_KEY_BUF as i16) / 8 {
            self.b.emit(store_imm(Size::DW, R10, s.key + 8 * i, 0));
        }
        // One byte more than compared: a longer key reads as longer.
        self.string_to(index, R10, s.key, MAX_STRING_KEY + 1)?;
        let fits = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, s.key));
        self.b.jmp_imm_to(BPF_JLE, R1, MAX_STRING_KEY as i32, fits);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why = format!("m[k] with a string key longer than {MAX_STRING_KEY} bytes");
            self.count(Counter::Skipped { program, why }, index.span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(fits);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// `size` bytes of target memory at R3 into stack slot `dst` (zeros when unreadable).
    fn read_user_n(&mut self, dst: i16, size: i32) -> Result<(), LowerError> {
        self.stack_ptr(R1, dst);
        self.b.emit(mov64_imm(R2, size));
        self.b.emit(call(BPF_FUNC_probe_read_user));
        Ok(())
    }

    /// R0 = the `size`-byte word at `at` + `offset` of target memory (zero-extended),
    /// where stack slot `at` holds an address.
    fn word_at(&mut self, s: &Scan, at: i16, offset: u32, size: u64) -> Result<(), LowerError> {
        self.b.emit(store_imm(Size::DW, R10, s.tmp, 0));
        self.b.emit(load(Size::DW, R3, R10, at));
        self.b.emit(alu64_imm(BPF_ADD, R3, offset as i32));
        self.read_user_n(s.tmp, size as i32)?;
        self.b.emit(load(Size::DW, R0, R10, s.tmp));
        Ok(())
    }

    /// Looks at the 8 slots of the bucket or group at `cur` without branching (one
    /// branch a step keeps the verifier's pending paths few): bit i of `ctrl` is set
    /// when slot i is full (tophash at least `minTopHash` in a bucket, a control byte
    /// with its top bit clear in a group) and its key equals the key; any bit set jumps
    /// to `hit`, which picks the slot.
    fn scan_group(&mut self, s: &Scan, l: &Labels, buckets: bool) -> Result<(), LowerError> {
        self.word_at(s, s.cur, 0, 8)?;
        self.b.emit(store_reg(Size::DW, R10, s.found, R0));
        self.b.emit(store_imm(Size::DW, R10, s.ctrl, 0));
        for i in 0..SLOTS {
            let key_at = s.slots.key + i * s.slots.key_stride;
            self.b.emit(load(Size::DW, R3, R10, s.cur));
            self.b.emit(alu64_imm(BPF_ADD, R3, key_at as i32));
            // R1 = 0 when the keys are equal, else 1.
            self.key_differs(s)?;
            // R2 = 1 when the slot is not full.
            self.b.emit(load(Size::DW, R2, R10, s.found));
            self.b.emit(alu64_imm(BPF_RSH, R2, 8 * i as i32));
            self.b.emit(alu64_imm(BPF_AND, R2, 0xff));
            if buckets {
                self.b.emit(alu64_imm(BPF_SUB, R2, MIN_TOP_HASH));
                self.b.emit(alu64_imm(BPF_RSH, R2, 63));
            } else {
                self.b.emit(alu64_imm(BPF_RSH, R2, 7));
            }
            self.b.emit(alu64_reg(BPF_OR, R1, R2));
            self.b.emit(alu64_imm(BPF_XOR, R1, 1));
            self.b.emit(alu64_imm(BPF_LSH, R1, i as i32));
            self.b.emit(load(Size::DW, R2, R10, s.ctrl));
            self.b.emit(alu64_reg(BPF_OR, R2, R1));
            self.b.emit(store_reg(Size::DW, R10, s.ctrl, R2));
        }
        self.b.emit(store_imm(Size::DW, R10, s.found, 0));
        self.b.emit(load(Size::DW, R1, R10, s.ctrl));
        self.b.jmp_imm_to(BPF_JNE, R1, 0, l.hit);
        Ok(())
    }

    /// At `hit`: the element of the first slot whose bit is set in `ctrl` into `found`.
    fn pick_slot(&mut self, s: &Scan, found: Label) {
        for i in 0..SLOTS {
            let next = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R10, s.ctrl));
            self.b.emit(alu64_imm(BPF_AND, R1, 1 << i));
            self.b.jmp_imm_to(BPF_JEQ, R1, 0, next);
            let elem_at = s.slots.elem + i * s.slots.elem_stride;
            self.b.emit(load(Size::DW, R1, R10, s.cur));
            self.b.emit(alu64_imm(BPF_ADD, R1, elem_at as i32));
            self.b.emit(store_reg(Size::DW, R10, s.found, R1));
            self.b.ja_to(found);
            self.b.bind(next);
            self.b.emit(mov64_imm(R0, 0));
        }
    }

    /// R1 = 0 when the key at target address R3 equals the key, else 1 (no branch).
    fn key_differs(&mut self, s: &Scan) -> Result<(), LowerError> {
        if !s.string_key {
            self.b.emit(store_imm(Size::DW, R10, s.tmp, 0));
            self.read_user_n(s.tmp, s.key_size as i32)?;
            self.b.emit(load(Size::DW, R1, R10, s.tmp));
            self.b.emit(load(Size::DW, R2, R10, s.key));
            self.b.emit(alu64_reg(BPF_XOR, R1, R2));
        } else {
            // A string key: its (pointer, length); then as many bytes as the key has
            // from its pointer (a shorter string differs by its length anyway).
            self.read_user_n(s.tmp, 16)?;
            let words = (STRING_KEY_BUF / 8) as i16;
            for i in 0..words {
                self.b.emit(store_imm(Size::DW, R10, s.bytes + 8 * i, 0));
            }
            self.b.emit(load(Size::DW, R2, R10, s.key));
            self.b.emit(alu64_imm(BPF_AND, R2, MAX_STRING_KEY as i32));
            self.b.emit(load(Size::DW, R3, R10, s.tmp));
            self.stack_ptr(R1, s.bytes);
            self.b.emit(call(BPF_FUNC_probe_read_user));
            self.b.emit(load(Size::DW, R1, R10, s.tmp + 8));
            self.b.emit(load(Size::DW, R2, R10, s.key));
            self.b.emit(alu64_reg(BPF_XOR, R1, R2));
            for i in 0..words {
                self.b.emit(load(Size::DW, R2, R10, s.bytes + 8 * i));
                self.b.emit(load(Size::DW, R3, R10, s.key + 8 + 8 * i));
                self.b.emit(alu64_reg(BPF_XOR, R2, R3));
                self.b.emit(alu64_reg(BPF_OR, R1, R2));
            }
        }
        // R1 = (R1 | -R1) >> 63: 1 when R1 is not zero.
        self.b.emit(mov64_reg(R2, R1));
        self.b.emit(neg64(R2));
        self.b.emit(alu64_reg(BPF_OR, R1, R2));
        self.b.emit(alu64_imm(BPF_RSH, R1, 63));
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
        self.b.jmp_imm_to(BPF_JEQ, R1, 0, absent);
        // far_end = the size of the bucket array in bytes, for now.
        self.word_at(s, s.cur, b, 1)?;
        self.b.emit(alu64_imm(BPF_AND, R0, 63));
        self.b.emit(mov64_imm(R1, size));
        self.b.emit(alu64_reg(BPF_LSH, R1, R0));
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R1));
        self.word_at(s, s.cur, flags, 1)?;
        self.b.emit(store_reg(Size::DW, R10, s.link, R0));
        self.word_at(s, s.cur, oldbuckets, 8)?;
        self.b.emit(store_reg(Size::DW, R10, s.far, R0));
        self.word_at(s, s.cur, buckets, 8)?;
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, absent);
        self.b.emit(store_reg(Size::DW, R10, s.next, R0));
        self.b.emit(load(Size::DW, R1, R10, s.far_end));
        self.b.emit(alu64_reg(BPF_ADD, R0, R1));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        let same = self.b.new_label();
        self.b.emit(load(Size::DW, R2, R10, s.link));
        self.b.jmp_imm_to(BPF_JSET, R2, SAME_SIZE_GROW, same);
        self.b.emit(alu64_imm(BPF_RSH, R1, 1));
        self.b.bind(same);
        self.b.emit(load(Size::DW, R0, R10, s.far));
        self.b.emit(alu64_reg(BPF_ADD, R1, R0));
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R1));
        self.b.emit(store_imm(Size::DW, R10, s.link, 0));
        Ok(())
    }

    /// The next bucket into `cur`: the overflow bucket of the one before, else the next
    /// of the array, else the first old bucket (once), else absent.
    fn buckets_next(&mut self, s: &Scan, l: &Labels) -> Result<(), LowerError> {
        let (array, old) = (self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R0, R10, s.link));
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, array);
        self.b.emit(store_reg(Size::DW, R10, s.cur, R0));
        self.b.ja_to(l.scan);
        self.b.bind(array);
        self.b.emit(load(Size::DW, R1, R10, s.next));
        self.b.emit(load(Size::DW, R2, R10, s.end));
        self.b.jmp_reg_to(BPF_JGE, R1, R2, old);
        self.b.emit(store_reg(Size::DW, R10, s.cur, R1));
        self.b.emit(alu64_imm(BPF_ADD, R1, s.slots.size as i32));
        self.b.emit(store_reg(Size::DW, R10, s.next, R1));
        self.b.ja_to(l.scan);
        // The array is done: the old buckets next, unless there are none or they were
        // the array just done.
        self.b.bind(old);
        self.b.emit(load(Size::DW, R3, R10, s.far));
        self.b.jmp_imm_to(BPF_JEQ, R3, 0, l.absent);
        self.b.emit(load(Size::DW, R4, R10, s.far_end));
        self.b.jmp_reg_to(BPF_JEQ, R2, R4, l.absent);
        self.b.emit(store_reg(Size::DW, R10, s.end, R4));
        self.b.emit(store_reg(Size::DW, R10, s.cur, R3));
        self.b.emit(alu64_imm(BPF_ADD, R3, s.slots.size as i32));
        self.b.emit(store_reg(Size::DW, R10, s.next, R3));
        Ok(())
    }

    /// The swiss walk from the header at `cur`: `next`..`end` the groups of the table
    /// at hand, `far`..`far_end` the directory's entries, `link` the table at hand. A
    /// small map (dirLen 0) is a table of one group at dirPtr with no directory.
    fn swiss_start(&mut self, s: &Scan, dir_ptr: u32, dir_len: u32, absent: Label) -> Result<(), LowerError> {
        self.b.emit(load(Size::DW, R1, R10, s.cur));
        self.b.jmp_imm_to(BPF_JEQ, R1, 0, absent);
        self.word_at(s, s.cur, dir_len, 8)?;
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R0));
        self.word_at(s, s.cur, dir_ptr, 8)?;
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, absent);
        self.b.emit(store_reg(Size::DW, R10, s.far, R0));
        self.b.emit(store_reg(Size::DW, R10, s.next, R0));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        self.b.emit(store_reg(Size::DW, R10, s.link, R0));
        let (dir, done) = (self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R1, R10, s.far_end));
        self.b.jmp_imm_to(BPF_JNE, R1, 0, dir);
        // Small: one group, no directory (its end at its start).
        self.b.emit(alu64_imm(BPF_ADD, R0, s.slots.size as i32));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        self.b.emit(load(Size::DW, R0, R10, s.far));
        self.b.emit(store_reg(Size::DW, R10, s.far_end, R0));
        self.b.ja_to(done);
        // A directory of far_end tables: no group at hand yet (next == end).
        self.b.bind(dir);
        self.b.emit(alu64_imm(BPF_LSH, R1, 3));
        self.b.emit(alu64_reg(BPF_ADD, R1, R0));
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
        self.b.jmp_reg_to(BPF_JGE, R1, R2, table);
        self.b.emit(store_reg(Size::DW, R10, s.cur, R1));
        self.b.emit(alu64_imm(BPF_ADD, R1, size));
        self.b.emit(store_reg(Size::DW, R10, s.next, R1));
        self.b.ja_to(l.scan);
        self.b.bind(table);
        self.b.emit(load(Size::DW, R3, R10, s.far));
        self.b.emit(load(Size::DW, R2, R10, s.far_end));
        self.b.jmp_reg_to(BPF_JGE, R3, R2, l.absent);
        self.b.emit(mov64_reg(R1, R3));
        self.b.emit(alu64_imm(BPF_ADD, R1, 8));
        self.b.emit(store_reg(Size::DW, R10, s.far, R1));
        self.b.emit(store_imm(Size::DW, R10, s.tmp, 0));
        self.read_user_n(s.tmp, 8)?;
        self.b.emit(load(Size::DW, R1, R10, s.tmp));
        self.b.emit(load(Size::DW, R2, R10, s.link));
        self.b.jmp_reg_to(BPF_JEQ, R1, R2, l.head);
        self.b.emit(store_reg(Size::DW, R10, s.link, R1));
        self.b.jmp_imm_to(BPF_JEQ, R1, 0, l.head);
        self.word_at(s, s.link, mask, 8)?;
        self.b.emit(alu64_imm(BPF_ADD, R0, 1));
        self.b.emit(alu64_imm(BPF_MUL, R0, size));
        self.b.emit(store_reg(Size::DW, R10, s.end, R0));
        self.word_at(s, s.link, data, 8)?;
        self.b.emit(load(Size::DW, R1, R10, s.end));
        self.b.emit(alu64_reg(BPF_ADD, R1, R0));
        self.b.emit(store_reg(Size::DW, R10, s.end, R1));
        self.b.emit(store_reg(Size::DW, R10, s.cur, R0));
        self.b.emit(alu64_imm(BPF_ADD, R0, size));
        self.b.emit(store_reg(Size::DW, R10, s.next, R0));
        Ok(())
    }
}

/// Where a scan goes next.
struct Labels {
    head: Label,
    scan: Label,
    absent: Label,
    hit: Label,
}
