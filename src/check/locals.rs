//! The Go values a line probe can name: the locals and parameters of the function (or
//! inlined copy) the line is in, where DWARF places them at the site's address, and for
//! those that cannot be read there, why, naming the line: optimized away there, not
//! declared yet, or declared in a block that does not hold the line.

use super::govalues::{go_ty, GoValue};
use super::unreadable::Unreadable;
use crate::arch::abi::Location;
use crate::gobin::{GoBinary, LineSite, LocalState, TargetError, ValueLocation};
use crate::gotypes::{TypeId, TypeKind};

/// The locals at `site`, each readable with its place, or with why not.
pub fn line_values(target: &dyn GoBinary, site: &LineSite, limit: u32) -> Result<Vec<GoValue>, TargetError> {
    let locals = target.locals_at(site)?;
    let file = site.file.rsplit('/').next().unwrap_or(&site.file);
    let at = format!("{file}:{}", site.line);
    let word = target.word_type();
    let types = &*target.types();
    Ok(locals
        .into_iter()
        .map(|l| {
            let declared = l.decl_line.map(|d| format!("{file}:{d}")).unwrap_or_else(|| "another line".to_string());
            let (name, at) = (l.name.clone(), at.clone());
            let ty = match (&l.state, l.ty) {
                (_, None) => Err(Unreadable::NoType { name }),
                (LocalState::InScope(ValueLocation::At(_)), Some(t)) => Ok(go_ty(types, t, limit)),
                (LocalState::InScope(ValueLocation::Nowhere), _) if l.decl_line == Some(site.line) && !l.param => {
                    Err(Unreadable::NothingYet { name, at })
                }
                (LocalState::InScope(ValueLocation::Nowhere), _) => Err(Unreadable::OptimizedAway { name, at }),
                (LocalState::InScope(ValueLocation::Unsupported(why)), _) => {
                    Err(Unreadable::Location { name, at, why: why.clone() })
                }
                (LocalState::NotYet, _) => Err(Unreadable::NotDeclaredYet { name, at, declared }),
                (LocalState::OutOfScope, _) => Err(Unreadable::OutOfScope { name, at, declared }),
            };
            let location = match (&l.state, &ty) {
                (LocalState::InScope(ValueLocation::At(loc)), Ok(_)) => loc.clone(),
                _ => Location::Empty,
            };
            // `&total`: the local's address, the compiler having moved it to the heap.
            // The script names it `total`, and reads it through the pointer.
            let pointee = |t: TypeId| match types.get(t).kind {
                TypeKind::Pointer { elem } => Some(elem),
                _ => None,
            };
            match (l.name.strip_prefix('&'), l.ty.and_then(pointee)) {
                (Some(name), Some(elem)) => GoValue {
                    name: name.to_string(),
                    type_id: elem,
                    ty: ty.map(|_| go_ty(types, elem, limit)),
                    location,
                    is_result: false,
                    at_entry: false,
                    escaped: true,
                },
                _ => GoValue {
                    name: l.name,
                    type_id: l.ty.unwrap_or(word),
                    ty,
                    location,
                    is_result: false,
                    at_entry: false,
                    escaped: false,
                },
            }
        })
        .collect())
}
