//! The target's DWARF (gimli), read lazily: the sections are decompressed on first use,
//! each compile unit is indexed (its top-level functions and types by name) only when a
//! lookup needs it, and only the types a script reaches are parsed into the `Types` arena.
//!
//! Go-specific DWARF: `DW_AT_go_kind` (0x2900) holds the reflect.Kind of a type,
//! `DW_AT_go_elem` (0x2902) the element of a slice, map or chan. Strings and slices are
//! structures named `string` and `[]T`; interfaces, maps, chans and funcs are typedefs of
//! runtime structures; results are formal parameters with `DW_AT_variable_parameter`.

use crate::gotypes::{GoType, StructField, TypeId, TypeKind, Types};
use crate::target::{elf, symbols, Param, TargetError};
use gimli::{constants as dw, AttributeValue, DebugInfoOffset, DwAt, DwTag, Reader, UnitOffset};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type R = gimli::EndianArcSlice<gimli::LittleEndian>;
type Entry = gimli::DebuggingInformationEntry<R>;

const DW_AT_GO_KIND: DwAt = DwAt(0x2900);
const DW_AT_GO_ELEM: DwAt = DwAt(0x2902);

/// reflect.Kind values that DW_AT_go_kind holds.
mod kind {
    pub const CHAN: u64 = 18;
    pub const FUNC: u64 = 19;
    pub const INTERFACE: u64 = 20;
    pub const MAP: u64 = 21;
    pub const SLICE: u64 = 23;
    pub const STRING: u64 = 24;
}

/// How many typedefs of typedefs are followed before giving up (a cycle in bad DWARF).
const TYPEDEF_DEPTH: usize = 16;

/// Top-level named DIEs of one compile unit.
#[derive(Default)]
struct UnitIndex {
    functions: HashMap<String, UnitOffset>,
    types: HashMap<String, UnitOffset>,
}

/// One compile unit: its header and abbreviations (not a `gimli::Unit`, which would
/// need `.debug_line` and friends decompressed too).
struct UnitSlot {
    start: DebugInfoOffset,
    header: gimli::UnitHeader<R>,
    abbrevs: Arc<gimli::Abbreviations>,
    /// The compile unit's name: the Go package path.
    name: String,
    index: Option<Arc<UnitIndex>>,
}

/// The attributes of one DIE that gtrace uses, read once into owned values.
#[derive(Default)]
struct Die {
    tag: Option<DwTag>,
    name: Option<String>,
    ty: Option<DebugInfoOffset>,
    byte_size: Option<u64>,
    encoding: Option<gimli::DwAte>,
    go_kind: Option<u64>,
    go_elem: Option<DebugInfoOffset>,
    variable_parameter: bool,
    member_offset: Option<u64>,
    count: Option<u64>,
    upper_bound: Option<u64>,
}

/// The DWARF of one target, with what has been indexed and parsed so far.
pub(crate) struct DwarfInfo {
    path: PathBuf,
    debug_str: gimli::DebugStr<R>,
    /// Location and range lists, decompressed on first use (inlined calls only).
    lists: Option<Lists>,
    units: Vec<UnitSlot>,
    type_ids: HashMap<DebugInfoOffset, TypeId>,
    unsafe_pointer: Option<TypeId>,
}

/// A string attribute: inline (`DW_FORM_string`, what Go writes) or in `.debug_str`;
/// None for forms that need a unit's string-offsets table, which Go does not use.
fn string(debug_str: &gimli::DebugStr<R>, value: AttributeValue<R>) -> gimli::Result<Option<String>> {
    let r = match value {
        AttributeValue::String(r) => r,
        AttributeValue::DebugStrRef(off) => debug_str.get_str(off)?,
        _ => return Ok(None),
    };
    Ok(Some(r.to_string_lossy()?.into_owned()))
}

/// Where the hidden dictionary argument of a shape-instantiated generic function goes:
/// 0 for a function (`pkg.F[go.shape.int]`), 1 for a method of a generic type
/// (`pkg.(*T[go.shape.int]).M`, after the receiver); None for everything else, closures
/// (`pkg.F[go.shape.int].func1`) and method values (`-fm`) included: they capture it.
pub(crate) fn dictionary_position(name: &str) -> Option<usize> {
    if !name.contains("[go.shape.") {
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
    (plain && !closure).then_some(1)
}

/// A member of a structure type: name, offset and type DIE.
pub(crate) struct Member {
    pub name: String,
    pub offset: u64,
    pub ty: Option<DebugInfoOffset>,
}

impl DwarfInfo {
    /// Loads the DWARF of the ELF in `data`: only `.debug_info`, `.debug_abbrev` and
    /// `.debug_str` are decompressed. None when it has no `.debug_info`.
    pub(crate) fn load(path: &Path, data: &[u8]) -> Result<Option<DwarfInfo>, TargetError> {
        let section = |name: &str| -> Result<Option<R>, TargetError> {
            Ok(elf::section(path, data, name)?.map(|bytes| R::new(Arc::from(&*bytes), gimli::LittleEndian)))
        };
        let Some(info) = section(".debug_info")? else { return Ok(None) };
        let empty = || R::new(Arc::from(&[][..]), gimli::LittleEndian);
        let debug_info = gimli::DebugInfo::from(info);
        let debug_abbrev = gimli::DebugAbbrev::from(section(".debug_abbrev")?.unwrap_or_else(empty));
        let debug_str = gimli::DebugStr::from(section(".debug_str")?.unwrap_or_else(empty));
        let bad = |e: gimli::Error| TargetError::Dwarf { path: path.to_path_buf(), message: e.to_string() };
        let mut abbrev_cache: HashMap<gimli::DebugAbbrevOffset, Arc<gimli::Abbreviations>> = HashMap::new();
        let mut units = Vec::new();
        let mut headers = debug_info.units();
        while let Some(header) = headers.next().map_err(bad)? {
            let start = DebugInfoOffset(header.offset().0);
            let abbrevs = match abbrev_cache.get(&header.debug_abbrev_offset()) {
                Some(a) => a.clone(),
                None => {
                    let a = Arc::new(debug_abbrev.abbreviations(header.debug_abbrev_offset()).map_err(bad)?);
                    abbrev_cache.insert(header.debug_abbrev_offset(), a.clone());
                    a
                }
            };
            let mut slot = UnitSlot { start, header, abbrevs, name: String::new(), index: None };
            let mut entries = slot.header.entries(&slot.abbrevs);
            if let Some(root) = entries.next_dfs().map_err(bad)? {
                if let Some(value) = root.attr_value(dw::DW_AT_name) {
                    slot.name = string(&debug_str, value).map_err(bad)?.unwrap_or_default();
                }
            }
            units.push(slot);
        }
        units.sort_by_key(|u| u.start.0);
        Ok(Some(DwarfInfo {
            path: path.to_path_buf(),
            debug_str,
            lists: None,
            units,
            type_ids: HashMap::new(),
            unsafe_pointer: None,
        }))
    }

    fn bad(&self, e: gimli::Error) -> TargetError {
        TargetError::Dwarf { path: self.path.clone(), message: e.to_string() }
    }

    fn bad_ref(&self, what: &str, at: DebugInfoOffset) -> TargetError {
        TargetError::Dwarf { path: self.path.clone(), message: format!("{what} at .debug_info+{:#x}", at.0) }
    }

    /// The index of unit `u`, built on first use with one walk of its DIEs.
    fn index(&mut self, u: usize) -> Result<Arc<UnitIndex>, TargetError> {
        if let Some(index) = &self.units[u].index {
            return Ok(index.clone());
        }
        let mut index = UnitIndex::default();
        {
            let slot = &self.units[u];
            let mut entries = slot.header.entries(&slot.abbrevs);
            while let Some(entry) = entries.next_dfs().map_err(|e| self.bad(e))? {
                if entry.depth() != 1 {
                    continue;
                }
                let map = match entry.tag() {
                    dw::DW_TAG_subprogram => &mut index.functions,
                    dw::DW_TAG_structure_type | dw::DW_TAG_typedef => &mut index.types,
                    _ => continue,
                };
                let Some(value) = entry.attr_value(dw::DW_AT_name) else { continue };
                let Some(name) = string(&self.debug_str, value).map_err(|e| self.bad(e))? else { continue };
                map.entry(name).or_insert(entry.offset());
            }
        }
        let index = Arc::new(index);
        self.units[u].index = Some(index.clone());
        Ok(index)
    }

    /// Finds a top-level DIE by name, looking first in the units of `package` (where Go
    /// puts it), then in every other unit.
    fn lookup(
        &mut self,
        package: &str,
        name: &str,
        pick: fn(&UnitIndex) -> &HashMap<String, UnitOffset>,
    ) -> Result<Option<DebugInfoOffset>, TargetError> {
        let (mine, others): (Vec<usize>, Vec<usize>) =
            (0..self.units.len()).partition(|u| self.units[*u].name == package);
        for u in mine.into_iter().chain(others) {
            let index = self.index(u)?;
            if let Some(off) = pick(&index).get(name) {
                return Ok(off.to_debug_info_offset(&self.units[u].header));
            }
        }
        Ok(None)
    }

    /// The unit holding `.debug_info` offset `at`, and the offset within it.
    fn locate(&self, at: DebugInfoOffset) -> Option<(usize, UnitOffset)> {
        let u = self.units.partition_point(|s| s.start.0 <= at.0).checked_sub(1)?;
        Some((u, at.to_unit_offset(&self.units[u].header)?))
    }

    /// A reference attribute as a `.debug_info` offset.
    fn reference(&self, u: usize, value: AttributeValue<R>) -> Option<DebugInfoOffset> {
        match value {
            AttributeValue::UnitRef(off) => off.to_debug_info_offset(&self.units[u].header),
            AttributeValue::DebugInfoRef(off) => Some(off),
            _ => None,
        }
    }

    fn read_die(&self, u: usize, entry: &Entry) -> Result<Die, TargetError> {
        let mut die = Die { tag: Some(entry.tag()), ..Die::default() };
        for attr in entry.attrs() {
            let value = attr.value();
            match attr.name() {
                dw::DW_AT_name => {
                    die.name = string(&self.debug_str, value).map_err(|e| self.bad(e))?;
                }
                dw::DW_AT_type => die.ty = self.reference(u, value),
                DW_AT_GO_ELEM => die.go_elem = self.reference(u, value),
                dw::DW_AT_byte_size => die.byte_size = value.udata_value(),
                dw::DW_AT_encoding => {
                    if let AttributeValue::Encoding(e) = value {
                        die.encoding = Some(e);
                    } else {
                        die.encoding = value.u8_value().map(gimli::DwAte);
                    }
                }
                DW_AT_GO_KIND => die.go_kind = value.udata_value(),
                dw::DW_AT_variable_parameter => {
                    die.variable_parameter = match value {
                        AttributeValue::Flag(f) => f,
                        other => other.udata_value().is_some_and(|v| v != 0),
                    }
                }
                dw::DW_AT_data_member_location => die.member_offset = value.udata_value(),
                dw::DW_AT_count => die.count = value.udata_value(),
                dw::DW_AT_upper_bound => die.upper_bound = value.udata_value(),
                _ => {}
            }
        }
        Ok(die)
    }

    /// The DIE at `at` and its direct children.
    fn die_with_children(&self, at: DebugInfoOffset) -> Result<(Die, Vec<Die>), TargetError> {
        let (u, off) = self.locate(at).ok_or_else(|| self.bad_ref("reference outside .debug_info", at))?;
        let slot = &self.units[u];
        let mut entries = slot.header.entries_at_offset(&slot.abbrevs, off).map_err(|e| self.bad(e))?;
        let first = entries.next_dfs().map_err(|e| self.bad(e))?.ok_or_else(|| self.bad_ref("no DIE", at))?;
        let base = first.depth();
        let has_children = first.has_children();
        let die = self.read_die(u, first)?;
        let mut children = Vec::new();
        if has_children {
            while let Some(entry) = entries.next_dfs().map_err(|e| self.bad(e))? {
                let depth = entry.depth() - base;
                if depth <= 0 {
                    break;
                }
                if depth == 1 {
                    children.push(self.read_die(u, entry)?);
                }
            }
        }
        Ok((die, children))
    }

    fn die(&self, at: DebugInfoOffset) -> Result<Die, TargetError> {
        let (u, off) = self.locate(at).ok_or_else(|| self.bad_ref("reference outside .debug_info", at))?;
        let slot = &self.units[u];
        let entry = slot.header.entry(&slot.abbrevs, off).map_err(|e| self.bad(e))?;
        self.read_die(u, &entry)
    }

    /// Parameters and results of function `name` in DWARF order (receiver first); None
    /// when DWARF has no subprogram of that name.
    pub(crate) fn params(&mut self, name: &str, types: &mut Types) -> Result<Option<Vec<Param>>, TargetError> {
        let Some(at) = self.lookup(symbols::package_of(name), name, |i| &i.functions)? else { return Ok(None) };
        let (_, children) = self.die_with_children(at)?;
        let mut params = Vec::new();
        let mut results = 0;
        for child in children.into_iter().filter(|c| c.tag == Some(dw::DW_TAG_formal_parameter)) {
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
            dw::DW_TAG_typedef => match die.go_kind {
                Some(kind::INTERFACE) => {
                    let target = match die.ty {
                        Some(t) => self.die(t)?.name,
                        None => None,
                    };
                    return Ok(GoType {
                        name,
                        size: 16,
                        kind: TypeKind::Interface { empty: target.as_deref() == Some("runtime.eface") },
                    });
                }
                Some(kind::MAP) => return Ok(GoType { name, size: 8, kind: TypeKind::Map }),
                Some(kind::CHAN) => return Ok(GoType { name, size: 8, kind: TypeKind::Chan }),
                Some(kind::FUNC) => return Ok(GoType { name, size: 8, kind: TypeKind::Func }),
                _ => {
                    // A named type: the underlying type under this name. Go's local
                    // typedefs for generic shapes (`.param0`) keep the shape's name.
                    let Some(target) = die.ty else { return Err(self.bad_ref("typedef without a type", at)) };
                    if depth >= TYPEDEF_DEPTH {
                        return Err(self.bad_ref("typedef cycle", at));
                    }
                    let keep = die.name.filter(|n| !n.starts_with('.'));
                    return self.parse_type(target, keep, types, pending, depth + 1);
                }
            },
            _ => TypeKind::Other,
        };
        let size = match kind {
            TypeKind::Pointer { .. } | TypeKind::UnsafePointer | TypeKind::Func if size == 0 => 8,
            _ => size,
        };
        Ok(GoType { name, size, kind })
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
        let Some(at) = self.lookup(package, name, |i| &i.types)? else { return Ok(None) };
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
        assert_eq!(dictionary_position("main.(*Stack[go.shape.string]).Push.func2"), None);
        assert_eq!(dictionary_position("main.(*Stack[go.shape.string]).Push-fm"), None);
        assert_eq!(dictionary_position("main.main"), None);
    }
}

/// The sections that say where values are at a given address (DWARF 4 and 5 forms).
struct Lists {
    locations: gimli::LocationLists<R>,
    ranges: gimli::RangeLists<R>,
    debug_addr: gimli::DebugAddr<R>,
}

/// What a compile unit's root says about address encodings.
struct UnitBase {
    encoding: gimli::Encoding,
    base_address: u64,
    addr_base: gimli::DebugAddrBase,
}

/// A parameter of an inlined call, and the registers DWARF puts it in at one address:
/// `(DWARF register number, byte offset in the value, size)` pieces; `Some(None)` when
/// DWARF places it elsewhere there (memory, a constant), None when nowhere (its location
/// does not cover the address: optimized away there).
pub(crate) struct InlinedParam {
    pub param: Param,
    pub pieces: Option<Option<Vec<(u16, u64, u64)>>>,
}

impl DwarfInfo {
    fn lists(&mut self, data: &[u8]) -> Result<&Lists, TargetError> {
        if self.lists.is_none() {
            let path = self.path.clone();
            let section = |name: &str| -> Result<R, TargetError> {
                Ok(match elf::section(&path, data, name)? {
                    Some(bytes) => R::new(Arc::from(&*bytes), gimli::LittleEndian),
                    None => R::new(Arc::from(&[][..]), gimli::LittleEndian),
                })
            };
            self.lists = Some(Lists {
                locations: gimli::LocationLists::new(
                    gimli::DebugLoc::from(section(".debug_loc")?),
                    gimli::DebugLocLists::from(section(".debug_loclists")?),
                ),
                ranges: gimli::RangeLists::new(
                    gimli::DebugRanges::from(section(".debug_ranges")?),
                    gimli::DebugRngLists::from(section(".debug_rnglists")?),
                ),
                debug_addr: gimli::DebugAddr::from(section(".debug_addr")?),
            });
        }
        Ok(self.lists.as_ref().expect("set above"))
    }

    fn unit_base(&self, u: usize) -> Result<UnitBase, TargetError> {
        let slot = &self.units[u];
        let mut base =
            UnitBase { encoding: slot.header.encoding(), base_address: 0, addr_base: gimli::DebugAddrBase(0) };
        let mut entries = slot.header.entries(&slot.abbrevs);
        if let Some(root) = entries.next_dfs().map_err(|e| self.bad(e))? {
            if let Some(AttributeValue::Addr(a)) = root.attr_value(dw::DW_AT_low_pc) {
                base.base_address = a;
            }
            if let Some(AttributeValue::DebugAddrBase(b)) = root.attr_value(dw::DW_AT_addr_base) {
                base.addr_base = b;
            }
        }
        Ok(base)
    }

    /// Whether the DIE's code (low_pc/high_pc or ranges) holds `addr`.
    fn covers(&self, entry: &Entry, addr: u64, base: &UnitBase, lists: &Lists) -> Result<bool, TargetError> {
        if let Some(AttributeValue::Addr(low)) = entry.attr_value(dw::DW_AT_low_pc) {
            let high = match entry.attr_value(dw::DW_AT_high_pc) {
                Some(AttributeValue::Addr(h)) => h,
                Some(v) => low + v.udata_value().unwrap_or(0),
                None => low + 1,
            };
            return Ok(low <= addr && addr < high);
        }
        if let Some(AttributeValue::RangeListsRef(raw)) = entry.attr_value(dw::DW_AT_ranges) {
            let offset = gimli::RangeListsOffset(raw.0);
            let mut ranges = lists
                .ranges
                .ranges(offset, base.encoding, base.base_address, &lists.debug_addr, base.addr_base)
                .map_err(|e| self.bad(e))?;
            while let Some(r) = ranges.next().map_err(|e| self.bad(e))? {
                if r.begin <= addr && addr < r.end {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The registers a location (an expression, or a list) gives at `addr`: None when it
    /// does not cover `addr`, `Some(None)` when it is anything but registers there
    /// (memory, a constant).
    #[allow(clippy::type_complexity)]
    fn registers_at(
        &self,
        value: AttributeValue<R>,
        addr: u64,
        base: &UnitBase,
        lists: &Lists,
    ) -> Result<Option<Option<Vec<(u16, u64, u64)>>>, TargetError> {
        let expr = match value {
            AttributeValue::Exprloc(e) => Some(e),
            AttributeValue::LocationListsRef(offset) => {
                let mut locs = lists
                    .locations
                    .locations(offset, base.encoding, base.base_address, &lists.debug_addr, base.addr_base)
                    .map_err(|e| self.bad(e))?;
                let mut found = None;
                while let Some(entry) = locs.next().map_err(|e| self.bad(e))? {
                    if entry.range.begin <= addr && addr < entry.range.end {
                        found = Some(entry.data);
                        break;
                    }
                }
                found
            }
            _ => None,
        };
        let Some(expr) = expr else { return Ok(None) };
        let mut ops = expr.operations(base.encoding);
        let mut pieces = Vec::new();
        let mut pending: Option<u16> = None;
        let mut offset = 0;
        while let Some(op) = ops.next().map_err(|e| self.bad(e))? {
            match op {
                gimli::Operation::Register { register } if pending.is_none() => pending = Some(register.0),
                gimli::Operation::Piece { size_in_bits, bit_offset: None } if size_in_bits % 8 == 0 => {
                    let Some(reg) = pending.take() else { return Ok(Some(None)) };
                    pieces.push((reg, offset, size_in_bits / 8));
                    offset += size_in_bits / 8;
                }
                _ => return Ok(Some(None)),
            }
        }
        if let Some(reg) = pending {
            if !pieces.is_empty() {
                return Ok(Some(None));
            }
            pieces.push((reg, 0, 8));
        }
        Ok(Some((!pieces.is_empty()).then_some(pieces)))
    }

    /// The parameters of the call of `callee` inlined into `caller` whose code holds
    /// `body`, each with the registers DWARF puts it in at `at` (the probe's address,
    /// which may be outside the body). None when DWARF has no such inlined call.
    pub(crate) fn inlined_params(
        &mut self,
        data: &[u8],
        callee: &str,
        caller: &str,
        body: u64,
        at: u64,
        types: &mut Types,
    ) -> Result<Option<Vec<InlinedParam>>, TargetError> {
        let Some(origin) = self.lookup(symbols::package_of(callee), callee, |i| &i.functions)? else { return Ok(None) };
        let Some(outer) = self.lookup(symbols::package_of(caller), caller, |i| &i.functions)? else { return Ok(None) };
        let (u, off) = self.locate(outer).ok_or_else(|| self.bad_ref("reference outside .debug_info", outer))?;
        let base = self.unit_base(u)?;
        self.lists(data)?;
        let lists = self.lists.take().expect("loaded above");
        let found = self.find_inlined(u, off, origin, body, &base, &lists);
        let raw = match found {
            Ok(Some(raw)) => raw,
            Ok(None) => {
                self.lists = Some(lists);
                return Ok(None);
            }
            Err(e) => {
                self.lists = Some(lists);
                return Err(e);
            }
        };
        let mut located = Vec::new();
        for (param_origin, location) in raw {
            let pieces = match location {
                Some(v) => self.registers_at(v, at, &base, &lists)?,
                None => None,
            };
            located.push((param_origin, pieces));
        }
        self.lists = Some(lists);
        let mut out = Vec::new();
        for (param_origin, pieces) in located {
            let (die, _) = self.die_with_children(param_origin)?;
            let Some(ty) = die.ty else { continue };
            let ty = self.type_id(ty, types)?;
            let name = die.name.unwrap_or_else(|| "_".to_string());
            out.push(InlinedParam { param: Param { name, ty, is_result: die.variable_parameter }, pieces });
        }
        Ok(Some(out))
    }

    /// In the subtree of the DIE at `off`, the inlined call of `origin` covering `addr`:
    /// its formal parameters' abstract origins and location attributes.
    #[allow(clippy::type_complexity)]
    fn find_inlined(
        &self,
        u: usize,
        off: UnitOffset,
        origin: DebugInfoOffset,
        addr: u64,
        base: &UnitBase,
        lists: &Lists,
    ) -> Result<Option<Vec<(DebugInfoOffset, Option<AttributeValue<R>>)>>, TargetError> {
        let slot = &self.units[u];
        let mut entries = slot.header.entries_at_offset(&slot.abbrevs, off).map_err(|e| self.bad(e))?;
        let Some(first) = entries.next_dfs().map_err(|e| self.bad(e))? else { return Ok(None) };
        let top = first.depth();
        let mut inside: Option<isize> = None;
        let mut params = Vec::new();
        while let Some(entry) = entries.next_dfs().map_err(|e| self.bad(e))? {
            let depth = entry.depth() - top;
            if depth <= 0 {
                break;
            }
            if let Some(d) = inside {
                if depth <= d {
                    break;
                }
                if depth == d + 1 && entry.tag() == dw::DW_TAG_formal_parameter {
                    if let Some(p) = entry.attr_value(dw::DW_AT_abstract_origin).and_then(|v| self.reference(u, v)) {
                        params.push((p, entry.attr_value(dw::DW_AT_location)));
                    }
                }
                continue;
            }
            if entry.tag() == dw::DW_TAG_inlined_subroutine
                && entry.attr_value(dw::DW_AT_abstract_origin).and_then(|v| self.reference(u, v)) == Some(origin)
                && self.covers(entry, addr, base, lists)?
            {
                inside = Some(depth);
            }
        }
        Ok(inside.map(|_| params))
    }
}
