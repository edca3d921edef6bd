//! Private maps kept by one pointer (`@_t0[req] = nsecs`, read back, `delete`d or
//! `take`n at the request's end: what the libraries keep their start times in) as an
//! array of slots indexed by a hash of the key, with the map's own hash as the spill: a
//! set, read and delete of a key in its slot is an array lookup the verifier inlines
//! and a few loads, stores and compare-and-exchanges, where a hash map's takes a helper
//! call that hashes the key, locks a bucket and walks it (about 0.2 us each on this
//! project's VM, docs/performance.md).
//!
//! A slot is (tag, value, spilled): `tag` the key that holds it (0 when free), `spilled`
//! how many keys whose slot this is live in the spill. A set claims its key's free slot
//! by a compare-and-exchange of the tag, 0 to the key (of two claiming it at once on two
//! CPUs one wins; a second set of the same key finds its tag and writes in place); a key
//! whose slot another holds, or whose slot has keys in the spill, goes to the spill (the
//! map's hash, `--map-size` keys), counting itself in `spilled` first. So a key is in its
//! slot or in the spill, never both, and a read or delete whose slot is not its own and
//! has nothing spilled is done without touching the hash. A delete or take releases the
//! slot: a compare-and-exchange of the tag, the key to BUSY (of two at once one wins:
//! `take` gets the value once), then the value zeroed and the tag freed (so a slot
//! claimed again reads 0 until its new value is written). Keys 0 and BUSY never hold a
//! slot (spilled, counted as others). The kind of map (a private `@_name`, one key and a
//! value of 8 bytes, never named whole) and its sizes are chosen in maps.rs
//! (`slots_for`); what it refuses when the spill is full is counted as the map's, by the
//! kernel's errno.
//!
//! Not kept exactly as a hash would keep it when one key's operations run at once on
//! two CPUs: the tag and the value are two words, and only the tag is exchanged. A set
//! that found its tag, delayed while a take of the same key released the slot and
//! another key claimed it, writes its value over that key's; a read that found its tag
//! may load the next owner's value; two sets of one key, one spilling while the other
//! claims the freed slot, leave the key in both (a review found these by reading; a
//! 40-second test of 1.4 million operations on one slot did not hit them). So only the
//! standard library's maps are slotted (maps.rs `add_slots`), whose use keeps one key's
//! operations in order: a request's start is set before its end takes it, on one
//! goroutine. A user's `@_name` map is a plain hash.

use super::codegen::Gen;
use super::ir::Arg;
use super::layout::SLOT_HASH;
use super::maps::{Slots, UserMap};
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::syntax::ast::Span;

/// A slot: the key holding it, its value, how many keys of this slot are spilled.
pub const TAG: i16 = 0;
pub const VALUE: i16 = 8;
pub const SPILLED: i16 = 16;
pub const SLOT_BYTES: u32 = 24;
/// The tag of a slot being released (never a key's: such a key is spilled).
const BUSY: i32 = -1;
/// At most 2^MAX_BITS slots (96 KiB).
pub const MAX_BITS: u32 = 12;

/// How many bits index the slots of a map of `entries` keys (`--map-size`): the largest
/// power of two not over it, at most 2^MAX_BITS.
pub fn slot_bits(entries: u32) -> u32 {
    (31 - entries.max(1).leading_zeros()).min(MAX_BITS)
}

/// The slot of `key` in a map of 2^bits slots (as the programs compute it).
pub fn slot_index(key: u64, bits: u32) -> u32 {
    if bits == 0 {
        return 0;
    }
    (key.wrapping_mul(SLOT_HASH) >> (64 - bits)) as u32
}

/// errnos a spill update gives.
const EEXIST: i32 = 17;
const ENOENT: i32 = 2;

impl Gen<'_> {
    /// Finds the slot of the key in stack slot `key`: R0 = its address, also kept in the
    /// stack slot returned, and R2 = the key; jumps to `other` when the key can hold no
    /// slot (0 or BUSY).
    fn find_slot(&mut self, s: &Slots, key: i16, other: Label, span: Span) -> Result<i16, LowerError> {
        let at = self.slot(8, span)?;
        if s.bits == 0 {
            self.b.emit(mov64_imm(R1, 0));
        } else {
            self.b.emit(load(Size::DW, R1, R10, key));
            self.b.emit2(ld_imm64(R2, SLOT_HASH));
            self.b.emit(alu64_reg(AluOp::Mul, R1, R2));
            self.b.emit(alu64_imm(AluOp::Rsh, R1, (64 - s.bits) as i32));
        }
        self.b.emit(store_reg(Size::DW, R10, at, R1));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&s.object_name), Arg::Stack(at)]);
        // Never taken: the index is below the array's size.
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
        self.b.emit(store_reg(Size::DW, R10, at, R0));
        self.b.emit(load(Size::DW, R2, R10, key));
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, other);
        self.b.jmp_imm_to(JmpOp::Eq, R2, BUSY, other);
        Ok(at)
    }

    /// Adds `delta` to the spilled count of the slot whose address is in stack slot `at`.
    fn add_spilled(&mut self, at: i16, delta: i32) {
        self.b.emit(load(Size::DW, R1, R10, at));
        self.b.emit(mov64_imm(R2, delta));
        self.b.emit(atomic_add(Size::DW, R1, SPILLED, R2));
    }

    /// R0 = the value of the key in stack slot `key` (0 when absent).
    pub(super) fn slotted_read(&mut self, um: &UserMap, s: &Slots, key: i16, span: Span) -> Result<(), LowerError> {
        let (other, end) = (self.b.new_label(), self.b.new_label());
        self.find_slot(s, key, other, span)?;
        self.b.emit(load(Size::DW, R1, R0, TAG));
        self.b.jmp_reg_to(JmpOp::Ne, R1, R2, other);
        self.b.emit(load(Size::DW, R0, R0, VALUE));
        self.b.ja_to(end);
        self.b.bind(other);
        self.b.emit(load(Size::DW, R1, R0, SPILLED));
        self.b.emit(mov64_imm(R0, 0));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, end);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        self.b.emit(load(Size::DW, R0, R0, 0));
        self.b.bind(end);
        Ok(())
    }

    /// Sets the key in stack slot `key` to the 8-byte value in stack slot `val`: in its
    /// slot when it holds it or claims it, else in the spill (a refusal counted).
    pub(super) fn slotted_store(
        &mut self,
        um: &UserMap,
        s: &Slots,
        key: i16,
        val: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let (spill, claimed, write, end) =
            (self.b.new_label(), self.b.new_label(), self.b.new_label(), self.b.new_label());
        let at = self.find_slot(s, key, spill, span)?;
        self.b.emit(load(Size::DW, R1, R0, TAG));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, write);
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, spill);
        self.b.emit(load(Size::DW, R1, R0, SPILLED));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, spill);
        // A free slot with nothing spilled: claimed by one compare-and-exchange of its tag
        // (or found claimed by the same key on another CPU).
        self.b.emit(mov64_reg(R1, R0));
        self.b.emit(mov64_imm(R0, 0));
        self.b.emit(atomic_cmpxchg(Size::DW, R1, TAG, R2));
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, claimed);
        self.b.jmp_reg_to(JmpOp::Ne, R0, R2, spill);
        self.b.bind(claimed);
        self.b.emit(mov64_reg(R0, R1));
        self.b.bind(write);
        self.b.emit(load(Size::DW, R1, R10, val));
        self.b.emit(store_reg(Size::DW, R0, VALUE, R1));
        self.b.ja_to(end);
        // The spill: counted in the slot before it is inserted (so that a count of 0 says
        // no key of this slot is spilled), uncounted when it was there already or refused.
        self.b.bind(spill);
        self.add_spilled(at, 1);
        let args = |flag| [Arg::Map(&um.object_name), Arg::Stack(key), Arg::Stack(val), Arg::Imm(flag)];
        self.b.call(BPF_FUNC_map_update_elem, &args(BPF_NOEXIST));
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        let ret = self.slot(8, span)?;
        self.b.emit(store_reg(Size::DW, R10, ret, R0));
        self.add_spilled(at, -1);
        self.b.emit(load(Size::DW, R0, R10, ret));
        let present = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Eq, R0, -EEXIST, present);
        self.count_refused(&um.object_name, span)?;
        self.b.ja_to(end);
        self.b.bind(present);
        self.b.call(BPF_FUNC_map_update_elem, &args(BPF_EXIST));
        // Deleted on another CPU in between: as if that delete came after.
        self.b.jmp_imm_to(JmpOp::Eq, R0, -ENOENT, end);
        self.count_refused_update(&um.object_name, span)?;
        self.b.bind(end);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Deletes the key in stack slot `key`; with `taken` (a stack slot), keeps there the
    /// value this delete removed (0 when absent, or another probe removed it first).
    pub(super) fn slotted_delete(
        &mut self,
        um: &UserMap,
        s: &Slots,
        key: i16,
        taken: Option<i16>,
        span: Span,
    ) -> Result<(), LowerError> {
        let (other, end) = (self.b.new_label(), self.b.new_label());
        if let Some(t) = taken {
            self.b.emit(store_imm(Size::DW, R10, t, 0));
        }
        let at = self.find_slot(s, key, other, span)?;
        // Its own slot: the tag from the key to BUSY (one of two at once wins), then the
        // value zeroed and the slot freed.
        self.b.emit(mov64_reg(R1, R0));
        self.b.emit(mov64_reg(R0, R2));
        self.b.emit(mov64_imm(R3, BUSY));
        self.b.emit(atomic_cmpxchg(Size::DW, R1, TAG, R3));
        self.b.jmp_reg_to(JmpOp::Ne, R0, R2, other);
        if let Some(t) = taken {
            self.b.emit(load(Size::DW, R3, R1, VALUE));
            self.b.emit(store_reg(Size::DW, R10, t, R3));
        }
        self.b.emit(store_imm(Size::DW, R1, VALUE, 0));
        self.b.emit(mov64_imm(R0, BUSY));
        self.b.emit(mov64_imm(R3, 0));
        self.b.emit(atomic_cmpxchg(Size::DW, R1, TAG, R3));
        self.b.ja_to(end);
        // Not in its slot: in the spill if anything of its slot is.
        self.b.bind(other);
        self.b.emit(load(Size::DW, R1, R10, at));
        self.b.emit(load(Size::DW, R1, R1, SPILLED));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, end);
        if let Some(t) = taken {
            self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
            self.b.emit(load(Size::DW, R1, R0, 0));
            self.b.emit(store_reg(Size::DW, R10, t, R1));
        }
        self.b.call(BPF_FUNC_map_delete_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        let removed = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, removed);
        if let Some(t) = taken {
            // Another probe's delete removed it first: it has the value.
            self.b.emit(store_imm(Size::DW, R10, t, 0));
        }
        self.b.ja_to(end);
        self.b.bind(removed);
        self.add_spilled(at, -1);
        self.b.bind(end);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }
}
