//! Names and types of every expression of one probe instance: fills its `Facts` and the
//! map table, and reports what does not type. Statements here; expressions, calls and
//! names in the files beside it.

mod arith;
mod calls;
mod expr;
mod names;

use super::govalues::GoValue;
use super::keynames;
use super::maps::{MapTable, MapValueTy};
use super::ty::Ty;
use super::{Builtin, Facts, InstanceKind, SelfVar};
use crate::diag::{Diagnostic, Diagnostics};
use crate::gotypes::{TypeKind, Types};
use crate::syntax::ast::*;
use std::collections::BTreeMap;

pub use arith::conversion;
pub use calls::agg_of;

/// What an instance's body may name, and how it is compiled.
pub struct Env<'a> {
    pub kind: InstanceKind,
    /// Bytes read of a Go string.
    pub string_limit: u32,
    pub types: &'a Types,
    /// The parameters and results the probe can read, with where they are.
    pub values: Vec<GoValue>,
    /// Whether the probe belongs to a function (not begin, end or interval).
    pub has_function: bool,
}

/// What typing a body found.
pub struct Typed {
    pub facts: Facts,
    pub uses_elapsed: bool,
}

/// Types `body` in `env`: facts into the result, map shapes and self variables into the
/// script-wide tables, errors into `diags`.
pub fn check_body(
    body: &Block,
    env: Env,
    maps: &mut MapTable,
    self_vars: &mut BTreeMap<String, SelfVar>,
    diags: &mut Diagnostics,
) -> Typed {
    let mut cx = Cx {
        kind: env.kind,
        string_limit: env.string_limit,
        types: env.types,
        values: env.values,
        facts: Facts::default(),
        maps,
        self_vars,
        diags,
        uses_elapsed: false,
        has_function: env.has_function,
    };
    cx.block(body);
    Typed { facts: cx.facts, uses_elapsed: cx.uses_elapsed }
}

struct Cx<'a> {
    kind: InstanceKind,
    /// Bytes read of a Go string.
    string_limit: u32,
    types: &'a Types,
    values: Vec<GoValue>,
    facts: Facts,
    maps: &'a mut MapTable,
    self_vars: &'a mut BTreeMap<String, SelfVar>,
    diags: &'a mut Diagnostics,
    uses_elapsed: bool,
    has_function: bool,
}

impl Cx<'_> {
    pub(super) fn err(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    pub(super) fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            self.stmt(s);
        }
    }

    pub(super) fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let { name, value } => {
                let mut t = self.expr(value);
                // Set again, an untyped constant takes the local's type.
                if let Some(old) = self.facts.locals.get(&name.name).cloned() {
                    if self.facts.consts.contains_key(&value.id) && t != Ty::Void {
                        t = if self.adapt(value, &old) { old } else { Ty::Void };
                    }
                }
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
                                format!("`{}` was {}; it cannot become {}", name.name, old.a(), t.a()),
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
                let mut t = self.expr(value);
                // An untyped constant takes the variable's type.
                if let Some(v) = self.self_vars.get(&name.name).map(|v| v.ty.clone()) {
                    if self.facts.consts.contains_key(&value.id) && t != Ty::Void {
                        t = if self.adapt(value, &v) { v } else { Ty::Void };
                    }
                }
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
                        let (first, was) = (v.span, v.ty.a());
                        self.err(
                            Diagnostic::error(
                                name.span,
                                format!("self.{} was {}; it cannot become {}", name.name, was, t.a()),
                            )
                            .label("type changes here")
                            .related(first, "first assigned here"),
                        );
                    }
                    Some(_) => {}
                    None => {
                        let index = self.self_vars.len() as u32;
                        self.self_vars.insert(name.name.clone(), SelfVar { index, ty: t, span: name.span });
                    }
                }
            }
            StmtKind::AssignMap { map, value } => {
                let keys = self.keys(map);
                let v = match &value.kind {
                    ExprKind::Call { func, args } if agg_of(&func.name).is_some() => self.agg(func, args, value),
                    _ => {
                        let mut t = self.expr(value);
                        // An untyped constant takes the type of the map's values.
                        if let Some(MapValueTy::Plain(v)) = self.maps.maps.get(&map.name.name).map(|m| m.value.clone())
                        {
                            if self.facts.consts.contains_key(&value.id) && t != Ty::Void {
                                t = if self.adapt(value, &v) { v } else { Ty::Void };
                            }
                        }
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
                    let names = keynames::key_names(map);
                    self.maps.declare(&map.name.name, keys, names, v, map.span, self.diags);
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
    pub(super) fn nilable(&self, t: &Ty) -> bool {
        match t {
            Ty::Pointer { .. } | Ty::Interface => true,
            Ty::Go(id) => matches!(
                self.types.get(*id).kind,
                TypeKind::Slice { .. } | TypeKind::Map | TypeKind::Chan | TypeKind::Func
            ),
            _ => false,
        }
    }

    pub(super) fn condition(&mut self, cond: &Expr) {
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

    pub(super) fn keys(&mut self, map: &MapRef) -> Vec<Ty> {
        let known = self.maps.maps.get(&map.name.name).map(|m| m.keys.clone()).unwrap_or_default();
        map.keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let mut t = self.expr(k);
                // An untyped constant key takes the type of the map's key there.
                if let Some(want) = known.get(i) {
                    if self.facts.consts.contains_key(&k.id) && t != Ty::Void && *want != t {
                        t = if self.adapt(k, want) { want.clone() } else { Ty::Void };
                    }
                }
                self.storable(k, &t, "a map key");
                t
            })
            .collect()
    }

    /// Reports a value that cannot be stored (in a key, a value, a local, an event).
    pub(super) fn storable(&mut self, e: &Expr, t: &Ty, role: &str) -> bool {
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
}
