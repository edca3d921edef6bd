//! Calls: aggregations, the statements that look like calls (print, printf, delete,
//! clear, exit), and the builtin functions that give values (len, hasPrefix).

use super::super::keynames::KeyName;
use super::super::maps::MapValueTy;
use super::super::ty::{Ty, I64, U64};
use super::Cx;
use crate::diag::Diagnostic;
use crate::gotypes::TypeKind;
use crate::plan::Agg;
use crate::syntax::ast::*;
use crate::syntax::format::{self, Piece};

pub fn agg_of(name: &str) -> Option<&'static str> {
    ["count", "sum", "avg", "min", "max", "stats", "hist", "lhist"].into_iter().find(|a| *a == name)
}

impl Cx<'_> {
    /// An aggregation call: its map value type, or None after an error.
    pub(super) fn agg(&mut self, func: &Ident, args: &[Expr], call: &Expr) -> Option<MapValueTy> {
        let want = match func.name.as_str() {
            "count" => 0,
            "lhist" => 4,
            _ => 1,
        };
        if args.len() != want {
            self.err(
                Diagnostic::error(
                    call.span,
                    format!(
                        "{}() takes {} argument{}, not {}",
                        func.name,
                        want,
                        if want == 1 { "" } else { "s" },
                        args.len()
                    ),
                )
                .label("wrong number of arguments"),
            );
            return None;
        }
        self.facts.types.insert(call.id, Ty::Void);
        if func.name == "count" {
            return Some(MapValueTy::Agg { agg: Agg::Count, of: U64 });
        }
        let of = self.expr(&args[0]);
        if of == Ty::Void {
            return None; // already reported
        }
        if !(of.is_integer() || of == Ty::Duration) {
            let mut d = Diagnostic::error(
                args[0].span,
                format!("{}() needs an integer or a duration, not a {}", func.name, of.describe()),
            )
            .label("not a number");
            if matches!(of, Ty::Float { .. }) {
                d = d.hint(super::arith::NO_FLOAT_MATH).hint("count floats by value instead: `@m[x] = count()`");
            }
            self.err(d);
            return None;
        }
        let agg = match func.name.as_str() {
            "sum" => Agg::Sum,
            "avg" => Agg::Avg,
            "min" => Agg::Min,
            "max" => Agg::Max,
            "stats" => Agg::Stats,
            "hist" => Agg::Hist,
            _ => {
                let mut lit = [0i64; 3];
                for (i, a) in args[1..].iter().enumerate() {
                    match const_int(a) {
                        Ok(v) => lit[i] = v,
                        Err(why) => {
                            self.err(
                                Diagnostic::error(
                                    a.span,
                                    format!("lhist bounds must be integer or duration literals: {why}"),
                                )
                                .label("not a bound"),
                            );
                            return None;
                        }
                    }
                }
                let [lo, hi, step] = lit;
                if let Err((why, hint)) = lhist_shape(lo, hi, step) {
                    self.err(Diagnostic::error(call.span, why).label("bad bounds").hint(hint));
                    return None;
                }
                Agg::Lhist { lo, hi, step }
            }
        };
        Some(MapValueTy::Agg { agg, of })
    }

    pub(super) fn expr_stmt(&mut self, e: &Expr) {
        let ExprKind::Call { func, args, names } = &e.kind else {
            self.expr(e);
            self.err(
                Diagnostic::error(e.span, "this expression does nothing")
                    .label("value unused")
                    .hint("assign it, or print it with print(...)"),
            );
            return;
        };
        if agg_of(&func.name).is_some() {
            self.bare_aggregation(e, func, args);
            return;
        }
        if func.name == "span" {
            self.span(e, args, names);
            self.facts.types.insert(e.id, Ty::Void);
            return;
        }
        self.positional(func, names);
        if func.name == "trace_context" {
            self.trace_context(e, args);
            self.facts.types.insert(e.id, Ty::Void);
            return;
        }
        match func.name.as_str() {
            "print" => self.print(e, args),
            "printf" => self.printf(e, args),
            "delete" => self.delete(e, args),
            "clear" => self.clear(e, args),
            "exit" => {
                if !args.is_empty() {
                    self.err(Diagnostic::error(e.span, "exit() takes no arguments").label("unexpected arguments"));
                }
            }
            _ => {
                let t = self.expr(e);
                if t != Ty::Void {
                    self.err(
                        Diagnostic::error(e.span, "this expression does nothing")
                            .label("value unused")
                            .hint("assign it, or print it"),
                    );
                }
            }
        }
        self.facts.types.insert(e.id, Ty::Void);
    }

    /// A bare aggregation: into the implicit map `@`, keyed by the probed function.
    fn bare_aggregation(&mut self, e: &Expr, func: &Ident, args: &[Expr]) {
        let Some(v) = self.agg(func, args, e) else { return };
        if !self.has_function {
            self.err(
                Diagnostic::error(e.span, "a bare aggregation is keyed by the probed function; this probe has none")
                    .label("no function here")
                    .hint("aggregate into a map: `@name = count()`"),
            );
            return;
        }
        let key = KeyName { name: "func".into(), explicit: false, span: e.span };
        self.maps.declare("", vec![Ty::Func], vec![key], v, e.span, self.diags);
    }

    /// `print(...)`: a whole map alone, or values that can be stored.
    fn print(&mut self, e: &Expr, args: &[Expr]) {
        if args.is_empty() {
            self.err(Diagnostic::error(e.span, "print() needs something to print").label("no arguments"));
        }
        for a in args {
            if let ExprKind::Map(m) = &a.kind {
                if m.keys.is_empty() && args.len() == 1 {
                    self.maps.reference(m);
                    self.maps.whole.insert(m.name.name.clone());
                    continue;
                }
            }
            let t = self.expr(a);
            self.storable(a, &t, "printed");
        }
    }

    /// `delete(@m[key])`: one element.
    fn delete(&mut self, e: &Expr, args: &[Expr]) {
        match args {
            [Expr { kind: ExprKind::Map(m), .. }] if !m.keys.is_empty() => {
                self.keys(m);
                self.maps.reference(m);
                self.maps.deleted.insert(m.name.name.clone());
            }
            _ => self.err(
                Diagnostic::error(e.span, "delete takes one map element: `delete(@m[key])`").label("not a map element"),
            ),
        }
    }

    /// `clear(@m)`: a whole map.
    fn clear(&mut self, e: &Expr, args: &[Expr]) {
        match args {
            [Expr { kind: ExprKind::Map(m), .. }] if m.keys.is_empty() => {
                self.maps.reference(m);
                self.maps.whole.insert(m.name.name.clone());
                self.maps.cleared.insert(m.name.name.clone());
            }
            _ => self.err(Diagnostic::error(e.span, "clear takes one map: `clear(@m)`").label("not a map")),
        }
    }

    /// Only span() names its arguments.
    pub(super) fn positional(&mut self, func: &Ident, names: &[Option<Ident>]) {
        if let Some(n) = names.iter().flatten().next() {
            self.err(
                Diagnostic::error(n.span, format!("{}() takes its arguments in order, without names", func.name))
                    .label("a named argument")
                    .hint("only span() names its arguments (its attributes)"),
            );
        }
    }

    pub(super) fn printf(&mut self, e: &Expr, args: &[Expr]) {
        let Some((first, rest)) = args.split_first() else {
            self.err(Diagnostic::error(e.span, "printf needs a format string").label("no format"));
            return;
        };
        let ExprKind::Str(fmt) = &first.kind else {
            self.err(
                Diagnostic::error(first.span, "the format of printf must be a string literal").label("not a literal"),
            );
            return;
        };
        self.facts.types.insert(first.id, Ty::Str { max: fmt.len() as u32 });
        let pieces = match format::parse(fmt) {
            Ok(p) => p,
            Err(fe) => {
                self.err(Diagnostic::error(verb_span(first.span, fmt, fe.at, fe.end), fe.message).label("bad format"));
                return;
            }
        };
        let verbs: Vec<_> = pieces.iter().filter_map(|p| if let Piece::Verb(v) = p { Some(v) } else { None }).collect();
        if verbs.len() != rest.len() {
            self.err(
                Diagnostic::error(
                    e.span,
                    format!(
                        "the format has {} verb{} but {} value{} follow{}",
                        verbs.len(),
                        if verbs.len() == 1 { "" } else { "s" },
                        rest.len(),
                        if rest.len() == 1 { "" } else { "s" },
                        if rest.len() == 1 { "s" } else { "" }
                    ),
                )
                .label("count mismatch"),
            );
        }
        for (v, a) in verbs.iter().zip(rest) {
            let t = self.expr(a);
            self.facts.printed.push(a.id);
            if t == Ty::Void {
                continue; // already reported
            }
            let ok = match v.verb {
                'v' => t != Ty::Void && !matches!(t, Ty::Args | Ty::Nil),
                'd' | 'i' | 'u' | 'c' | 'o' => t.is_numeric() || t == Ty::Bool,
                'x' | 'X' => t.is_numeric() || matches!(t, Ty::Str { .. }),
                's' => matches!(t, Ty::Str { .. } | Ty::Func | Ty::Interface),
                'q' => matches!(t, Ty::Str { .. } | Ty::Func),
                't' => t == Ty::Bool,
                'p' => matches!(t, Ty::Pointer { .. }) || t.is_integer(),
                'e' | 'E' | 'f' | 'F' | 'g' | 'G' => matches!(t, Ty::Float { .. }),
                _ => false,
            };
            if !ok {
                self.err(
                    Diagnostic::error(a.span, format!("%{} cannot print a {}", v.verb, t.describe()))
                        .label("wrong verb for this value")
                        .hint("%v prints any value"),
                );
            }
        }
    }

    /// `defined(x)`: whether `x` can be read at this probe in this binary (a package
    /// variable, a field, a parameter), a constant known now. Typing `x` reports nothing:
    /// its errors only make the answer false.
    fn defined(&mut self, e: &Expr, args: &[Expr]) -> Ty {
        let [x] = args else {
            self.err(Diagnostic::error(e.span, "defined takes one value: `defined(pkg.Var)`").label("wrong arguments"));
            return Ty::Void;
        };
        let mut quiet = crate::diag::Diagnostics::default();
        std::mem::swap(self.diags, &mut quiet);
        let t = self.expr(x);
        std::mem::swap(self.diags, &mut quiet);
        let yes = t != Ty::Void && !quiet.has_errors();
        self.facts.static_conds.insert(e.id, yes);
        self.facts.consts.insert(e.id, i128::from(yes));
        Ty::Bool
    }

    /// A type for messages: the Go type's name when it is one (`a map[string]int`).
    /// `take(@m[k])`: the element's value, deleted; of two probes taking it at once, one
    /// gets it and the other 0 (the kernel's delete succeeds once). A number only (an
    /// integer, a duration, a pointer): what a map element read gives in a register.
    fn take(&mut self, e: &Expr, args: &[Expr], tys: &[Ty]) -> Ty {
        match (args, tys) {
            ([Expr { kind: ExprKind::Map(m), .. }], [t @ (Ty::Int { .. } | Ty::Duration | Ty::Pointer { .. })])
                if !m.keys.is_empty() =>
            {
                self.maps.deleted.insert(m.name.name.clone());
                t.clone()
            }
            ([Expr { kind: ExprKind::Map(m), .. }], [Ty::Void]) if !m.keys.is_empty() => Ty::Void,
            _ => {
                self.err(
                    Diagnostic::error(e.span, "take takes one map element that holds a number: `take(@m[key])`")
                        .label("not a map element holding a number"),
                );
                Ty::Void
            }
        }
    }

    fn what(&self, t: &Ty) -> String {
        match t {
            Ty::Go(id) => format!("a {}", self.types.get(*id).name),
            _ => t.a(),
        }
    }

    pub(super) fn call(&mut self, e: &Expr, func: &Ident, args: &[Expr]) -> Ty {
        if let Some(to) = super::arith::conversion(&func.name) {
            return self.convert(e, to, &func.name, args);
        }
        if func.name == "defined" {
            return self.defined(e, args);
        }
        if func.name == "string" {
            return self.bytes_to_string(e, args);
        }
        let tys: Vec<Ty> = args.iter().map(|a| self.expr(a)).collect();
        match func.name.as_str() {
            "take" => return self.take(e, args, &tys),
            "len" | "cap" => {
                let name = func.name.as_str();
                if args.len() != 1 {
                    self.err(
                        Diagnostic::error(e.span, format!("{name} takes one argument"))
                            .label("wrong number of arguments"),
                    );
                    return Ty::Void;
                }
                // As in Go: len of strings, slices, arrays, maps and channels; cap of
                // slices, arrays and channels.
                let ok = match &tys[0] {
                    Ty::Str { .. } => name == "len",
                    Ty::Go(id) => match self.types.get(*id).kind {
                        TypeKind::Slice { .. } | TypeKind::Array { .. } | TypeKind::Chan => true,
                        TypeKind::Map { .. } => name == "len",
                        _ => false,
                    },
                    _ => false,
                };
                if !ok {
                    if tys[0] != Ty::Void {
                        let what = if name == "len" {
                            "a string, slice, array, map or channel"
                        } else {
                            "a slice, array or channel"
                        };
                        self.err(
                            Diagnostic::error(args[0].span, format!("{name} needs {what}, not {}", self.what(&tys[0])))
                                .label(if name == "len" { "no length" } else { "no capacity" }),
                        );
                    }
                    return Ty::Void;
                }
                return I64;
            }
            "hasPrefix" => {
                let lit = matches!(args.get(1).map(|a| &a.kind), Some(ExprKind::Str(_)));
                if args.len() != 2 || !matches!(tys[0], Ty::Str { .. }) || !lit {
                    self.err(
                        Diagnostic::error(
                            e.span,
                            "hasPrefix takes a string and a string literal: hasPrefix(s, \"/api/\")",
                        )
                        .label("wrong arguments"),
                    );
                    return Ty::Void;
                }
                return Ty::Bool;
            }
            _ => {}
        }
        let what = if agg_of(&func.name).is_some() {
            format!(
                "{}() is an aggregation: it goes in a statement of its own, or as `@map[keys] = {}(...)`",
                func.name, func.name
            )
        } else if ["print", "printf", "exit", "delete", "clear", "span", "trace_context"].contains(&func.name.as_str())
        {
            format!("{}() is a statement, not a value", func.name)
        } else {
            format!("unknown function `{}`", crate::diag::echoed(&func.name))
        };
        self.err(Diagnostic::error(func.span, what).label("not a value here"));
        Ty::Void
    }
}

/// The value of an integer or duration literal, possibly negated, in an int64.
fn const_int(e: &Expr) -> Result<i64, &'static str> {
    match &e.kind {
        ExprKind::Int(v) | ExprKind::Duration(v) => i64::try_from(*v).map_err(|_| "this one is larger than an int64"),
        ExprKind::Unary { op: UnOp::Neg, operand } => const_int(operand).map(|v| -v),
        _ => Err("this is not one"),
    }
}

/// Why `lhist(x, lo, hi, step)` cannot be made, and a hint; computed in checked
/// arithmetic, so any bounds are judged right.
fn lhist_shape(lo: i64, hi: i64, step: i64) -> Result<u32, (String, String)> {
    if step <= 0 {
        return Err(("lhist(x, lo, hi, step) needs step > 0".into(), "step is the width of one bucket".into()));
    }
    if hi <= lo {
        return Err(("lhist(x, lo, hi, step) needs lo < hi".into(), "buckets go from lo up to hi".into()));
    }
    let span = i128::from(hi) - i128::from(lo);
    let n = (span + i128::from(step) - 1) / i128::from(step) + 2;
    let max = crate::plan::LHIST_MAX_BUCKETS;
    if n > i128::from(max) {
        let least = (span + i128::from(max) - 3) / i128::from(max - 2);
        return Err((
            format!("lhist(x, {lo}, {hi}, {step}) would have {n} buckets, more than {max}"),
            format!("a step of {least} or more keeps it to {max}, or narrow lo..hi"),
        ));
    }
    Ok(crate::plan::lhist_buckets(lo, hi, step))
}

/// Where the bytes `at..end` of a format string are in the script: inside the literal
/// when nothing before `end` was written as an escape, the whole literal otherwise.
/// The literal's source is longer than its text by what its escapes add; each of `"`,
/// `\\` and a line break after `end` must be an escape adding at least one byte, so when
/// they account for all of it, the source up to `end` is the text itself.
fn verb_span(literal: Span, fmt: &str, at: usize, end: usize) -> Span {
    let added = ((literal.end - literal.start) as usize).checked_sub(fmt.len() + 2);
    let escaped_after = fmt.get(end..).map(|t| t.chars().filter(|c| matches!(c, '"' | '\\' | '\n' | '\r')).count());
    if at < end && added.is_some() && added == escaped_after {
        let start = literal.start as usize + 1;
        Span::new(literal.file, start + at, start + end)
    } else {
        literal
    }
}
