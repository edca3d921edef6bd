//! Statements: locals, `self` variables, map assignments (values and aggregations),
//! expression statements and `if`.

use super::super::maps::MapValueTy;
use super::super::ty::Ty;
use super::super::{keynames, Builtin, SelfVar};
use super::{agg_of, Cx};
use crate::diag::Diagnostic;
use crate::syntax::ast::*;

impl Cx<'_> {
    pub(super) fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let { name, value } => self.let_stmt(name, value),
            StmtKind::AssignSelf { name, value } => self.assign_self(name, value),
            StmtKind::AssignMap { map, value } => self.assign_map(map, value),
            StmtKind::Expr(e) => self.expr_stmt(e),
            StmtKind::If { cond, then, otherwise } => {
                self.condition(cond);
                // `if defined(x)`: known now; the branch not taken is neither checked
                // nor compiled (it may name what this binary does not have).
                let known = self.facts.static_conds.get(&cond.id).copied();
                if known != Some(false) {
                    self.block(then);
                }
                if known != Some(true) {
                    match otherwise {
                        Some(Else::Block(b)) => self.block(b),
                        Some(Else::If(s)) => self.stmt(s),
                        None => {}
                    }
                }
            }
        }
    }

    /// The type of `value` assigned to something that already has type `existing`: an
    /// untyped constant takes that type (Void, reported, when it does not fit).
    fn assigned(&mut self, value: &Expr, existing: Option<Ty>) -> Ty {
        let t = self.expr(value);
        match existing {
            Some(old) if t != Ty::Void && self.untyped(value) => {
                if self.adapt(value, &old) {
                    old
                } else {
                    Ty::Void
                }
            }
            _ => t,
        }
    }

    /// `x := value`
    fn let_stmt(&mut self, name: &Ident, value: &Expr) {
        let old = self.facts.locals.get(&name.name).cloned();
        let t = self.assigned(value, old.clone());
        if t == Ty::Void || !self.storable(value, &t, "held in a local") {
            // Already reported; known from here on (as nothing), so that its uses are
            // not reported again as unknown names.
            self.facts.locals.entry(name.name.clone()).or_insert(Ty::Void);
            return;
        }
        if let Some(old) = old.filter(|old| old.value_type() != t.value_type()) {
            self.err(
                Diagnostic::error(name.span, format!("`{}` was {}; it cannot become {}", name.name, old.a(), t.a()))
                    .label("type changes here"),
            );
            return;
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

    /// `self.name = value`
    fn assign_self(&mut self, name: &Ident, value: &Expr) {
        let existing = self.self_vars.get(&name.name).map(|v| v.ty.clone());
        let t = self.assigned(value, existing);
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
                    Diagnostic::error(name.span, format!("self.{} was {}; it cannot become {}", name.name, was, t.a()))
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

    /// `@m[keys] = value`, where value may be an aggregation.
    fn assign_map(&mut self, map: &MapRef, value: &Expr) {
        let keys = self.keys(map);
        let v = match &value.kind {
            ExprKind::Call { func, args, .. } if agg_of(&func.name).is_some() => self.agg(func, args, value),
            _ => {
                let existing = match self.maps.maps.get(&map.name.name).map(|m| &m.value) {
                    Some(MapValueTy::Plain(v)) => Some(v.clone()),
                    _ => None,
                };
                let t = self.assigned(value, existing);
                if t == Ty::Void || !self.storable(value, &t, "stored in a map") {
                    return; // already reported
                }
                Some(MapValueTy::Plain(t))
            }
        };
        if let Some(v) = v {
            let names = keynames::key_names(map);
            self.maps.declare(&map.name.name, keys, names, v, map.span, self.diags);
        }
    }
}
