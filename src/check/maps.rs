//! The table of user maps (`@name`): every use of a map must agree on its key types and
//! on what its value is (one aggregation, or plain values of one type).

use super::ty::Ty;
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::Agg;
use crate::syntax::ast::Span;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub enum MapValueTy {
    Agg { agg: Agg, of: Ty },
    Plain(Ty),
}

#[derive(Clone, Debug)]
pub struct MapInfo {
    pub keys: Vec<Ty>,
    pub value: MapValueTy,
    /// Where the map was first given its shape.
    pub span: Span,
}

#[derive(Debug, Default)]
pub struct MapTable {
    pub maps: BTreeMap<String, MapInfo>,
    /// Maps named by print/clear/delete/reads, checked once all probes are seen.
    pub referenced: Vec<(String, Span)>,
}

/// `@name`, or `@` for the anonymous map.
pub fn display_name(name: &str) -> String {
    format!("@{name}")
}

impl MapTable {
    /// Records a write of `value` under `keys` to map `name`; an error if it disagrees with
    /// an earlier use.
    pub fn declare(&mut self, name: &str, keys: Vec<Ty>, value: MapValueTy, span: Span, diags: &mut Diagnostics) {
        let Some(existing) = self.maps.get(name) else {
            self.maps.insert(name.to_string(), MapInfo { keys, value, span });
            return;
        };
        let key_layout = |k: &[Ty]| k.iter().map(|t| t.value_type()).collect::<Vec<_>>();
        if key_layout(&existing.keys) != key_layout(&keys) {
            diags.push(
                Diagnostic::error(span, format!("{} is used with different keys", display_name(name)))
                    .label(format!("keys here: [{}]", describe(&keys)))
                    .related(existing.span, format!("keys here: [{}]", describe(&existing.keys))),
            );
            return;
        }
        let same = match (&existing.value, &value) {
            (MapValueTy::Agg { agg: a, of: x }, MapValueTy::Agg { agg: b, of: y }) => {
                a == b && x.value_type() == y.value_type()
            }
            (MapValueTy::Plain(x), MapValueTy::Plain(y)) => x.value_type() == y.value_type(),
            _ => false,
        };
        if !same {
            diags.push(
                Diagnostic::error(span, format!("{} holds different kinds of values", display_name(name)))
                    .label(format!("here: {}", describe_value(&value)))
                    .related(existing.span, format!("here: {}", describe_value(&existing.value)))
                    .hint("a map holds one aggregation, or plain values of one type: use another map name"),
            );
        }
    }

    pub fn reference(&mut self, name: &str, span: Span) {
        self.referenced.push((name.to_string(), span));
    }

    /// Every referenced map must be written somewhere.
    pub fn check_references(&self, diags: &mut Diagnostics) {
        for (name, span) in &self.referenced {
            if !self.maps.contains_key(name) {
                let close = crate::diag::closest(name, self.maps.keys().map(|k| k.as_str()), 1);
                let mut d =
                    Diagnostic::error(*span, format!("{} is never assigned", display_name(name))).label("unknown map");
                if let Some(c) = close.first() {
                    d = d.hint(format!("did you mean {}?", display_name(c)));
                }
                diags.push(d);
            }
        }
    }
}

fn describe(keys: &[Ty]) -> String {
    keys.iter().map(|k| k.describe()).collect::<Vec<_>>().join(", ")
}

fn describe_value(v: &MapValueTy) -> String {
    match v {
        MapValueTy::Agg { agg, of } => format!("{}() of {}", agg.name(), of.describe()),
        MapValueTy::Plain(t) => t.describe(),
    }
}
