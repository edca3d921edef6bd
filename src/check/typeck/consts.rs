//! Untyped constants, as Go types them: integer and float literals, constant
//! expressions folded exactly in 128 bits and kept in `Facts::consts` (`fold`), whether
//! a value fits a type, a float constant's bits once rounded, and an untyped constant
//! given the type of the other side of an operation (`adapt`).

use super::super::ty::{Ty, I64, U64};
use super::Cx;
use crate::diag::Diagnostic;
use crate::syntax::ast::*;

/// The integer an untyped float constant stands for, when it is a whole number that fits
/// 128 bits (`1e9`, `2.0`, `-3e2`), computed from its decimal text exactly.
pub fn float_as_integer(text: &str) -> Option<i128> {
    let (neg, t) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    // value = digits * 10^(exp - len(frac))
    let mut scale = exp.checked_sub(i32::try_from(frac.len()).ok()?)?;
    let mut digits = digits.trim_start_matches('0').to_string();
    while scale < 0 {
        digits = digits.strip_suffix('0')?.to_string();
        scale += 1;
    }
    let mut v: i128 = 0;
    for d in digits.bytes() {
        v = v.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
    }
    for _ in 0..scale {
        if v == 0 {
            break;
        }
        v = v.checked_mul(10)?;
    }
    Some(if neg { -v } else { v })
}

/// The bits of the untyped float constant `text` rounded once to a float of `size`
/// bytes, as Go rounds a constant; `None` when it overflows that type.
pub fn float_bits(text: &str, size: u8) -> Option<u64> {
    if size == 4 {
        let v: f32 = text.parse().ok()?;
        v.is_finite().then(|| u64::from(v.to_bits()))
    } else {
        let v: f64 = text.parse().ok()?;
        v.is_finite().then(|| v.to_bits())
    }
}

/// Whether the constant `v` fits in a value of type `ty`.
pub fn representable(v: i128, ty: &Ty) -> bool {
    match ty {
        Ty::Int { size, signed: true } => {
            let bits = u32::from(*size) * 8;
            v >= -(1i128 << (bits - 1)) && v < 1i128 << (bits - 1)
        }
        Ty::Int { size, signed: false } => v >= 0 && v < 1i128 << (u32::from(*size) * 8),
        Ty::Duration => i64::try_from(v).is_ok(),
        _ => false,
    }
}

impl Cx<'_> {
    /// An integer literal: an untyped constant, typed int64 while nothing else says
    /// (uint64 when it does not fit an int64).
    pub(super) fn int_literal(&mut self, e: &Expr, v: u64) -> Ty {
        self.facts.consts.insert(e.id, i128::from(v));
        if v > i64::MAX as u64 {
            U64
        } else {
            I64
        }
    }

    pub(super) fn constant(&self, e: &Expr) -> Option<i128> {
        self.facts.consts.get(&e.id).copied()
    }

    /// A float literal: an untyped constant, typed float64 while nothing else says.
    pub(super) fn float_literal(&mut self, e: &Expr, text: &str) -> Ty {
        if float_bits(text, 8).is_none() {
            self.err(Diagnostic::error(e.span, format!("constant {text} overflows float64")).label("too large"));
            return Ty::Void;
        }
        self.facts.floats.insert(e.id, text.to_string());
        Ty::Float { size: 8 }
    }

    /// Is `e` an untyped constant (an integer or a float)?
    pub(super) fn untyped(&self, e: &Expr) -> bool {
        self.facts.consts.contains_key(&e.id) || self.facts.floats.contains_key(&e.id)
    }

    /// Gives the untyped float constant `e` the type `to`: a float of that width (rounded
    /// once), or an integer when it is a whole number (`1e9`), as Go does.
    fn adapt_float(&mut self, e: &Expr, text: &str, to: &Ty) -> bool {
        match to {
            Ty::Float { size } => {
                if float_bits(text, *size).is_none() {
                    self.err(
                        Diagnostic::error(e.span, format!("constant {text} overflows {}", to.describe()))
                            .label(format!("does not fit {}", to.a())),
                    );
                    return false;
                }
                self.facts.types.insert(e.id, to.clone());
                true
            }
            Ty::Int { .. } | Ty::Duration => match float_as_integer(text) {
                Some(v) => {
                    self.facts.floats.remove(&e.id);
                    self.facts.consts.insert(e.id, v);
                    self.adapt(e, to)
                }
                None => {
                    self.err(
                        Diagnostic::error(e.span, format!("constant {text} truncated to {}", to.describe()))
                            .label("not a whole number")
                            .hint("an untyped constant takes the type of the other operand, as in Go"),
                    );
                    false
                }
            },
            _ => {
                self.err(
                    Diagnostic::error(e.span, format!("cannot use the constant {text} as {}", to.a()))
                        .label("a float constant"),
                );
                false
            }
        }
    }

    /// Records `e` as the untyped constant `v` (typed int64, or uint64 when it does not
    /// fit an int64); an error when it fits neither.
    pub(super) fn folded(&mut self, e: &Expr, v: i128) -> Ty {
        if !(representable(v, &I64) || representable(v, &U64)) {
            self.err(
                Diagnostic::error(e.span, format!("constant {v} overflows a 64-bit integer"))
                    .label("constant overflow"),
            );
            return Ty::Void;
        }
        self.facts.consts.insert(e.id, v);
        if representable(v, &I64) {
            I64
        } else {
            U64
        }
    }

    /// Gives the untyped constant `e` the type `to`, if its value fits (Go's rule).
    pub(super) fn adapt(&mut self, e: &Expr, to: &Ty) -> bool {
        if let Some(text) = self.facts.floats.get(&e.id).cloned() {
            return self.adapt_float(e, &text, to);
        }
        let Some(v) = self.constant(e) else { return true };
        if matches!(to, Ty::Float { .. }) {
            // An integer constant as a float: rounded when lowered, as Go rounds it.
            self.facts.types.insert(e.id, to.clone());
            return true;
        }
        if !representable(v, to) {
            self.err(
                Diagnostic::error(e.span, format!("constant {v} overflows {}", to.describe()))
                    .label(format!("does not fit {}", to.a()))
                    .hint("an untyped constant takes the type of the other operand, as in Go"),
            );
            return false;
        }
        self.facts.types.insert(e.id, to.clone());
        true
    }
}

/// `a op b` on untyped constants, as Go evaluates constant expressions (exactly; an
/// error where Go's compiler gives one).
pub(super) fn fold(op: BinOp, a: i128, b: i128) -> Result<i128, String> {
    use BinOp::*;
    let v = match op {
        Add => a.checked_add(b),
        Sub => a.checked_sub(b),
        Mul => a.checked_mul(b),
        Div | Rem if b == 0 => return Err("division by zero in a constant".into()),
        Div => a.checked_div(b),
        Rem => a.checked_rem(b),
        BitAnd => Some(a & b),
        BitOr => Some(a | b),
        BitXor => Some(a ^ b),
        _ => None,
    };
    v.ok_or_else(|| "constant overflow".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_fit_as_go_says() {
        assert!(representable(127, &Ty::Int { size: 1, signed: true }));
        assert!(!representable(128, &Ty::Int { size: 1, signed: true }));
        assert!(representable(-128, &Ty::Int { size: 1, signed: true }));
        assert!(!representable(-1, &Ty::Int { size: 4, signed: false }));
        assert!(representable(u64::MAX as i128, &U64));
        assert!(!representable(1 << 64, &U64));
        assert!(representable(i64::MIN as i128, &Ty::Duration));
    }

    #[test]
    fn constant_folding() {
        assert_eq!(fold(BinOp::Div, -7, 2), Ok(-3));
        assert_eq!(fold(BinOp::Rem, -7, 2), Ok(-1));
        assert!(fold(BinOp::Div, 1, 0).is_err());
        assert!(fold(BinOp::Mul, i128::MAX, 2).is_err());
    }
}
