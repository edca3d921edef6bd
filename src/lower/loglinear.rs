//! `hist()`'s update of one CPU's value (the layout `plan::Agg::Hist` documents, the
//! buckets hist.rs defines): the sum, the exact least and greatest value, and one of 16
//! logarithmic sub-buckets per power of two, found from the value's top bit and four
//! comparisons (about 75 instructions run in all, no map lookup, no helper call).

use super::agg::{add_r1, bump_bucket};
use super::ir::{Func as Builder, VReg};
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::hist::{thresholds, BUCKETS, SUB};

/// On entry `val` points at the map value and R1 holds the value; R1 to R5 are clobbered.
pub fn update(b: &mut Builder, val: VReg) {
    let n = BUCKETS as i16;
    add_r1(b, val, 8 * n);
    // The least value as the greatest `x ^ i64::MAX`, the greatest as the greatest
    // `x ^ i64::MIN` (unsigned): a zeroed value stands for none seen.
    keep_greatest(b, val, 8 * (n + 1), i64::MAX as u64);
    keep_greatest(b, val, 8 * (n + 2), 1 << 63);
    index(b);
    bump_bucket(b, val, BUCKETS as u32 - 1);
}

/// *(u64 *)(val + off) = max(itself, r1 ^ mask), compared unsigned.
fn keep_greatest(b: &mut Builder, val: VReg, off: i16, mask: u64) {
    let done = b.new_label();
    b.emit2(ld_imm64(R3, mask));
    b.emit(alu64_reg(AluOp::Xor, R3, R1));
    b.op(load(Size::DW, R2, R0, off), R2, val);
    b.jmp_reg_to(JmpOp::Ge, R2, R3, done);
    b.op(store_reg(Size::DW, R0, off, R0), val, R3);
    b.bind(done);
}

/// R2 = the bucket of R1, as `hist::index` computes it: 0 for R1 <= 0, else
/// 1 + 16 p + j, with p the top bit of R1 and j its sub-bucket.
fn index(b: &mut Builder) {
    let done = b.new_label();
    b.emit(mov64_imm(R2, 0));
    b.jmp_imm_to(JmpOp::Sle, R1, 0, done);
    b.emit(mov64_reg(R4, R1));
    top_bit(b);
    // R4 = x << (63 - p): the top bit at 63, the bits below it the position within
    // the power of two.
    b.emit(mov64_imm(R3, 63));
    b.emit(alu64_reg(AluOp::Sub, R3, R2));
    b.emit(alu64_reg(AluOp::Lsh, R4, R3));
    let found = b.new_label();
    sub_bucket(b, &thresholds(), 0, SUB, found);
    b.bind(found);
    b.emit(alu64_imm(AluOp::Lsh, R2, crate::hist::SCALE as i32));
    b.emit(alu64_reg(AluOp::Add, R2, R3));
    b.emit(alu64_imm(AluOp::Add, R2, 1));
    b.bind(done);
}

/// R2 = the top bit of R1 (0 < R1 < 2^63), without a branch: for each shift s of 32,
/// 16, ..., 1, `(2^s - 1 - x) >> 63` is 1 when x >= 2^s; then p += s and x >>= s. One
/// path, so the verifier walks it once (a branch a step gave it 64 paths a `hist()`,
/// and the sub-bucket's 16 more each: 40 hist() in a probe reached its limit).
fn top_bit(b: &mut Builder) {
    for (shift, log) in [(32u32, 5), (16, 4), (8, 3), (4, 2), (2, 1), (1, 0)] {
        b.emit2(ld_imm64(R5, (1u64 << shift) - 1));
        b.emit(alu64_reg(AluOp::Sub, R5, R1));
        b.emit(alu64_imm(AluOp::Rsh, R5, 63));
        b.emit(alu64_imm(AluOp::Lsh, R5, log));
        b.emit(alu64_reg(AluOp::Add, R2, R5));
        b.emit(alu64_reg(AluOp::Rsh, R1, R5));
    }
}

/// R3 = the j in lo..hi with t[j] <= R4 < t[j + 1]: a binary search on constants.
fn sub_bucket(b: &mut Builder, t: &[u64; SUB], lo: usize, hi: usize, found: Label) {
    if hi - lo == 1 {
        b.emit(mov64_imm(R3, lo as i32));
        b.ja_to(found);
        return;
    }
    let mid = (lo + hi) / 2;
    let upper = b.new_label();
    b.emit2(ld_imm64(R5, t[mid]));
    b.jmp_reg_to(JmpOp::Ge, R4, R5, upper);
    sub_bucket(b, t, lo, mid, found);
    b.bind(upper);
    sub_bucket(b, t, mid, hi, found);
}
