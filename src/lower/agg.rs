//! Updating one CPU's aggregation value in place. On entry the virtual register `val`
//! points at the map value and R1 holds the aggregated value; the layouts are those `plan::Agg` documents
//! (histograms: the buckets, then the sum of the values).
//!
//! `hist()` (`hist_update`): the layout `plan::Agg::Hist` documents, the buckets hist.rs
//! defines: the sum, the exact least and greatest value, and one of 16 logarithmic
//! sub-buckets per power of two, found from the value's top bit and four comparisons
//! (about 75 instructions run in all, no map lookup, no helper call).
//!
//! `count()`, `sum()` and `hist()` change the value with atomic instructions only
//! (`atomic`): an add, and for a histogram's least and greatest value a comparison that
//! stores only with preemption off, which a new extreme alone reaches. So another
//! task's program on the same CPU can run in the middle of the update and nothing is
//! lost, and a program that needs no other protection runs without the preemption
//! guard (guard.rs).

use super::ir::{Func as Builder, VReg};
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::bpf::kfuncs::Kfunc;
use crate::hist::{thresholds, BUCKETS, SUB};
use crate::plan::{lhist_buckets, Agg};

/// Whether `update` changes a value of `agg` with atomic instructions only.
pub fn atomic(agg: Agg) -> bool {
    matches!(agg, Agg::Count | Agg::Sum | Agg::Hist)
}

/// `signed`: whether R1 holds a signed value (an lhist compares it with its bounds).
pub fn update(b: &mut Builder, val: VReg, agg: Agg, signed: bool) {
    match agg {
        Agg::Count => atomic_add_const(b, val, 0, 1),
        Agg::Sum => atomic_add_r1(b, val, 0),
        Agg::Avg => {
            add_const(b, val, 0, 1);
            add_r1(b, val, 8);
        }
        Agg::Min => extreme(b, val, 0, 8, JmpOp::Sge),
        Agg::Max => extreme(b, val, 0, 8, JmpOp::Sle),
        Agg::Stats => {
            // [count, sum, min, max]: min and max are set on the first value (count == 0).
            let first = b.new_label();
            let done = b.new_label();
            let not_min = b.new_label();
            b.op(load(Size::DW, R2, R0, 0), R2, val);
            b.jmp_imm_to(JmpOp::Eq, R2, 0, first);
            b.op(load(Size::DW, R3, R0, 16), R3, val);
            b.jmp_reg_to(JmpOp::Sge, R1, R3, not_min);
            b.op(store_reg(Size::DW, R0, 16, R0), val, R1);
            b.bind(not_min);
            b.op(load(Size::DW, R3, R0, 24), R3, val);
            b.jmp_reg_to(JmpOp::Sle, R1, R3, done);
            b.op(store_reg(Size::DW, R0, 24, R0), val, R1);
            b.ja_to(done);
            b.bind(first);
            b.op(store_reg(Size::DW, R0, 16, R0), val, R1);
            b.op(store_reg(Size::DW, R0, 24, R0), val, R1);
            b.bind(done);
            add_const(b, val, 0, 1);
            add_r1(b, val, 8);
        }
        Agg::Hist => hist_update(b, val),
        Agg::Lhist { lo, hi, step } => {
            let n = lhist_buckets(lo, hi, step);
            add_r1(b, val, 8 * n as i16);
            let below = b.new_label();
            let above = b.new_label();
            let done = b.new_label();
            // An unsigned value is never below a negative lo, and always above a
            // negative hi; otherwise it compares unsigned.
            if signed || lo > 0 {
                b.emit2(ld_imm64(R3, lo as u64));
                b.jmp_reg_to(if signed { JmpOp::Slt } else { JmpOp::Lt }, R1, R3, below);
            }
            if signed || hi > 0 {
                b.emit2(ld_imm64(R3, hi as u64));
                b.jmp_reg_to(if signed { JmpOp::Sge } else { JmpOp::Ge }, R1, R3, above);
            } else {
                b.ja_to(above);
            }
            // lo <= x < hi: (x - lo) fits in a u64 whatever the bounds, so divide unsigned.
            b.emit2(ld_imm64(R3, lo as u64));
            b.emit(alu64_reg(AluOp::Sub, R1, R3));
            b.emit2(ld_imm64(R3, step as u64));
            b.emit(alu64_reg(AluOp::Div, R1, R3));
            b.emit(mov64_reg(R2, R1));
            b.emit(alu64_imm(AluOp::Add, R2, 1));
            b.ja_to(done);
            b.bind(below);
            b.emit(mov64_imm(R2, 0));
            b.ja_to(done);
            b.bind(above);
            b.emit(mov64_imm(R2, n as i32 - 1));
            b.bind(done);
            bump_bucket(b, val, n - 1, false);
        }
    }
}

/// *(u64 *)(val + off) += k
fn add_const(b: &mut Builder, val: VReg, off: i16, k: i32) {
    b.op(load(Size::DW, R2, R0, off), R2, val);
    b.emit(alu64_imm(AluOp::Add, R2, k));
    b.op(store_reg(Size::DW, R0, off, R0), val, R2);
}

/// *(u64 *)(val + off) += k, atomically.
fn atomic_add_const(b: &mut Builder, val: VReg, off: i16, k: i32) {
    b.emit(mov64_imm(R2, k));
    b.op(atomic_add(Size::DW, R0, off, R0), val, R2);
}

/// *(u64 *)(val + off) += r1, atomically.
fn atomic_add_r1(b: &mut Builder, val: VReg, off: i16) {
    b.op(atomic_add(Size::DW, R0, off, R0), val, R1);
}

/// *(u64 *)(val + off) += r1
pub(super) fn add_r1(b: &mut Builder, val: VReg, off: i16) {
    b.op(load(Size::DW, R2, R0, off), R2, val);
    b.emit(alu64_reg(AluOp::Add, R2, R1));
    b.op(store_reg(Size::DW, R0, off, R0), val, R2);
}

/// [seen, value]: keep r1 unless the kept value already wins (`keep_if` r1 vs it).
fn extreme(b: &mut Builder, val: VReg, seen: i16, value: i16, keep_if: JmpOp) {
    let set = b.new_label();
    let done = b.new_label();
    b.op(load(Size::DW, R2, R0, seen), R2, val);
    b.jmp_imm_to(JmpOp::Eq, R2, 0, set);
    b.op(load(Size::DW, R3, R0, value), R3, val);
    b.jmp_reg_to(keep_if, R1, R3, done);
    b.bind(set);
    b.op(store_reg(Size::DW, R0, value, R0), val, R1);
    b.op(store_imm(Size::DW, R0, seen, 1), val, R0);
    b.bind(done);
}

/// Adds one to bucket R2 (clamped to `last`, which the verifier needs to see); with
/// `atomic`, by an atomic add. Clobbers R2.
pub(super) fn bump_bucket(b: &mut Builder, val: VReg, last: u32, atomic: bool) {
    let ok = b.new_label();
    b.jmp_imm_to(JmpOp::Le, R2, last as i32, ok);
    b.emit(mov64_imm(R2, last as i32));
    b.bind(ok);
    b.emit(alu64_imm(AluOp::Lsh, R2, 3));
    b.op(alu64_reg(AluOp::Add, R0, R2), val, R2);
    if atomic {
        atomic_add_const(b, val, 0, 1);
    } else {
        add_const(b, val, 0, 1);
    }
}

/// On entry `val` points at the map value and R1 holds the value; R1 to R5 are clobbered.
pub fn hist_update(b: &mut Builder, val: VReg) {
    let n = BUCKETS as i16;
    atomic_add_r1(b, val, 8 * n);
    // The least value as the greatest `x ^ i64::MAX`, the greatest as the greatest
    // `x ^ i64::MIN` (unsigned): a zeroed value stands for none seen.
    keep_greatest(b, val, 8 * (n + 1), i64::MAX as u64);
    keep_greatest(b, val, 8 * (n + 2), 1 << 63);
    index(b);
    bump_bucket(b, val, BUCKETS as u32 - 1, true);
}

/// *(u64 *)(val + off) = max(itself, r1 ^ mask), compared unsigned. A value that would
/// be stored is compared again and stored with preemption off (the kfuncs' calls, on
/// this rare path only), so that no other task's program on this CPU stores between
/// the comparison and the store. Keeps R1.
fn keep_greatest(b: &mut Builder, val: VReg, off: i16, mask: u64) {
    let done = b.new_label();
    let kept = b.new_label();
    b.emit2(ld_imm64(R3, mask));
    b.emit(alu64_reg(AluOp::Xor, R3, R1));
    b.op(load(Size::DW, R2, R0, off), R2, val);
    b.jmp_reg_to(JmpOp::Ge, R2, R3, done);
    let x = b.vreg();
    b.op(mov64_reg(R0, R0), x, R1);
    b.call_kfunc(Kfunc::PreemptDisable);
    b.emit2(ld_imm64(R3, mask));
    b.op(alu64_reg(AluOp::Xor, R3, R0), R3, x);
    b.op(load(Size::DW, R2, R0, off), R2, val);
    b.jmp_reg_to(JmpOp::Ge, R2, R3, kept);
    b.op(store_reg(Size::DW, R0, off, R0), val, R3);
    b.bind(kept);
    b.call_kfunc(Kfunc::PreemptEnable);
    b.op(mov64_reg(R0, R0), R1, x);
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
