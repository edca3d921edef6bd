//! Floats without floating point: a float32 or float64 is held as its IEEE bits
//! (zero-extended to 64), and compared with integer operations on those bits. For values
//! that are not NaN, mapping the bits `b` to the signed integer `sign(b) ? -(b & MAG) : b`
//! orders them as IEEE orders the floats (magnitudes grow with their bits, -0 and +0 both
//! map to 0); a NaN compares false with everything, `!=` true, as in Go. Negation flips
//! the sign bit, as Go's `-x` does.

use super::codegen::Gen;
use super::LowerError;
use crate::bpf::insn::*;
use crate::syntax::ast::*;

/// The magnitude mask, the bits of +Inf, and the sign bit's position.
fn layout(size: u8) -> (u64, u64, i32) {
    if size == 4 {
        (0x7fff_ffff, 0x7f80_0000, 31)
    } else {
        (0x7fff_ffff_ffff_ffff, 0x7ff0_0000_0000_0000, 63)
    }
}

/// The bits of the constant `v` as a float of `size` bytes (rounded to nearest, as Go
/// rounds an integer constant given a float type).
pub fn int_constant_bits(v: i128, size: u8) -> u64 {
    if size == 4 {
        u64::from((v as f32).to_bits())
    } else {
        (v as f64).to_bits()
    }
}

impl Gen<'_> {
    /// R0 = (R1 `op` R2) for two floats of `size` bytes held as bits in R1 and R2.
    pub fn float_compare(&mut self, op: BinOp, size: u8, span: Span) -> Result<(), LowerError> {
        use BinOp::*;
        let jump = match op {
            Eq => JmpOp::Eq,
            Ne => JmpOp::Ne,
            Lt => JmpOp::Slt,
            Le => JmpOp::Sle,
            Gt => JmpOp::Sgt,
            Ge => JmpOp::Sge,
            _ => return Err(LowerError::unsupported(span, "arithmetic on floats")),
        };
        let (mag, inf, sign) = layout(size);
        let nan = self.b.new_label();
        let end = self.b.new_label();
        self.b.emit2(ld_imm64(R4, mag));
        self.b.emit2(ld_imm64(R5, inf));
        for reg in [R1, R2] {
            // A NaN: a magnitude above +Inf's bits.
            self.b.emit(mov64_reg(R3, reg));
            self.b.emit(alu64_reg(AluOp::And, R3, R4));
            self.b.jmp_reg_to(JmpOp::Gt, R3, R5, nan);
            // Negative: the magnitude, negated.
            let positive = self.b.new_label();
            self.b.emit(mov64_reg(R0, reg));
            self.b.emit(alu64_imm(AluOp::Rsh, R0, sign));
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, positive);
            self.b.emit(mov64_reg(reg, R3));
            self.b.emit(neg64(reg));
            self.b.bind(positive);
        }
        self.b.emit(mov64_imm(R0, 1));
        self.b.jmp_reg_to(jump, R1, R2, end);
        self.b.emit(mov64_imm(R0, 0));
        self.b.ja_to(end);
        self.b.bind(nan);
        self.b.emit(mov64_imm(R0, i32::from(op == Ne)));
        self.b.bind(end);
        Ok(())
    }

    /// R0 = -operand for a float of `size` bytes: its sign bit flipped.
    pub fn float_negate(&mut self, operand: &Expr, size: u8) -> Result<(), LowerError> {
        self.expr(operand)?;
        if size == 4 {
            // A 32-bit XOR keeps the upper half zero.
            self.b.emit(alu32_imm(AluOp::Xor, R0, i32::MIN));
        } else {
            self.b.emit(mov64_imm(R1, 1));
            self.b.emit(alu64_imm(AluOp::Lsh, R1, 63));
            self.b.emit(alu64_reg(AluOp::Xor, R0, R1));
        }
        Ok(())
    }
}
