//! Go types and function parameters from DWARF: subprograms' formal parameters (results
//! marked `DW_AT_variable_parameter`, generic dictionaries placed), and type DIEs parsed
//! into the `Types` arena, each once, reached types queued rather than recursed into.

use super::*;
use crate::gobin::elf::symbols;
use crate::gobin::Param;
use crate::gotypes::{GoType, StructField, TypeKind, Types};

/// Where the hidden dictionary argument of a shape-instantiated generic function goes:
/// 0 for a function (`pkg.F[go.shape.int]`), 1 for a method of a generic type
/// (`pkg.(*T[go.shape.int]).M`, after the receiver); None for everything else, closures
/// (`pkg.F[go.shape.int].func1`) and method values (`-fm`) included: they capture it.
pub(crate) fn dictionary_position(name: &str) -> Option<usize> {
    // A name without `[` (most) is passed at the cost of a byte search.
    if !name.contains('[') || !name.contains("[go.shape.") {
        return None;
    }
    let package = symbols::package_of(name);
    let rest = name.get(package.len() + 1..)?;
    if rest.ends_with(']') {
        return Some(0);
    }
    let open = rest.find('[')?;
    let mut depth = 0;
    let mut close = None;
    for (i, c) in rest[open..].char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let mut after = &rest[close? + 1..];
    if rest.starts_with('(') {
        after = after.strip_prefix(')')?;
    }
    let method = after.strip_prefix('.')?;
    let closure = ["func", "gowrap", "deferwrap"]
        .iter()
        .any(|p| method.strip_prefix(p).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())));
    let plain = !method.is_empty() && method.chars().all(|c| c.is_alphanumeric() || c == '_');
    // Go 1.18 and 1.19 (numbered shapes, `go.shape.int_0`) pass it first, before the
    // receiver too.
    (plain && !closure).then_some(if numbered_shapes(name) { 0 } else { 1 })
}

/// Whether the shapes in `name` are numbered (`[go.shape.int_0,go.shape.string_1]`), as
/// Go 1.18 and 1.19 named them.
fn numbered_shapes(name: &str) -> bool {
    let b = name.as_bytes();
    (0..b.len()).any(|i| {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        b[i] == b'_' && digits > 0 && matches!(b.get(i + 1 + digits), Some(b',' | b']'))
    })
}

/// A member of a structure type: name, offset and type DIE.
pub(crate) struct Member {
    pub name: String,
    pub offset: u64,
    pub ty: Option<DebugInfoOffset>,
}

impl DwarfInfo {
    /// Parameters and results of function `name` in DWARF order (receiver first); None
    /// when DWARF has no subprogram of that name.
    pub(crate) fn params(&mut self, name: &str, types: &mut Types) -> Result<Option<Vec<Param>>, TargetError> {
        let Some(named) = self.lookup("f", symbols::package_of(name), name, |i| &i.functions)? else { return Ok(None) };
        // A function also inlined elsewhere is named by an abstract DIE that lists its
        // parameters but not its unnamed results; its out-of-line copy lists them all
        // (the parameters by their abstract origin).
        let at = self.concrete_of(named)?.unwrap_or(named);
        let children = self.children_of(at, &|tag| tag == dw::DW_TAG_formal_parameter)?;
        let mut params = Vec::new();
        let mut results = 0;
        for child in children {
            let child = match child.origin {
                Some(o) if child.name.is_none() => {
                    let origin = self.die(o)?;
                    Die {
                        name: origin.name,
                        ty: child.ty.or(origin.ty),
                        variable_parameter: child.variable_parameter || origin.variable_parameter,
                        ..child
                    }
                }
                _ => child,
            };
            let ty = match child.ty {
                Some(t) => self.type_id(t, types)?,
                None => return Err(self.bad_ref("parameter without a type", at)),
            };
            let name = match child.name {
                Some(n) => n,
                None if child.variable_parameter => format!("~r{results}"),
                None => "_".to_string(),
            };
            // Go 1.26 lists every result but the last twice when the function defers a
            // call (the same name, type and place): a name is one value. Only `_` may repeat.
            if name != "_" && params.iter().any(|p: &Param| p.name == name) {
                continue;
            }
            results += usize::from(child.variable_parameter);
            params.push(Param { name, ty, is_result: child.variable_parameter });
        }
        // A shape-instantiated generic function takes its dictionary as a hidden argument
        // that DWARF does not list: first, or right after the receiver of a method.
        if let Some(at) = dictionary_position(name) {
            if !params.iter().any(|p| p.name == ".dict") && at <= params.len() {
                let ty = self.unsafe_pointer(types);
                params.insert(at, Param { name: ".dict".to_string(), ty, is_result: false });
            }
        }
        Ok(Some(params))
    }

    fn unsafe_pointer(&mut self, types: &mut Types) -> TypeId {
        *self.unsafe_pointer.get_or_insert_with(|| {
            types.add(GoType { name: "unsafe.Pointer".to_string(), size: 8, kind: TypeKind::UnsafePointer })
        })
    }

    /// The TypeId of the type DIE at `at`, parsing it (and every type it reaches) on first
    /// use. Reached types are queued, not recursed into, so deep type graphs are fine.
    pub(crate) fn type_id(&mut self, at: DebugInfoOffset, types: &mut Types) -> Result<TypeId, TargetError> {
        let mut pending = Vec::new();
        let id = self.reserve(at, types, &mut pending);
        while let Some((id, off)) = pending.pop() {
            let t = self.parse_type(off, None, types, &mut pending, 0)?;
            types.items[id.0 as usize] = t;
        }
        Ok(id)
    }

    /// The id of the type at `at`: known, or a placeholder queued for parsing.
    fn reserve(
        &mut self,
        at: DebugInfoOffset,
        types: &mut Types,
        pending: &mut Vec<(TypeId, DebugInfoOffset)>,
    ) -> TypeId {
        if let Some(id) = self.type_ids.get(&at) {
            return *id;
        }
        let id = types.add(GoType { name: String::new(), size: 0, kind: TypeKind::Other });
        self.type_ids.insert(at, id);
        pending.push((id, at));
        id
    }

    fn parse_type(
        &mut self,
        at: DebugInfoOffset,
        name: Option<String>,
        types: &mut Types,
        pending: &mut Vec<(TypeId, DebugInfoOffset)>,
        depth: usize,
    ) -> Result<GoType, TargetError> {
        let (die, children) = self.die_with_children(at)?;
        let name = name.or(die.name.clone()).unwrap_or_default();
        let size = die.byte_size.unwrap_or(0);
        let kind = match die.tag.unwrap_or(dw::DW_TAG_null) {
            dw::DW_TAG_base_type => match die.encoding.unwrap_or(dw::DW_ATE_signed) {
                dw::DW_ATE_boolean => TypeKind::Bool,
                dw::DW_ATE_float => TypeKind::Float,
                dw::DW_ATE_complex_float => TypeKind::Complex,
                dw::DW_ATE_unsigned | dw::DW_ATE_unsigned_char => TypeKind::Int { signed: false },
                _ => TypeKind::Int { signed: true },
            },
            dw::DW_TAG_pointer_type => match die.ty {
                Some(elem) if name != "unsafe.Pointer" => {
                    TypeKind::Pointer { elem: self.reserve(elem, types, pending) }
                }
                _ => TypeKind::UnsafePointer,
            },
            dw::DW_TAG_structure_type => match die.go_kind {
                Some(kind::STRING) => TypeKind::String,
                Some(kind::SLICE) => {
                    let elem = match die.go_elem {
                        Some(e) => Some(e),
                        None => self.slice_elem(&children)?,
                    };
                    match elem {
                        Some(e) => TypeKind::Slice { elem: self.reserve(e, types, pending) },
                        None => return Err(self.bad_ref("slice type without an element type", at)),
                    }
                }
                _ if name == "string" => TypeKind::String,
                _ => {
                    let mut fields = Vec::new();
                    for m in children.iter().filter(|c| c.tag == Some(dw::DW_TAG_member)) {
                        let Some(ty) = m.ty else { return Err(self.bad_ref("member without a type", at)) };
                        fields.push(StructField {
                            name: m.name.clone().unwrap_or_default(),
                            ty: self.reserve(ty, types, pending),
                            offset: m.member_offset.unwrap_or(0),
                            embedded: m.embedded,
                        });
                    }
                    TypeKind::Struct { fields }
                }
            },
            dw::DW_TAG_array_type => {
                let Some(elem) = die.ty else { return Err(self.bad_ref("array without an element type", at)) };
                let range = children.iter().find(|c| c.tag == Some(dw::DW_TAG_subrange_type));
                let len = range.and_then(|r| r.count.or(r.upper_bound.map(|u| u + 1))).unwrap_or(0);
                TypeKind::Array { elem: self.reserve(elem, types, pending), len }
            }
            dw::DW_TAG_subroutine_type => TypeKind::Func,
            dw::DW_TAG_typedef => return self.parse_typedef(at, die, name, types, pending, depth),
            _ => TypeKind::Other,
        };
        let size = match kind {
            TypeKind::Pointer { .. } | TypeKind::UnsafePointer | TypeKind::Func if size == 0 => 8,
            _ => size,
        };
        Ok(GoType { name, size, kind })
    }

    /// A typedef: Go's interfaces, maps, chans and funcs are typedefs of runtime
    /// structures; any other is a named type, the underlying type under its name.
    fn parse_typedef(
        &mut self,
        at: DebugInfoOffset,
        die: Die,
        name: String,
        types: &mut Types,
        pending: &mut Vec<(TypeId, DebugInfoOffset)>,
        depth: usize,
    ) -> Result<GoType, TargetError> {
        match die.go_kind {
            Some(kind::INTERFACE) => {
                let target = match die.ty {
                    Some(t) => self.die(t)?.name,
                    None => None,
                };
                Ok(GoType {
                    name,
                    size: 16,
                    kind: TypeKind::Interface { empty: target.as_deref() == Some("runtime.eface") },
                })
            }
            Some(kind::MAP) => {
                let key = die.go_key.map(|k| self.reserve(k, types, pending));
                let elem = die.go_elem.map(|e| self.reserve(e, types, pending));
                Ok(GoType { name, size: 8, kind: TypeKind::Map { key, elem } })
            }
            Some(kind::CHAN) => Ok(GoType { name, size: 8, kind: TypeKind::Chan }),
            Some(kind::FUNC) => Ok(GoType { name, size: 8, kind: TypeKind::Func }),
            _ => {
                // A named type: the underlying type under this name. Go's local
                // typedefs for generic shapes (`.param0`) keep the shape's name.
                let Some(target) = die.ty else { return Err(self.bad_ref("typedef without a type", at)) };
                if depth >= TYPEDEF_DEPTH {
                    return Err(self.bad_ref("typedef cycle", at));
                }
                let keep = die.name.filter(|n| !n.starts_with('.'));
                self.parse_type(target, keep, types, pending, depth + 1)
            }
        }
    }

    /// The element of a slice described without DW_AT_go_elem: what its `array` member
    /// points to.
    fn slice_elem(&self, children: &[Die]) -> Result<Option<DebugInfoOffset>, TargetError> {
        let Some(array) = children.iter().find(|c| c.name.as_deref() == Some("array")).and_then(|c| c.ty) else {
            return Ok(None);
        };
        Ok(self.die(array)?.ty)
    }

    /// Members of the structure type named `name` in package `package` (following a
    /// typedef of it), or None if DWARF has no such type.
    pub(crate) fn struct_members(&mut self, package: &str, name: &str) -> Result<Option<Vec<Member>>, TargetError> {
        let Some(at) = self.lookup("t", package, name, |i| &i.types)? else { return Ok(None) };
        self.members_at(at).map(Some)
    }

    /// Members of the structure type at `at` (following typedefs: Go names structs that
    /// way, e.g. `runtime.stack`).
    pub(crate) fn members_at(&self, mut at: DebugInfoOffset) -> Result<Vec<Member>, TargetError> {
        for _ in 0..TYPEDEF_DEPTH {
            let die = self.die(at)?;
            match (die.tag, die.ty) {
                (Some(dw::DW_TAG_typedef), Some(target)) => at = target,
                _ => break,
            }
        }
        let (_, children) = self.die_with_children(at)?;
        Ok(children
            .into_iter()
            .filter(|c| c.tag == Some(dw::DW_TAG_member))
            .map(|c| Member { name: c.name.unwrap_or_default(), offset: c.member_offset.unwrap_or(0), ty: c.ty })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::dictionary_position;

    #[test]
    fn dictionary_goes_first_for_functions_and_after_the_receiver_for_methods() {
        assert_eq!(dictionary_position("main.Sum[go.shape.int]"), Some(0));
        assert_eq!(dictionary_position("example.com/x/pkg.Map[go.shape.string,go.shape.int]"), Some(0));
        assert_eq!(dictionary_position("main.(*Stack[go.shape.string]).Push"), Some(1));
        assert_eq!(dictionary_position("main.Stack[go.shape.string].Len"), Some(1));
        assert_eq!(dictionary_position("main.Sum[go.shape.int].func1"), None);
        assert_eq!(dictionary_position("main.(*Stack[go.shape.*uint8_0]).Push"), Some(0));
        assert_eq!(dictionary_position("main.Pair[go.shape.int_0,go.shape.string_1]"), Some(0));
        assert_eq!(dictionary_position("main.Stack[go.shape.struct { a_1 int }].Len"), Some(1));
        assert_eq!(dictionary_position("main.Sum[go.shape.int_0].func1"), None);
        assert_eq!(dictionary_position("main.(*Stack[go.shape.string]).Push.func2"), None);
        assert_eq!(dictionary_position("main.(*Stack[go.shape.string]).Push-fm"), None);
        assert_eq!(dictionary_position("main.main"), None);
    }
}
