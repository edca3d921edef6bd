//! Expressions: literals, self variables, map reads, fields, indexing (operators in
//! arith.rs).

use super::super::maps::{self, MapValueTy};
use super::super::ty::Ty;
use super::Cx;
use crate::diag::{closest, Diagnostic};
use crate::gotypes::{TypeId, TypeKind};
use crate::syntax::ast::*;

impl Cx<'_> {
    pub(super) fn expr(&mut self, e: &Expr) -> Ty {
        let t = self.expr_inner(e);
        self.facts.types.insert(e.id, t.clone());
        t
    }

    fn expr_inner(&mut self, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Int(v) => self.int_literal(e, *v),
            ExprKind::Float(text) => self.float_literal(e, text),
            ExprKind::Str(s) => Ty::Str { max: s.len() as u32 },
            ExprKind::Bool(v) => {
                // Known now: `if otlp { ... }` compiles its branch only with --otlp.
                self.facts.static_conds.insert(e.id, *v);
                Ty::Bool
            }
            ExprKind::Duration(_) => Ty::Duration,
            ExprKind::Name(n) => self.name(e, n),
            ExprKind::SelfVar(name) => self.self_var(e, name),
            ExprKind::Map(m) => self.map_read(e, m),
            ExprKind::Field { base, field } => self.field(e, base, field),
            ExprKind::Index { base, index } => self.index(e, base, index),
            ExprKind::Assert { base, ty } => self.assert(e, base, ty),
            ExprKind::Unary { op, operand } => self.unary(e, *op, operand),
            ExprKind::Binary { op, lhs, rhs } => self.binary(e, *op, lhs, rhs),
            ExprKind::Call { func, args, names } => {
                self.positional(func, names);
                self.call(e, func, args)
            }
        }
    }

    fn self_var(&mut self, e: &Expr, name: &str) -> Ty {
        self.facts.uses_self = true;
        match self.self_vars.get(name) {
            Some(v) => v.ty.clone(),
            None => {
                let close = closest(name, self.self_vars.keys().map(|k| k.as_str()), 1);
                let mut d = Diagnostic::error(e.span, format!("self.{name} is read before any probe assigns it"))
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

    /// A plain map's value read back in a probe.
    fn map_read(&mut self, e: &Expr, m: &MapRef) -> Ty {
        self.keys(m);
        self.maps.reference(m);
        match self.maps.maps.get(&m.name.name).map(|i| i.value.clone()) {
            Some(MapValueTy::Plain(t)) => t,
            Some(MapValueTy::Agg { agg, .. }) => {
                self.err(
                    Diagnostic::error(e.span, format!("the value of a {}() map cannot be read in a probe", agg.name()))
                        .label("not readable here")
                        .hint("aggregations are kept per CPU and summed when printed; print(@m) prints any map"),
                );
                Ty::Void
            }
            None => {
                self.err(
                    Diagnostic::error(
                        e.span,
                        format!("{} is read before any probe assigns it", maps::display_name(&m.name.name)),
                    )
                    .label("unknown map")
                    .hint("assign a map in an earlier probe of the script before reading it"),
                );
                Ty::Void
            }
        }
    }

    /// `base.field`, through a pointer as in Go; `arg.NAME` is a parameter.
    fn field(&mut self, e: &Expr, base: &Expr, field: &Ident) -> Ty {
        if let ExprKind::Name(n) = &base.kind {
            if n == "arg" && self.facts.locals.get("arg").is_none() {
                return self.go_value(e, &field.name, field.span, true);
            }
        }
        let bt = match self.global_field(e, base, field) {
            super::globals::FieldBase::Whole(t) => return t,
            super::globals::FieldBase::Base => self.facts.ty(base.id).clone(),
            super::globals::FieldBase::Not => self.expr(base),
        };
        let Some(mut id) = self.facts.go_types.get(&base.id).copied() else {
            // A base that was already an error (Void) says nothing more: one bad name in
            // a chain `a.b.c.d` is one error, not one per field after it.
            if bt != Ty::Void {
                self.err(Diagnostic::error(field.span, "only Go values have fields").label("not a Go struct"));
            }
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
        let f = match super::promoted::find(self.types, id, &field.name) {
            super::promoted::Lookup::Direct(f) => Some(f),
            super::promoted::Lookup::Promoted { through, field } => {
                self.facts.promoted.insert(e.id, through);
                Some(field)
            }
            super::promoted::Lookup::Ambiguous(paths) => {
                self.err(
                    Diagnostic::error(field.span, format!("ambiguous selector: `{}` of {}", field.name, t.name))
                        .label("promoted from several embedded fields")
                        .hint(format!("name the one you mean: {}", paths.join(", "))),
                );
                return Ty::Void;
            }
            super::promoted::Lookup::NotFound => None,
        };
        let Some(f) = f else {
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
        self.go_typed(e, fid)
    }

    /// `base[index]` of a string, slice, array or Go map.
    fn index(&mut self, e: &Expr, base: &Expr, index: &Expr) -> Ty {
        let bt = match self.global_index_base(base) {
            Some(t) => t,
            None => self.expr(base),
        };
        let it = self.expr(index);
        if let Some(id) = self.facts.go_types.get(&base.id).copied() {
            if let TypeKind::Map { key, elem } = self.types.get(id).kind {
                return self.map_index(e, base, index, &it, key, elem);
            }
        }
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
                        .label("not a slice, array, string or map"),
                );
                return Ty::Void;
            }
        };
        self.go_typed(e, elem)
    }

    /// `*p` of a typed Go pointer.
    pub(super) fn deref(&mut self, e: &Expr, t: Ty) -> Ty {
        match t {
            Ty::Pointer { elem: Some(id) } => self.go_typed(e, id),
            Ty::Void => Ty::Void,
            _ => {
                self.err(
                    Diagnostic::error(e.span, format!("only typed Go pointers can be dereferenced, not {}", t.a()))
                        .label("not a pointer"),
                );
                Ty::Void
            }
        }
    }

    /// `m[k]` of a Go map with integer or string keys: a value of the element's type
    /// (the zero value when absent), read by scanning the map (lower/gomap.rs).
    fn map_index(
        &mut self,
        e: &Expr,
        base: &Expr,
        index: &Expr,
        it: &Ty,
        key: Option<TypeId>,
        elem: Option<TypeId>,
    ) -> Ty {
        let map = self.types.get(self.facts.go_types[&base.id]).name.clone();
        let (Some(key), Some(elem)) = (key, elem) else {
            self.err(
                Diagnostic::error(base.span, format!("the DWARF of {map} does not say its key and element types"))
                    .label("cannot be indexed"),
            );
            return Ty::Void;
        };
        let kt = self.types.get(key);
        let fits = match kt.kind {
            TypeKind::Int { .. } => it.is_integer(),
            TypeKind::String => matches!(it, Ty::Str { .. }),
            _ => {
                self.err(
                    Diagnostic::error(
                        base.span,
                        format!("{map} has keys of type {}: m[k] reads maps with integer or string keys", kt.name),
                    )
                    .label("key type not supported")
                    .hint("len(m) works for any map"),
                );
                return Ty::Void;
            }
        };
        if !fits && *it != Ty::Void {
            self.err(
                Diagnostic::error(index.span, format!("a key of {map} must be {}, not {}", kt.name, it.a()))
                    .label("wrong key type"),
            );
            return Ty::Void;
        }
        self.facts.map_index = true;
        self.go_typed(e, elem)
    }
}

impl Cx<'_> {
    /// `x.(*T)`: a machine word, uintptr, unsafe.Pointer or pointer read as a pointer to
    /// T; an interface's data word when its dynamic type is *T, else nil (T resolved
    /// before typing: `check::asserted`).
    fn assert(&mut self, e: &Expr, base: &Expr, ty: &Ident) -> Ty {
        let bt = self.expr(base);
        let found = match self.asserted.get(&ty.name).cloned() {
            Some(Ok(found)) => found,
            Some(Err(why)) => {
                self.err(Diagnostic::error(ty.span, why.message).label("unknown type").hint_if(why.hint));
                return Ty::Void;
            }
            None => return Ty::Void,
        };
        if bt == Ty::Void {
            return Ty::Void;
        }
        let base_type = self.facts.go_types.get(&base.id).map(|b| self.types.get(*b));
        match base_type.map(|t| (&t.kind, t.size)) {
            Some((TypeKind::Pointer { .. } | TypeKind::UnsafePointer, _) | (TypeKind::Int { .. }, 8)) => {}
            Some((TypeKind::Interface { .. }, _)) => match found.descriptor {
                // Go's `p, _ := v.(*T)`: the data word if the dynamic type is *T.
                Some(descriptor) => {
                    self.facts.dynamic_asserts.insert(e.id, descriptor);
                }
                None => {
                    self.err(
                        Diagnostic::error(ty.span, format!("the binary has no runtime type {}", ty.name))
                            .label("no value of this type can be in an interface")
                            .hint("an interface can only hold a type the program converts to one"),
                    );
                    return Ty::Void;
                }
            },
            _ => {
                self.err(
                    Diagnostic::error(base.span, format!("{} cannot be asserted to {}", bt.a(), ty.name))
                        .label("not an interface, a machine word or a pointer")
                        .hint("assert an interface (`err.(*os.PathError)`), a parameter by position (`arg2.(*net/http.Request)`), a uintptr or a pointer"),
                );
                return Ty::Void;
            }
        }
        self.go_typed(e, found.ty)
    }
}
