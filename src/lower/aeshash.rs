//! The Go runtime's aeshash in eBPF, so that `m[k]` (maplookup.rs) finds a key's bucket
//! or probe sequence as the runtime does: here the rounds and the shape where a round
//! XORs its key last (`AesRounds::KeyLast`: runtime/asm_amd64.s `memhash64`,
//! `memhash32`, `aeshashbody`); aeskeyfirst.rs has the shape where it XORs it first.
//!
//! An `AESENC` round is done with T-tables: four tables of 256 u32 (each the S-box
//! entry times the MixColumns column, one rotation apart) in the one-entry array map
//! `aes_tables`, which the runtime fills before anything is attached (the plan's
//! `MapRole::AesTables`, from `t_tables`). One round is 16 table loads and XORs.
//! The keys are the process's `runtime.aeskeysched` (read from the target at its
//! link-time address plus a PIE's load bias) and the map's own seed.
//!
//! String keys (and 1- and 2-byte integer keys, which the runtime hashes as bytes) are
//! hashed up to `MAX_HASHED_STRING` bytes, the runtime's length classes 0, 1-16, 17-32,
//! 33-64 and 65-128: 1, 2, 4 or 8 lanes of 16 bytes, each scrambled three times and
//! XORed together. Longer keys are not hashed (the caller skips the hit, counted).

use super::codegen::Gen;
use super::ir::Arg;
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::plan::{MapKind, MapRole, MapSpec};
use crate::syntax::ast::Span;

/// The map of the four T-tables.
pub const AES_TABLES: &str = "aes_tables";
/// Bytes of one table (256 u32) and of all four.
const TABLE: i32 = 1024;
const TABLES: u32 = 4 * TABLE as u32;
/// The longest string key hashed (the runtime's 65-128 class; longer keys loop).
pub const MAX_HASHED_STRING: u32 = 128;
/// The bytes of `runtime.aeskeysched` that integer keys use (three round keys).
pub const INT_KEYS: u32 = 48;

/// The `aes_tables` map: one entry, the four tables.
pub fn aes_tables_map() -> MapSpec {
    MapSpec {
        object_name: AES_TABLES.into(),
        kind: MapKind::Array,
        key_size: 4,
        value_size: TABLES,
        max_entries: 1,
        role: MapRole::AesTables,
    }
}

/// The AES S-box (FIPS-197 5.1.1): the inverse in GF(2^8) followed by the affine map.
fn sbox() -> [u8; 256] {
    let mul = |mut a: u8, mut b: u8| {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                p ^= a;
            }
            a = (a << 1) ^ if a & 0x80 != 0 { 0x1b } else { 0 };
            b >>= 1;
        }
        p
    };
    let mut s = [0u8; 256];
    for (x, out) in s.iter_mut().enumerate() {
        // x^254 is the inverse of x (0 for 0).
        let mut inv = 1u8;
        for _ in 0..254 {
            inv = mul(inv, x as u8);
        }
        let inv = if x == 0 { 0 } else { inv };
        *out = inv ^ inv.rotate_left(1) ^ inv.rotate_left(2) ^ inv.rotate_left(3) ^ inv.rotate_left(4) ^ 0x63;
    }
    s
}

/// The four T-tables as the `aes_tables` map holds them: table r at 1024 r, entry x the
/// little-endian u32 whose byte i is row i of MixColumns applied to S(x) placed in row
/// r (T0[x] = (2s, s, s, 3s); T1, T2, T3 its rotations by 8, 16, 24 bits).
pub fn t_tables() -> Vec<u8> {
    let s = sbox();
    let mut out = Vec::with_capacity(TABLES as usize);
    for r in 0..4 {
        for &v in &s {
            let two = (v << 1) ^ if v & 0x80 != 0 { 0x1b } else { 0 };
            let t0 = u32::from_le_bytes([two, v, v, two ^ v]);
            out.extend_from_slice(&t0.rotate_left(8 * r).to_le_bytes());
        }
    }
    out
}

/// A round key: the state itself as the round found it (`AESENC X1, X1`; only where the
/// key is XORed last) or 16 bytes on the stack.
#[derive(Clone, Copy)]
pub(super) enum RoundKey {
    Own,
    Slot(i16),
}

/// Where a round XORs its key, the one thing the two instruction sets' rounds differ in:
/// after MixColumns (amd64's `AESENC`: aeshash.rs) or before SubBytes (arm64's `AESE`,
/// `AESMC`: aeskeyfirst.rs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyAt {
    Last,
    First,
}

/// The stack slots a hash works in (released once it is computed).
pub(super) struct AesSlots {
    /// A pointer to the tables (the map value).
    pub tables: i16,
    /// The 16-byte state being scrambled.
    pub state: i16,
    /// Round keys read from the target.
    pub keys: i16,
}

impl Gen<'_> {
    /// The slots of one hash; `keys` bytes for round keys. The tables' address is looked
    /// up; a lookup that fails (it cannot: one entry) jumps to the program's end.
    pub(super) fn aes_slots(&mut self, keys: u32, span: Span) -> Result<AesSlots, LowerError> {
        let a = AesSlots { tables: self.slot(8, span)?, state: self.slot(16, span)?, keys: self.slot(keys, span)? };
        self.b.emit(store_imm(Size::DW, R10, a.state, 0));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(AES_TABLES), Arg::Stack(a.state)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, self.done);
        self.b.emit(store_reg(Size::DW, R10, a.tables, R0));
        Ok(a)
    }

    /// One round on the 16 bytes at `state` with round key `rk`, XORed where `at` says:
    /// SubBytes and ShiftRows through the tables, MixColumns when `mix` (`AESENC` always
    /// mixes). With `lo_only`, only the low 8 bytes are computed (a last round whose high
    /// half nobody reads). Clobbers R0-R5, R9.
    pub(super) fn aes_round(
        &mut self,
        a: &AesSlots,
        state: i16,
        rk: RoundKey,
        (at, mix): (KeyAt, bool),
        lo_only: bool,
    ) {
        self.b.emit(load(Size::DW, R9, R10, a.tables));
        for (reg, half) in [(R1, 0), (R2, 8)] {
            self.b.emit(load(Size::DW, reg, R10, state + half));
            if at == KeyAt::First {
                self.xor_round_key(reg, rk, half);
            }
        }
        self.aes_columns(lo_only, mix);
        if at == KeyAt::Last {
            self.xor_round_key(R3, rk, 0);
            if !lo_only {
                self.xor_round_key(R4, rk, 8);
            }
        }
        self.b.emit(store_reg(Size::DW, R10, state, R3));
        if !lo_only {
            self.b.emit(store_reg(Size::DW, R10, state + 8, R4));
        }
    }

    /// `reg` ^= the half at `half` (0 or 8) of round key `rk` (`Own`: the state the round
    /// found, in R1 and R2). Clobbers R0.
    fn xor_round_key(&mut self, reg: crate::bpf::insn::Reg, rk: RoundKey, half: i16) {
        match rk {
            RoundKey::Own => self.b.emit(alu64_reg(AluOp::Xor, reg, if half == 0 { R1 } else { R2 })),
            RoundKey::Slot(k) => {
                self.b.emit(load(Size::DW, R0, R10, k + half));
                self.b.emit(alu64_reg(AluOp::Xor, reg, R0));
            }
        }
    }

    /// Three rounds of the block at `a.state` with `keys`, the last one low half only
    /// (what the hash takes): MixColumns in the first two, and in the last when
    /// `mix_last`.
    pub(super) fn three_rounds(&mut self, a: &AesSlots, keys: [RoundKey; 3], at: KeyAt, mix_last: bool) {
        for (i, rk) in keys.into_iter().enumerate() {
            self.aes_round(a, a.state, rk, (at, i < 2 || mix_last), i == 2);
        }
    }

    /// R3 and R4 = the low and high halves of SubBytes and ShiftRows of the state in R1
    /// and R2 (R9 points at the tables), then MixColumns when `mix`: each output column
    /// four table loads XORed, or without MixColumns four S-box bytes (byte 1 of T0).
    /// With `lo_only` only R3. Clobbers R0 and R5.
    pub(super) fn aes_columns(&mut self, lo_only: bool, mix: bool) {
        let columns = if lo_only { 2 } else { 4 };
        for c in 0..columns {
            // Output column c takes row r from input column c + r (ShiftRows).
            for r in 0..4u8 {
                let col = (c + r) % 4;
                let word = if col < 2 { R1 } else { R2 };
                let shift = 8 * i32::from(r) + 32 * i32::from(col % 2);
                self.b.emit(mov64_reg(R5, word));
                if shift != 0 {
                    self.b.emit(alu64_imm(AluOp::Rsh, R5, shift));
                }
                self.b.emit(alu64_imm(AluOp::And, R5, 0xff));
                self.b.emit(alu64_imm(AluOp::Lsh, R5, 2));
                self.b.emit(alu64_reg(AluOp::Add, R5, R9));
                if mix {
                    self.b.emit(load(Size::W, R5, R5, TABLE as i16 * i16::from(r)));
                } else {
                    self.b.emit(load(Size::W, R5, R5, 0));
                    self.b.emit(alu64_imm(AluOp::Rsh, R5, 8));
                    self.b.emit(alu64_imm(AluOp::And, R5, 0xff));
                    if r > 0 {
                        self.b.emit(alu64_imm(AluOp::Lsh, R5, 8 * i32::from(r)));
                    }
                }
                if r == 0 {
                    self.b.emit(mov64_reg(R0, R5));
                } else {
                    self.b.emit(alu64_reg(AluOp::Xor, R0, R5));
                }
            }
            let acc = if c < 2 { R3 } else { R4 };
            if c % 2 == 0 {
                self.b.emit(mov64_reg(acc, R0));
            } else {
                self.b.emit(alu64_imm(AluOp::Lsh, R0, 32));
                self.b.emit(alu64_reg(AluOp::Or, acc, R0));
            }
        }
    }

    /// `len` bytes of `runtime.aeskeysched` from `offset` into `dst`: its link-time
    /// address `keysched` plus the load bias (a PIE's).
    pub(super) fn read_aeskeysched(
        &mut self,
        keysched: u64,
        offset: u32,
        dst: i16,
        len: u32,
    ) -> Result<(), LowerError> {
        let src = self.b.vreg();
        self.b.wide(src, keysched + u64::from(offset));
        self.add_bias(src);
        self.read_target(&[Arg::Stack(dst), Arg::Imm(len as i32), src.into()])
    }

    /// Round key `lane` (the number in slot `lane`) into `dst`: the 16 bytes at
    /// `runtime.aeskeysched` + 16 * lane, moved by the load bias (a PIE's).
    pub(super) fn read_round_key(&mut self, keysched: u64, lane: i16, dst: i16) -> Result<(), LowerError> {
        let src = self.b.vreg();
        self.b.wide(src, keysched);
        self.add_bias(src);
        let at = self.b.vreg();
        self.b.load_stack(Size::DW, at, lane);
        self.b.op(alu64_imm(AluOp::Lsh, R0, 4), at, R0);
        self.b.op(alu64_reg(AluOp::Add, R0, R0), src, at);
        self.read_target(&[Arg::Stack(dst), Arg::Imm(16), src.into()])
    }

    /// `memhash64` / `memhash32` of the integer in slot `key` (`size` 8 or 4) with the
    /// seed in slot `seed`, into slot `out`: the state (seed, key) scrambled with the
    /// first three round keys.
    pub(super) fn aeshash_int(
        &mut self,
        keysched: u64,
        key: i16,
        size: u64,
        seed: i16,
        out: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let a = self.aes_slots(INT_KEYS, span)?;
        self.read_aeskeysched(keysched, 0, a.keys, INT_KEYS)?;
        self.b.emit(load(Size::DW, R1, R10, seed));
        self.b.emit(store_reg(Size::DW, R10, a.state, R1));
        self.b.emit(load(Size::DW, R1, R10, key));
        if size == 4 {
            // PINSRD $2: the key in bytes 8..12, the rest of the high half zero.
            self.b.emit(alu32_reg(AluOp::Mov, R1, R1));
        }
        self.b.emit(store_reg(Size::DW, R10, a.state + 8, R1));
        let keys = [0, 16, 32].map(|at| RoundKey::Slot(a.keys + at));
        self.three_rounds(&a, keys, KeyAt::Last, true);
        self.hash_out(a.state, out);
        self.b.frame.release(mark);
        Ok(())
    }

    /// `memhash` of `len` (1 to 8, a constant) bytes: the integer in slot `key`, as the
    /// runtime hashes 1- and 2-byte keys (`memhash8`, `memhash16`), into slot `out`.
    pub(super) fn aeshash_small_int(
        &mut self,
        keysched: u64,
        key: i16,
        len: u64,
        seed: i16,
        out: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let a = self.aes_slots(16, span)?;
        let x0 = self.slot(16, span)?;
        self.b.emit(mov64_imm(R1, len as i32));
        self.aeshash_seed(&a, keysched, seed, x0)?;
        // The data lane: the key's bytes (zero above them) XOR the scrambled seed.
        self.b.emit(load(Size::DW, R1, R10, key));
        self.b.emit(load(Size::DW, R2, R10, x0));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, a.state, R1));
        self.b.emit(load(Size::DW, R1, R10, x0 + 8));
        self.b.emit(store_reg(Size::DW, R10, a.state + 8, R1));
        self.three_rounds(&a, [RoundKey::Own; 3], KeyAt::Last, true);
        self.hash_out(a.state, out);
        self.b.frame.release(mark);
        Ok(())
    }

    /// `strhash` (`aeshashbody`) of the string record in slot `key` (its length, at
    /// most `MAX_HASHED_STRING`, then its bytes, zero after them) with the seed in slot
    /// `seed`, into slot `out`. The length's class gives 1, 2, 4 or 8 lanes: lane 0 is
    /// seeded with the scrambled seed, lane i with the unscrambled one XOR round key i,
    /// scrambled once; the first half of the lanes take the string's first 16-byte
    /// blocks, the second half its last ones (overlapping); each lane is scrambled three
    /// times and the lanes' low halves XORed. The empty string is the seed scrambled
    /// once more.
    pub(super) fn aeshash_string(
        &mut self,
        keysched: u64,
        key: i16,
        seed: i16,
        out: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let a = self.aes_slots(16, span)?;
        let (x0, x1) = (self.slot(16, span)?, self.slot(16, span)?);
        let (acc, lane, lanes) = (self.slot(8, span)?, self.slot(8, span)?, self.slot(8, span)?);
        self.b.emit(load(Size::DW, R1, R10, key));
        self.aeshash_seed(&a, keysched, seed, x0)?;
        let (empty, finish) = (self.b.new_label(), self.b.new_label());
        self.load_unlinked(R1, key);
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, empty);
        // x1: the seed unscrambled.
        self.b.emit(alu64_imm(AluOp::And, R1, 0xffff));
        self.b.emit2(ld_imm64(R2, 0x0001_0001_0001_0001));
        self.b.emit(alu64_reg(AluOp::Mul, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, x1 + 8, R1));
        self.b.emit(load(Size::DW, R1, R10, seed));
        self.b.emit(store_reg(Size::DW, R10, x1, R1));
        // Lanes by length class: 1-16, 17-32, 33-64, 65-128.
        self.load_unlinked(R1, key);
        let classes = [(16, 1), (32, 2), (64, 4), (MAX_HASHED_STRING as i32, 8)];
        self.each_lane(&a, (acc, lane, lanes), &classes, finish, |g| {
            g.lane_seed(&a, keysched, x0, x1, lane)?;
            g.lane_block(&a, key, lane, lanes);
            g.three_rounds(&a, [RoundKey::Own; 3], KeyAt::Last, true);
            Ok(())
        })?;
        self.b.bind(empty);
        self.aes_round(&a, x0, RoundKey::Own, (KeyAt::Last, true), true);
        self.b.emit(load(Size::DW, R1, R10, x0));
        self.b.emit(store_reg(Size::DW, R10, acc, R1));
        self.b.bind(finish);
        self.hash_out(acc, out);
        self.b.frame.release(mark);
        Ok(())
    }

    /// The lanes of a string of R1 bytes: `lanes` = the `n` of the first of `classes`
    /// (`(most bytes, n)`) that holds it, then for each lane `lane` in turn `one_lane`
    /// (which leaves the lane's hash in the low half of `a.state`) XORed into `acc`
    /// (zeroed first); then on to `finish`.
    pub(super) fn each_lane(
        &mut self,
        a: &AesSlots,
        (acc, lane, lanes): (i16, i16, i16),
        classes: &[(i32, i32)],
        finish: Label,
        one_lane: impl FnOnce(&mut Self) -> Result<(), LowerError>,
    ) -> Result<(), LowerError> {
        let (classed, head) = (self.b.new_label(), self.b.new_label());
        for &(most, n) in classes {
            self.b.emit(store_imm(Size::DW, R10, lanes, n));
            self.b.jmp_imm_to(JmpOp::Le, R1, most, classed);
        }
        self.b.bind(classed);
        self.b.emit(store_imm(Size::DW, R10, acc, 0));
        self.b.emit(store_imm(Size::DW, R10, lane, 0));
        self.b.bind(head);
        self.b.emit(load(Size::DW, R1, R10, lane));
        self.b.emit(load(Size::DW, R2, R10, lanes));
        self.b.jmp_reg_to(JmpOp::Ge, R1, R2, finish);
        one_lane(self)?;
        self.b.emit(load(Size::DW, R1, R10, a.state));
        self.b.emit(load(Size::DW, R2, R10, acc));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, acc, R1));
        self.b.emit(load(Size::DW, R1, R10, lane));
        self.b.emit(alu64_imm(AluOp::Add, R1, 1));
        self.b.emit(store_reg(Size::DW, R10, lane, R1));
        self.b.ja_to(head);
        Ok(())
    }

    /// The hash: the low 8 bytes at `from` into slot `out`.
    pub(super) fn hash_out(&mut self, from: i16, out: i16) {
        self.b.emit(load(Size::DW, R0, R10, from));
        self.b.emit(store_reg(Size::DW, R10, out, R0));
    }

    /// The state of lane `lane`: the scrambled seed `x0` for lane 0, else `x1` XOR round
    /// key `lane`, scrambled once with itself.
    fn lane_seed(&mut self, a: &AesSlots, keysched: u64, x0: i16, x1: i16, lane: i16) -> Result<(), LowerError> {
        self.lane_start(a, keysched, lane, (x0, a.state), |g| {
            for half in [0, 8] {
                g.b.emit(load(Size::DW, R1, R10, x1 + half));
                g.b.emit(load(Size::DW, R2, R10, a.keys + half));
                g.b.emit(alu64_reg(AluOp::Xor, R1, R2));
                g.b.emit(store_reg(Size::DW, R10, a.state + half, R1));
            }
            g.aes_round(a, a.state, RoundKey::Own, (KeyAt::Last, true), false);
        })
    }

    /// What a lane starts from, into `dst`: `x0` for lane 0; else round key `lane` read
    /// into `a.keys`, then `scramble` (the shape's own). R0 = 0 after it.
    pub(super) fn lane_start(
        &mut self,
        a: &AesSlots,
        keysched: u64,
        lane: i16,
        (x0, dst): (i16, i16),
        scramble: impl FnOnce(&mut Self),
    ) -> Result<(), LowerError> {
        let (other, done) = (self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R1, R10, lane));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, other);
        for half in [0, 8] {
            self.b.emit(load(Size::DW, R1, R10, x0 + half));
            self.b.emit(store_reg(Size::DW, R10, dst + half, R1));
        }
        self.b.ja_to(done);
        self.b.bind(other);
        self.read_round_key(keysched, lane, a.keys)?;
        scramble(self);
        self.b.bind(done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// XORs lane `lane`'s 16-byte block of the string into the state: at 16 * lane in
    /// the first half of the lanes, at len - 16 * (lanes - lane) in the second (at 0 with
    /// one lane), read byte by byte (the offset varies; the stack allows no unaligned
    /// wider loads).
    pub(super) fn lane_block(&mut self, a: &AesSlots, key: i16, lane: i16, lanes: i16) {
        let (first, at) = (self.b.new_label(), self.b.new_label());
        self.b.emit(load(Size::DW, R1, R10, lane));
        self.b.emit(load(Size::DW, R2, R10, lanes));
        self.b.emit(mov64_reg(R3, R2));
        self.b.emit(alu64_imm(AluOp::Rsh, R3, 1));
        self.b.jmp_reg_to(JmpOp::Lt, R1, R3, first);
        // The second half (or the one lane): len - 16 * (lanes - lane), at least 0.
        self.b.emit(alu64_reg(AluOp::Sub, R2, R1));
        self.b.emit(alu64_imm(AluOp::Lsh, R2, 4));
        self.b.emit(load(Size::DW, R1, R10, key));
        self.b.emit(alu64_reg(AluOp::Sub, R1, R2));
        self.b.jmp_imm_to(JmpOp::Sge, R1, 0, at);
        self.b.emit(mov64_imm(R1, 0));
        self.b.ja_to(at);
        self.b.bind(first);
        self.b.emit(alu64_imm(AluOp::Lsh, R1, 4));
        self.b.bind(at);
        // Within the buffer whatever the verifier knows of the length.
        let bounded = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Le, R1, (MAX_HASHED_STRING - 16) as i32, bounded);
        self.b.emit(mov64_imm(R1, (MAX_HASHED_STRING - 16) as i32));
        self.b.bind(bounded);
        self.b.emit(mov64_reg(R4, R10));
        self.b.emit(alu64_imm(AluOp::Add, R4, i32::from(key) + 8));
        self.b.emit(alu64_reg(AluOp::Add, R4, R1));
        for half in [0i16, 8] {
            self.b.emit(mov64_imm(R2, 0));
            for j in 0..8 {
                self.b.emit(load(Size::B, R1, R4, half + j));
                if j > 0 {
                    self.b.emit(alu64_imm(AluOp::Lsh, R1, 8 * i32::from(j)));
                }
                self.b.emit(alu64_reg(AluOp::Or, R2, R1));
            }
            self.b.emit(load(Size::DW, R1, R10, a.state + half));
            self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
            self.b.emit(store_reg(Size::DW, R10, a.state + half, R1));
        }
    }

    /// `reg` = the word in `slot`, as a value of its own: what a branch then learns of
    /// it stays with the register, not the slot (so that every length class's path
    /// leaves the stack alike and the verifier walks what follows once, not per class).
    pub(super) fn load_unlinked(&mut self, reg: crate::bpf::insn::Reg, slot: i16) {
        self.b.emit(load(Size::DW, reg, R10, slot));
        self.b.emit(alu64_imm(AluOp::Or, reg, 0));
    }

    /// The start of `aeshashbody` for a key of R1 bytes: `x0` = (seed, the length's low
    /// 16 bits four times) XOR the first round key, scrambled once with itself. Uses
    /// `a.keys` (16 bytes) and `a.state`.
    pub(super) fn aeshash_seed(&mut self, a: &AesSlots, keysched: u64, seed: i16, x0: i16) -> Result<(), LowerError> {
        self.b.emit(alu64_imm(AluOp::And, R1, 0xffff));
        self.b.emit2(ld_imm64(R2, 0x0001_0001_0001_0001));
        self.b.emit(alu64_reg(AluOp::Mul, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, x0 + 8, R1));
        self.b.emit(load(Size::DW, R1, R10, seed));
        self.b.emit(store_reg(Size::DW, R10, x0, R1));
        self.read_aeskeysched(keysched, 0, a.keys, 16)?;
        for half in [0, 8] {
            self.b.emit(load(Size::DW, R1, R10, x0 + half));
            self.b.emit(load(Size::DW, R2, R10, a.keys + half));
            self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
            self.b.emit(store_reg(Size::DW, R10, x0 + half, R1));
        }
        self.aes_round(a, x0, RoundKey::Own, (KeyAt::Last, true), false);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sbox_and_tables_are_fips_197s() {
        let s = sbox();
        // FIPS-197 figure 7: S(0x00) = 0x63, S(0x53) = 0xed, S(0xff) = 0x16.
        assert_eq!((s[0x00], s[0x53], s[0xff]), (0x63, 0xed, 0x16));
        let mut seen = [false; 256];
        s.iter().for_each(|&v| seen[v as usize] = true);
        assert!(seen.iter().all(|&b| b), "the S-box is a permutation");
        let t = t_tables();
        assert_eq!(t.len(), TABLES as usize);
        let entry = |r: usize, x: usize| u32::from_le_bytes(t[1024 * r + 4 * x..][..4].try_into().unwrap());
        // S(0x01) = 0x7c: T0 = (0xf8, 0x7c, 0x7c, 0x84).
        assert_eq!(entry(0, 1), u32::from_le_bytes([0xf8, 0x7c, 0x7c, 0x84]));
        assert_eq!(entry(3, 1), entry(0, 1).rotate_left(24));
    }
}
