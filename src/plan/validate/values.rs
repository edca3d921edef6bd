//! What the output reads by the plan's word: printf formats that parse (with their
//! widths bounded by the parser), the Go types whole values are printed by (every type
//! they name is in `Plan::go_types`), each copied value's layout inside its record, and
//! the plan's texts that reach the operator's terminal (names, formats, labels, probe
//! headers, script lines): no control characters but tabs, and a format's newlines.

use super::layout::MAX_VALUE;
use super::Refused;
use crate::capture::{Capture, Node, NodeKind};
use crate::gotypes::{TypeId, TypeKind, Types};
use crate::plan::{EventKind, MapRole, MapValue, Plan, ValueType};

/// How deep a copied value's layout may nest (`--depth` is at most 8; a level of a value
/// is at most a pointer, an element and a field).
const MAX_NESTING: usize = 64;

fn refused(problem: String) -> Refused {
    Refused::Plan { problem }
}

/// Refuses a format, a type or a layout the output could not read as gtrace writes it.
pub fn check(plan: &Plan) -> Result<(), Refused> {
    texts(plan)?;
    let types = &plan.go_types;
    if let Some(t) = plan.dynamic_types.values().find(|t| t.layout.is_some_and(|id| !known(types, id))) {
        return Err(refused(format!("has a dynamic type ({}) whose layout names no type of the plan", t.name)));
    }
    if let Some(i) = (0..types.items.len()).find(|i| !type_ok(types, &types.items[*i].kind)) {
        return Err(refused(format!("has a Go type ({}) that names no type of the plan", types.items[i].name)));
    }
    for (i, e) in plan.events.iter().enumerate() {
        if let EventKind::Printf { format } = &e.kind {
            if let Err(err) = crate::syntax::format::parse(format) {
                return Err(Refused::Event {
                    index: i,
                    problem: format!("its format cannot be printed: {}", err.message),
                });
            }
        }
        for f in &e.fields {
            value(types, &f.ty).map_err(|problem| Refused::Event { index: i, problem })?;
        }
    }
    for m in &plan.maps {
        let MapRole::User { keys, value: v, .. } = &m.role else { continue };
        let of = match v {
            MapValue::Plain(t) | MapValue::Agg { of: t, .. } => t,
        };
        let values = keys.iter().map(|k| &k.ty).chain(std::iter::once(of));
        for t in values {
            value(types, t).map_err(|p| Refused::Map { map: m.object_name.clone(), problem: p })?;
        }
    }
    Ok(())
}

/// The texts gtrace prints from the plan: none may drive the terminal.
fn texts(plan: &Plan) -> Result<(), Refused> {
    let plain = |t: &str| t.chars().all(|c| !c.is_control() || c == '\t');
    let word = |t: &str| t.chars().all(|c| c.is_alphanumeric() || c == '_');
    let bad = |what: &str, text: &str| refused(format!("has a {what} gtrace would not write: {text:?}"));
    for m in &plan.maps {
        if let MapRole::User { name, key_names, .. } = &m.role {
            if let Some(n) = std::iter::once(name).chain(key_names).find(|n| !word(n)) {
                return Err(Refused::Map {
                    map: m.object_name.clone(),
                    problem: format!("a name that is no identifier: {n:?}"),
                });
            }
        }
    }
    if let Some(f) = plan.functions.iter().chain(plan.dictionaries.values()).find(|f| !plain(f)) {
        return Err(bad("function name", f));
    }
    if let Some(t) = plan.dynamic_types.values().map(|t| &t.name).find(|t| !plain(t)) {
        return Err(bad("type name", t));
    }
    if let Some(m) = plan.binary.module.as_ref().filter(|m| !plain(m)) {
        return Err(bad("module path", m));
    }
    for p in &plan.probes {
        let lines = p.source_lines.iter().map(|(_, l)| l);
        if let Some(t) = std::iter::once(&p.describe).chain(lines).find(|t| !plain(t)) {
            return Err(Refused::Program {
                program: p.program.clone(),
                problem: format!("a text with control characters: {t:?}"),
            });
        }
    }
    for (i, e) in plan.events.iter().enumerate() {
        let in_format = |t: &str| t.chars().all(|c| !c.is_control() || c == '\n' || c == '\t');
        let ok = match &e.kind {
            EventKind::Printf { format } => in_format(format),
            EventKind::Print { labels } => labels.iter().flatten().all(|l| plain(l)),
            EventKind::Span { keys, .. } => keys.iter().flatten().all(|l| plain(l)),
            _ => true,
        };
        if !ok {
            return Err(Refused::Event { index: i, problem: "a text with control characters".into() });
        }
    }
    let skipped = plan.skipped.iter().flat_map(|s| [&s.probe, &s.function]);
    match skipped.into_iter().find(|t| !plain(t)) {
        Some(t) => Err(bad("passed-over site", t)),
        None => Ok(()),
    }
}

fn known(types: &Types, id: TypeId) -> bool {
    (id.0 as usize) < types.items.len()
}

/// Whether every type `kind` names is in `types`.
fn type_ok(types: &Types, kind: &TypeKind) -> bool {
    match kind {
        TypeKind::Pointer { elem } | TypeKind::Slice { elem } | TypeKind::Array { elem, .. } => known(types, *elem),
        TypeKind::Struct { fields } => fields.iter().all(|f| known(types, f.ty)),
        TypeKind::Map { key, elem } => key.iter().chain(elem).all(|t| known(types, *t)),
        _ => true,
    }
}

/// A whole value's layout: within its record, of known types, bounded in depth.
fn value(types: &Types, ty: &ValueType) -> Result<(), String> {
    let ValueType::Go { capture } = ty else { return Ok(()) };
    let Capture { root, size, .. } = capture;
    if *size > MAX_VALUE {
        return Err(format!("a copied value of {size} bytes, more than {MAX_VALUE}"));
    }
    node(types, root, *size, 0)
}

fn node(types: &Types, n: &Node, size: u32, depth: usize) -> Result<(), String> {
    if depth > MAX_NESTING {
        return Err(format!("a copied value nested deeper than {MAX_NESTING} levels"));
    }
    if !known(types, n.ty) {
        return Err(format!("a copied value of type {}, which is no type of the plan", n.ty.0));
    }
    let (offsets, children): (Vec<u32>, Vec<&Node>) = match &n.kind {
        NodeKind::Bytes | NodeKind::Cut => (vec![], vec![]),
        NodeKind::Struct { fields } => (vec![], fields.iter().collect()),
        NodeKind::Array { elems } => (vec![], elems.iter().collect()),
        NodeKind::Str { bytes, max } => (vec![*bytes, bytes.saturating_add(*max)], vec![]),
        NodeKind::Slice { elems_at, elems } => (vec![*elems_at], elems.iter().collect()),
        NodeKind::Pointer { pointee } => (vec![], pointee.iter().map(|p| p.as_ref()).collect()),
        NodeKind::Func { code } => (vec![*code], vec![]),
        NodeKind::Iface { type_at, data_at, str_at, max, elems, .. } => {
            let mut at = vec![*type_at, *data_at, *str_at, str_at.saturating_add(*max)];
            let inner: Vec<&Node> = elems.iter().flat_map(|e| &e.elems).collect();
            if let Some(e) = elems {
                at.extend([e.head_at.saturating_add(16), e.elems_at]);
                if inner.iter().any(|n| matches!(n.kind, NodeKind::Iface { elems: Some(_), .. }) || !is_iface(n)) {
                    return Err("a slice of interfaces whose elements are not interfaces".into());
                }
            }
            (at, inner)
        }
        NodeKind::Map { len_at, n_at, entries_at, entries, .. } => {
            (vec![*len_at, *n_at, *entries_at], entries.iter().flat_map(|(k, v)| [k, v]).collect())
        }
    };
    if let Some(at) = std::iter::once(n.at).chain(offsets).find(|at| *at > size) {
        return Err(format!("a copied value laid out at byte {at}, outside its {size} bytes"));
    }
    children.into_iter().try_for_each(|c| node(types, c, size, depth + 1))
}

fn is_iface(n: &Node) -> bool {
    matches!(n.kind, NodeKind::Iface { .. })
}
