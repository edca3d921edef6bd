//! `m[k]` as the runtime looks a key up: hash the key as the process's runtime does
//! (aeshash.rs or aeskeyfirst.rs, in the shape of its CPU's AES instructions, with its
//! `aeskeysched`, or, where `useAeshash` is false, memhash.rs with its `hashkey`; both
//! with the map's seed), then look at one bucket chain (Go 1.17 to
//! 1.23: bucket `hash & (2^B - 1)`, or its old bucket while the map grows and that one
//! is not yet evacuated; slots whose tophash is the hash's top byte) or one probe
//! sequence (Go 1.24 and later: the directory's table for the hash's top bits, then its
//! groups from `H1 & mask` in the quadratic sequence, slots whose control byte is `H2`,
//! until a group with an empty slot; a small map is its one group). Slots are picked by
//! the byte match, so a hit compares about one key.
//!
//! A chain or sequence longer than `MAX_STEPS` buckets or groups (which the runtime's
//! load factors make all but impossible) ends the hit as skipped, counted; so does a
//! string key longer than the hash computed here takes.
//!
//! For the verifier: the walk's loop carries no constant but its step counter, a slot's
//! string key is read at once and compared word by word without branches, and the
//! length classes' branches work on copies of the length (`load_unlinked`), so the paths
//! of a step meet again and the verifier keeps few states (one string `m[k]` adds about
//! 0.1 s to `--check`).

use super::aeshash::MAX_HASHED_STRING;
use super::codegen::Gen;
use super::ir::Arg;
use super::mapwalk::{Key, SLOTS};
use super::memhash::MAX_FALLBACK_STRING;
use super::LowerError;
use crate::arch::AesRounds;
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::gobin::{AesGlobals, MapLayout};
use crate::plan::Counter;
use crate::syntax::ast::Span;

/// Buckets of one chain, or groups of one probe sequence, looked at before the hit is
/// skipped.
pub const MAX_STEPS: i32 = 16;
/// `minTopHash` of the bucket layout: tophash values below it mark empty or evacuated
/// slots; a hash's top byte below it is raised by it.
const MIN_TOP_HASH: i32 = 5;
/// Tophash values of an evacuated bucket's first slot: evacuatedX, Y, Empty.
const EVACUATED: (i32, i32) = (2, 4);
/// `sameSizeGrow` in hmap.flags.
const SAME_SIZE_GROW: i32 = 8;
/// Bytes of a map header read at once.
const HEADER: u32 = 48;
/// Bytes each control byte matches against, repeated (`bitsetLSB`), and their top bits.
const LSB: u64 = 0x0101_0101_0101_0101;
const MSB: u64 = 0x8080_8080_8080_8080;

/// The stack slots of the walk.
struct Walk {
    hdr: i16,
    hash: i16,
    cur: i16,
    ctrl: i16,
    matches: i16,
    steps: i16,
    /// Swiss: the probe sequence's index and offset, the table's groups and mask, and
    /// whether the map is small (one group).
    index: i16,
    offset: i16,
    data: i16,
    mask: i16,
    small: i16,
    tag: i16,
    /// A string key's bytes in the slot being compared (allocated once the hash is
    /// done, where its temporaries were).
    cmp: i16,
    tmp: i16,
}

/// Whether every header field a lookup reads is within the `HEADER` bytes it reads at
/// once (true of every release; a layout from another's DWARF might not be: then the
/// map is scanned).
pub(super) fn header_fits(layout: &MapLayout) -> bool {
    let last = match *layout {
        MapLayout::Buckets { flags, b, hash0, buckets, oldbuckets } => {
            [flags + 1, b + 1, hash0 + 4, buckets + 8, oldbuckets + 8]
        }
        MapLayout::Swiss { seed, dir_ptr, dir_len, global_shift, .. } => {
            [seed + 8, dir_ptr + 8, dir_len + 8, global_shift + 1, 0]
        }
    };
    last.iter().all(|&end| end <= HEADER)
}

impl Gen<'_> {
    /// Looks the key up in the map whose header address is in R0; the element's address
    /// goes to slot `found` (0 when absent).
    pub(super) fn hashed_lookup(
        &mut self,
        k: &Key,
        layout: &MapLayout,
        aes: AesGlobals,
        found: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mut w = self.walk_slots(span)?;
        self.b.emit(store_reg(Size::DW, R10, w.cur, R0));
        self.b.emit(store_imm(Size::DW, R10, found, 0));
        let (absent, hit, skipped) = (self.b.new_label(), self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R3, R10, w.cur));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, absent);
        self.b.comment("m[k]: the map's header");
        for i in 0..(HEADER / 8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, w.hdr + 8 * i, 0));
        }
        self.read_user_n(w.hdr, HEADER as i32, R3)?;
        self.b.emit(load(Size::DW, R1, R10, w.hdr));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, absent);
        let (seed, seed_size) = match *layout {
            MapLayout::Buckets { hash0, .. } => (hash0, Size::W),
            MapLayout::Swiss { seed, .. } => (seed, Size::DW),
        };
        self.b.emit(load(seed_size, R1, R10, w.hdr + seed as i16));
        self.b.emit(store_reg(Size::DW, R10, w.tmp, R1));
        self.key_hash(k, aes, &w, span)?;
        if k.string {
            // Where the hash's temporaries were.
            w.cmp = self.slot(MAX_HASHED_STRING, span)?;
        }
        match *layout {
            MapLayout::Buckets { flags, b, buckets, oldbuckets, .. } => {
                self.first_bucket(k, &w, [flags, b, buckets, oldbuckets])?
            }
            MapLayout::Swiss { dir_ptr, dir_len, global_shift, groups_data, groups_mask, .. } => {
                self.first_group(k, &w, [dir_ptr, dir_len, global_shift, groups_data, groups_mask], absent)?
            }
        }
        let head = self.b.new_label();
        self.b.emit(store_imm(Size::DW, R10, w.steps, 0));
        self.b.bind(head);
        self.b.emit(load(Size::DW, R1, R10, w.steps));
        self.b.jmp_imm_to(JmpOp::Sge, R1, MAX_STEPS, skipped);
        self.b.emit(alu64_imm(AluOp::Add, R1, 1));
        self.b.emit(store_reg(Size::DW, R10, w.steps, R1));
        let step_end = self.b.new_label();
        self.match_slots(k, &w, found, step_end, hit)?;
        self.b.bind(step_end);
        match layout {
            MapLayout::Buckets { .. } => {
                // The next bucket of the chain.
                self.b.emit(store_imm(Size::DW, R10, w.tmp, 0));
                self.b.emit(load(Size::DW, R3, R10, w.cur));
                self.b.emit(alu64_imm(AluOp::Add, R3, k.slots.overflow as i32));
                self.read_user_n(w.tmp, 8, R3)?;
                self.b.emit(load(Size::DW, R1, R10, w.tmp));
                self.b.jmp_imm_to(JmpOp::Eq, R1, 0, absent);
                self.b.emit(store_reg(Size::DW, R10, w.cur, R1));
            }
            MapLayout::Swiss { .. } => self.next_group(k, &w, absent),
        }
        self.b.ja_to(head);
        self.b.bind(skipped);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why =
                format!("m[k] looked at {MAX_STEPS} buckets or groups of one chain or probe sequence without its end");
            self.count(Counter::Skipped { program, why }, span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(absent);
        self.b.emit(store_imm(Size::DW, R10, found, 0));
        self.b.bind(hit);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// The runtime's hash of the key, with the seed in `w.tmp`, into `w.hash`: aeshash
    /// where the process's runtime uses AES, else its memhash (or the hit skipped when
    /// its keys were not found).
    fn key_hash(&mut self, k: &Key, aes: AesGlobals, w: &Walk, span: Span) -> Result<(), LowerError> {
        self.b.comment("m[k]: the key's hash");
        let (aes_on, hashed) = (self.b.new_label(), self.b.new_label());
        self.uses_aeshash(aes, w, aes_on)?;
        match aes.hashkey {
            Some(hashkey) => {
                let too_long = self.b.new_label();
                self.memhash_key(k, (hashkey, self.binary.memhash_constants), (w.tmp, w.hash), too_long, span)?;
                self.b.ja_to(hashed);
                if k.string {
                    self.b.bind(too_long);
                    let why = format!(
                        "m[k] with a string key longer than {MAX_FALLBACK_STRING} bytes in a process whose runtime \
                         hashes without AES (memhash)"
                    );
                    self.skip_hit(why, span)?;
                }
            }
            None => {
                let why = "m[k] in a process whose runtime hashes maps without AES (memhash), whose keys gtrace \
                           did not find"
                    .to_string();
                self.skip_hit(why, span)?;
            }
        }
        self.b.bind(aes_on);
        self.hash_key(k, aes, w.tmp, w.hash, span)?;
        self.b.bind(hashed);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    fn walk_slots(&mut self, span: Span) -> Result<Walk, LowerError> {
        let hdr = self.slot(HEADER, span)?;
        let mut w = || self.slot(8, span);
        let (hash, cur, ctrl, matches, steps) = (w()?, w()?, w()?, w()?, w()?);
        let (index, offset, data, mask, small, tag) = (w()?, w()?, w()?, w()?, w()?, w()?);
        let tmp = self.slot(16, span)?;
        Ok(Walk { hdr, hash, cur, ctrl, matches, steps, index, offset, data, mask, small, tag, cmp: 0, tmp })
    }

    /// Jumps to `aes_on` when the process's runtime hashes with AES.
    fn uses_aeshash(&mut self, aes: AesGlobals, w: &Walk, aes_on: Label) -> Result<(), LowerError> {
        self.b.emit(store_imm(Size::DW, R10, w.ctrl, 0));
        self.b.emit2(ld_imm64(R3, aes.use_aeshash));
        self.add_bias(R3);
        self.read_user_n(w.ctrl, 1, R3)?;
        self.b.emit(load(Size::DW, R1, R10, w.ctrl));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, aes_on);
        Ok(())
    }

    /// Ends the hit as skipped, counted with `why`.
    fn skip_hit(&mut self, why: String, span: Span) -> Result<(), LowerError> {
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            self.count(Counter::Skipped { program, why }, span)?;
        }
        self.b.ja_to(self.done);
        Ok(())
    }

    /// The runtime's AES hash of the key with the seed in slot `seed`, into slot `out`,
    /// in the shape of the runtime's instructions (`AesRounds`).
    pub(super) fn hash_key(
        &mut self,
        k: &Key,
        aes: AesGlobals,
        seed: i16,
        out: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let keysched = aes.aeskeysched;
        match (aes.rounds, k.string, k.size) {
            (AesRounds::KeyLast, false, 8 | 4) => self.aeshash_int(keysched, k.key, k.size, seed, out, span),
            (AesRounds::KeyLast, false, size) => self.aeshash_small_int(keysched, k.key, size, seed, out, span),
            (AesRounds::KeyLast, true, _) => self.aeshash_string(keysched, k.key, seed, out, span),
            (AesRounds::KeyFirst { int32_low, .. }, false, 8 | 4) => {
                self.key_first_int(keysched, (k.key, k.size), int32_low, seed, out, span)
            }
            (AesRounds::KeyFirst { short_mixed, .. }, false, size) => {
                self.key_first_small_int((keysched, short_mixed), (k.key, size), seed, out, span)
            }
            (AesRounds::KeyFirst { short_mixed, .. }, true, _) => {
                self.key_first_string((keysched, short_mixed), k.key, seed, out, span)
            }
        }
    }

    /// Buckets: the bucket of the hash (or its old bucket while the map grows, unless
    /// evacuated) into `cur`, the hash's tophash into `tag`.
    fn first_bucket(&mut self, k: &Key, w: &Walk, [flags, b, buckets, oldbuckets]: [u32; 4]) -> Result<(), LowerError> {
        let size = k.slots.size as i32;
        // mask = 2^B - 1 (B < 64).
        self.b.emit(load(Size::B, R1, R10, w.hdr + b as i16));
        self.b.emit(alu64_imm(AluOp::And, R1, 63));
        self.b.emit(mov64_imm(R2, 1));
        self.b.emit(alu64_reg(AluOp::Lsh, R2, R1));
        self.b.emit(alu64_imm(AluOp::Sub, R2, 1));
        self.b.emit(store_reg(Size::DW, R10, w.mask, R2));
        self.b.emit(load(Size::DW, R1, R10, w.hash));
        self.b.emit(alu64_reg(AluOp::And, R1, R2));
        self.b.emit(alu64_imm(AluOp::Mul, R1, size));
        self.b.emit(load(Size::DW, R2, R10, w.hdr + buckets as i16));
        self.b.emit(alu64_reg(AluOp::Add, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, w.cur, R1));
        let chosen = self.b.new_label();
        self.b.emit(load(Size::DW, R3, R10, w.hdr + oldbuckets as i16));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, chosen);
        let same = self.b.new_label();
        self.b.emit(load(Size::DW, R2, R10, w.mask));
        self.b.emit(load(Size::B, R1, R10, w.hdr + flags as i16));
        self.b.jmp_imm_to(JmpOp::Set, R1, SAME_SIZE_GROW, same);
        self.b.emit(alu64_imm(AluOp::Rsh, R2, 1));
        self.b.bind(same);
        self.b.emit(load(Size::DW, R1, R10, w.hash));
        self.b.emit(alu64_reg(AluOp::And, R1, R2));
        self.b.emit(alu64_imm(AluOp::Mul, R1, size));
        self.b.emit(alu64_reg(AluOp::Add, R3, R1));
        self.b.emit(store_reg(Size::DW, R10, w.data, R3));
        // The old bucket holds the key unless it was evacuated (tophash[0] in 2..=4).
        self.b.emit(store_imm(Size::DW, R10, w.tmp, 0));
        self.read_user_n(w.tmp, 1, R3)?;
        self.b.emit(load(Size::DW, R1, R10, w.tmp));
        self.b.emit(alu64_imm(AluOp::Sub, R1, EVACUATED.0));
        self.b.jmp_imm_to(JmpOp::Le, R1, EVACUATED.1 - EVACUATED.0, chosen);
        self.b.emit(load(Size::DW, R1, R10, w.data));
        self.b.emit(store_reg(Size::DW, R10, w.cur, R1));
        self.b.bind(chosen);
        // tophash: the top byte, raised by minTopHash when below it (branchless).
        self.b.emit(load(Size::DW, R1, R10, w.hash));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, 56));
        self.b.emit(mov64_reg(R2, R1));
        self.b.emit(alu64_imm(AluOp::Sub, R2, MIN_TOP_HASH));
        self.b.emit(alu64_imm(AluOp::Rsh, R2, 63));
        self.b.emit(alu64_imm(AluOp::Mul, R2, MIN_TOP_HASH));
        self.b.emit(alu64_reg(AluOp::Add, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, w.tag, R1));
        Ok(())
    }

    /// Swiss: the first group of the hash's probe sequence into `cur` (a small map's one
    /// group), H2 into `tag`.
    fn first_group(&mut self, k: &Key, w: &Walk, offs: [u32; 5], absent: Label) -> Result<(), LowerError> {
        let [dir_ptr, dir_len, global_shift, groups_data, groups_mask] = offs;
        self.b.emit(load(Size::DW, R1, R10, w.hash));
        self.b.emit(alu64_imm(AluOp::And, R1, 0x7f));
        self.b.emit(store_reg(Size::DW, R10, w.tag, R1));
        self.b.emit(store_imm(Size::DW, R10, w.index, 0));
        self.b.emit(store_imm(Size::DW, R10, w.offset, 0));
        self.b.emit(store_imm(Size::DW, R10, w.mask, 0));
        self.b.emit(load(Size::DW, R1, R10, w.hdr + dir_ptr as i16));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, absent);
        self.b.emit(store_reg(Size::DW, R10, w.cur, R1));
        self.b.emit(store_reg(Size::DW, R10, w.data, R1));
        // small = dirLen == 0, without a branch.
        self.b.emit(load(Size::DW, R2, R10, w.hdr + dir_len as i16));
        self.b.emit(mov64_reg(R3, R2));
        self.b.emit(neg64(R3));
        self.b.emit(alu64_reg(AluOp::Or, R3, R2));
        self.b.emit(alu64_imm(AluOp::Rsh, R3, 63));
        self.b.emit(alu64_imm(AluOp::Xor, R3, 1));
        self.b.emit(store_reg(Size::DW, R10, w.small, R3));
        let done = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Ne, R3, 0, done);
        // The directory's index: hash >> globalShift (0 with one table); then the table.
        let one = self.b.new_label();
        self.b.emit(mov64_imm(R4, 0));
        self.b.jmp_imm_to(JmpOp::Eq, R2, 1, one);
        self.b.emit(load(Size::B, R3, R10, w.hdr + global_shift as i16));
        self.b.emit(alu64_imm(AluOp::And, R3, 63));
        self.b.emit(load(Size::DW, R4, R10, w.hash));
        self.b.emit(alu64_reg(AluOp::Rsh, R4, R3));
        self.b.jmp_reg_to(JmpOp::Ge, R4, R2, absent);
        self.b.bind(one);
        self.b.emit(alu64_imm(AluOp::Lsh, R4, 3));
        self.b.emit(load(Size::DW, R3, R10, w.data));
        self.b.emit(alu64_reg(AluOp::Add, R3, R4));
        self.b.emit(store_imm(Size::DW, R10, w.tmp, 0));
        self.read_user_n(w.tmp, 8, R3)?;
        self.b.emit(load(Size::DW, R3, R10, w.tmp));
        self.b.jmp_imm_to(JmpOp::Eq, R3, 0, absent);
        // The table's groups and mask (read into the header's place).
        self.b.emit(mov64_reg(R1, R3));
        self.b.emit(store_reg(Size::DW, R10, w.tmp, R1));
        for (field, slot) in [(groups_data, w.data), (groups_mask, w.mask)] {
            self.b.emit(store_imm(Size::DW, R10, slot, 0));
            self.b.emit(load(Size::DW, R3, R10, w.tmp));
            self.b.emit(alu64_imm(AluOp::Add, R3, field as i32));
            self.read_user_n(slot, 8, R3)?;
        }
        self.b.emit(load(Size::DW, R1, R10, w.hash));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, 7));
        self.b.emit(load(Size::DW, R2, R10, w.mask));
        self.b.emit(alu64_reg(AluOp::And, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, w.offset, R1));
        self.b.emit(alu64_imm(AluOp::Mul, R1, k.slots.size as i32));
        self.b.emit(load(Size::DW, R2, R10, w.data));
        self.b.emit(alu64_reg(AluOp::Add, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, w.cur, R1));
        self.b.bind(done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Swiss: after a group without the key, absent if the group has an empty slot (or
    /// the map is small), else the next group of the quadratic probe sequence.
    fn next_group(&mut self, k: &Key, w: &Walk, absent: Label) {
        self.b.emit(load(Size::DW, R1, R10, w.ctrl));
        self.b.emit(mov64_reg(R2, R1));
        self.b.emit(alu64_imm(AluOp::Lsh, R2, 6));
        self.b.emit(alu64_imm(AluOp::Xor, R2, -1));
        self.b.emit(alu64_reg(AluOp::And, R1, R2));
        self.b.emit2(ld_imm64(R2, MSB));
        self.b.emit(alu64_reg(AluOp::And, R1, R2));
        self.b.emit(load(Size::DW, R2, R10, w.small));
        self.b.emit(alu64_reg(AluOp::Or, R1, R2));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, absent);
        self.b.emit(load(Size::DW, R1, R10, w.index));
        self.b.emit(alu64_imm(AluOp::Add, R1, 1));
        self.b.emit(store_reg(Size::DW, R10, w.index, R1));
        self.b.emit(load(Size::DW, R2, R10, w.offset));
        self.b.emit(alu64_reg(AluOp::Add, R2, R1));
        self.b.emit(load(Size::DW, R1, R10, w.mask));
        self.b.emit(alu64_reg(AluOp::And, R2, R1));
        self.b.emit(store_reg(Size::DW, R10, w.offset, R2));
        self.b.emit(alu64_imm(AluOp::Mul, R2, k.slots.size as i32));
        self.b.emit(load(Size::DW, R1, R10, w.data));
        self.b.emit(alu64_reg(AluOp::Add, R2, R1));
        self.b.emit(store_reg(Size::DW, R10, w.cur, R2));
    }

    /// The slots of the bucket or group at `cur` whose control byte is `tag`, each
    /// compared with the key (one read when the byte matches, none otherwise); a slot
    /// whose key equals it puts its element's address in `found` and jumps to `hit`.
    fn match_slots(&mut self, k: &Key, w: &Walk, found: i16, step_end: Label, hit: Label) -> Result<(), LowerError> {
        self.b.emit(store_imm(Size::DW, R10, w.ctrl, 0));
        self.b.emit(load(Size::DW, R3, R10, w.cur));
        self.read_user_n(w.ctrl, 8, R3)?;
        // matches: bit 8i+7 set when byte i of ctrl equals tag (exact, no borrow).
        self.b.emit(load(Size::DW, R1, R10, w.tag));
        self.b.emit2(ld_imm64(R2, LSB));
        self.b.emit(alu64_reg(AluOp::Mul, R1, R2));
        self.b.emit(load(Size::DW, R2, R10, w.ctrl));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
        self.b.emit2(ld_imm64(R2, !MSB));
        self.b.emit(mov64_reg(R3, R1));
        self.b.emit(alu64_reg(AluOp::And, R3, R2));
        self.b.emit(alu64_reg(AluOp::Add, R3, R2));
        self.b.emit(alu64_reg(AluOp::Or, R3, R1));
        self.b.emit(alu64_reg(AluOp::Or, R3, R2));
        self.b.emit(alu64_imm(AluOp::Xor, R3, -1));
        self.b.emit(store_reg(Size::DW, R10, w.matches, R3));
        // Each slot whose byte matched (unrolled: no loop state for the verifier to
        // keep apart).
        for i in 0..SLOTS {
            let skip = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R10, w.matches));
            self.b.emit(alu64_imm(AluOp::Rsh, R1, 8 * i as i32 + 7));
            self.b.emit(alu64_imm(AluOp::And, R1, 1));
            self.b.jmp_imm_to(JmpOp::Eq, R1, 0, skip);
            self.b.emit(load(Size::DW, R3, R10, w.cur));
            self.b.emit(alu64_imm(AluOp::Add, R3, (k.slots.key + i * k.slots.key_stride) as i32));
            if k.string {
                self.string_key_differs(k, w, skip)?;
            } else {
                self.b.emit(store_imm(Size::DW, R10, w.tmp, 0));
                self.read_user_n(w.tmp, k.size as i32, R3)?;
                self.b.emit(load(Size::DW, R1, R10, w.tmp));
                self.b.emit(load(Size::DW, R2, R10, k.key));
                self.b.jmp_reg_to(JmpOp::Ne, R1, R2, skip);
            }
            // Equal: the element's address.
            self.b.emit(load(Size::DW, R1, R10, w.cur));
            self.b.emit(alu64_imm(AluOp::Add, R1, (k.slots.elem + i * k.slots.elem_stride) as i32));
            self.b.emit(store_reg(Size::DW, R10, found, R1));
            self.b.ja_to(hit);
            self.b.bind(skip);
            self.b.emit(mov64_imm(R0, 0));
        }
        self.b.ja_to(step_end);
        Ok(())
    }

    /// With R3 the address of a slot's string key: jumps to `differ` unless it has the
    /// key's length and bytes (read at once into `cmp`, compared word by word without
    /// branches: the fewer paths, the fewer states the verifier must tell apart).
    fn string_key_differs(&mut self, k: &Key, w: &Walk, differ: Label) -> Result<(), LowerError> {
        self.read_user_n(w.tmp, 16, R3)?;
        self.b.emit(load(Size::DW, R1, R10, w.tmp + 8));
        self.b.emit(load(Size::DW, R2, R10, k.key));
        self.b.jmp_reg_to(JmpOp::Ne, R1, R2, differ);
        for i in 0..(MAX_HASHED_STRING / 8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, w.cmp + 8 * i, 0));
        }
        // The slot's length as read bounds the read (the verifier's precision tracking
        // then stops at this read, not where the key was built).
        self.b.emit(load(Size::DW, R2, R10, w.tmp + 8));
        self.b.jmp_imm_to(JmpOp::Gt, R2, MAX_HASHED_STRING as i32, differ);
        let src = self.b.vreg();
        self.b.load_stack(Size::DW, src, w.tmp);
        self.read_target(&[Arg::Stack(w.cmp), R2.into(), src.into()])?;
        self.b.emit(mov64_imm(R0, 0));
        for i in 0..(MAX_HASHED_STRING / 8) as i16 {
            self.b.emit(load(Size::DW, R1, R10, w.cmp + 8 * i));
            self.b.emit(load(Size::DW, R2, R10, k.key + 8 + 8 * i));
            self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
            self.b.emit(alu64_reg(AluOp::Or, R0, R1));
        }
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, differ);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_releases_header_fits_the_bytes_read() {
        for minor in 17..=27 {
            let layout = crate::gobin::Target::map_layout_for_version(&format!("go1.{minor}.0")).expect("a layout");
            assert!(header_fits(&layout), "go1.{minor}");
        }
        let far = MapLayout::Buckets { flags: 8, b: 9, hash0: 12, buckets: 16, oldbuckets: 48 };
        assert!(!header_fits(&far));
    }
}
