//! Names and types of every expression of one probe, for each group of functions it is
//! compiled for. Fills `Facts` and the map table; reports what does not type.

use super::builtins::{self, Builtin};
use super::govalues::{go_ty, go_values, inlined_values, reads_go_values, GoValue};
use super::maps::{MapTable, MapValueTy};
use super::probes::ResolvedProbe;
use super::ty::{Ty, I64, U64};
use super::{Checked, Facts, Instance, InstanceKind, Name};
use crate::arch::abi::Location;
use crate::diag::{closest, Diagnostic, Diagnostics};
use crate::plan::Agg;
use crate::syntax::ast::*;
use crate::syntax::format::{self, Piece};
use crate::target::types::{TypeKind, Types};
use crate::target::Target;

pub fn check_probe(
    script: &Script,
    probe: ResolvedProbe,
    target: &mut Target,
    checked: &mut Checked,
    diags: &mut Diagnostics,
    limit: u32,
) {
    let Item::Probe(ast) = &script.items[probe.item] else { return };
    // One instance for all functions when the body reads no Go value; else one each.
    let groups: Vec<Vec<super::FuncSite>> = if probe.functions.len() > 1 && reads_go_values(&ast.body) {
        probe.functions.iter().map(|f| vec![f.clone()]).collect()
    } else {
        vec![probe.functions.clone()]
    };
    // Where the function was inlined, parameters are read where DWARF locates them. A
    // probe whose body cannot be compiled at an inlined call (a parameter DWARF does not
    // place in registers there) skips that call, and says so, when real calls remain.
    let inlined: Vec<bool> = groups.iter().map(|g| g.len() == 1 && target.inlined_at(g[0].entry).is_some()).collect();
    let mut skipped = 0;
    let mut failed: Vec<crate::diag::Diagnostic> = Vec::new();
    let instances_before = checked.instances.len();
    let mut seen: Vec<(Span, String)> = Vec::new();
    // Inlined calls whose parameters sit in the same registers share one program.
    let mut work: Vec<(Vec<super::FuncSite>, bool, Result<Vec<GoValue>, String>)> = Vec::new();
    let mut same_places: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (functions, at_inlined_call) in groups.into_iter().zip(inlined) {
        let values = match functions.as_slice() {
            [one] if at_inlined_call => Ok(inlined_values(target, &one.name, one.entry, limit)),
            [one] => go_values(target, &one.name, probe.kind, limit),
            _ => Ok(Vec::new()),
        };
        if let (true, Ok(v)) = (at_inlined_call, &values) {
            let key = format!("{}{v:?}", functions[0].name);
            if let Some(&i) = same_places.get(&key) {
                work[i].0.extend(functions);
                continue;
            }
            same_places.insert(key, work.len());
        }
        work.push((functions, at_inlined_call, values));
    }
    for (functions, at_inlined_call, values) in work {
        let values = match values {
            Ok(v) => v,
            Err(message) => {
                diags.push(Diagnostic::error(ast.span, message));
                continue;
            }
        };
        let mut local = Diagnostics::default();
        let mut cx = Cx {
            kind: probe.kind,
            string_limit: limit,
            types: target.types(),
            values,
            facts: Facts::default(),
            maps: &mut checked.maps,
            self_vars: &mut checked.self_vars,
            diags: &mut local,
            uses_elapsed: false,
            has_function: !functions.is_empty(),
        };
        cx.block(&ast.body);
        let uses_elapsed = cx.uses_elapsed;
        let facts = cx.facts;
        // The goroutine is found through R14, which holds g only in ABIInternal functions.
        let needs_g =
            uses_elapsed || facts.uses_self || facts.names.values().any(|n| *n == Name::Builtin(Builtin::Goid));
        if needs_g {
            for f in &functions {
                if target.find(&f.name).first().is_some_and(|t| t.abi == crate::target::Abi::Abi0) {
                    local.push(
                        Diagnostic::error(
                            ast.span,
                            format!(
                                "`{}` is an assembly (ABI0) function: R14 does not hold the goroutine there",
                                f.name
                            ),
                        )
                        .label("goid, self and elapsed are unavailable here")
                        .hint("probe the Go function that calls it instead"),
                    );
                }
            }
        }
        if at_inlined_call && local.has_errors() {
            skipped += functions.len();
            failed.extend(local.items);
            continue;
        }
        // The same mistake in a body compiled for several functions is reported once.
        for d in local.items {
            if !seen.iter().any(|(s, m)| *s == d.span && *m == d.message) {
                seen.push((d.span, d.message.clone()));
                diags.push(d);
            }
        }
        checked.instances.push(Instance {
            item: probe.item,
            kind: probe.kind,
            functions,
            facts,
            uses_elapsed,
            describe: probe.describe.clone(),
        });
    }
    if skipped > 0 && checked.instances.len() == instances_before {
        // No call of the function could be compiled: the errors of the inlined ones.
        for d in failed {
            if !seen.iter().any(|(s, m)| *s == d.span && *m == d.message) {
                seen.push((d.span, d.message.clone()));
                diags.push(d);
            }
        }
    } else if skipped > 0 {
        diags.push(
            Diagnostic::warning(
                ast.span,
                format!("this probe reads parameters that DWARF does not place in registers at {skipped} of the places where the function was inlined"),
            )
            .label("those inlined calls are not traced")
            .hint("a probe that reads no parameters fires at every inlined call"),
        );
    }
}

pub fn agg_of(name: &str) -> Option<&'static str> {
    ["count", "sum", "avg", "min", "max", "stats", "hist", "lhist"].into_iter().find(|a| *a == name)
}

struct Cx<'a> {
    kind: InstanceKind,
    /// Bytes read of a Go string.
    string_limit: u32,
    types: &'a Types,
    values: Vec<GoValue>,
    facts: Facts,
    maps: &'a mut MapTable,
    self_vars: &'a mut std::collections::BTreeMap<String, super::SelfVar>,
    diags: &'a mut Diagnostics,
    uses_elapsed: bool,
    has_function: bool,
}

impl Cx<'_> {
    fn err(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let { name, value } => {
                let t = self.expr(value);
                if t == Ty::Void {
                    return; // already reported
                }
                if !self.storable(value, &t, "held in a local") {
                    return;
                }
                if let Some(old) = self.facts.locals.get(&name.name) {
                    if old.value_type() != t.value_type() {
                        self.err(
                            Diagnostic::error(
                                name.span,
                                format!(
                                    "`{}` was a {}; it cannot become a {}",
                                    name.name,
                                    old.describe(),
                                    t.describe()
                                ),
                            )
                            .label("type changes here"),
                        );
                        return;
                    }
                }
                if Builtin::from_name(&name.name).is_some() || self.values.iter().any(|v| v.name == name.name) {
                    self.err(
                        Diagnostic::warning(
                            name.span,
                            format!("`{}` hides a builtin or parameter of the same name", name.name),
                        )
                        .hint("use another name"),
                    );
                }
                self.facts.locals.insert(name.name.clone(), t);
            }
            StmtKind::AssignSelf { name, value } => {
                let t = self.expr(value);
                if t == Ty::Void || !self.storable(value, &t, "a self variable") {
                    return;
                }
                if !self.has_function {
                    self.err(
                        Diagnostic::error(name.span, "self variables belong to a goroutine; this probe runs on none")
                            .label("no goroutine here"),
                    );
                    return;
                }
                self.facts.uses_self = true;
                match self.self_vars.get(&name.name) {
                    Some(v) if v.ty.value_type() != t.value_type() => {
                        let (first, was) = (v.span, v.ty.describe());
                        self.err(
                            Diagnostic::error(
                                name.span,
                                format!("self.{} was a {}; it cannot become a {}", name.name, was, t.describe()),
                            )
                            .label("type changes here")
                            .related(first, "first assigned here"),
                        );
                    }
                    Some(_) => {}
                    None => {
                        let index = self.self_vars.len() as u32;
                        self.self_vars.insert(name.name.clone(), super::SelfVar { index, ty: t, span: name.span });
                    }
                }
            }
            StmtKind::AssignMap { map, value } => {
                let keys = self.keys(map);
                let v = match &value.kind {
                    ExprKind::Call { func, args } if agg_of(&func.name).is_some() => self.agg(func, args, value),
                    _ => {
                        let t = self.expr(value);
                        if t == Ty::Void {
                            return; // already reported
                        }
                        if !self.storable(value, &t, "stored in a map") {
                            return;
                        }
                        Some(MapValueTy::Plain(t))
                    }
                };
                if let Some(v) = v {
                    self.maps.declare(&map.name.name, keys, v, map.span, self.diags);
                }
            }
            StmtKind::Expr(e) => self.expr_stmt(e),
            StmtKind::If { cond, then, otherwise } => {
                self.condition(cond);
                self.block(then);
                match otherwise {
                    Some(Else::Block(b)) => self.block(b),
                    Some(Else::If(s)) => self.stmt(s),
                    None => {}
                }
            }
        }
    }

    /// Can this be compared with nil?
    fn nilable(&self, t: &Ty) -> bool {
        match t {
            Ty::Pointer { .. } | Ty::Interface => true,
            Ty::Go(id) => matches!(
                self.types.get(*id).kind,
                TypeKind::Slice { .. } | TypeKind::Map | TypeKind::Chan | TypeKind::Func
            ),
            _ => false,
        }
    }

    fn condition(&mut self, cond: &Expr) {
        let t = self.expr(cond);
        if t != Ty::Bool && t != Ty::Void {
            let hint = if t.is_numeric() { "compare it: `x != 0`" } else { "a condition is a comparison or a bool" };
            self.err(
                Diagnostic::error(cond.span, format!("a condition must be a bool, not {}", t.a()))
                    .label("not a bool")
                    .hint(hint),
            );
        }
    }

    fn keys(&mut self, map: &MapRef) -> Vec<Ty> {
        map.keys
            .iter()
            .map(|k| {
                let t = self.expr(k);
                self.storable(k, &t, "a map key");
                t
            })
            .collect()
    }

    /// An aggregation call: its map value type, or None after an error.
    fn agg(&mut self, func: &Ident, args: &[Expr], call: &Expr) -> Option<MapValueTy> {
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
            self.err(
                Diagnostic::error(
                    args[0].span,
                    format!("{}() needs an integer or a duration, not a {}", func.name, of.describe()),
                )
                .label("not a number"),
            );
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
                        Some(v) => lit[i] = v,
                        None => {
                            self.err(
                                Diagnostic::error(a.span, "lhist bounds must be integer or duration literals")
                                    .label("not a literal"),
                            );
                            return None;
                        }
                    }
                }
                let [lo, hi, step] = lit;
                if step <= 0 || hi <= lo {
                    self.err(
                        Diagnostic::error(call.span, "lhist(x, lo, hi, step) needs lo < hi and step > 0")
                            .label("bad bounds"),
                    );
                    return None;
                }
                if crate::plan::lhist_buckets(lo, hi, step) > 1000 {
                    self.err(
                        Diagnostic::error(call.span, "lhist would have more than 1000 buckets")
                            .label("too many buckets")
                            .hint("use a larger step"),
                    );
                    return None;
                }
                Agg::Lhist { lo, hi, step }
            }
        };
        Some(MapValueTy::Agg { agg, of })
    }

    fn expr_stmt(&mut self, e: &Expr) {
        let ExprKind::Call { func, args } = &e.kind else {
            self.expr(e);
            self.err(
                Diagnostic::error(e.span, "this expression does nothing")
                    .label("value unused")
                    .hint("assign it, or print it with print(...)"),
            );
            return;
        };
        if agg_of(&func.name).is_some() {
            // A bare aggregation: into the implicit map `@`, keyed by the probed function.
            if let Some(v) = self.agg(func, args, e) {
                if !self.has_function {
                    self.err(
                        Diagnostic::error(
                            e.span,
                            "a bare aggregation is keyed by the probed function; this probe has none",
                        )
                        .label("no function here")
                        .hint("aggregate into a map: `@name = count()`"),
                    );
                    return;
                }
                self.maps.declare("", vec![Ty::Func], v, e.span, self.diags);
            }
            return;
        }
        match func.name.as_str() {
            "print" => {
                if args.is_empty() {
                    self.err(Diagnostic::error(e.span, "print() needs something to print").label("no arguments"));
                }
                for a in args {
                    if let ExprKind::Map(m) = &a.kind {
                        if m.keys.is_empty() && args.len() == 1 {
                            self.maps.reference(&m.name.name, m.span);
                            continue;
                        }
                    }
                    let t = self.expr(a);
                    self.storable(a, &t, "printed");
                }
            }
            "printf" => self.printf(e, args),
            "delete" => match args.as_slice() {
                [Expr { kind: ExprKind::Map(m), .. }] if !m.keys.is_empty() => {
                    self.keys(m);
                    self.maps.reference(&m.name.name, m.span);
                }
                _ => self.err(
                    Diagnostic::error(e.span, "delete takes one map element: `delete(@m[key])`")
                        .label("not a map element"),
                ),
            },
            "clear" => match args.as_slice() {
                [Expr { kind: ExprKind::Map(m), .. }] if m.keys.is_empty() => self.maps.reference(&m.name.name, m.span),
                _ => self.err(Diagnostic::error(e.span, "clear takes one map: `clear(@m)`").label("not a map")),
            },
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

    fn printf(&mut self, e: &Expr, args: &[Expr]) {
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
                self.err(Diagnostic::error(first.span, fe.message).label("bad format"));
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
            if t == Ty::Void {
                continue; // already reported
            }
            let ok = match v.verb {
                'v' => t != Ty::Void && !matches!(t, Ty::Go(_) | Ty::Args | Ty::Nil),
                'd' | 'i' | 'u' | 'c' | 'o' => t.is_numeric() || t == Ty::Bool,
                'x' | 'X' => t.is_numeric() || matches!(t, Ty::Str { .. }),
                's' => matches!(t, Ty::Str { .. } | Ty::Func | Ty::Interface),
                'q' => matches!(t, Ty::Str { .. } | Ty::Func),
                't' => t == Ty::Bool,
                'p' => matches!(t, Ty::Pointer { .. }) || t.is_integer(),
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

    fn expr(&mut self, e: &Expr) -> Ty {
        let t = self.expr_inner(e);
        self.facts.types.insert(e.id, t.clone());
        t
    }

    fn expr_inner(&mut self, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Int(v) => {
                if *v > i64::MAX as u64 {
                    U64
                } else {
                    I64
                }
            }
            ExprKind::Str(s) => Ty::Str { max: s.len() as u32 },
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Duration(_) => Ty::Duration,
            ExprKind::Name(n) => self.name(e, n),
            ExprKind::SelfVar(name) => {
                self.facts.uses_self = true;
                match self.self_vars.get(name) {
                    Some(v) => v.ty.clone(),
                    None => {
                        let close = closest(name, self.self_vars.keys().map(|k| k.as_str()), 1);
                        let mut d =
                            Diagnostic::error(e.span, format!("self.{name} is read before any probe assigns it"))
                                .label("unknown self variable")
                                .hint("assign it in an earlier probe, e.g. `on entry F { self.x = ... }`");
                        if let Some(c) = close.first() {
                            d = d.hint(format!("did you mean self.{c}?"));
                        }
                        self.err(d);
                        Ty::Void
                    }
                }
            }
            ExprKind::Map(m) => {
                self.keys(m);
                self.maps.reference(&m.name.name, m.span);
                match self.maps.maps.get(&m.name.name).map(|i| i.value.clone()) {
                    Some(MapValueTy::Plain(t)) => t,
                    Some(MapValueTy::Agg { agg, .. }) => {
                        self.err(
                            Diagnostic::error(
                                e.span,
                                format!("the value of a {}() map cannot be read in a probe", agg.name()),
                            )
                            .label("not readable here")
                            .hint("aggregations are kept per CPU and summed when printed; print(@m) prints any map"),
                        );
                        Ty::Void
                    }
                    None => {
                        self.err(
                            Diagnostic::error(
                                e.span,
                                format!(
                                    "{} is read before any probe assigns it",
                                    super::maps::display_name(&m.name.name)
                                ),
                            )
                            .label("unknown map")
                            .hint("assign a map in an earlier probe of the script before reading it"),
                        );
                        Ty::Void
                    }
                }
            }
            ExprKind::Field { base, field } => {
                if let ExprKind::Name(n) = &base.kind {
                    if n == "arg" && self.facts.locals.get("arg").is_none() {
                        return self.go_value(e, &field.name, field.span, true);
                    }
                }
                self.expr(base);
                let Some(mut id) = self.facts.go_types.get(&base.id).copied() else {
                    self.err(Diagnostic::error(field.span, "only Go values have fields").label("not a Go struct"));
                    return Ty::Void;
                };
                // Like Go, `p.f` reads through a pointer to a struct.
                if let TypeKind::Pointer { elem } = &self.types.get(id).kind {
                    id = *elem;
                }
                let t = self.types.get(id);
                let TypeKind::Struct { fields } = &t.kind else {
                    self.err(Diagnostic::error(field.span, format!("{} has no fields", t.name)).label("not a struct"));
                    return Ty::Void;
                };
                let Some(f) = fields.iter().find(|f| f.name == field.name) else {
                    let close = closest(&field.name, fields.iter().map(|f| f.name.as_str()), 1);
                    let mut d = Diagnostic::error(field.span, format!("no field `{}` in {}", field.name, t.name))
                        .label("unknown field");
                    d = match close.first() {
                        Some(c) => d.hint(format!("did you mean `{c}`?")),
                        None => d.hint(format!(
                            "its fields: {}",
                            fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
                        )),
                    };
                    self.err(d);
                    return Ty::Void;
                };
                let fid = f.ty;
                self.go_typed(e, fid, &field.name, field.span)
            }
            ExprKind::Index { base, index } => {
                let bt = self.expr(base);
                let it = self.expr(index);
                if !it.is_integer() && it != Ty::Void {
                    self.err(
                        Diagnostic::error(index.span, format!("an index must be an integer, not {}", it.a()))
                            .label("not an integer"),
                    );
                    return Ty::Void;
                }
                if matches!(bt, Ty::Str { .. }) {
                    return Ty::Int { size: 1, signed: false };
                }
                let Some(id) = self.facts.go_types.get(&base.id).copied() else {
                    if bt != Ty::Void {
                        self.err(
                            Diagnostic::error(base.span, format!("a {} cannot be indexed", bt.describe()))
                                .label("not a slice, array or string"),
                        );
                    }
                    return Ty::Void;
                };
                let t = self.types.get(id);
                let elem = match &t.kind {
                    TypeKind::Slice { elem } | TypeKind::Array { elem, .. } => *elem,
                    _ => {
                        self.err(
                            Diagnostic::error(base.span, format!("{} cannot be indexed", t.name))
                                .label("not a slice, array or string")
                                .hint("maps cannot be indexed by a probe; len(m) works"),
                        );
                        return Ty::Void;
                    }
                };
                self.go_typed(e, elem, "this element", e.span)
            }
            ExprKind::Unary { op, operand } => {
                let t = self.expr(operand);
                match op {
                    UnOp::Neg if t.is_integer() => I64,
                    UnOp::Neg if t == Ty::Duration => Ty::Duration,
                    UnOp::Not if t == Ty::Bool => Ty::Bool,
                    UnOp::Deref => match t {
                        Ty::Pointer { elem: Some(id) } => self.go_typed(e, id, "*p", e.span),
                        Ty::Void => Ty::Void,
                        _ => {
                            self.err(
                                Diagnostic::error(
                                    e.span,
                                    format!("only typed Go pointers can be dereferenced, not {}", t.a()),
                                )
                                .label("not a pointer"),
                            );
                            Ty::Void
                        }
                    },
                    _ => {
                        let sym = if *op == UnOp::Neg { "-" } else { "!" };
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
            ExprKind::Binary { op, lhs, rhs } => self.binary(e, *op, lhs, rhs),
            ExprKind::Call { func, args } => self.call(e, func, args),
        }
    }

    fn binary(&mut self, e: &Expr, op: BinOp, lhs: &Expr, rhs: &Expr) -> Ty {
        let l = self.expr(lhs);
        let r = self.expr(rhs);
        if l == Ty::Void || r == Ty::Void {
            return Ty::Void;
        }
        use BinOp::*;
        let mismatch = |cx: &mut Self, why: &str| {
            cx.err(
                Diagnostic::error(
                    e.span,
                    format!("`{}` cannot apply to a {} and a {}", op.symbol(), l.describe(), r.describe()),
                )
                .label(why.to_string()),
            );
            Ty::Void
        };
        match op {
            And | Or => {
                if l == Ty::Bool && r == Ty::Bool {
                    Ty::Bool
                } else {
                    mismatch(self, "both sides must be bools")
                }
            }
            Eq | Ne | Lt | Le | Gt | Ge => {
                let comparable =
                    (l.is_numeric() && r.is_numeric()) || (l == Ty::Bool && r == Ty::Bool && matches!(op, Eq | Ne));
                if comparable {
                    Ty::Bool
                } else if matches!((&l, &r), (Ty::Str { .. }, Ty::Str { .. })) && matches!(op, Eq | Ne) {
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
                } else if matches!(op, Eq | Ne)
                    && (self.nilable(&l) && r == Ty::Nil || l == Ty::Nil && self.nilable(&r))
                {
                    Ty::Bool
                } else {
                    mismatch(self, "these cannot be compared")
                }
            }
            _ => {
                if !(l.is_numeric() && r.is_numeric()) {
                    return mismatch(self, "both sides must be numbers");
                }
                if l == Ty::Duration || r == Ty::Duration {
                    if matches!(op, Add | Sub | Mul | Div | Rem)
                        && !(l == Ty::Duration && r == Ty::Duration && matches!(op, Mul))
                    {
                        if l == Ty::Duration && r == Ty::Duration && matches!(op, Div) {
                            return I64;
                        }
                        return Ty::Duration;
                    }
                    return mismatch(self, "not an operation on durations");
                }
                let signed = l.is_signed() || r.is_signed();
                Ty::Int { size: 8, signed }
            }
        }
    }

    fn call(&mut self, e: &Expr, func: &Ident, args: &[Expr]) -> Ty {
        let tys: Vec<Ty> = args.iter().map(|a| self.expr(a)).collect();
        match func.name.as_str() {
            "len" => {
                if args.len() != 1 {
                    self.err(Diagnostic::error(e.span, "len takes one argument").label("wrong number of arguments"));
                    return Ty::Void;
                }
                let ok = match &tys[0] {
                    Ty::Str { .. } => true,
                    Ty::Go(id) => matches!(
                        self.types.get(*id).kind,
                        TypeKind::Slice { .. } | TypeKind::Array { .. } | TypeKind::Map
                    ),
                    _ => false,
                };
                if !ok {
                    if tys[0] != Ty::Void {
                        self.err(
                            Diagnostic::error(
                                args[0].span,
                                format!("len needs a string, slice, array or map, not {}", tys[0].a()),
                            )
                            .label("no length"),
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
        } else if ["print", "printf", "exit", "delete", "clear"].contains(&func.name.as_str()) {
            format!("{}() is a statement, not a value", func.name)
        } else {
            format!("unknown function `{}`", func.name)
        };
        self.err(Diagnostic::error(func.span, what).label("not a value here"));
        Ty::Void
    }

    /// Records the Go type of `e` and returns its script type (or reports why it cannot
    /// be read).
    fn go_typed(&mut self, e: &Expr, id: crate::target::types::TypeId, what: &str, span: Span) -> Ty {
        self.facts.go_types.insert(e.id, id);
        match go_ty(self.types, id, what, self.string_limit) {
            Ok(t) => t,
            Err(why) => {
                self.err(Diagnostic::error(span, why).label("cannot be read"));
                Ty::Void
            }
        }
    }

    /// Reports a value that cannot be stored (in a key, a value, a local, an event).
    fn storable(&mut self, e: &Expr, t: &Ty, role: &str) -> bool {
        let why = match t {
            Ty::Go(id) => {
                format!("a {} cannot be {role}: pick one of its fields, or use len()", self.types.get(*id).name)
            }
            Ty::Args if role == "printed" => return true,
            Ty::Args => format!("`args` cannot be {role}; print(args) prints every parameter"),
            Ty::Nil => format!("nil cannot be {role}"),
            Ty::Interface if role != "printed" => {
                format!("an interface cannot be {role}; compare it with nil, or print it")
            }
            Ty::Void => return false,
            _ => return true,
        };
        self.err(Diagnostic::error(e.span, why).label(format!("cannot be {role}")));
        false
    }

    fn name(&mut self, e: &Expr, n: &str) -> Ty {
        if let Some(t) = self.facts.locals.get(n).cloned() {
            self.facts.names.insert(e.id, Name::Local(n.to_string()));
            return t;
        }
        if let Some(b) = Builtin::from_name(n) {
            match b {
                Builtin::Elapsed => {
                    if self.kind != InstanceKind::Return {
                        self.err(
                            Diagnostic::error(e.span, "`elapsed` is only known in `on return` probes")
                                .label("no matching entry here")
                                .hint("use it in `on return FUNC { ... }`"),
                        );
                        return Ty::Void;
                    }
                    self.uses_elapsed = true;
                }
                Builtin::Func if !self.has_function => {
                    self.err(
                        Diagnostic::error(e.span, "`func` is only known in probes of functions")
                            .label("no function here"),
                    );
                    return Ty::Void;
                }
                _ => {}
            }
            self.facts.names.insert(e.id, Name::Builtin(b));
            return b.ty();
        }
        if n == "nil" {
            return Ty::Nil;
        }
        if n == "args" {
            if !self.has_function {
                self.err(
                    Diagnostic::error(e.span, "`args` is only known in probes of functions").label("no function here"),
                );
                return Ty::Void;
            }
            self.facts.args = self
                .values
                .iter()
                .filter(|v| !v.is_result && !matches!(v.location, Location::Unreadable { .. }) && v.ty.is_ok())
                .filter_map(|v| match &v.ty {
                    Ok(t) if !matches!(t, Ty::Go(_)) => Some(super::ArgInfo {
                        name: v.name.clone(),
                        location: v.location.clone(),
                        type_id: v.type_id,
                        ty: t.clone(),
                    }),
                    _ => None,
                })
                .collect();
            return Ty::Args;
        }
        if n == "ustack" {
            if !self.has_function {
                self.err(
                    Diagnostic::error(e.span, "`ustack` is only known in probes of functions")
                        .label("no Go stack here"),
                );
                return Ty::Void;
            }
            return Ty::Stack;
        }
        if self.kind == InstanceKind::Return {
            let results: Vec<usize> = (0..self.values.len()).filter(|i| self.values[*i].is_result).collect();
            let pos = if n == "ret" { Some(0) } else { n.strip_prefix("ret").and_then(|d| d.parse::<usize>().ok()) };
            if let Some(pos) = pos {
                return match results.get(pos) {
                    Some(&i) => {
                        let name = self.values[i].name.clone();
                        self.go_value(e, &name, e.span, false)
                    }
                    None => {
                        self.err(
                            Diagnostic::error(
                                e.span,
                                format!(
                                    "the function has {} result{}",
                                    results.len(),
                                    if results.len() == 1 { "" } else { "s" }
                                ),
                            )
                            .label(format!("no result {pos}")),
                        );
                        Ty::Void
                    }
                };
            }
        }
        self.go_value(e, n, e.span, false)
    }

    /// A parameter (or, in return probes, a result) by its Go name.
    fn go_value(&mut self, e: &Expr, n: &str, span: Span, via_arg: bool) -> Ty {
        let found = self.values.iter().find(|v| v.name == n && (!via_arg || !v.is_result)).cloned();
        let Some(v) = found else {
            let mut candidates: Vec<&str> = self.values.iter().map(|v| v.name.as_str()).collect();
            candidates.extend(self.facts.locals.keys().map(|k| k.as_str()));
            if !via_arg {
                candidates.extend(builtins::NAMES.iter().copied());
            }
            let close = closest(n, candidates, 2);
            let mut d =
                Diagnostic::error(span, format!("unknown name `{n}`")).label("not a parameter, local or builtin");
            if !self.has_function {
                d = d.hint("begin, end and interval probes have no parameters");
            } else if self.values.first().is_some_and(|v| v.name == "arg0") && !via_arg {
                d = d.hint("this binary has no DWARF (stripped): parameters are known by position as machine words, `arg0` … `arg8` (RAX, RBX, RCX, RDI, RSI, R8 … R11), results as `ret0` …");
            } else if self.values.is_empty() {
                d = d.hint("no parameters are known for this function (no DWARF, or a probe on several functions)");
            } else if self.kind == InstanceKind::Entry
                && self.values.iter().all(|v| v.name != n)
                && n.starts_with("ret")
            {
                d = d.hint("results are known in `on return` probes");
            }
            if let Some(c) = close.first() {
                d = d.hint(format!("did you mean `{c}`?"));
            }
            self.err(d);
            return Ty::Void;
        };
        match v.ty {
            Ok(t) => {
                if let Location::Unreadable { reason } = &v.location {
                    self.err(
                        Diagnostic::error(span, format!("`{n}` cannot be read: {reason}"))
                            .label("unreadable at this probe"),
                    );
                    return Ty::Void;
                }
                self.facts.names.insert(e.id, Name::GoValue { name: v.name.clone(), location: v.location.clone() });
                self.facts.go_types.insert(e.id, v.type_id);
                t
            }
            Err(why) => {
                self.err(Diagnostic::error(span, why).label("cannot be read"));
                Ty::Void
            }
        }
    }
}

/// The value of an integer or duration literal, possibly negated.
fn const_int(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(v) | ExprKind::Duration(v) => i64::try_from(*v).ok(),
        ExprKind::Unary { op: UnOp::Neg, operand } => const_int(operand).map(|v| -v),
        _ => None,
    }
}
