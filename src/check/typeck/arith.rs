//! Operators and conversions, typed as Go types them: the operands of a binary
//! operation have one type (an untyped constant takes the other side's type, if it
//! fits: consts.rs); a shift takes its left operand's type; `T(x)` converts between
//! integer types and durations. Untyped constant expressions are folded here, in 128
//! bits (`consts::fold`).

use super::super::ty::{Ty, I64, U64};
use super::consts::fold;
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

/// Types that arithmetic works on: integers and durations (Go's time.Duration is an
/// integer type).
fn arithmetic(t: &Ty) -> bool {
    matches!(t, Ty::Int { .. } | Ty::Duration)
}

impl Cx<'_> {
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
