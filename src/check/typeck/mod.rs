//! Names and types of every expression of one probe instance: fills its `Facts` and the
//! map table, and reports what does not type. Statements here; expressions, calls and
//! names in the files beside it.

mod arith;
mod calls;
mod consts;
mod expr;
mod globals;
mod names;
mod promoted;
mod span;
mod stmt;

use super::govalues::GoValue;
use super::maps::MapTable;
use super::ty::Ty;
use super::{Facts, InstanceKind, SelfVar};
use crate::diag::{Diagnostic, Diagnostics};
use crate::gotypes::{TypeKind, Types};
use crate::syntax::ast::*;
use std::collections::BTreeMap;

pub use arith::conversion;
pub use calls::agg_of;
pub use consts::float_bits;
pub use span::MAX_ATTRIBUTES;

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
    /// The package-level variables the body may name (`check::globals::resolve`).
    pub globals: super::globals::Globals,
    /// The types the body asserts (`check::asserted::resolve`).
    pub asserted: super::asserted::Asserted,
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
        globals: env.globals,
        asserted: env.asserted,
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
    globals: super::globals::Globals,
    asserted: super::asserted::Asserted,
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

    /// Can this be compared with nil?
    pub(super) fn nilable(&self, t: &Ty) -> bool {
        match t {
            Ty::Pointer { .. } | Ty::Interface => true,
            Ty::Go(id) => matches!(
                self.types.get(*id).kind,
                TypeKind::Slice { .. } | TypeKind::Map { .. } | TypeKind::Chan | TypeKind::Func
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
                    if self.untyped(k) && t != Ty::Void && *want != t {
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
        if role == "printed" {
            self.facts.printed.push(e.id);
        }
        let why = match t {
            // Printed whole, as Go's fmt prints it (copied at the probe).
            Ty::Go(_) if role == "printed" => return true,
            Ty::Go(id) => format!(
                "a {} cannot be {role}: pick one of its fields, use len(), or print it whole",
                self.types.get(*id).name
            ),
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
