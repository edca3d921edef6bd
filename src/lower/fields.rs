//! Where a struct field is: at its offset in the struct, following a pointer as Go does
//! (`p.f` of a `*T`), and through the embedded fields a promoted field comes from (the
//! checker records them: `Facts::promoted`), reading each embedded pointer on the way.

use super::codegen::Gen;
use super::values::Place;
use super::LowerError;
use crate::gotypes::{TypeId, TypeKind};
use crate::syntax::ast::{Expr, Ident};

impl Gen<'_> {
    /// The place of `base.field` (the expression `e`).
    pub(super) fn field_place(&mut self, e: &Expr, base: &Expr, field: &Ident) -> Result<Place, LowerError> {
        if let Some(c) = self.coalesced.get(&e.id).copied() {
            return self.coalesced_place(base, c);
        }
        let bid = self.go_type_of(base).ok_or_else(|| LowerError::unsupported(e.span, "a field of this"))?;
        let mut steps: Vec<String> = self.facts.promoted.get(&e.id).cloned().unwrap_or_default();
        steps.push(field.name.clone());
        let (mut place, mut sid) = match &self.types.get(bid).kind {
            TypeKind::Pointer { elem } => {
                let elem = *elem;
                self.expr(base)?;
                (self.address_place(e.span)?, elem)
            }
            _ => (self.place(base)?, bid),
        };
        let last = steps.len() - 1;
        for (i, name) in steps.iter().enumerate() {
            let (offset, ty) =
                self.struct_field(sid, name).ok_or_else(|| LowerError::unsupported(field.span, "this field"))?;
            place = place.plus(offset);
            if i == last {
                break;
            }
            // An embedded field on the way: a struct in place, or a pointer to follow.
            sid = match &self.types.get(ty).kind {
                TypeKind::Pointer { elem } => {
                    let elem = *elem;
                    self.read_scalar(&place, 8, false)?;
                    place = self.address_place(e.span)?;
                    elem
                }
                _ => ty,
            };
        }
        Ok(place)
    }

    /// The offset and type of field `name` of the struct `sid`.
    pub(super) fn struct_field(&self, sid: TypeId, name: &str) -> Option<(u64, TypeId)> {
        match &self.types.get(sid).kind {
            TypeKind::Struct { fields } => fields.iter().find(|f| f.name == name).map(|f| (f.offset, f.ty)),
            _ => None,
        }
    }
}
