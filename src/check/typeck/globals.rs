//! Package-level variables in expressions (see check/globals.rs for the rules): the node
//! that denotes the variable is named `Name::Global` and typed by its Go type; fields
//! and indexes go on from there as for any Go value.

use super::super::globals::{shadowed, Global};
use super::super::ty::Ty;
use super::super::Name;
use super::Cx;
use crate::diag::Diagnostic;
use crate::syntax::ast::*;

/// What `base.field` is, seen from its base.
pub(super) enum FieldBase {
    /// The whole expression is a package variable (`main.config`, `"net/http".Client`).
    Whole(Ty),
    /// The base is a package variable (`"main.config"` in `"main.config".Port`), typed.
    Base,
    /// Neither: an ordinary field access.
    Not,
}

impl Cx<'_> {
    /// `base.field` where it names a package variable, or has one as its base.
    pub(super) fn global_field(&mut self, e: &Expr, base: &Expr, field: &Ident) -> FieldBase {
        match &base.kind {
            ExprKind::Name(n) => {
                let locals: Vec<&str> = self.facts.locals.keys().map(String::as_str).collect();
                if shadowed(n, &locals, &self.values) {
                    return FieldBase::Not;
                }
                match self.globals.get(&format!("{n}.{}", field.name)).cloned() {
                    Some(found) => FieldBase::Whole(self.global(e, found)),
                    None => FieldBase::Not,
                }
            }
            ExprKind::Str(s) => {
                let whole = format!("{s}.{}", field.name);
                match (self.globals.get(s).cloned(), self.globals.get(&whole).cloned()) {
                    (Some(Ok(g)), _) => {
                        let t = self.global(base, Ok(g));
                        self.facts.types.insert(base.id, t.clone());
                        if t == Ty::Void {
                            return FieldBase::Whole(Ty::Void);
                        }
                        FieldBase::Base
                    }
                    (_, Some(found @ Ok(_))) => FieldBase::Whole(self.global(e, found)),
                    (Some(err), _) | (None, Some(err)) => {
                        let t = self.global(base, err);
                        FieldBase::Whole(t)
                    }
                    (None, None) => FieldBase::Whole(self.no_global(base.span, s)),
                }
            }
            _ => FieldBase::Not,
        }
    }

    /// `"pkg.Var"[i]`: the base of an index, when it is a quoted package variable.
    pub(super) fn global_index_base(&mut self, base: &Expr) -> Option<Ty> {
        let ExprKind::Str(s) = &base.kind else { return None };
        let t = match self.globals.get(s).cloned() {
            Some(found) => self.global(base, found),
            None => self.no_global(base.span, s),
        };
        self.facts.types.insert(base.id, t.clone());
        Some(t)
    }

    /// Names and types `e` as the variable `found`, or reports why it cannot be read.
    fn global(&mut self, e: &Expr, found: Result<Global, super::super::globals::GlobalError>) -> Ty {
        let g = match found {
            Ok(g) => g,
            Err(why) => {
                self.err(Diagnostic::error(e.span, why.message).label("a package-level variable").hint_if(why.hint));
                return Ty::Void;
            }
        };
        if !self.has_function {
            self.err(
                Diagnostic::error(e.span, format!("`{}` would be read in gtrace's own memory here", g.name))
                    .label("not in the traced program")
                    .hint("`on begin`, `on end` and `on interval` run in gtrace itself; read package variables in a probe of a function, which runs in the traced program"),
            );
            return Ty::Void;
        }
        self.facts.names.insert(e.id, Name::Global { name: g.name.clone(), addr: g.addr });
        self.go_typed(e, g.ty)
    }

    fn no_global(&mut self, span: Span, name: &str) -> Ty {
        self.err(
            Diagnostic::error(span, format!("no package-level variable `{name}`"))
                .label("not a variable of the program")
                .hint("a quoted name followed by a field or an index is a package-level variable: `\"net/http.DefaultClient\".Timeout`"),
        );
        Ty::Void
    }
}
