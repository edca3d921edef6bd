//! Updating one CPU's aggregation value in place. On entry the virtual register `val`
//! points at the map value and R1 holds the aggregated value; the layouts are those `plan::Agg` documents
//! (histograms: the buckets, then the sum of the values; `hist()` in loglinear.rs).

use super::ir::{Func as Builder, VReg};
use crate::bpf::insn::*;
use crate::plan::{lhist_buckets, Agg};

/// `signed`: whether R1 holds a signed value (an lhist compares it with its bounds).
pub fn update(b: &mut Builder, val: VReg, agg: Agg, signed: bool) {
    match agg {
        Agg::Count => add_const(b, val, 0, 1),
        Agg::Sum => add_r1(b, val, 0),
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
        Agg::Hist => super::loglinear::update(b, val),
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
            bump_bucket(b, val, n - 1);
        }
    }
}

/// *(u64 *)(val + off) += k
fn add_const(b: &mut Builder, val: VReg, off: i16, k: i32) {
    b.op(load(Size::DW, R2, R0, off), R2, val);
    b.emit(alu64_imm(AluOp::Add, R2, k));
    b.op(store_reg(Size::DW, R0, off, R0), val, R2);
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

/// Adds one to bucket R2 (clamped to `last`, which the verifier needs to see).
pub(super) fn bump_bucket(b: &mut Builder, val: VReg, last: u32) {
    let ok = b.new_label();
    b.jmp_imm_to(JmpOp::Le, R2, last as i32, ok);
    b.emit(mov64_imm(R2, last as i32));
    b.bind(ok);
    b.emit(alu64_imm(AluOp::Lsh, R2, 3));
    b.op(alu64_reg(AluOp::Add, R0, R2), val, R2);
    add_const(b, val, 0, 1);
}
