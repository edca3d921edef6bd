//! The table of user maps (`@name`): every use of a map must agree on its key types, on
//! its keys' names (`keynames`) and on what its value is (one aggregation, or plain values
//! of one type).

use super::keynames::{self, KeyName};
use super::ty::Ty;
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::Agg;
use crate::syntax::ast::{MapRef, Span};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub enum MapValueTy {
    Agg { agg: Agg, of: Ty },
    Plain(Ty),
}

#[derive(Clone, Debug)]
pub struct MapInfo {
    pub keys: Vec<Ty>,
    /// One name per key: written in some use (`method: x`), else derived from the key
    /// expression of the first use.
    pub key_names: Vec<KeyName>,
    pub value: MapValueTy,
    /// Where the map was first given its shape.
    pub span: Span,
}

#[derive(Debug, Default)]
pub struct MapTable {
    pub maps: BTreeMap<String, MapInfo>,
    /// Maps named by print/clear/delete/reads, with the key names written there (if
    /// any), checked once all probes are seen.
    pub referenced: Vec<(String, Span, Vec<Option<KeyName>>)>,
    /// Maps some probe deletes an element of (`delete(@m[k])`).
    pub deleted: std::collections::BTreeSet<String>,
    /// Maps some probe names whole (`print(@m)`, `clear(@m)`), not by one element.
    pub whole: std::collections::BTreeSet<String>,
    /// Maps some probe clears (`clear(@m)`: gtrace deletes their elements while the
    /// probes run).
    pub cleared: std::collections::BTreeSet<String>,
    /// Some probe's `func` carries a dictionary in its high bits (check/generics.rs): a
    /// map keyed by `func` alone is then a hash, not an array indexed by it.
    pub func_dictionaries: bool,
}

impl MapInfo {
    /// Whether the map can be a per-CPU array indexed by the probed function: keyed by
    /// `func` alone, an aggregation whose value tells an element never updated (all
    /// zero) from one that was (not `sum`, which can add up to 0), and never deleted
    /// from in a probe (a program can zero only its own CPU's value of an array).
    pub fn by_function(&self, deleted: bool) -> bool {
        self.keys == [Ty::Func] && self.array_value(deleted)
    }

    /// Whether the map can be a per-CPU array of one element: no keys (`@h =
    /// hist(elapsed)`), and a value as `by_function` asks. Its lookup is the verifier's
    /// (no helper call, no hash), and nothing is ever inserted.
    pub fn single(&self, deleted: bool) -> bool {
        self.keys.is_empty() && self.array_value(deleted)
    }

    fn array_value(&self, deleted: bool) -> bool {
        matches!(&self.value, MapValueTy::Agg { agg, .. } if *agg != Agg::Sum) && !deleted
    }
}

/// `@name`, or `@` for the anonymous map.
pub fn display_name(name: &str) -> String {
    format!("@{name}")
}

impl MapTable {
    /// Records a write of `value` under `keys` to map `name`; an error if it disagrees with
    /// an earlier use.
    pub fn declare(
        &mut self,
        name: &str,
        keys: Vec<Ty>,
        key_names: Vec<KeyName>,
        value: MapValueTy,
        span: Span,
        diags: &mut Diagnostics,
    ) {
        let Some(existing) = self.maps.get_mut(name) else {
            self.maps.insert(name.to_string(), MapInfo { keys, key_names, value, span });
            return;
        };
        if !widen_keys(&mut existing.keys, &keys) {
            diags.push(
                Diagnostic::error(span, format!("{} is used with different keys", display_name(name)))
                    .label(format!("keys here: [{}]", describe(&keys)))
                    .related(existing.span, format!("keys here: [{}]", describe(&existing.keys))),
            );
            return;
        }
        merge_names(name, &mut existing.key_names, key_names, diags);
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

    /// A use of `map` that does not write it: a read, print, clear or delete.
    pub fn reference(&mut self, map: &MapRef) {
        let written = keynames::key_names(map).into_iter().map(|n| n.explicit.then_some(n)).collect();
        self.referenced.push((map.name.name.clone(), map.span, written));
    }

    /// Every referenced map must be written somewhere, and the key names written where
    /// it is read must be its names; every map's key names must be valid and distinct.
    pub fn check_references(&self, diags: &mut Diagnostics) {
        for (name, info) in &self.maps {
            check_names(name, &info.key_names, diags);
        }
        for (name, span, written) in &self.referenced {
            if let Some(info) = self.maps.get(name) {
                for (n, have) in written.iter().zip(&info.key_names) {
                    match n {
                        Some(n) if n.name != have.name => diags.push(renamed(name, n, have)),
                        _ => {}
                    }
                }
            }
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

/// Takes the names of a new use of a map into its names: a written name wins over a
/// derived one; two written names must agree. Derived names that differ keep the first.
fn merge_names(map: &str, names: &mut [KeyName], new: Vec<KeyName>, diags: &mut Diagnostics) {
    for (have, new) in names.iter_mut().zip(new) {
        if !new.explicit || have.name == new.name {
            continue;
        }
        if have.explicit {
            diags.push(renamed(map, &new, have));
        } else {
            *have = new;
        }
    }
}

fn renamed(map: &str, here: &KeyName, there: &KeyName) -> Diagnostic {
    let how = if there.explicit { "named" } else { "named after its expression" };
    Diagnostic::error(
        here.span,
        format!("this key of {} is named `{}`, but elsewhere `{}`", display_name(map), here.name, there.name),
    )
    .label(format!("named `{}` here", here.name))
    .related(there.span, format!("{how} `{}` here", there.name))
    .hint("a key has one name wherever the map is used: the label of its metrics and its field in -f json")
}

/// Each name is a valid label name, and no two keys of a map share one.
fn check_names(map: &str, names: &[KeyName], diags: &mut Diagnostics) {
    for (i, n) in names.iter().enumerate() {
        let how = if n.explicit { "" } else { " (after its expression)" };
        if let Some(why) = keynames::invalid(&n.name) {
            let mut d =
                Diagnostic::error(n.span, format!("`{}` cannot name a key of {}{how}", n.name, display_name(map)))
                    .label("not a valid key name")
                    .hint(why);
            if !n.explicit {
                d = d.hint("name the key: `@m[NAME: expr]`");
            }
            diags.push(d);
        } else if let Some(first) = names[..i].iter().find(|f| f.name == n.name) {
            let mut d =
                Diagnostic::error(n.span, format!("two keys of {} are named `{}`{how}", display_name(map), n.name))
                    .label("the second")
                    .related(first.span, "the first");
            d = d.hint(format!("name them apart: `{}[a: ..., b: ...]`", display_name(map)));
            diags.push(d);
        }
    }
}

/// Whether `keys` fit the map's keys `have`: the same kinds, one by one. A string key
/// takes the longest of the strings used for it (a literal is as long as its text): the
/// key is built in a zeroed slot of the map's size, so a shorter string is the same key
/// wherever it is written (`@m["OK"]` and `@m["NotFound"]` are one map).
fn widen_keys(have: &mut [Ty], keys: &[Ty]) -> bool {
    if have.len() != keys.len() {
        return false;
    }
    let same = |a: &Ty, b: &Ty| match (a, b) {
        (Ty::Str { .. }, Ty::Str { .. }) => true,
        _ => a.value_type() == b.value_type(),
    };
    if !have.iter().zip(keys).all(|(a, b)| same(a, b)) {
        return false;
    }
    for (a, b) in have.iter_mut().zip(keys) {
        if let (Ty::Str { max: a }, Ty::Str { max: b }) = (a, b) {
            *a = (*a).max(*b);
        }
    }
    true
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
