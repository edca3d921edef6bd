//! Promoted fields, found as Go finds them: `c.pa` where `pa` is a field of a struct
//! embedded in `c`'s type (`type client struct { parseState; ... }`), through embedded
//! structs and pointers to structs, at any depth. The shallowest match wins; two at the
//! same depth are ambiguous, as Go's compiler says.

use crate::gotypes::{StructField, TypeId, TypeKind, Types};

/// How deep embedded fields are followed (Go has no limit; real types nest a few levels).
const MAX_DEPTH: usize = 8;

pub enum Lookup {
    /// A field of the struct itself.
    Direct(StructField),
    /// A promoted field: the embedded fields passed through, in order, then the field.
    Promoted {
        through: Vec<String>,
        field: StructField,
    },
    /// Several promoted fields of that name at the same depth: the paths to them.
    Ambiguous(Vec<String>),
    NotFound,
}

/// The struct `id` is, or points to.
fn struct_fields(types: &Types, id: TypeId) -> Option<&[StructField]> {
    let id = match &types.get(id).kind {
        TypeKind::Pointer { elem } => *elem,
        _ => id,
    };
    match &types.get(id).kind {
        TypeKind::Struct { fields } => Some(fields),
        _ => None,
    }
}

/// Field `name` of the struct `sid`, or promoted from its embedded fields.
pub fn find(types: &Types, sid: TypeId, name: &str) -> Lookup {
    let Some(fields) = struct_fields(types, sid) else { return Lookup::NotFound };
    if let Some(f) = fields.iter().find(|f| f.name == name) {
        return Lookup::Direct(f.clone());
    }
    // Breadth first over the embedded fields: (path so far, the embedded field's type).
    let mut level: Vec<(Vec<String>, TypeId)> =
        fields.iter().filter(|f| f.embedded).map(|f| (vec![f.name.clone()], f.ty)).collect();
    for _ in 0..MAX_DEPTH {
        let mut found: Vec<(Vec<String>, StructField)> = Vec::new();
        let mut next = Vec::new();
        for (path, ty) in &level {
            let Some(fields) = struct_fields(types, *ty) else { continue };
            if let Some(f) = fields.iter().find(|f| f.name == name) {
                found.push((path.clone(), f.clone()));
                continue;
            }
            // A type that embeds a pointer to itself is followed to MAX_DEPTH only.
            for e in fields.iter().filter(|f| f.embedded) {
                let mut p = path.clone();
                p.push(e.name.clone());
                next.push((p, e.ty));
            }
        }
        match found.len() {
            0 => {}
            1 => {
                let (through, field) = found.remove(0);
                return Lookup::Promoted { through, field };
            }
            _ => return Lookup::Ambiguous(found.into_iter().map(|(p, _)| format!("{}.{name}", p.join("."))).collect()),
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Lookup::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gotypes::GoType;

    fn add(types: &mut Types, name: &str, size: u64, kind: TypeKind) -> TypeId {
        types.add(GoType { name: name.into(), size, kind })
    }

    fn field(name: &str, ty: TypeId, offset: u64, embedded: bool) -> StructField {
        StructField { name: name.into(), ty, offset, embedded }
    }

    #[test]
    fn promoted_through_structs_and_pointers_shallowest_first() {
        let mut t = Types::default();
        let int = add(&mut t, "int", 8, TypeKind::Int { signed: true });
        let inner = add(&mut t, "main.inner", 16, TypeKind::Struct { fields: vec![field("deep", int, 8, false)] });
        let inner_ptr = add(&mut t, "*main.inner", 8, TypeKind::Pointer { elem: inner });
        let base = add(
            &mut t,
            "main.base",
            24,
            TypeKind::Struct { fields: vec![field("pa", int, 0, false), field("inner", inner_ptr, 16, true)] },
        );
        let other = add(&mut t, "main.other", 8, TypeKind::Struct { fields: vec![field("pa", int, 0, false)] });
        let outer = add(
            &mut t,
            "main.outer",
            40,
            TypeKind::Struct { fields: vec![field("n", int, 0, false), field("base", base, 8, true)] },
        );
        assert!(matches!(find(&t, outer, "n"), Lookup::Direct(f) if f.offset == 0));
        match find(&t, outer, "pa") {
            Lookup::Promoted { through, field } => assert_eq!((through, field.offset), (vec!["base".to_string()], 0)),
            _ => panic!("pa is promoted from base"),
        }
        match find(&t, outer, "deep") {
            Lookup::Promoted { through, .. } => assert_eq!(through, ["base", "inner"]),
            _ => panic!("deep is promoted through base and *inner"),
        }
        assert!(matches!(find(&t, outer, "nope"), Lookup::NotFound));
        let both = add(
            &mut t,
            "main.both",
            16,
            TypeKind::Struct { fields: vec![field("base", base, 0, true), field("other", other, 24, true)] },
        );
        match find(&t, both, "pa") {
            Lookup::Ambiguous(paths) => assert_eq!(paths, ["base.pa", "other.pa"]),
            _ => panic!("pa is ambiguous in both"),
        }
    }
}
