//! Go types from the runtime's own type data, for binaries without DWARF: every type a
//! Go program may meet at run time has a descriptor in `.rodata` (what `reflect` and
//! interfaces use), found through the linker's `.typelink` table (offsets from
//! `moduledata.types`; a stripped binary keeps both). A script names such a type in a
//! type assertion (`arg2.(*net/http.Request)`), and gets its fields and layout as DWARF
//! would give them. Types are decoded on first use, into the same arena as DWARF's.

mod descriptor;

use crate::gobin::elf::moduledata;
use crate::gobin::Target;
use crate::gotypes::{GoType, StructField, TypeId, TypeKind};
use descriptor::{kind, Reader};
use std::collections::HashMap;

/// Where the type data is, and the named types it holds by name.
pub struct TypeData {
    /// `moduledata.types`: name and type offsets count from it.
    base: u64,
    /// Named types reached from a typelink (`*T`, `[]T`, `map[K]V`...), by full name
    /// (`net/http.Request`) and by short name (`http.Request`, which may be several).
    by_name: HashMap<String, Vec<u64>>,
}

/// Why a type cannot be found in the runtime's type data.
#[derive(Clone, Debug, PartialEq)]
pub enum NoRuntimeType {
    /// The binary has no `.typelink` table or its base was not found.
    NoTypeData,
    /// No type of that name; the closest names, for "did you mean".
    Unknown { closest: Vec<String> },
    /// A short name (`http.Request`) that several packages have.
    Ambiguous { candidates: Vec<String> },
}

impl Target {
    /// The Go type named `name`: from DWARF when the binary has it and it knows the
    /// name, else from the runtime's type data (which also takes short package names).
    pub fn type_named(&self, name: &str) -> Result<TypeId, NoRuntimeType> {
        let bare = name.trim_start_matches('*');
        if self.has_dwarf() {
            if let Some(id) = self.type_by_name(bare) {
                return Ok(self.pointers_to(id, name.len() - bare.len()));
            }
        }
        self.runtime_type_named(name)
    }

    /// The type named `name` (`net/http.Request`, `*http.Request`, `[]main.Item`) from
    /// the runtime's type data, decoded into the type arena.
    pub fn runtime_type_named(&self, name: &str) -> Result<TypeId, NoRuntimeType> {
        let data = self.type_data().ok_or(NoRuntimeType::NoTypeData)?;
        let (stars, bare) = (name.len() - name.trim_start_matches('*').len(), name.trim_start_matches('*'));
        let at = match data.by_name.get(bare).map(Vec::as_slice) {
            Some([one]) => *one,
            Some(several) => {
                let mut candidates: Vec<String> = several.iter().filter_map(|a| self.full_name(data, *a)).collect();
                candidates.sort();
                return Err(NoRuntimeType::Ambiguous { candidates });
            }
            None => return Err(NoRuntimeType::Unknown { closest: closest(&data, bare) }),
        };
        let id = self.decode_type(data, at, &mut HashMap::new()).ok_or(NoRuntimeType::NoTypeData)?;
        Ok(self.pointers_to(id, stars))
    }

    /// `stars` pointers to the type `id` (`**T` for 2), added to the arena.
    fn pointers_to(&self, mut id: TypeId, stars: usize) -> TypeId {
        let mut types = self.types.borrow_mut();
        for _ in 0..stars {
            let elem = types.get(id).name.clone();
            id = types.add(GoType { name: format!("*{elem}"), size: 8, kind: TypeKind::Pointer { elem: id } });
        }
        id
    }

    /// The link-time address of the descriptor of `*T`, for `name` `*T`: from DWARF
    /// (`DW_AT_go_runtime_type`), else `T`'s descriptor's `PtrToThis`.
    pub fn pointer_descriptor(&self, name: &str) -> Option<u64> {
        let elem = name.strip_prefix('*')?;
        if self.has_dwarf() {
            if let Some(at) = self.runtime_type_address(name) {
                return Some(at);
            }
        }
        let data = self.type_data()?;
        let [at] = data.by_name.get(elem)?.as_slice() else { return None };
        let image = self.image();
        let reader = Reader { image: &image, base: data.base, go_minor: self.go_minor() };
        reader.ptr_to_this(*at)
    }

    /// The Go name of the runtime type whose descriptor is at `addr` (a link-time
    /// address: a PIE's load bias must be removed first) as the descriptor writes it,
    /// with short package names as fmt prints them: `*errors.errorString`.
    pub fn runtime_type_name(&self, addr: u64) -> Option<String> {
        let image = self.image();
        let reader = Reader { image: &image, base: self.types_base()?, go_minor: self.go_minor() };
        reader.own_name(addr)
    }

    /// The base of the runtime's type data when it was found (stripped binaries too).
    pub(crate) fn type_data_base(&self) -> Option<u64> {
        self.type_data().map(|d| d.base)
    }

    fn full_name(&self, data: &TypeData, at: u64) -> Option<String> {
        let image = self.image();
        let reader = Reader { image: &image, base: data.base, go_minor: self.go_minor() };
        reader.type_name(at, 0)
    }

    fn go_minor(&self) -> u32 {
        self.go_version().and_then(crate::gobin::go_minor).unwrap_or(26)
    }

    /// The type data, found on first use.
    fn type_data(&self) -> Option<&TypeData> {
        self.type_data.get_or_init(|| self.find_type_data()).as_ref()
    }

    fn find_type_data(&self) -> Option<TypeData> {
        let image = self.image();
        let (base, descriptors) = match crate::gobin::elf::section(&self.path, &self.data, ".typelink").ok()? {
            Some(links) => self.typelinked(&image, &links)?,
            None => self.laid_out(&image)?,
        };
        let reader = Reader { image: &image, base, go_minor: self.go_minor() };
        let mut by_name: HashMap<String, Vec<u64>> = HashMap::new();
        let mut add = |at: u64| {
            if !reader.is_named(at) {
                return;
            }
            let Some(name) = reader.type_name(at, 0) else { return };
            let short = short_name(&name);
            for key in [name, short] {
                let list = by_name.entry(key).or_default();
                if !list.contains(&at) {
                    list.push(at);
                }
            }
        };
        for at in descriptors {
            add(at);
            let Some(h) = reader.head(at) else { continue };
            match h.kind {
                kind::POINTER | kind::SLICE | kind::ARRAY | kind::CHAN => {
                    reader.elem(at).into_iter().for_each(&mut add)
                }
                kind::MAP => reader.map_key_elem(at).into_iter().for_each(|(k, v)| {
                    add(k);
                    add(v)
                }),
                _ => {}
            }
        }
        Some(TypeData { base, by_name })
    }

    /// Go 1.17 to 1.26: the base and the descriptors the linker's `.typelink` table
    /// lists (offsets from `moduledata.types`: the composite types, whose elements are
    /// the named types).
    fn typelinked(&self, image: &crate::gobin::elf::image::Image, links: &[u8]) -> Option<(u64, Vec<u64>)> {
        let offsets: Vec<u32> = links.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let base = match self.symbol_types_base() {
            Some(base) => base,
            None => {
                let (_, md) = self.pclntab(image, self.layout.pclntab?).ok()?;
                let largest = offsets.iter().copied().max().unwrap_or(0);
                moduledata::types_base(image, md?, self.layout.rodata?, u64::from(largest))?
            }
        };
        Some((base, offsets.into_iter().map(|o| base + u64::from(o)).collect()))
    }

    /// Go 1.27 on: every descriptor, one after the other from `moduledata.types`.
    fn laid_out(&self, image: &crate::gobin::elf::image::Image) -> Option<(u64, Vec<u64>)> {
        let go_type = crate::gobin::elf::section_range(&self.path, &self.data, ".go.type")?;
        let (_, md) = self.pclntab(image, self.layout.pclntab?).ok()?;
        let (base, end) = moduledata::type_descriptors(image, md?, go_type)?;
        let reader = Reader { image, base, go_minor: self.go_minor() };
        let mut all = Vec::new();
        // The first word is `runtime.types` itself.
        let mut at = base + 8;
        while at < end {
            at = at.next_multiple_of(8);
            all.push(at);
            at += reader.descriptor_size(at)?;
        }
        Some((base, all))
    }

    /// The descriptor at `at` as a `GoType` in the arena (memoized in `seen` for this
    /// decoding, which breaks cycles: a struct with a pointer to itself).
    fn decode_type(&self, data: &TypeData, at: u64, seen: &mut HashMap<u64, TypeId>) -> Option<TypeId> {
        if let Some(id) = seen.get(&at).copied().or_else(|| self.decoded.borrow().get(&at).copied()) {
            return Some(id);
        }
        let image = self.image();
        let reader = Reader { image: &image, base: data.base, go_minor: self.go_minor() };
        let h = reader.head(at)?;
        let name = reader.type_name(at, 0)?;
        let id = self.types.borrow_mut().add(GoType { name: name.clone(), size: h.size, kind: TypeKind::Other });
        seen.insert(at, id);
        let mut sub = |a: u64| self.decode_type(data, a, seen);
        let kind = match h.kind {
            kind::BOOL => TypeKind::Bool,
            kind::INT..=kind::INT64 => TypeKind::Int { signed: true },
            kind::UINT..=kind::UINTPTR => TypeKind::Int { signed: false },
            kind::FLOAT32 | kind::FLOAT64 => TypeKind::Float,
            kind::COMPLEX64 | kind::COMPLEX128 => TypeKind::Complex,
            kind::STRING => TypeKind::String,
            kind::UNSAFE_POINTER => TypeKind::UnsafePointer,
            kind::POINTER => TypeKind::Pointer { elem: sub(reader.elem(at)?)? },
            kind::SLICE => TypeKind::Slice { elem: sub(reader.elem(at)?)? },
            kind::ARRAY => TypeKind::Array { elem: sub(reader.elem(at)?)?, len: reader.array_len(at)? },
            kind::MAP => {
                let (k, v) = reader.map_key_elem(at)?;
                TypeKind::Map { key: sub(k), elem: sub(v) }
            }
            kind::INTERFACE => TypeKind::Interface { empty: reader.interface_is_empty(at)? },
            kind::CHAN => TypeKind::Chan,
            kind::FUNC => TypeKind::Func,
            kind::STRUCT => {
                let mut fields = Vec::new();
                for f in reader.fields(at)? {
                    fields.push(StructField { name: f.name, ty: sub(f.ty)?, offset: f.offset, embedded: f.embedded });
                }
                TypeKind::Struct { fields }
            }
            _ => TypeKind::Other,
        };
        self.types.borrow_mut().items[id.0 as usize].kind = kind;
        self.decoded.borrow_mut().insert(at, id);
        Some(id)
    }
}

/// `net/http.Request` → `http.Request`; `*net/url.URL` → `*url.URL`; others unchanged.
fn short_name(name: &str) -> String {
    let bare = name.trim_start_matches('*');
    let stars = &name[..name.len() - bare.len()];
    let head = bare.split('[').next().unwrap_or(bare);
    match head.rfind('/') {
        Some(slash) => format!("{stars}{}", &bare[slash + 1..]),
        None => name.to_string(),
    }
}

/// Up to three names closest to `name`, for "did you mean".
fn closest(data: &TypeData, name: &str) -> Vec<String> {
    let named = data.by_name.keys().filter(|k| k.contains('.')).map(String::as_str);
    crate::diag::closest(name, named, 3).into_iter().map(String::from).collect()
}

#[cfg(test)]
mod tests {
    use super::short_name;

    #[test]
    fn short_names_drop_the_package_path() {
        assert_eq!(short_name("net/http.Request"), "http.Request");
        assert_eq!(short_name("*net/url.URL"), "*url.URL");
        assert_eq!(short_name("main.Pair[example.com/x.T]"), "main.Pair[example.com/x.T]");
        assert_eq!(short_name("int"), "int");
    }
}
