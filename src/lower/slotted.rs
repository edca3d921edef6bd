//! Private maps kept by one pointer (`@_t0[req] = nsecs`, read back, `delete`d or
//! `take`n at the request's end: what the libraries keep their start times in) as an
//! array of slots indexed by a hash of the key, with the map's own hash as the spill: a
//! set, read and delete of a key in its slot is an array lookup the verifier inlines
//! and a few loads, stores and two atomic instructions, where a hash map's takes a
//! helper call that hashes the key, locks a bucket and walks it (about 0.2 us each on
//! this project's VM, docs/performance.md).
//!
//! A slot is (lock, tag, value, spilled): `lock` 1 while an operation holds the slot,
//! `tag` the key in the slot (0 when free), `spilled` how many keys whose slot this is
//! live in the spill (the map's hash, `--map-size` keys). Every operation on a key
//! holds its slot's lock throughout: taken by a compare-and-exchange 0 -> 1, released
//! by an exchange to 0 (both atomics that fetch, fully ordered on every JIT: the next
//! holder sees every store of the last). Under it a set writes the key's value in place
//! when the tag is the key or the key is in the spill (looked for only when `spilled`
//! is not 0), claims a free slot (tag, then value) when it is in neither, and otherwise
//! inserts the key in the spill, counted in `spilled`; a read or delete finds the key by its tag
//! or, when `spilled` is not 0, in the spill (found there and deleted: `spilled` less
//! one); a delete or `take` of the key in its slot frees the tag. Key 0 never holds a
//! slot (a free slot's tag): it is spilled, under the lock of slot 0 like any key of
//! slot 0. The kind of map (a private `@_name`, one key and a value of 8 bytes, never
//! named whole) and its sizes are chosen in maps.rs (`add_slots`); what it refuses when
//! the spill is full is counted as the map's, by the kernel's errno.
//!
//! Why it is exact for any interleaving on any number of CPUs. Every key has one slot,
//! and the words of a slot and the spill's elements of that slot's keys change only
//! while that slot's lock is held (the spill is touched only here; the map is never
//! named whole). So the operations on one slot's keys run one at a time, each as if
//! alone, and each takes effect at an instant while it holds the lock: they are the
//! same as a hash's in the order they held it. Case by case, the races a review found
//! in the lock-free version (where only the tag was exchanged):
//! - A set that found its tag, delayed while a take of the key released the slot and
//!   another key claimed it, wrote its value over that key's: the set's tag test and
//!   value write are one hold; the take and the claim hold the lock before or after it,
//!   never between.
//! - A read that found its tag could load the next owner's value (or, if the key came
//!   back, its value of between): the read holds the lock from its tag test to its load.
//! - Two sets of one key, one spilling while the other claimed the freed slot, left the
//!   key in both: the first to hold the lock puts the key somewhere, and the second sees
//!   it there (the tag, or the key in the spill by a lookup). A key is put in its slot
//!   only when its tag is free and the key is not in the spill (`spilled` is 0, or a
//!   lookup in the same hold did not find it: `spilled` changes with the spill in one
//!   hold), and in the spill only when the tag is not the key: so never in both, and the review's smaller fix (deleting a
//!   key's spill copy when its slot is released with keys spilled) has nothing to do.
//! - Two takes of one key: the first holds the lock and frees the tag (or deletes the
//!   element), the second finds the key absent and takes 0: the value is taken once.
//! - A spilled key's element is written in place through the pointer a lookup gave:
//!   every delete of that key holds the lock, so the element outlives the write.
//! - A reader waits for writers as writers do: two atomics, what a seqlock's reader
//!   needs too on arm64 (a plain load is not ordered with the loads after it, and eBPF
//!   has no load-acquire before Linux 6.15).
//!
//! Never waiting without bound: an operation tries the lock `TRIES` times and, held by
//! another all that while, ends the hit counted as skipped (`Counter::Skipped`, said by
//! `--stats` and at exit), the map unchanged. Once, then in `ROUNDS` rounds of
//! `ROUND_TRIES` tries without a branch between them (`lock_slot`): the verifier walks
//! a bounded loop one turn at a time, and its cost is by turn (about 8 us each on this
//! project's VM), so 1,024 turns of one try made every program with a slotted map take
//! 8-14 ms to load, most of `gtrace http`'s start-up in the kernel
//! (docs/performance.md, "blink").
//! Since Linux 6.10 a program runs with preemption disabled (codegen.rs's prologue), so
//! a holder is never off its CPU in between and a hold is a few dozen instructions (a
//! spill's, a helper call or two), unless an interrupt's handling (a softirq's
//! included) or the host pausing its vCPU stretches it: then the others on its slot may
//! give up, counted (8-12 of 400,000 operations under contention on this project's
//! 2-CPU VM, docs/performance.md); before 6.10, on a kernel that preempts, a holder
//! preempted in between does the same. A user's `@_name` map of that shape is slotted
//! as a library's is.

use super::codegen::Gen;
use super::ir::Arg;
use super::layout::SLOT_HASH;
use super::maps::{Slots, UserMap};
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::plan::Counter;
use crate::syntax::ast::Span;

/// A slot: its lock, the key holding it, its value, how many keys of this slot are
/// spilled.
pub const LOCK: i16 = 0;
pub const TAG: i16 = 8;
pub const VALUE: i16 = 16;
pub const SPILLED: i16 = 24;
pub const SLOT_BYTES: u32 = 32;
/// At most 2^MAX_BITS slots (128 KiB).
pub const MAX_BITS: u32 = 12;
/// The rounds of tries after the first, and the tries in each.
pub const ROUNDS: i32 = 128;
pub const ROUND_TRIES: i32 = 8;
/// How many compare-and-exchanges an operation tries for its slot's lock.
pub const TRIES: i32 = 1 + ROUNDS * ROUND_TRIES;

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

/// Why a hit ends when its slot's lock stays held (`Counter::Skipped`).
pub fn busy_why(map: &str) -> String {
    format!("the slot of its key of @{map} was held by another probe through {TRIES} tries")
}

impl Gen<'_> {
    /// Finds and holds the slot of the key in stack slot `key` (`lock_slot`): R1 = its
    /// address, also kept in the stack slot returned, and R2 = the key; jumps to `other`
    /// (the lock held) when the key can hold no slot (0).
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
        self.lock_slot(s, at, span)?;
        self.b.emit(load(Size::DW, R2, R10, key));
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, other);
        Ok(at)
    }

    /// Holds the lock of the slot whose address is in stack slot `at`, R1 that address
    /// after; held by another through `TRIES` tries, the hit is counted as skipped and
    /// ends.
    ///
    /// One try, whose lock taken is the fall-through (what a hit without contention
    /// runs: the same four instructions as one try of a loop); found held, rounds of
    /// `ROUND_TRIES` tries with no branch between them, the lock taken when any of them
    /// found it free (the lock word is 0 or 1: the AND of what they found is 0). A try
    /// after the one that took it finds the lock held, by this operation, and changes
    /// nothing. The verifier walks a round as one turn of the loop (`ROUNDS` turns, not
    /// `TRIES`), and the lock taken after a round is the jump's fall-through too: it
    /// goes on with it and keeps one state, the next round's, for later, so each round's
    /// is pruned where it joins. (The other way round it kept a state for each turn
    /// before walking on, and a probe of eight slotted operations went over its 8,192:
    /// "the sequence of 8193 jumps is too complex".)
    fn lock_slot(&mut self, s: &Slots, at: i16, span: Span) -> Result<(), LowerError> {
        let (give_up, busy, first, locked) =
            (self.b.new_label(), self.b.new_label(), self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R1, R10, at));
        // One more: the count goes down before each round, and the last gives up.
        self.b.emit(mov64_imm(R4, ROUNDS + 1));
        self.b.ja_to(first);
        self.b.bind(give_up);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            self.count(Counter::Skipped { program, why: busy_why(&s.name) }, span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(busy);
        self.b.emit(alu64_imm(AluOp::Sub, R4, 1));
        self.b.jmp_imm_to(JmpOp::Eq, R4, 0, give_up);
        self.b.emit(mov64_imm(R5, 1));
        for _ in 0..ROUND_TRIES {
            self.try_lock();
            self.b.emit(alu64_reg(AluOp::And, R5, R0));
        }
        self.b.jmp_imm_to(JmpOp::Ne, R5, 0, busy);
        self.b.ja_to(locked);
        self.b.bind(first);
        self.try_lock();
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, busy);
        self.b.bind(locked);
        Ok(())
    }

    /// One try of the lock of the slot at R1: R0 = what the lock word was (0: taken now).
    fn try_lock(&mut self) {
        self.b.emit(mov64_imm(R0, 0));
        self.b.emit(mov64_imm(R3, 1));
        self.b.emit(atomic_cmpxchg(Size::DW, R1, LOCK, R3));
    }

    /// Releases the lock of the slot whose address is in stack slot `at`.
    fn unlock_slot(&mut self, at: i16) {
        self.b.emit(load(Size::DW, R1, R10, at));
        self.b.emit(mov64_imm(R3, 0));
        self.b.emit(atomic_xchg(Size::DW, R1, LOCK, R3));
    }

    /// Adds `delta` to the spilled count of the slot (locked) whose address is in stack
    /// slot `at`.
    fn add_spilled(&mut self, at: i16, delta: i32) {
        self.b.emit(load(Size::DW, R1, R10, at));
        self.b.emit(load(Size::DW, R2, R1, SPILLED));
        self.b.emit(alu64_imm(AluOp::Add, R2, delta));
        self.b.emit(store_reg(Size::DW, R1, SPILLED, R2));
    }

    /// R0 = the value of the key in stack slot `key` (0 when absent).
    pub(super) fn slotted_read(&mut self, um: &UserMap, s: &Slots, key: i16, span: Span) -> Result<(), LowerError> {
        let got = self.slot(8, span)?;
        let (other, end) = (self.b.new_label(), self.b.new_label());
        self.b.emit(store_imm(Size::DW, R10, got, 0));
        let at = self.find_slot(s, key, other, span)?;
        self.b.emit(load(Size::DW, R3, R1, TAG));
        self.b.jmp_reg_to(JmpOp::Ne, R3, R2, other);
        self.b.emit(load(Size::DW, R3, R1, VALUE));
        self.b.emit(store_reg(Size::DW, R10, got, R3));
        self.b.ja_to(end);
        self.b.bind(other);
        self.b.emit(load(Size::DW, R3, R1, SPILLED));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, end);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        self.b.emit(load(Size::DW, R0, R0, 0));
        self.b.emit(store_reg(Size::DW, R10, got, R0));
        self.b.bind(end);
        self.unlock_slot(at);
        self.b.emit(load(Size::DW, R0, R10, got));
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
        let (spill, claim, write, insert, refused, end) = (
            self.b.new_label(),
            self.b.new_label(),
            self.b.new_label(),
            self.b.new_label(),
            self.b.new_label(),
            self.b.new_label(),
        );
        let at = self.find_slot(s, key, spill, span)?;
        self.b.emit(load(Size::DW, R3, R1, TAG));
        self.b.jmp_reg_to(JmpOp::Eq, R3, R2, write);
        // Keys of this slot spilled: the key may be one of them.
        self.b.emit(load(Size::DW, R4, R1, SPILLED));
        self.b.jmp_imm_to(JmpOp::Ne, R4, 0, spill);
        self.b.jmp_imm_to(JmpOp::Ne, R3, 0, insert);
        // A free slot, the key not in the spill: claimed.
        self.b.bind(claim);
        self.b.emit(store_reg(Size::DW, R1, TAG, R2));
        self.b.bind(write);
        self.b.emit(load(Size::DW, R3, R10, val));
        self.b.emit(store_reg(Size::DW, R1, VALUE, R3));
        self.b.ja_to(end);
        // The spill: the key's element written in place; else its free slot claimed, or
        // the key inserted and counted.
        self.b.bind(spill);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        let absent = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, absent);
        self.b.emit(load(Size::DW, R1, R10, val));
        self.b.emit(store_reg(Size::DW, R0, 0, R1));
        self.b.ja_to(end);
        self.b.bind(absent);
        self.b.emit(load(Size::DW, R1, R10, at));
        self.b.emit(load(Size::DW, R2, R10, key));
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, insert);
        self.b.emit(load(Size::DW, R3, R1, TAG));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, claim);
        self.b.bind(insert);
        let args = [Arg::Map(&um.object_name), Arg::Stack(key), Arg::Stack(val), Arg::Imm(BPF_NOEXIST)];
        self.b.call(BPF_FUNC_map_update_elem, &args);
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, refused);
        self.add_spilled(at, 1);
        self.b.ja_to(end);
        self.b.bind(refused);
        self.count_refused(&um.object_name, span)?;
        self.b.bind(end);
        self.unlock_slot(at);
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
        self.b.emit(load(Size::DW, R3, R1, TAG));
        self.b.jmp_reg_to(JmpOp::Ne, R3, R2, other);
        if let Some(t) = taken {
            self.b.emit(load(Size::DW, R3, R1, VALUE));
            self.b.emit(store_reg(Size::DW, R10, t, R3));
        }
        self.b.emit(store_imm(Size::DW, R1, TAG, 0));
        self.b.ja_to(end);
        // Not in its slot: in the spill if anything of its slot is.
        self.b.bind(other);
        self.b.emit(load(Size::DW, R3, R1, SPILLED));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, end);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        if let Some(t) = taken {
            self.b.emit(load(Size::DW, R1, R0, 0));
            self.b.emit(store_reg(Size::DW, R10, t, R1));
        }
        // Present under the lock: the delete removes it.
        self.b.call(BPF_FUNC_map_delete_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, end);
        self.add_spilled(at, -1);
        self.b.bind(end);
        self.unlock_slot(at);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }
}
