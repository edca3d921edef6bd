//! What the output reads by the plan's word: printf formats that parse (with their
//! widths bounded by the parser), the Go types whole values are printed by (every type
//! they name is in `Plan::go_types`), and each copied value's layout inside its record.
//! The output trusts these when it decodes events and maps.

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
    let types = &plan.go_types;
    if let Some(i) = (0..types.items.len()).find(|i| !type_ok(types, &types.items[*i].kind)) {
        return Err(refused(format!("has a Go type ({}) that names no type of the plan", types.items[i].name)));
    }
    for (i, e) in plan.events.iter().enumerate() {
        if let EventKind::Printf { format } = &e.kind {
            if let Err(err) = crate::syntax::format::parse(format) {
                return Err(refused(format!("event {i}: its format cannot be printed: {}", err.message)));
            }
        }
        for f in &e.fields {
            value(types, &f.ty).map_err(|p| refused(format!("event {i}: {p}")))?;
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
    let Capture { root, size } = capture;
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
        NodeKind::Iface { type_at, data_at, str_at, max, .. } => {
            (vec![*type_at, *data_at, *str_at, str_at.saturating_add(*max)], vec![])
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
