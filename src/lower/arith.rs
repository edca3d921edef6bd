//! Integer arithmetic as Go computes it, on the operands' type: results wrap at the
//! type's width (an int8 stays in -128..127), shifts by the width or more give 0 (or the
//! sign for a signed `>>`), division truncates toward zero and, where Go would panic,
//! dividing by zero gives 0 (see docs/language.md). Constants are emitted as their type
//! holds them; conversions truncate or extend as Go's do.

use super::codegen::Gen;
use super::LowerError;
use crate::bpf::insn::*;
use crate::check::ty::Ty;
use crate::syntax::ast::*;

/// The width in bits and signedness Go's arithmetic uses for a type.
fn shape(ty: &Ty) -> (u32, bool) {
    match ty {
        Ty::Int { size, signed } => (u32::from(*size) * 8, *signed),
        Ty::Duration => (64, true),
        _ => (64, false),
    }
}

/// The 64-bit pattern that holds the constant `v` as a value of type `ty`.
pub fn constant_bits(v: i128, ty: &Ty) -> u64 {
    if let Ty::Float { size } = ty {
        return super::float::int_constant_bits(v, *size);
    }
    let (bits, signed) = shape(ty);
    let raw = v as u64;
    if bits == 64 {
        return raw;
    }
    let shift = 64 - bits;
    if signed {
        (((raw << shift) as i64) >> shift) as u64
    } else {
        (raw << shift) >> shift
    }
}

impl Gen<'_> {
    /// Truncates `reg` to the width of `ty` and extends it back to 64 bits, signed or not,
    /// as a Go value of that type holds it.
    pub fn wrap(&mut self, reg: Reg, ty: &Ty) {
        let (bits, signed) = shape(ty);
        if bits < 64 {
            let shift = (64 - bits) as i32;
            self.b.emit(alu64_imm(AluOp::Lsh, reg, shift));
            self.b.emit(alu64_imm(if signed { AluOp::Arsh } else { AluOp::Rsh }, reg, shift));
        }
    }

    /// R0 = R1 `op` R2 for `+ - * / % & | ^ << >>` on values of type `ty` (the left
    /// operand's type; for the others both sides have it).
    pub fn arith_op(&mut self, op: BinOp, ty: &Ty, span: Span) -> Result<(), LowerError> {
        use BinOp::*;
        let (bits, signed) = shape(ty);
        match op {
            Add | Sub | Mul | BitAnd | BitOr | BitXor => {
                let code = match op {
                    Add => AluOp::Add,
                    Sub => AluOp::Sub,
                    Mul => AluOp::Mul,
                    BitAnd => AluOp::And,
                    BitOr => AluOp::Or,
                    _ => AluOp::Xor,
                };
                self.b.emit(alu64_reg(code, R1, R2));
            }
            Div | Rem => {
                // Dividing by zero gives 0 (Go panics; a tracer must not stop).
                let nonzero = self.b.new_label();
                let done = self.b.new_label();
                self.b.jmp_imm_to(JmpOp::Ne, R2, 0, nonzero);
                self.b.emit(mov64_imm(R1, 0));
                self.b.ja_to(done);
                self.b.bind(nonzero);
                let code = if op == Div { AluOp::Div } else { AluOp::Mod };
                if signed {
                    self.signed_div(code);
                } else {
                    self.b.emit(alu64_reg(code, R1, R2));
                }
                self.b.bind(done);
            }
            Shl | Shr => {
                // A count of the width or more (a negative one too, as a huge unsigned
                // count) shifts everything out.
                let in_range = self.b.new_label();
                let done = self.b.new_label();
                self.b.jmp_imm_to(JmpOp::Lt, R2, bits as i32, in_range);
                if op == Shr && signed {
                    self.b.emit(alu64_imm(AluOp::Arsh, R1, 63));
                } else {
                    self.b.emit(mov64_imm(R1, 0));
                }
                self.b.ja_to(done);
                self.b.bind(in_range);
                let code = match (op, signed) {
                    (Shl, _) => AluOp::Lsh,
                    (_, true) => AluOp::Arsh,
                    _ => AluOp::Rsh,
                };
                self.b.emit(alu64_reg(code, R1, R2));
                self.b.bind(done);
            }
            _ => return Err(LowerError::unsupported(span, "this operator")),
        }
        self.wrap(R1, ty);
        self.b.emit(mov64_reg(R0, R1));
        Ok(())
    }

    /// R1 = R1 / R2 or R1 % R2 (`code`), signed and truncated as Go's, R2 not 0: the
    /// unsigned operation on the magnitudes, then the sign (the quotient's is the signs'
    /// exclusive or, the remainder's the dividend's). BPF's own signed division (ISA v4,
    /// Linux 6.6) is not used: 6.1's verifier refuses it. MinInt64 / -1 wraps to MinInt64,
    /// as in Go. Clobbers R3 and R4.
    fn signed_div(&mut self, code: AluOp) {
        self.b.emit(mov64_reg(R3, R1));
        if code == AluOp::Div {
            self.b.emit(alu64_reg(AluOp::Xor, R3, R2));
        }
        self.b.emit(alu64_imm(AluOp::Arsh, R3, 63));
        for r in [R1, R2] {
            self.b.emit(mov64_reg(R4, r));
            self.b.emit(alu64_imm(AluOp::Arsh, R4, 63));
            self.b.emit(alu64_reg(AluOp::Xor, r, R4));
            self.b.emit(alu64_reg(AluOp::Sub, r, R4));
        }
        self.b.emit(alu64_reg(code, R1, R2));
        self.b.emit(alu64_reg(AluOp::Xor, R1, R3));
        self.b.emit(alu64_reg(AluOp::Sub, R1, R3));
    }

    /// R0 = `to(x)`: x's value truncated or extended to `to`, as Go converts.
    pub fn conversion(&mut self, x: &Expr, to: &Ty) -> Result<(), LowerError> {
        self.expr(x)?;
        self.wrap(R0, to);
        Ok(())
    }

    /// R0 = -operand, wrapped to its type.
    pub fn negate(&mut self, operand: &Expr, ty: &Ty) -> Result<(), LowerError> {
        if let Ty::Float { size } = ty {
            return self.float_negate(operand, *size);
        }
        self.expr(operand)?;
        self.b.emit(neg64(R0));
        self.wrap(R0, ty);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_as_their_type_holds_them() {
        let i8t = Ty::Int { size: 1, signed: true };
        let u16t = Ty::Int { size: 2, signed: false };
        assert_eq!(constant_bits(-1, &i8t), u64::MAX);
        assert_eq!(constant_bits(-1, &u16t), 0xffff);
        assert_eq!(constant_bits(200, &Ty::Int { size: 1, signed: false }), 200);
        assert_eq!(constant_bits(-5, &Ty::Duration), (-5i64) as u64);
        assert_eq!(constant_bits(u64::MAX as i128, &Ty::Int { size: 8, signed: false }), u64::MAX);
    }
}
