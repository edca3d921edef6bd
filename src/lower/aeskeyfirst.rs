//! The Go runtime's aeshash where a round XORs its key first (`AesRounds::KeyFirst`:
//! arm64's `AESE`, then `AESMC`; runtime/asm_arm64.s `memhash64`, `memhash32`,
//! `aeshashbody`, since Go 1.27 internal/runtime/maps/memhash_arm64.s), with the tables,
//! slots and round (`aes_round` with `KeyAt::First`) of aeshash.rs. What differs from the
//! other shape:
//!
//! - A round is state = MixColumns(ShiftRows(SubBytes(state ^ key))); the last round of
//!   an integer key or of a lane of a key over 16 bytes has no MixColumns.
//! - Integer keys: the state is (seed, key) (a 4-byte key up to Go 1.26: the seed's low
//!   32 bits, then the key, then zeros), scrambled three times with round key 0.
//! - Byte keys: `x0` = round(round key 0 ^ (seed, length)). The empty key's hash is `x0`.
//!   1 to 16 bytes: the bytes (1 to 15 placed in 8-, 4-, 2- and 1-byte pieces at bytes
//!   0, 8, 12 and 14 of the block, each piece there only when that bit of the length is
//!   set) scrambled three times with key `x0`, MixColumns in the last one since Go 1.21. 17 to 128 bytes: 2,
//!   4 or 8 lanes, lane i keyed by `x0` (i = 0) or round(round key i ^ (seed, length)),
//!   the first half of the lanes taking the first 16-byte blocks, the second half the
//!   last ones; the lanes' low halves XORed.

use super::aeshash::{AesSlots, KeyAt, RoundKey, MAX_HASHED_STRING};
use super::codegen::Gen;
use super::LowerError;
use crate::bpf::insn::*;
use crate::syntax::ast::Span;

impl Gen<'_> {
    /// `memhash64` / `memhash32` of the integer in slot `key` (`size` 8 or 4) with the
    /// seed in slot `seed`, into slot `out`.
    pub(super) fn key_first_int(
        &mut self,
        keysched: u64,
        (key, size): (i16, u64),
        int32_low: bool,
        seed: i16,
        out: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let a = self.aes_slots(16, span)?;
        self.read_aeskeysched(keysched, 0, a.keys, 16)?;
        self.b.emit(load(Size::DW, R1, R10, seed));
        self.b.emit(load(Size::DW, R2, R10, key));
        if size == 4 {
            self.b.emit(alu32_reg(AluOp::Mov, R2, R2));
            if int32_low {
                // VMOV seed, V0.S[0]; VLD1 key, V0.S[1]: the high half zero.
                self.b.emit(alu32_reg(AluOp::Mov, R1, R1));
                self.b.emit(alu64_imm(AluOp::Lsh, R2, 32));
                self.b.emit(alu64_reg(AluOp::Or, R1, R2));
                self.b.emit(mov64_imm(R2, 0));
            }
        }
        self.b.emit(store_reg(Size::DW, R10, a.state, R1));
        self.b.emit(store_reg(Size::DW, R10, a.state + 8, R2));
        self.three_rounds(&a, [RoundKey::Slot(a.keys); 3], KeyAt::First, false);
        self.hash_out(a.state, out);
        self.b.frame.release(mark);
        Ok(())
    }

    /// `memhash` of `len` (1 to 8, a constant) bytes: the integer in slot `key`, as the
    /// runtime hashes 1- and 2-byte keys, into slot `out`.
    pub(super) fn key_first_small_int(
        &mut self,
        (keysched, short_mixed): (u64, bool),
        (key, len): (i16, u64),
        seed: i16,
        out: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let a = self.aes_slots(16, span)?;
        let (x0, v30) = (self.slot(16, span)?, self.slot(16, span)?);
        self.b.emit(mov64_imm(R1, len as i32));
        self.first_key(&a, keysched, seed, (x0, v30))?;
        // The pieces of 8, 4, 2 and 1 bytes the length's bits take, at bytes 0, 8, 12, 14.
        self.b.emit(load(Size::DW, R1, R10, key));
        self.b.emit(mov64_imm(R3, 0));
        self.b.emit(mov64_imm(R4, 0));
        let mut from = 0;
        for (bytes, at) in [(8u64, 0i32), (4, 64), (2, 96), (1, 112)] {
            if len & bytes == 0 {
                continue;
            }
            self.b.emit(mov64_reg(R2, R1));
            if from > 0 {
                self.b.emit(alu64_imm(AluOp::Rsh, R2, 8 * from as i32));
            }
            if bytes < 8 {
                self.b.emit(alu64_imm(AluOp::And, R2, ((1u64 << (8 * bytes)) - 1) as i32));
            }
            let (acc, shift) = if at < 64 { (R3, at) } else { (R4, at - 64) };
            if shift > 0 {
                self.b.emit(alu64_imm(AluOp::Lsh, R2, shift));
            }
            self.b.emit(alu64_reg(AluOp::Or, acc, R2));
            from += bytes;
        }
        self.b.emit(store_reg(Size::DW, R10, a.state, R3));
        self.b.emit(store_reg(Size::DW, R10, a.state + 8, R4));
        self.three_rounds(&a, [RoundKey::Slot(x0); 3], KeyAt::First, short_mixed);
        self.hash_out(a.state, out);
        self.b.frame.release(mark);
        Ok(())
    }

    /// `v30` = (seed, R1: the length); `x0` = round key 0 scrambled once with it (the
    /// start of `aeshashbody`).
    fn first_key(&mut self, a: &AesSlots, keysched: u64, seed: i16, (x0, v30): (i16, i16)) -> Result<(), LowerError> {
        self.b.emit(store_reg(Size::DW, R10, v30 + 8, R1));
        self.b.emit(load(Size::DW, R1, R10, seed));
        self.b.emit(store_reg(Size::DW, R10, v30, R1));
        self.read_aeskeysched(keysched, 0, x0, 16)?;
        self.aes_round(a, x0, RoundKey::Slot(v30), (KeyAt::First, true), false);
        Ok(())
    }

    /// `strhash` (`aeshashbody`) of the string record in slot `key` (its length, at most
    /// `MAX_HASHED_STRING`, then its bytes, zero after them) with the seed in slot
    /// `seed`, into slot `out`.
    pub(super) fn key_first_string(
        &mut self,
        (keysched, short_mixed): (u64, bool),
        key: i16,
        seed: i16,
        out: i16,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let a = self.aes_slots(16, span)?;
        let (x0, v30) = (self.slot(16, span)?, self.slot(16, span)?);
        let (acc, lane, lanes) = (self.slot(8, span)?, self.slot(8, span)?, self.slot(8, span)?);
        self.load_unlinked(R1, key);
        self.first_key(&a, keysched, seed, (x0, v30))?;
        self.b.emit(load(Size::DW, R1, R10, x0));
        self.b.emit(store_reg(Size::DW, R10, acc, R1));
        let (finish, short) = (self.b.new_label(), self.b.new_label());
        self.load_unlinked(R1, key);
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, finish);
        self.b.jmp_imm_to(JmpOp::Le, R1, 16, short);
        // Lanes by length class: 17-32, 33-64, 65-128.
        let classes = [(32, 2), (64, 4), (MAX_HASHED_STRING as i32, 8)];
        self.each_lane(&a, (acc, lane, lanes), &classes, finish, |g| {
            g.lane_key(&a, keysched, (x0, v30), lane)?;
            for half in [0, 8] {
                g.b.emit(store_imm(Size::DW, R10, a.state + half, 0));
            }
            g.lane_block(&a, key, lane, lanes);
            g.three_rounds(&a, [RoundKey::Slot(a.keys); 3], KeyAt::First, false);
            Ok(())
        })?;
        // 1 to 16 bytes: one block, three rounds with MixColumns.
        self.b.bind(short);
        self.short_block(&a, key, (lane, lanes));
        self.three_rounds(&a, [RoundKey::Slot(x0); 3], KeyAt::First, short_mixed);
        self.b.emit(load(Size::DW, R1, R10, a.state));
        self.b.emit(store_reg(Size::DW, R10, acc, R1));
        self.b.bind(finish);
        self.hash_out(acc, out);
        self.b.frame.release(mark);
        Ok(())
    }

    /// Lane `lane`'s key into `a.keys`: `x0` for lane 0, else round key `lane` XOR
    /// `v30`, scrambled once.
    fn lane_key(&mut self, a: &AesSlots, keysched: u64, (x0, v30): (i16, i16), lane: i16) -> Result<(), LowerError> {
        self.lane_start(a, keysched, lane, (x0, a.keys), |g| {
            g.aes_round(a, a.keys, RoundKey::Slot(v30), (KeyAt::First, true), false)
        })
    }

    /// The block of a key of 1 to 16 bytes into `a.state`: 16 bytes as they are, else
    /// the pieces of 8, 4, 2 and 1 bytes that the length's bits 3 to 0 take, in order,
    /// at bytes 0, 8, 12 and 14 (a piece masked to zero when its bit is clear: no
    /// branch per bit). `pos` and `hi` are two 8-byte slots to work in.
    fn short_block(&mut self, a: &AesSlots, key: i16, (pos, hi): (i16, i16)) {
        let data = key + 8;
        let (whole, built) = (self.b.new_label(), self.b.new_label());
        self.load_unlinked(R1, key);
        self.b.jmp_imm_to(JmpOp::Eq, R1, 16, whole);
        self.b.emit(store_imm(Size::DW, R10, pos, 0));
        self.b.emit(store_imm(Size::DW, R10, hi, 0));
        for (bytes, bit, at) in [(8i16, 3, 0), (4, 2, 64), (2, 1, 96), (1, 0, 112)] {
            self.b.emit(load(Size::DW, R1, R10, pos));
            self.load_le(data, bytes, MAX_HASHED_STRING as i32 - i32::from(bytes));
            // R0 &= -(len >> bit & 1); pos += len & (1 << bit).
            self.load_unlinked(R1, key);
            self.b.emit(alu64_imm(AluOp::Rsh, R1, bit));
            self.b.emit(alu64_imm(AluOp::And, R1, 1));
            self.b.emit(mov64_reg(R2, R1));
            self.b.emit(neg64(R1));
            self.b.emit(alu64_reg(AluOp::And, R0, R1));
            self.b.emit(alu64_imm(AluOp::Lsh, R2, bit));
            self.b.emit(load(Size::DW, R1, R10, pos));
            self.b.emit(alu64_reg(AluOp::Add, R1, R2));
            self.b.emit(store_reg(Size::DW, R10, pos, R1));
            if at == 0 {
                self.b.emit(store_reg(Size::DW, R10, a.state, R0));
            } else {
                if at > 64 {
                    self.b.emit(alu64_imm(AluOp::Lsh, R0, at - 64));
                }
                self.b.emit(load(Size::DW, R1, R10, hi));
                self.b.emit(alu64_reg(AluOp::Or, R1, R0));
                self.b.emit(store_reg(Size::DW, R10, hi, R1));
            }
        }
        self.b.emit(load(Size::DW, R1, R10, hi));
        self.b.emit(store_reg(Size::DW, R10, a.state + 8, R1));
        self.b.ja_to(built);
        self.b.bind(whole);
        for half in [0, 8] {
            self.b.emit(load(Size::DW, R1, R10, data + half));
            self.b.emit(store_reg(Size::DW, R10, a.state + half, R1));
        }
        self.b.bind(built);
        self.b.emit(mov64_imm(R0, 0));
    }
}
