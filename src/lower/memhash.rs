//! The Go runtime's fallback map hash in eBPF (runtime/hash64.go `memhashFallback`,
//! `memhash32Fallback`, `memhash64Fallback`; internal/runtime/maps since Go 1.27), which
//! a process uses when its CPU has no AES (or with GODEBUG=cpu.aes=off): wyhash's `mix`
//! (the high and low halves of a 128-bit product XORed, the product made of four 32-bit
//! ones) over the key's words, keyed by the process's `hashkey` and the map's seed. Go
//! 1.17 to 1.22 mix in wyhash's constants m1 and m2 where later releases read
//! `hashkey[1]`. String keys are hashed up to `MAX_FALLBACK_STRING` bytes (longer ones
//! take the runtime's three-lane loop, not done here: the caller skips the hit, counted).

use super::codegen::Gen;
use super::mapwalk::Key;
use super::LowerError;
use crate::bpf::insn::*;
use crate::syntax::ast::Span;

/// wyhash's constants as runtime/hash64.go names them.
const M1: u64 = 0xa076_1d64_78bd_642f;
const M2: u64 = 0xe703_7ed1_a0b4_28db;
const M5: u64 = 0x1d8e_4e27_c47d_124f;
/// The longest string key the fallback hash is computed for here.
pub const MAX_FALLBACK_STRING: i32 = 48;

impl Gen<'_> {
    /// R0 = mix(R1, R2): the 128-bit product's high and low halves XORed. Clobbers
    /// R1-R5 and R9.
    fn mix(&mut self) {
        self.b.emit(mov64_reg(R0, R1));
        self.b.emit(alu64_reg(AluOp::Mul, R0, R2));
        // x = x1:x0 (R4:R3), y = y1:y0 (R2:R5).
        self.b.emit(alu32_reg(AluOp::Mov, R3, R1));
        self.b.emit(mov64_reg(R4, R1));
        self.b.emit(alu64_imm(AluOp::Rsh, R4, 32));
        self.b.emit(alu32_reg(AluOp::Mov, R5, R2));
        self.b.emit(alu64_imm(AluOp::Rsh, R2, 32));
        // p00 in R1, p10 in R9, p11 in R5, p01 in R3.
        self.b.emit(mov64_reg(R1, R3));
        self.b.emit(alu64_reg(AluOp::Mul, R1, R5));
        self.b.emit(mov64_reg(R9, R4));
        self.b.emit(alu64_reg(AluOp::Mul, R9, R5));
        self.b.emit(mov64_reg(R5, R4));
        self.b.emit(alu64_reg(AluOp::Mul, R5, R2));
        self.b.emit(alu64_reg(AluOp::Mul, R3, R2));
        // The middle column's carry: (p00 >> 32) + lo32(p01) + lo32(p10), >> 32.
        self.b.emit(alu64_imm(AluOp::Rsh, R1, 32));
        self.b.emit(alu32_reg(AluOp::Mov, R4, R3));
        self.b.emit(alu64_reg(AluOp::Add, R1, R4));
        self.b.emit(alu32_reg(AluOp::Mov, R4, R9));
        self.b.emit(alu64_reg(AluOp::Add, R1, R4));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, 32));
        self.b.emit(alu64_imm(AluOp::Rsh, R3, 32));
        self.b.emit(alu64_imm(AluOp::Rsh, R9, 32));
        self.b.emit(alu64_reg(AluOp::Add, R5, R3));
        self.b.emit(alu64_reg(AluOp::Add, R5, R9));
        self.b.emit(alu64_reg(AluOp::Add, R5, R1));
        self.b.emit(alu64_reg(AluOp::Xor, R0, R5));
    }

    /// The fallback hash of the key with the seed in slot `seed`, into slot `out`; a
    /// string key longer than `MAX_FALLBACK_STRING` jumps to `too_long`.
    pub(super) fn memhash_key(
        &mut self,
        k: &Key,
        (hashkey, constants): (u64, bool),
        (seed, out): (i16, i16),
        too_long: crate::bpf::builder::Label,
        span: Span,
    ) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        let keys = self.slot(16, span)?;
        let (a, b, s) = (self.slot(8, span)?, self.slot(8, span)?, self.slot(8, span)?);
        let src = self.b.vreg();
        self.b.wide(src, hashkey);
        self.add_bias(src);
        self.read_user_n(keys, 16, src)?;
        if constants {
            // Go 1.17 to 1.22: K0 = hashkey[0] ^ m1, K1 = m2.
            self.b.emit(load(Size::DW, R1, R10, keys));
            self.b.emit2(ld_imm64(R2, M1));
            self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
            self.b.emit(store_reg(Size::DW, R10, keys, R1));
            self.b.emit2(ld_imm64(R1, M2));
            self.b.emit(store_reg(Size::DW, R10, keys + 8, R1));
        }
        // seed ^= K0.
        self.b.emit(load(Size::DW, R1, R10, seed));
        self.b.emit(load(Size::DW, R2, R10, keys));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
        self.b.emit(store_reg(Size::DW, R10, seed, R1));
        let finish = self.b.new_label();
        if k.string {
            self.fallback_string_words(k, keys, [seed, a, b, s], (out, finish), too_long)?;
        } else {
            self.b.emit(store_imm(Size::DW, R10, s, k.size as i32));
            self.b.emit(load(Size::DW, R1, R10, k.key));
            match k.size {
                8 | 4 => {
                    self.b.emit(store_reg(Size::DW, R10, a, R1));
                    self.b.emit(store_reg(Size::DW, R10, b, R1));
                }
                size => {
                    // p[0] | p[s>>1] << 8 | p[s-1] << 16.
                    let last = 8 * (size as i32 - 1);
                    let mid = 8 * (size as i32 >> 1);
                    self.b.emit(mov64_reg(R2, R1));
                    self.b.emit(alu64_imm(AluOp::And, R2, 0xff));
                    for (from, to) in [(mid, 8), (last, 16)] {
                        self.b.emit(mov64_reg(R3, R1));
                        self.b.emit(alu64_imm(AluOp::Rsh, R3, from));
                        self.b.emit(alu64_imm(AluOp::And, R3, 0xff));
                        self.b.emit(alu64_imm(AluOp::Lsh, R3, to));
                        self.b.emit(alu64_reg(AluOp::Or, R2, R3));
                    }
                    self.b.emit(store_reg(Size::DW, R10, a, R2));
                    self.b.emit(store_imm(Size::DW, R10, b, 0));
                }
            }
        }
        // mix(m5 ^ s, mix(a ^ K1, b ^ seed)).
        self.b.emit(load(Size::DW, R1, R10, a));
        self.b.emit(load(Size::DW, R2, R10, keys + 8));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
        self.b.emit(load(Size::DW, R2, R10, b));
        self.b.emit(load(Size::DW, R3, R10, seed));
        self.b.emit(alu64_reg(AluOp::Xor, R2, R3));
        self.mix();
        self.b.emit(mov64_reg(R2, R0));
        self.b.emit(load(Size::DW, R1, R10, s));
        self.b.emit2(ld_imm64(R3, M5));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R3));
        self.mix();
        self.b.emit(store_reg(Size::DW, R10, out, R0));
        self.b.bind(finish);
        self.b.emit(mov64_imm(R0, 0));
        self.b.frame.release(mark);
        Ok(())
    }

    /// A string key's words `a` and `b` by its length `s` (memhashFallback's cases), the
    /// seed mixed with each 16 bytes before the last 16 of a key over 16 bytes. The empty
    /// string's hash is the seed: into `out` at once, then to `finish`.
    fn fallback_string_words(
        &mut self,
        k: &Key,
        keys: i16,
        [seed, a, b, s]: [i16; 4],
        (out, finish): (i16, crate::bpf::builder::Label),
        too_long: crate::bpf::builder::Label,
    ) -> Result<(), LowerError> {
        let data = k.key + 8;
        let (short, mid, words, done) =
            (self.b.new_label(), self.b.new_label(), self.b.new_label(), self.b.new_label());
        self.load_unlinked(R1, k.key);
        self.b.emit(store_reg(Size::DW, R10, s, R1));
        self.b.jmp_imm_to(JmpOp::Sgt, R1, MAX_FALLBACK_STRING, too_long);
        self.b.jmp_imm_to(JmpOp::Ge, R1, 8, words);
        self.b.jmp_imm_to(JmpOp::Ge, R1, 4, mid);
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, short);
        // Empty: the hash is the seed itself.
        self.b.emit(load(Size::DW, R1, R10, seed));
        self.b.emit(store_reg(Size::DW, R10, out, R1));
        self.b.ja_to(finish);
        // 1 to 3 bytes: p[0] | p[s>>1] << 8 | p[s-1] << 16, b = 0.
        self.b.bind(short);
        self.b.emit(load(Size::B, R2, R10, data));
        for (shift, to) in [(true, 8), (false, 16)] {
            self.b.emit(load(Size::DW, R1, R10, s));
            if shift {
                self.b.emit(alu64_imm(AluOp::Rsh, R1, 1));
            } else {
                self.b.emit(alu64_imm(AluOp::Sub, R1, 1));
            }
            self.b.emit(alu64_imm(AluOp::And, R1, 3));
            self.b.emit(mov64_reg(R4, R10));
            self.b.emit(alu64_imm(AluOp::Add, R4, i32::from(data)));
            self.b.emit(alu64_reg(AluOp::Add, R4, R1));
            self.b.emit(load(Size::B, R3, R4, 0));
            self.b.emit(alu64_imm(AluOp::Lsh, R3, to));
            self.b.emit(alu64_reg(AluOp::Or, R2, R3));
        }
        self.b.emit(store_reg(Size::DW, R10, a, R2));
        self.b.emit(store_imm(Size::DW, R10, b, 0));
        self.b.ja_to(done);
        // 4 to 7 bytes: a = r4(p), b = r4(p + s - 4).
        self.b.bind(mid);
        self.b.emit(load(Size::W, R1, R10, data));
        self.b.emit(store_reg(Size::DW, R10, a, R1));
        self.b.emit(load(Size::DW, R1, R10, s));
        self.b.emit(alu64_imm(AluOp::Sub, R1, 4));
        self.load_le(data, 4, 3);
        self.b.emit(store_reg(Size::DW, R10, b, R0));
        self.b.ja_to(done);
        self.b.bind(words);
        self.fallback_long_words(data, keys, [seed, a, b, s]);
        self.b.bind(done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// A string key of 8 to 48 bytes: the seed mixed with each 16 bytes before the last
    /// 16, then `a` = r8(p + max(s - 16, 0)), `b` = r8(p + s - 8).
    fn fallback_long_words(&mut self, data: i16, keys: i16, [seed, a, b, s]: [i16; 4]) {
        for block in 0..2i16 {
            let skip = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R10, s));
            self.b.jmp_imm_to(JmpOp::Le, R1, 16 * (i32::from(block) + 1), skip);
            self.b.emit(load(Size::DW, R1, R10, data + 16 * block));
            self.b.emit(load(Size::DW, R2, R10, keys + 8));
            self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
            self.b.emit(load(Size::DW, R2, R10, data + 16 * block + 8));
            self.b.emit(load(Size::DW, R3, R10, seed));
            self.b.emit(alu64_reg(AluOp::Xor, R2, R3));
            self.mix();
            self.b.emit(store_reg(Size::DW, R10, seed, R0));
            self.b.bind(skip);
        }
        let from = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, s));
        self.b.emit(alu64_imm(AluOp::Sub, R1, 16));
        self.b.jmp_imm_to(JmpOp::Sge, R1, 0, from);
        self.b.emit(mov64_imm(R1, 0));
        self.b.bind(from);
        self.load_le(data, 8, MAX_FALLBACK_STRING - 8);
        self.b.emit(store_reg(Size::DW, R10, a, R0));
        self.b.emit(load(Size::DW, R1, R10, s));
        self.b.emit(alu64_imm(AluOp::Sub, R1, 8));
        self.load_le(data, 8, MAX_FALLBACK_STRING - 8);
        self.b.emit(store_reg(Size::DW, R10, b, R0));
    }

    /// R0 = the `n` bytes (little-endian) at `data` + R1 on the stack, R1 clamped to
    /// `most` (byte loads: the offset varies, and the stack allows no unaligned wider
    /// load). Clobbers R1-R4.
    pub(super) fn load_le(&mut self, data: i16, n: i16, most: i32) {
        let ok = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Le, R1, most, ok);
        self.b.emit(mov64_imm(R1, most));
        self.b.bind(ok);
        self.b.emit(mov64_reg(R4, R10));
        self.b.emit(alu64_imm(AluOp::Add, R4, i32::from(data)));
        self.b.emit(alu64_reg(AluOp::Add, R4, R1));
        self.b.emit(mov64_imm(R0, 0));
        for j in 0..n {
            self.b.emit(load(Size::B, R3, R4, j));
            if j > 0 {
                self.b.emit(alu64_imm(AluOp::Lsh, R3, 8 * i32::from(j)));
            }
            self.b.emit(alu64_reg(AluOp::Or, R0, R3));
        }
    }
}
