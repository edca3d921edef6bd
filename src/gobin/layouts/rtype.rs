//! Names of Go runtime types by the address of their descriptor (`internal/abi.Type`), so
//! an interface value can be printed with its dynamic type. Read from the executable:
//! `runtime.types` (from the symbol table) is the base that a type's `Str` name offset
//! counts from. Also what turns run-time addresses of a PIE back into link-time ones.

use crate::gobin::Target;
use crate::gotypes::TypeId;
use object::{Object, ObjectSymbol};

/// Offsets in `internal/abi.Type` (Go 1.17 to 1.26): TFlag and Str.
const TFLAG: u64 = 20;
const STR: u64 = 40;
/// `TFlagExtraStar`: the stored name has a `*` the type's own name does not.
const TFLAG_EXTRA_STAR: u8 = 1 << 1;

impl Target {
    /// A position-independent executable (ELF type ET_DYN): loaded at a bias that
    /// addresses seen at run time must have subtracted.
    pub fn is_pie(&self) -> bool {
        self.data.get(16..18) == Some(&[3, 0][..])
    }

    /// The link-time address of the byte at `offset` in the file.
    pub fn vaddr_of_file_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| s.offset <= offset && offset < s.offset + s.filesz.max(1))
            .map(|s| s.vaddr + (offset - s.offset))
    }

    /// The address of `runtime.types`, when the symbol table has it.
    pub(crate) fn types_base(&self) -> Option<u64> {
        *self.types_base.get_or_init(|| {
            let file = object::File::parse(&*self.data).ok()?;
            let sym = file.symbols().find(|s| s.name() == Ok("runtime.types"))?;
            Some(sym.address())
        })
    }

    /// The Go name of the runtime type whose descriptor is at `addr` (a link-time
    /// address: a PIE's load bias must be removed first), e.g. `*errors.errorString`.
    pub fn runtime_type_name(&self, addr: u64) -> Option<String> {
        let base = self.types_base()?;
        let t = self.bytes_at(addr, STR + 4)?;
        let tflag = t[TFLAG as usize];
        let off = i32::from_le_bytes(t[STR as usize..STR as usize + 4].try_into().ok()?);
        let name_at = base.checked_add_signed(off as i64)?;
        // A name: one byte of flags, a varint length, the bytes.
        let head = self.bytes_at(name_at, 11)?;
        let (mut len, mut shift, mut i) = (0u64, 0, 1);
        loop {
            let b = *head.get(i)?;
            len |= ((b & 0x7f) as u64) << shift;
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return None;
            }
        }
        let bytes = self.bytes_at(name_at + i as u64, len)?;
        let name = std::str::from_utf8(bytes).ok()?;
        let name = if tflag & TFLAG_EXTRA_STAR != 0 { name.strip_prefix('*').unwrap_or(name) } else { name };
        Some(name.to_string())
    }
}

/// A type an interface may hold at run time, known at compile time from DWARF: the
/// link-time address of its runtime descriptor, its Go name, and the layout printing
/// needs (for a pointer type, of what it points at), when it needs one.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeType {
    pub addr: u64,
    pub name: String,
    pub layout: Option<TypeId>,
}

/// Whether printing a value of the type named `name` held in an interface needs its
/// layout: a named type of a package (`main.Point`, `*main.Point`), an array, or a
/// slice of interfaces (`[]interface {}`, `[]error`), whose elements are printed.
/// Basic types print from their name; maps, channels and funcs as addresses.
pub fn needs_layout(name: &str) -> bool {
    let bare = name.trim_start_matches('*');
    if bare.starts_with("map[") || bare.starts_with("chan ") || bare.starts_with("func(") {
        return false;
    }
    if let Some(elem) = bare.strip_prefix("[]") {
        return elem.starts_with("interface {") || elem == "error" || !elem.contains('[') && elem.contains('.');
    }
    bare.contains('.') || bare.starts_with('[')
}

/// Where the probe reads a runtime type descriptor (`internal/abi.Type`, Go 1.17 to
/// 1.26, 64-bit) to learn whether an interface holds a slice of interfaces: the word
/// whose top byte is `Kind_` (kind in its low 5 bits), a slice type's `Elem`, and an
/// interface type's `Methods` length (0: the empty interface).
pub const KIND_WORD: i32 = 16;
pub const KIND_SHIFT: i32 = 56;
pub const KIND_MASK: i32 = 0x1f;
pub const KIND_INTERFACE: i32 = 20;
pub const KIND_SLICE: i32 = 23;
pub const SLICE_ELEM: i32 = 48;
pub const INTERFACE_METHODS_LEN: i32 = 64;
