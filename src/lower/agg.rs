//! Updating one CPU's aggregation value in place. On entry R7 points at the map value
//! and R1 holds the aggregated value; the layouts are those `plan::Agg` documents
//! (histograms: the buckets, then the sum of the values; `hist()` in loglinear.rs).

use super::ir::Func as Builder;
use crate::bpf::insn::*;
use crate::plan::{lhist_buckets, Agg};

/// `signed`: whether R1 holds a signed value (an lhist compares it with its bounds).
pub fn update(b: &mut Builder, agg: Agg, signed: bool) {
    match agg {
        Agg::Count => add_const(b, 0, 1),
        Agg::Sum => add_r1(b, 0),
        Agg::Avg => {
            add_const(b, 0, 1);
            add_r1(b, 8);
        }
        Agg::Min => extreme(b, 0, 8, JmpOp::Sge),
        Agg::Max => extreme(b, 0, 8, JmpOp::Sle),
        Agg::Stats => {
            // [count, sum, min, max]: min and max are set on the first value (count == 0).
            let first = b.new_label();
            let done = b.new_label();
            let not_min = b.new_label();
            b.emit(load(Size::DW, R2, R7, 0));
            b.jmp_imm_to(JmpOp::Eq, R2, 0, first);
            b.emit(load(Size::DW, R3, R7, 16));
            b.jmp_reg_to(JmpOp::Sge, R1, R3, not_min);
            b.emit(store_reg(Size::DW, R7, 16, R1));
            b.bind(not_min);
            b.emit(load(Size::DW, R3, R7, 24));
            b.jmp_reg_to(JmpOp::Sle, R1, R3, done);
            b.emit(store_reg(Size::DW, R7, 24, R1));
            b.ja_to(done);
            b.bind(first);
            b.emit(store_reg(Size::DW, R7, 16, R1));
            b.emit(store_reg(Size::DW, R7, 24, R1));
            b.bind(done);
            add_const(b, 0, 1);
            add_r1(b, 8);
        }
        Agg::Hist => super::loglinear::update(b),
        Agg::Lhist { lo, hi, step } => {
            let n = lhist_buckets(lo, hi, step);
            add_r1(b, 8 * n as i16);
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
            bump_bucket(b, n - 1);
        }
    }
}

/// *(u64 *)(r7 + off) += k
fn add_const(b: &mut Builder, off: i16, k: i32) {
    b.emit(load(Size::DW, R2, R7, off));
    b.emit(alu64_imm(AluOp::Add, R2, k));
    b.emit(store_reg(Size::DW, R7, off, R2));
}

/// *(u64 *)(r7 + off) += r1
pub(super) fn add_r1(b: &mut Builder, off: i16) {
    b.emit(load(Size::DW, R2, R7, off));
    b.emit(alu64_reg(AluOp::Add, R2, R1));
    b.emit(store_reg(Size::DW, R7, off, R2));
}

/// [seen, value]: keep r1 unless the kept value already wins (`keep_if` r1 vs it).
fn extreme(b: &mut Builder, seen: i16, value: i16, keep_if: JmpOp) {
    let set = b.new_label();
    let done = b.new_label();
    b.emit(load(Size::DW, R2, R7, seen));
    b.jmp_imm_to(JmpOp::Eq, R2, 0, set);
    b.emit(load(Size::DW, R3, R7, value));
    b.jmp_reg_to(keep_if, R1, R3, done);
    b.bind(set);
    b.emit(store_reg(Size::DW, R7, value, R1));
    b.emit(store_imm(Size::DW, R7, seen, 1));
    b.bind(done);
}

/// Adds one to bucket R2 (clamped to `last`, which the verifier needs to see).
pub(super) fn bump_bucket(b: &mut Builder, last: u32) {
    let ok = b.new_label();
    b.jmp_imm_to(JmpOp::Le, R2, last as i32, ok);
    b.emit(mov64_imm(R2, last as i32));
    b.bind(ok);
    b.emit(alu64_imm(AluOp::Lsh, R2, 3));
    b.emit(alu64_reg(AluOp::Add, R7, R2));
    add_const(b, 0, 1);
}
