//! The calls in flight on each goroutine, for `elapsed` and `on panic` (docs/panics.md):
//! one record per goroutine, found by its key (layout.rs `K_*`): its g pointer (the g
//! register at every Go function boundary: no read of the target's memory) and its
//! process (the tgid, one helper call), holding a stack of frames. An entry pushes
//! a frame (its time, its stack position, the function); a return finds its frame at
//! the top, or just above it when another program at the same RET popped it, and pops.
//!
//! Records live in an array indexed by a hash of g and the process (`goroutines`: a
//! lookup the verifier inlines, no helper call), each tagged with its g and its process.
//! The first goroutine to enter a timed call with a slot's hash claims the slot for good
//! (a compare-and-exchange of the g tag: of two claiming at once on two CPUs, one wins;
//! the winner then writes its process); a goroutine whose slot another holds (another g,
//! or the same g in another process) keeps its record in a hash map keyed by (g,
//! process) (`goroutines_spill`). The process is in every key because under -b two
//! processes of a binary whose heap is at a fixed address (Go before 1.26) have
//! goroutines at the same g (docs/fleet.md). A record is only ever written by its
//! goroutine's own programs (and runtime programs working on that goroutine while it is
//! stopped, in its process), so no two CPUs write one record at once, and a frame is
//! never pushed in one goroutine's record and looked for in another's. (A slot taken
//! over whenever its owner had no call in flight was not safe: the owner's push and a
//! newcomer's takeover could interleave.) Nothing is evicted: the Go runtime never frees
//! a g (a dead goroutine's is reused, with its record), so the two hold at most the
//! target's most goroutines at once (`maps::INFLIGHT_ENTRIES`, or `--map-size
//! inflight=N`); an entry that finds no room is counted by the kernel's errno
//! (`Counter::Refused`), its call not followed. (Under -b, a process that exits leaves
//! its records: the trace loop deletes its keys from the hash maps every few seconds,
//! runtime/ended.rs; its array slots stay claimed.)
//!
//! A frame's position is `rel = SP - base`, where `base` is the record's: when the
//! runtime copies the goroutine's stack (runtime.copystack, probed by `stack_moves`), it
//! notes the old stack's top in `moved`, and the next program that reads the record adds
//! how far the stack moved to `base` (one read of g.stack.hi, only then). So every frame
//! of the record keeps its position across stack copies, and comparing positions says
//! which frame is deeper (smaller rel).
//!
//! The first `INLINE` frames live in the record; deeper ones (recursion) in the `frames`
//! map under (g, index, process). Frames that ended without a RET (a recovered panic that no
//! probe saw, a probe detached mid-call) are stale: an entry pops every frame at or
//! below its own position, a return every frame below its own.

use super::codegen::Gen;
use super::ir::{Arg, VReg};
use super::layout::{
    FRAME, F_FUNC, F_REL, F_TIME, INLINE, KEY, K_G, K_INDEX, K_TGID, R_BASE, R_FRAMES, R_G, R_MOVED, R_TGID, R_TOP,
    SLOT_BITS, SLOT_HASH,
};
use super::loaded::{CallFrame, Record, Returned, Slot};
use super::{maps, LowerError};
use crate::arch::abi::Location;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::syntax::ast::Span;

/// How many stale frames one entry or return pops (the rest go at later ones).
const HEAL: usize = 4;

/// Which frames a probe takes for stale: an entry those at or below its position, a
/// return those below it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stale {
    AtOrBelow,
    Below,
}

impl Gen<'_> {
    /// Keeps the goroutine's key in a slot (layout.rs `K_*`, index 0): its g pointer from
    /// the g register or from where `from` says (a runtime function's argument: the g it
    /// works on), and its process.
    pub fn load_g(&mut self, from: Option<&Location>, span: Span) -> Result<Slot, LowerError> {
        let slot = self.goroutine_key(span)?;
        match from {
            Some(location) => {
                let mark = self.b.frame.mark();
                let place = self.location_place("gp", location, span)?;
                self.read_scalar(&place, 8, false)?;
                self.b.frame.release(mark);
                self.b.emit(store_reg(Size::DW, R10, slot, R0));
            }
            None => {
                self.load_reg(R1, self.arch().g_reg());
                self.b.emit(store_reg(Size::DW, R10, slot, R1));
            }
        }
        Ok(slot)
    }

    /// A new slot holding a goroutine's key with its process (the tgid of the task the
    /// probe runs on: every program runs in the target's process, and a runtime
    /// function's `gp` is a goroutine of that process; 0 when the programs run in one
    /// process only, which saves the helper call) and index 0; the g is the caller's to
    /// store at `K_G`.
    pub(super) fn goroutine_key(&mut self, span: Span) -> Result<Slot, LowerError> {
        let slot = self.slot(KEY, span)?;
        if self.one_process {
            self.b.emit(store_imm(Size::W, R10, slot + K_TGID, 0));
        } else {
            self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
            self.b.emit(alu64_imm(AluOp::Rsh, R0, 32));
            self.b.emit(store_reg(Size::W, R10, slot + K_TGID, R0));
        }
        self.b.emit(store_imm(Size::W, R10, slot + K_INDEX, 0));
        Ok(slot)
    }

    /// R0 = the array slot of the goroutine whose key is in slot `g` (never 0 past the
    /// check); its index is left in slot `index`.
    fn array_slot(&mut self, g: Slot, index: i16, none: Label) {
        self.b.emit(load(Size::DW, R1, R10, g + K_G));
        self.b.emit(load(Size::W, R2, R10, g + K_TGID));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
        self.b.emit2(ld_imm64(R2, SLOT_HASH));
        self.b.emit(alu64_reg(AluOp::Mul, R1, R2));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, (64 - SLOT_BITS) as i32));
        self.b.emit(store_reg(Size::W, R10, index, R1));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::GOROUTINES), Arg::Stack(index)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, none);
    }

    /// R0 = the record of the goroutine whose key is in slot `g` (or 0): its array slot
    /// if it holds it (its g and its process), else the spilled one. A g of 0 (no
    /// goroutine: a signal on a thread the Go runtime did not make) has none, and never
    /// matches a slot no goroutine claimed.
    pub(super) fn lookup_record(&mut self, g: Slot) -> Result<(), LowerError> {
        let index = self.frame_slot(8)?;
        let spill = self.b.new_label();
        let done = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, g));
        self.b.emit(mov64_imm(R0, 0));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, done);
        self.array_slot(g, index, spill);
        self.b.emit(load(Size::DW, R1, R0, R_G));
        self.b.emit(load(Size::DW, R2, R10, g + K_G));
        self.b.jmp_reg_to(JmpOp::Ne, R1, R2, spill);
        // The same g in another process (-b, a heap at a fixed address): not this one's.
        self.b.emit(load(Size::W, R1, R0, R_TGID));
        self.b.emit(load(Size::W, R2, R10, g + K_TGID));
        self.b.jmp_reg_to(JmpOp::Eq, R1, R2, done);
        self.b.bind(spill);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::GOROUTINES_SPILL), Arg::Stack(g)]);
        self.b.bind(done);
        self.b.emit(mov64_imm(R5, 0));
        Ok(())
    }

    /// Keeps a pointer to the goroutine's record in a slot (and applies a stack copy not
    /// yet applied); jumps to the end of the program when it has none, or (with
    /// `insert`) when none can be made.
    pub fn record(&mut self, g: Slot, insert: bool, span: Span) -> Result<Record, LowerError> {
        let record = self.record_unmoved(g, insert, span)?;
        self.resolve_move(record, span)?;
        Ok(record)
    }

    /// `record`, leaving a stack copy not yet applied to the caller (R0 = the record).
    fn record_unmoved(&mut self, g: Slot, insert: bool, span: Span) -> Result<Record, LowerError> {
        let slot = self.slot(8, span)?;
        let have = self.b.new_label();
        self.lookup_record(g)?;
        if insert {
            self.b.jmp_imm_to(JmpOp::Ne, R0, 0, have);
            // No goroutine (g 0): its call is not followed.
            self.b.emit(load(Size::DW, R1, R10, g));
            self.b.jmp_imm_to(JmpOp::Eq, R1, 0, self.done);
            // The goroutine's array slot, when no goroutine has it yet: claimed for good,
            // by one compare-and-exchange of its tag (0 to g), so that of two goroutines
            // claiming it at once on two CPUs one wins and the other spills; then the
            // winner's process. (Until it is written, a goroutine of the same g in
            // another process finds the process 0, no process's: it spills.)
            let index = self.slot(8, span)?;
            let spill = self.b.new_label();
            self.array_slot(g, index, spill);
            self.b.emit(mov64_reg(R1, R0));
            self.b.emit(load(Size::DW, R2, R10, g));
            self.b.emit(mov64_imm(R0, 0));
            self.b.emit(atomic_cmpxchg(Size::DW, R1, R_G, R2));
            self.b.jmp_imm_to(JmpOp::Ne, R0, 0, spill);
            self.b.emit(load(Size::W, R2, R10, g + K_TGID));
            self.b.emit(store_reg(Size::W, R1, R_TGID, R2));
            self.b.emit(mov64_reg(R0, R1));
            self.b.ja_to(have);
            // Else a new record in the spill map: zeros from `zeros`, never written.
            self.b.bind(spill);
            let zkey = self.slot(8, span)?;
            self.b.emit(store_imm(Size::DW, R10, zkey, 0));
            self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::ZEROS), Arg::Stack(zkey)]);
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
            let args = [Arg::Map(maps::GOROUTINES_SPILL), Arg::Stack(g), R0.into(), Arg::Imm(BPF_NOEXIST)];
            self.b.call(BPF_FUNC_map_update_elem, &args);
            self.b.emit(store_reg(Size::DW, R10, zkey, R0));
            self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::GOROUTINES_SPILL), Arg::Stack(g)]);
            self.b.jmp_imm_to(JmpOp::Ne, R0, 0, have);
            // No record could be made: this call is not followed (its return is not
            // seen), counted by the errno of the insertion.
            self.b.emit(load(Size::DW, R0, R10, zkey));
            self.count_refused(maps::GOROUTINES_SPILL, span)?;
            self.b.ja_to(self.done);
        } else {
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
        }
        self.b.bind(have);
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        Ok(Record { g, rec: slot })
    }

    /// A stack slot holding the goroutine's `g.stack.hi` (its g in slot `g`), read from
    /// the target (0 when the read fails).
    fn stack_hi_slot(&mut self, g: Slot, span: Span) -> Result<i16, LowerError> {
        let hi = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, hi, 0));
        self.b.emit(load(Size::DW, R3, R10, g));
        self.read_user(hi, R3, self.binary.g_layout.map_or(8, |g| g.stack_hi) as i32)?;
        Ok(hi)
    }

    /// When the stack was copied since the record was last read: base += how far its top
    /// moved (g.stack.hi now, minus the old top `stack_moves` noted).
    fn resolve_move(&mut self, record: Record, span: Span) -> Result<(), LowerError> {
        let rec = record.rec;
        let skip = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::DW, R2, R1, R_MOVED));
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, skip);
        let hi = self.stack_hi_slot(record.g, span)?;
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::DW, R2, R10, hi));
        self.b.emit(load(Size::DW, R3, R1, R_MOVED));
        self.b.emit(alu64_reg(AluOp::Sub, R2, R3));
        self.b.emit(load(Size::DW, R3, R1, R_BASE));
        self.b.emit(alu64_reg(AluOp::Add, R3, R2));
        self.b.emit(store_reg(Size::DW, R1, R_BASE, R3));
        self.b.emit(store_imm(Size::DW, R1, R_MOVED, 0));
        self.b.bind(skip);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// `dst` = this probe's position, SP - base (clobbers R1; recomputed where it is
    /// needed rather than kept in a slot: the programs of timed calls keep their stack
    /// under 64 bytes, codegen.rs).
    fn rel_into(&mut self, dst: Reg, record: Record) {
        self.load_reg(dst, self.arch().stack_pointer());
        self.b.emit(load(Size::DW, R1, R10, record.rec));
        self.b.emit(load(Size::DW, R1, R1, R_BASE));
        self.b.emit(alu64_reg(AluOp::Sub, dst, R1));
    }

    /// R0 = the address of frame number *(u64 *)(r10 + idx) of the record: in it for the
    /// first INLINE frames, else in the `frames` map; 0 when there is none. Clobbers R0-R5.
    pub(super) fn frame_addr(&mut self, record: Record, idx: i16, span: Span) -> Result<(), LowerError> {
        let key = self.slot(KEY, span)?;
        self.frame_addr_keyed(record, idx, key);
        Ok(())
    }

    /// `frame_addr`, building the key of a deep frame in the 16-byte slot `key`.
    pub(super) fn frame_addr_keyed(&mut self, record: Record, idx: i16, key: i16) {
        self.frame_addr_or(record, idx, |gen| {
            gen.key_at(record.g, idx, key);
            gen.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::FRAMES), Arg::Stack(key)]);
        });
    }

    /// `frame_addr` for the frames of push and pop, the deep frame's key made in the
    /// goroutine's key slot itself (its index set, then put back to 0: the record's key
    /// is the one with index 0), so that no other slot is live.
    fn frame_addr_g(&mut self, record: Record, idx: i16) {
        let g = record.g;
        self.frame_addr_or(record, idx, |gen| {
            gen.b.emit(store_reg(Size::W, R10, g + K_INDEX, R1));
            gen.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::FRAMES), Arg::Stack(g)]);
            gen.b.emit(store_imm(Size::W, R10, g + K_INDEX, 0));
        });
    }

    /// R0 = the address of frame number *(u64 *)(r10 + idx): in the record for the
    /// first INLINE frames, else what `deep` looks up (R1 holds the number).
    fn frame_addr_or(&mut self, record: Record, idx: i16, deep: impl FnOnce(&mut Self)) {
        let deep_label = self.b.new_label();
        let end = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, idx));
        self.b.jmp_imm_to(JmpOp::Ge, R1, INLINE, deep_label);
        self.inline_frame_addr(record);
        self.b.ja_to(end);
        self.b.bind(deep_label);
        deep(self);
        self.b.bind(end);
    }

    /// R0 = the address of inline frame number R1 (< INLINE) of the record.
    fn inline_frame_addr(&mut self, record: Record) {
        self.b.emit(alu64_imm(AluOp::And, R1, INLINE - 1));
        self.b.emit(alu64_imm(AluOp::Mul, R1, FRAME));
        self.b.emit(load(Size::DW, R0, R10, record.rec));
        self.b.emit(alu64_reg(AluOp::Add, R0, R1));
        self.b.emit(alu64_imm(AluOp::Add, R0, i32::from(R_FRAMES)));
    }

    /// The key (g, index, process) of a deep frame, in a new slot.
    fn deep_key(&mut self, g: Slot, idx: i16, span: Span) -> Result<i16, LowerError> {
        let key = self.slot(KEY, span)?;
        self.key_at(g, idx, key);
        Ok(key)
    }

    /// Writes the key of a frame (the goroutine's key in slot `g` with the index in slot
    /// `idx`, a u64 below 2^32) into the 16-byte slot `key`.
    pub(super) fn key_at(&mut self, g: Slot, idx: i16, key: i16) {
        self.b.emit(load(Size::DW, R1, R10, g + K_G));
        self.b.emit(store_reg(Size::DW, R10, key + K_G, R1));
        self.b.emit(load(Size::DW, R1, R10, idx));
        self.b.emit(store_reg(Size::W, R10, key + K_INDEX, R1));
        self.b.emit(load(Size::W, R1, R10, g + K_TGID));
        self.b.emit(store_reg(Size::W, R10, key + K_TGID, R1));
    }

    /// *(u64 *)(r10 + idx) = top - 1; jumps to `out` when the record holds no frame.
    fn top_index(&mut self, record: Record, idx: i16, minus: i32, out: Label) {
        self.b.emit(load(Size::DW, R1, R10, record.rec));
        self.b.emit(load(Size::W, R2, R1, R_TOP));
        if minus > 0 {
            self.b.jmp_imm_to(JmpOp::Eq, R2, 0, out);
            self.b.emit(alu64_imm(AluOp::Sub, R2, minus));
        }
        self.b.emit(store_reg(Size::DW, R10, idx, R2));
    }

    /// top = *(u64 *)(r10 + idx).
    pub(super) fn set_top(&mut self, record: Record, idx: i16) {
        self.b.emit(load(Size::DW, R1, R10, record.rec));
        self.b.emit(load(Size::DW, R2, R10, idx));
        self.b.emit(store_reg(Size::W, R1, R_TOP, R2));
    }

    /// Pops up to HEAL stale frames: those at or below (`Stale::AtOrBelow`) or below this
    /// probe's position (slot `idx` is scratch).
    fn heal(&mut self, record: Record, idx: i16, stale: Stale) {
        let out = self.b.new_label();
        for _ in 0..HEAL {
            self.top_index(record, idx, 1, out);
            self.frame_addr_g(record, idx);
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, out);
            self.b.emit(load(Size::DW, R3, R0, F_REL));
            self.rel_into(R4, record);
            let live = if stale == Stale::AtOrBelow { JmpOp::Sgt } else { JmpOp::Sge };
            self.b.jmp_reg_to(live, R3, R4, out);
            self.set_top(record, idx);
        }
        self.b.bind(out);
        self.b.emit(mov64_imm(R0, 0));
    }

    /// At the entry of a function whose calls are timed: pushes its frame on the
    /// goroutine's record (made if it has none).
    pub fn push_frame(&mut self, span: Span) -> Result<CallFrame, LowerError> {
        let g = self.load_g(None, span)?;
        let record = self.record_unmoved(g, true, span)?;
        let rec = record.rec;
        let idx = self.slot(8, span)?;
        let slow = self.b.new_label();
        let pushed = self.b.new_label();
        self.fast_push(record, idx, slow, pushed, span)?;
        self.b.bind(slow);
        self.resolve_move(record, span)?;
        // No frame in flight: positions start afresh (the stack may be another one).
        let have = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::W, R2, R1, R_TOP));
        self.b.jmp_imm_to(JmpOp::Ne, R2, 0, have);
        self.b.emit(store_imm(Size::DW, R1, R_BASE, 0));
        self.b.bind(have);
        self.b.emit(mov64_imm(R0, 0));
        self.heal(record, idx, Stale::AtOrBelow);
        // The frame's place: in the record, or a new element of `frames` (keyed in the
        // goroutine's key slot; made from any 24 bytes, the record's, then written).
        let (deep, place, refused, bump) =
            (self.b.new_label(), self.b.new_label(), self.b.new_label(), self.b.new_label());
        self.top_index(record, idx, 0, bump);
        self.b.emit(load(Size::DW, R1, R10, idx));
        self.b.jmp_imm_to(JmpOp::Ge, R1, INLINE, deep);
        self.inline_frame_addr(record);
        self.b.ja_to(place);
        self.b.bind(deep);
        self.b.emit(store_reg(Size::W, R10, g + K_INDEX, R1));
        self.b.emit(load(Size::DW, R3, R10, rec));
        self.b.emit(alu64_imm(AluOp::Add, R3, i32::from(R_FRAMES)));
        let args = [Arg::Map(maps::FRAMES), Arg::Stack(g), R3.into(), Arg::Imm(BPF_ANY)];
        self.b.call(BPF_FUNC_map_update_elem, &args);
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, refused);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::FRAMES), Arg::Stack(g)]);
        self.b.emit(store_imm(Size::W, R10, g + K_INDEX, 0));
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, place);
        // Inserted but not found (deleted meanwhile by another CPU): lost as a refusal
        // is, counted under no errno (`Refusal::Other`), as mapops.rs counts its own.
        self.b.emit(mov64_imm(R0, 0));
        self.count_refused(maps::FRAMES, span)?;
        self.b.ja_to(pushed);
        // No room for the frame: the call is not followed (counted by the errno), and
        // the record stays as it was, so that no missing frame sits on it.
        self.b.bind(refused);
        self.b.emit(store_imm(Size::W, R10, g + K_INDEX, 0));
        self.count_refused(maps::FRAMES, span)?;
        self.b.ja_to(pushed);
        self.b.bind(place);
        let at = self.b.vreg();
        self.b.op(mov64_reg(R0, R0), at, R0);
        self.function_id(span)?;
        self.b.op(store_reg(Size::DW, R0, F_FUNC, R0), at, R0);
        self.rel_into(R2, record);
        self.b.op(store_reg(Size::DW, R0, F_REL, R0), at, R2);
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.op(store_reg(Size::DW, R0, F_TIME, R0), at, R0);
        self.b.bind(bump);
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::W, R2, R1, R_TOP));
        self.b.emit(alu64_imm(AluOp::Add, R2, 1));
        self.b.emit(store_reg(Size::W, R1, R_TOP, R2));
        self.b.bind(pushed);
        self.b.emit(mov64_imm(R0, 0));
        Ok(CallFrame { record, index: idx })
    }

    /// The key (g, index of the frame `at`, process) of what the call keeps beside its
    /// frame (carry.rs), in a new slot.
    pub(super) fn frame_key(&mut self, at: CallFrame, span: Span) -> Result<i16, LowerError> {
        self.deep_key(at.record.g, at.index, span)
    }

    /// At a return of a timed function: finds this call's frame (at the top, or just
    /// above it when another program at this RET popped it), pops it, and keeps
    /// `elapsed`; a return whose entry was not seen ends the program.
    pub fn pop_frame(&mut self, span: Span) -> Result<Returned, LowerError> {
        let g = self.load_g(None, span)?;
        let record = self.record_unmoved(g, false, span)?;
        let func = self.b.vreg();
        self.function_id(span)?;
        self.b.op(mov64_reg(R0, R0), func, R0);
        let idx = self.slot(8, span)?;
        let found = self.b.new_label();
        let slow = self.b.new_label();
        self.fast_pop(record, func, idx, found, slow);
        self.b.bind(slow);
        self.resolve_move(record, span)?;
        self.heal(record, idx, Stale::Below);
        let popped = self.b.new_label();
        self.top_index(record, idx, 1, popped);
        self.frame_addr_g(record, idx);
        self.frame_is(record, func, popped);
        self.set_top(record, idx);
        self.b.ja_to(found);
        self.b.bind(popped);
        self.top_index(record, idx, 0, popped);
        self.frame_addr_g(record, idx);
        self.frame_is(record, func, self.done);
        self.b.bind(found);
        let frame = self.slot(8, span)?;
        self.b.emit(store_reg(Size::DW, R10, frame, R0));
        let elapsed = self.slot(8, span)?;
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.emit(load(Size::DW, R1, R10, frame));
        self.b.emit(load(Size::DW, R1, R1, F_TIME));
        self.b.emit(alu64_reg(AluOp::Sub, R0, R1));
        self.b.emit(store_reg(Size::DW, R10, elapsed, R0));
        Ok(Returned { at: CallFrame { record, index: idx }, frame, elapsed, entry: None })
    }

    /// The common entry, in registers: no stack copy to apply, fewer than INLINE frames
    /// in flight and the top one (if any) live, above this call. Pushes the frame (its
    /// index into slot `idx`) and jumps to `pushed`; otherwise jumps to `slow`.
    fn fast_push(
        &mut self,
        record: Record,
        idx: i16,
        slow: Label,
        pushed: Label,
        span: Span,
    ) -> Result<(), LowerError> {
        let rec = record.rec;
        let empty = self.b.new_label();
        let push = self.b.new_label();
        // The record and this call's position, kept in registers the allocator picks
        // (they survive the calls that find the function and the time).
        let (rp, pos) = (self.b.vreg(), self.b.vreg());
        self.b.comment("the common entry: push the frame in the record");
        self.b.load_stack(Size::DW, rp, rec);
        self.b.op(load(Size::DW, R0, R0, R_MOVED), R1, rp);
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, slow);
        self.b.op(load(Size::W, R0, R0, R_TOP), R2, rp);
        self.b.jmp_imm_to(JmpOp::Ge, R2, INLINE, slow);
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, empty);
        self.load_reg(pos, self.arch().stack_pointer());
        self.b.op(load(Size::DW, R0, R0, R_BASE), R1, rp);
        self.b.op(alu64_reg(AluOp::Sub, R0, R0), pos, R1);
        // The top frame must be above this call (else it is stale: the general path).
        self.b.emit(alu64_imm(AluOp::Sub, R2, 1));
        self.b.emit(alu64_imm(AluOp::And, R2, INLINE - 1));
        self.b.emit(alu64_imm(AluOp::Mul, R2, FRAME));
        self.b.op(mov64_reg(R0, R0), R1, rp);
        self.b.emit(alu64_reg(AluOp::Add, R1, R2));
        self.b.emit(load(Size::DW, R1, R1, R_FRAMES + F_REL));
        self.b.jmp_reg_to(JmpOp::Sle, R1, pos, slow);
        self.b.ja_to(push);
        self.b.bind(empty);
        // Nothing in flight: positions start afresh.
        self.b.op(store_imm(Size::DW, R0, R_BASE, 0), rp, R0);
        self.load_reg(pos, self.arch().stack_pointer());
        self.b.bind(push);
        let func = self.b.vreg();
        self.function_id(span)?;
        self.b.op(mov64_reg(R0, R0), func, R0);
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.op(load(Size::W, R0, R0, R_TOP), R2, rp);
        self.b.jmp_imm_to(JmpOp::Ge, R2, INLINE, slow);
        self.b.emit(store_reg(Size::DW, R10, idx, R2));
        self.b.emit(mov64_reg(R3, R2));
        self.b.emit(alu64_imm(AluOp::Add, R3, 1));
        self.b.op(store_reg(Size::W, R0, R_TOP, R0), rp, R3);
        self.b.emit(alu64_imm(AluOp::And, R2, INLINE - 1));
        self.b.emit(alu64_imm(AluOp::Mul, R2, FRAME));
        self.b.op(alu64_reg(AluOp::Add, R0, R0), R2, rp);
        self.b.emit(store_reg(Size::DW, R2, R_FRAMES + F_TIME, R0));
        self.b.op(store_reg(Size::DW, R0, R_FRAMES + F_REL, R0), R2, pos);
        self.b.op(store_reg(Size::DW, R0, R_FRAMES + F_FUNC, R0), R2, func);
        self.b.ja_to(pushed);
        Ok(())
    }

    /// The common return, in registers: no stack copy to apply, and this call's frame
    /// (position and function `func`) at the top of the record's inline frames. Pops it
    /// and jumps to `found` with R0 = the frame (its index in slot `idx`); otherwise
    /// jumps to `slow`.
    fn fast_pop(&mut self, record: Record, func: VReg, idx: i16, found: Label, slow: Label) {
        let rp = self.b.vreg();
        self.b.comment("the common return: this call's frame on top");
        self.b.load_stack(Size::DW, rp, record.rec);
        self.b.op(load(Size::DW, R0, R0, R_MOVED), R1, rp);
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, slow);
        self.b.op(load(Size::W, R0, R0, R_TOP), R2, rp);
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, slow);
        self.b.jmp_imm_to(JmpOp::Gt, R2, INLINE, slow);
        self.b.emit(alu64_imm(AluOp::Sub, R2, 1));
        self.b.emit(mov64_reg(R4, R2));
        self.b.emit(alu64_imm(AluOp::And, R2, INLINE - 1));
        self.b.emit(alu64_imm(AluOp::Mul, R2, FRAME));
        self.b.op(mov64_reg(R0, R0), R0, rp);
        self.b.emit(alu64_reg(AluOp::Add, R0, R2));
        self.b.emit(alu64_imm(AluOp::Add, R0, i32::from(R_FRAMES)));
        self.load_reg(R3, self.arch().stack_pointer());
        self.b.op(load(Size::DW, R0, R0, R_BASE), R1, rp);
        self.b.emit(alu64_reg(AluOp::Sub, R3, R1));
        self.b.emit(load(Size::DW, R1, R0, F_REL));
        self.b.jmp_reg_to(JmpOp::Ne, R1, R3, slow);
        self.b.emit(load(Size::W, R1, R0, F_FUNC));
        self.b.jmp_reg_to(JmpOp::Ne, R1, func, slow);
        self.b.op(store_reg(Size::W, R0, R_TOP, R0), rp, R4);
        self.b.emit(store_reg(Size::DW, R10, idx, R4));
        self.b.ja_to(found);
    }

    /// Jumps to `not` unless R0 is a frame at this probe's position of function `func`.
    fn frame_is(&mut self, record: Record, func: VReg, not: Label) {
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, not);
        self.b.emit(load(Size::DW, R3, R0, F_REL));
        self.rel_into(R2, record);
        self.b.jmp_reg_to(JmpOp::Ne, R3, R2, not);
        self.b.emit(load(Size::W, R1, R0, F_FUNC));
        self.b.jmp_reg_to(JmpOp::Ne, R1, func, not);
    }

    /// At runtime.copystack(gp, newsize), `gp` at `location`: notes gp's stack top before
    /// the copy in its record (if it has frames in flight and no copy is noted yet); the
    /// next program that reads the record applies the move.
    pub fn note_stack_move(&mut self, gp: &Location, span: Span) -> Result<(), LowerError> {
        let g = self.load_g(Some(gp), span)?;
        let rec = self.slot(8, span)?;
        self.lookup_record(g)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
        self.b.emit(store_reg(Size::DW, R10, rec, R0));
        self.b.emit(load(Size::W, R1, R0, R_TOP));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, self.done);
        self.b.emit(load(Size::DW, R1, R0, R_MOVED));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, self.done);
        let hi = self.stack_hi_slot(g, span)?;
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::DW, R2, R10, hi));
        self.b.emit(store_reg(Size::DW, R1, R_MOVED, R2));
        Ok(())
    }
}
