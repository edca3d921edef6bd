//! Operators, constants and conversions, typed as Go types them: the operands of a
//! binary operation have one type (an untyped constant takes the other side's type, if
//! it fits); a shift takes its left operand's type; `T(x)` converts between integer
//! types and durations. Untyped constant expressions are folded here, in 128 bits, and
//! their values kept in `Facts::consts`.

use super::super::ty::{Ty, I64, U64};
use super::Cx;
use crate::diag::Diagnostic;
use crate::syntax::ast::*;

/// The conversions a script can write, and the type each gives.
pub fn conversion(name: &str) -> Option<Ty> {
    let int = |size, signed| Some(Ty::Int { size, signed });
    match name {
        "int" | "int64" => int(8, true),
        "int8" => int(1, true),
        "int16" => int(2, true),
        "int32" | "rune" => int(4, true),
        "uint" | "uint64" | "uintptr" => int(8, false),
        "uint8" | "byte" => int(1, false),
        "uint16" => int(2, false),
        "uint32" => int(4, false),
        "duration" => Some(Ty::Duration),
        "float32" => Some(Ty::Float { size: 4 }),
        "float64" => Some(Ty::Float { size: 8 }),
        _ => None,
    }
}

/// Why floats cannot be computed with: said wherever arithmetic meets one.
pub const NO_FLOAT_MATH: &str = "eBPF has no floating point: gtrace compares floats, prints them and uses them as keys, but does not compute with them";

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

/// Types that arithmetic works on: integers and durations (Go's time.Duration is an
/// integer type).
fn arithmetic(t: &Ty) -> bool {
    matches!(t, Ty::Int { .. } | Ty::Duration)
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

    fn constant(&self, e: &Expr) -> Option<i128> {
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
    fn folded(&mut self, e: &Expr, v: i128) -> Ty {
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

    pub(super) fn unary(&mut self, e: &Expr, op: UnOp, operand: &Expr) -> Ty {
        let t = self.expr(operand);
        if let (UnOp::Neg, Some(text)) = (op, self.facts.floats.get(&operand.id).cloned()) {
            let negated = text.strip_prefix('-').map(str::to_string).unwrap_or_else(|| format!("-{text}"));
            self.facts.floats.insert(e.id, negated);
            return t;
        }
        match op {
            // A float's sign flips exactly (its sign bit), as Go's `-x` does.
            UnOp::Neg if matches!(t, Ty::Float { .. }) => t,
            UnOp::Neg if arithmetic(&t) && self.constant(operand).is_some() => {
                let v = self.constant(operand).unwrap_or(0);
                self.folded(e, -v)
            }
            UnOp::Neg if arithmetic(&t) => t,
            UnOp::Not if t == Ty::Bool => {
                if let Some(v) = self.facts.static_conds.get(&operand.id).copied() {
                    self.facts.static_conds.insert(e.id, !v);
                    self.facts.consts.insert(e.id, i128::from(!v));
                }
                Ty::Bool
            }
            UnOp::Deref => self.deref(e, t),
            _ => {
                let sym = if op == UnOp::Neg { "-" } else { "!" };
                if t != Ty::Void {
                    self.err(
                        Diagnostic::error(e.span, format!("`{sym}` cannot apply to a {}", t.describe()))
                            .label("wrong type"),
                    );
                }
                Ty::Void
            }
        }
    }

    /// `T(x)`: a conversion between integer types and durations, as Go converts them
    /// (truncated or extended to T's width); a constant must fit T.
    pub(super) fn convert(&mut self, e: &Expr, to: Ty, name: &str, args: &[Expr]) -> Ty {
        let [x] = args else {
            self.err(
                Diagnostic::error(e.span, format!("the conversion {name}(x) takes one value"))
                    .label("wrong number of arguments"),
            );
            return Ty::Void;
        };
        let t = self.expr(x);
        if t == Ty::Void {
            return Ty::Void;
        }
        if matches!(to, Ty::Float { .. }) || matches!(t, Ty::Float { .. }) {
            // Only constants convert to floats (`float64(1)`): converting values needs
            // floating point.
            if self.untyped(x) && self.adapt(x, &to) {
                if let Some(text) = self.facts.floats.get(&x.id).cloned() {
                    self.facts.floats.insert(e.id, text);
                } else if let Some(v) = self.constant(x) {
                    self.facts.consts.insert(e.id, v);
                }
                return to;
            }
            if !self.untyped(x) {
                self.err(
                    Diagnostic::error(x.span, format!("cannot convert {} to {name}", t.a()))
                        .label("a conversion to or from a float")
                        .hint(NO_FLOAT_MATH),
                );
            }
            return Ty::Void;
        }
        let pointer_to_uintptr = matches!(t, Ty::Pointer { .. }) && name == "uintptr";
        if !arithmetic(&t) && !pointer_to_uintptr {
            self.err(
                Diagnostic::error(x.span, format!("cannot convert {} to {name}", t.a()))
                    .label("not an integer or a duration")
                    .hint("conversions go between integer types and durations (and a pointer to uintptr)"),
            );
            return Ty::Void;
        }
        if self.constant(x).is_some() && !self.adapt(x, &to) {
            return Ty::Void;
        }
        to
    }

    /// `string(b)` of a Go `[]byte` (or `[]uint8`): its bytes as a string, as Go converts
    /// it. The slice's header starts as a string's does (data, len), so the string is
    /// read from the slice's own place (`Facts::go_types` keeps the slice's type).
    pub(super) fn bytes_to_string(&mut self, e: &Expr, args: &[Expr]) -> Ty {
        let [x] = args else {
            self.err(
                Diagnostic::error(e.span, "the conversion string(x) takes one value")
                    .label("wrong number of arguments"),
            );
            return Ty::Void;
        };
        let t = self.expr(x);
        let bytes = match self.facts.go_types.get(&x.id) {
            Some(id) => match self.types.get(*id).kind {
                crate::gotypes::TypeKind::Slice { elem } => {
                    self.types.get(elem).size == 1
                        && matches!(self.types.get(elem).kind, crate::gotypes::TypeKind::Int { .. })
                }
                _ => false,
            },
            None => false,
        };
        if t == Ty::Void {
            return Ty::Void;
        }
        if matches!(t, Ty::Str { .. }) {
            return t;
        }
        if !bytes {
            let what = match self.facts.go_types.get(&x.id) {
                Some(id) => format!("a {}", self.types.get(*id).name),
                None => t.a(),
            };
            self.err(
                Diagnostic::error(x.span, format!("cannot convert {what} to string"))
                    .label("not a []byte")
                    .hint("string(x) converts a Go []byte (or []uint8) to the string of its bytes"),
            );
            return Ty::Void;
        }
        let id = self.facts.go_types[&x.id];
        self.facts.go_types.insert(e.id, id);
        Ty::Str { max: self.string_limit }
    }

    pub(super) fn binary(&mut self, e: &Expr, op: BinOp, lhs: &Expr, rhs: &Expr) -> Ty {
        let mut l = self.expr(lhs);
        let mut r = self.expr(rhs);
        if l == Ty::Void || r == Ty::Void {
            return Ty::Void;
        }
        // An untyped float constant meets a typed value: it takes that value's type
        // (`n > 1e9` with an integer n, `f < 0.5` with a float32 f), as in Go.
        if self.facts.floats.contains_key(&lhs.id) && !self.untyped(rhs) && l != r {
            if !self.adapt(lhs, &r) {
                return Ty::Void;
            }
            l = r.clone();
        }
        if self.facts.floats.contains_key(&rhs.id) && !self.untyped(lhs) && l != r {
            if !self.adapt(rhs, &l) {
                return Ty::Void;
            }
            r = l.clone();
        }
        use BinOp::*;
        if matches!(l, Ty::Float { .. }) || matches!(r, Ty::Float { .. }) {
            return self.float_binary(e, op, lhs, rhs, l, r);
        }
        match op {
            And | Or if l == Ty::Bool && r == Ty::Bool => Ty::Bool,
            And | Or => self.mismatch(e, op, &l, &r, "both sides must be bools", None),
            Shl | Shr => self.shift(e, op, lhs, rhs, l, r),
            Eq | Ne | Lt | Le | Gt | Ge => self.comparison(e, op, lhs, rhs, l, r),
            _ => self.arith(e, op, lhs, rhs, l, r),
        }
    }

    /// `+ - * / % & | ^`: both sides of one type; two constants fold.
    fn arith(&mut self, e: &Expr, op: BinOp, lhs: &Expr, rhs: &Expr, l: Ty, r: Ty) -> Ty {
        if !arithmetic(&l) || !arithmetic(&r) {
            return self.mismatch(e, op, &l, &r, "both sides must be integers or durations", None);
        }
        if matches!(op, BinOp::Div | BinOp::Rem) && self.constant(rhs) == Some(0) {
            // Go's compiler refuses it too; a divisor that is zero only at run time gives 0.
            self.err(Diagnostic::error(rhs.span, "division by zero").label("a constant zero"));
            return Ty::Void;
        }
        match (self.constant(lhs), self.constant(rhs)) {
            (Some(a), Some(b)) => match fold(op, a, b) {
                Ok(v) => self.folded(e, v),
                Err(why) => {
                    self.err(Diagnostic::error(e.span, why).label("in this constant"));
                    Ty::Void
                }
            },
            (Some(_), None) => {
                if self.adapt(lhs, &r) {
                    r
                } else {
                    Ty::Void
                }
            }
            (None, Some(_)) => {
                if self.adapt(rhs, &l) {
                    l
                } else {
                    Ty::Void
                }
            }
            (None, None) if l == r => l,
            (None, None) => self.mismatch(e, op, &l, &r, "mismatched types", Some(conversion_hint(&l, &r))),
        }
    }

    /// `x << s`, `x >> s`: the type of x; s any integer (a constant must not be negative).
    fn shift(&mut self, e: &Expr, op: BinOp, lhs: &Expr, rhs: &Expr, l: Ty, r: Ty) -> Ty {
        if !arithmetic(&l) || !r.is_integer() {
            return self.mismatch(e, op, &l, &r, "shift an integer by an integer count", None);
        }
        if let Some(s) = self.constant(rhs) {
            if s < 0 {
                self.err(Diagnostic::error(rhs.span, format!("negative shift count {s}")).label("must be >= 0"));
                return Ty::Void;
            }
            if let Some(x) = self.constant(lhs) {
                let v = if op == BinOp::Shl {
                    u32::try_from(s).ok().and_then(|s| x.checked_shl(s)).filter(|v| (v >> s.min(127)) == x)
                } else {
                    Some(if s > 127 { x >> 127 } else { x >> s })
                };
                return match v {
                    Some(v) => self.folded(e, v),
                    None => {
                        self.err(Diagnostic::error(e.span, "constant shift overflows").label("constant overflow"));
                        Ty::Void
                    }
                };
            }
            self.facts.types.insert(rhs.id, U64);
        }
        // A constant shifted by a count known only when the probe runs is an int64.
        if self.constant(lhs).is_some() {
            return if self.adapt(lhs, &I64) { I64 } else { Ty::Void };
        }
        l
    }

    fn comparison(&mut self, e: &Expr, op: BinOp, lhs: &Expr, rhs: &Expr, l: Ty, r: Ty) -> Ty {
        use BinOp::*;
        let ordered = !matches!(op, Eq | Ne);
        if arithmetic(&l) && arithmetic(&r) {
            let ok = match (self.constant(lhs), self.constant(rhs)) {
                (Some(a), Some(b)) => {
                    // Folded: the comparison is the constant 1 or 0.
                    let v = match op {
                        Eq => a == b,
                        Ne => a != b,
                        Lt => a < b,
                        Le => a <= b,
                        Gt => a > b,
                        _ => a >= b,
                    };
                    self.facts.consts.insert(e.id, i128::from(v));
                    true
                }
                (Some(_), None) => self.adapt(lhs, &r),
                (None, Some(_)) => self.adapt(rhs, &l),
                (None, None) if l == r => true,
                (None, None) => {
                    return self.mismatch(e, op, &l, &r, "mismatched types", Some(conversion_hint(&l, &r)));
                }
            };
            return if ok { Ty::Bool } else { Ty::Void };
        }
        match (&l, &r) {
            (Ty::Bool, Ty::Bool) if !ordered => Ty::Bool,
            (Ty::Str { .. }, Ty::Str { .. }) if !ordered => {
                if matches!(lhs.kind, ExprKind::Str(_)) || matches!(rhs.kind, ExprKind::Str(_)) {
                    Ty::Bool
                } else {
                    self.err(
                        Diagnostic::error(e.span, "strings are compared with a string literal")
                            .label("neither side is a literal")
                            .hint("compare with \"...\" or use hasPrefix(s, \"...\")"),
                    );
                    Ty::Void
                }
            }
            (Ty::Pointer { elem: a }, Ty::Pointer { elem: b }) if !ordered => {
                if a == b {
                    Ty::Bool
                } else {
                    let (a, b) = (self.pointer_name(*a), self.pointer_name(*b));
                    self.err(
                        Diagnostic::error(e.span, format!("`{}` cannot compare a {a} with a {b}", op.symbol()))
                            .label("mismatched pointer types"),
                    );
                    Ty::Void
                }
            }
            _ if !ordered && (self.nilable(&l) && r == Ty::Nil || l == Ty::Nil && self.nilable(&r)) => Ty::Bool,
            _ => self.mismatch(e, op, &l, &r, "these cannot be compared", None),
        }
    }

    /// An operation with a float on one side: comparisons of one float type (a constant
    /// takes the other side's), nothing else.
    fn float_binary(&mut self, e: &Expr, op: BinOp, lhs: &Expr, rhs: &Expr, l: Ty, r: Ty) -> Ty {
        use BinOp::*;
        if !matches!(op, Eq | Ne | Lt | Le | Gt | Ge) {
            let floats = if l == r || self.untyped(lhs) || self.untyped(rhs) {
                format!("{} values", if matches!(l, Ty::Float { .. }) { l.describe() } else { r.describe() })
            } else {
                format!("{} and {}", l.a(), r.a())
            };
            self.err(
                Diagnostic::error(e.span, format!("`{}` cannot apply to {floats}", op.symbol()))
                    .label("arithmetic on floats")
                    .hint(NO_FLOAT_MATH),
            );
            return Ty::Void;
        }
        let ok = match (self.untyped(lhs), self.untyped(rhs)) {
            (true, true) => {
                self.err(
                    Diagnostic::error(e.span, "a comparison of two constants")
                        .label("known before the probe runs")
                        .hint("compare a Go value with a constant"),
                );
                return Ty::Void;
            }
            (true, false) => self.adapt(lhs, &r),
            (false, true) => self.adapt(rhs, &l),
            (false, false) if l == r => true,
            (false, false) => {
                return self.mismatch(e, op, &l, &r, "mismatched types", Some(format!("both sides must be {}", l.a())));
            }
        };
        if ok {
            Ty::Bool
        } else {
            Ty::Void
        }
    }

    fn pointer_name(&self, elem: Option<crate::gotypes::TypeId>) -> String {
        match elem {
            Some(id) => format!("*{}", self.types.get(id).name),
            None => "unsafe.Pointer".to_string(),
        }
    }

    fn mismatch(&mut self, e: &Expr, op: BinOp, l: &Ty, r: &Ty, why: &str, hint: Option<String>) -> Ty {
        let message = format!("`{}` cannot apply to {} and {}", op.symbol(), l.a(), r.a());
        self.err(Diagnostic::error(e.span, message).label(why.to_string()).hint_if(hint));
        Ty::Void
    }
}

/// How to make two types meet, as Go asks: convert one side.
fn conversion_hint(l: &Ty, r: &Ty) -> String {
    format!("convert one side, as in Go: {}(left) or {}(right)", r.describe(), l.describe())
}

/// `a op b` on untyped constants, as Go evaluates constant expressions (exactly; an
/// error where Go's compiler gives one).
fn fold(op: BinOp, a: i128, b: i128) -> Result<i128, String> {
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
