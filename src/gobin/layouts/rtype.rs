//! Runtime types as printing needs them: `runtime.types`, the base a type's `Str` name
//! offset counts from (the descriptors themselves are read in gobin/rtypes), the types an
//! interface may hold with their layouts, and the descriptor fields a probe reads. Also
//! what turns run-time addresses of a PIE back into link-time ones.

use crate::gobin::Target;
use crate::gotypes::TypeId;
use object::{Object, ObjectSymbol};

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

    /// The address of `runtime.types`, the base a type's `Str` name offset counts from:
    /// from the symbol table, else (stripped) from the runtime's type data (rtypes).
    pub(crate) fn types_base(&self) -> Option<u64> {
        *self.types_base.get_or_init(|| self.symbol_types_base().or_else(|| self.type_data_base()))
    }

    /// `runtime.types` from the symbol table alone.
    pub(crate) fn symbol_types_base(&self) -> Option<u64> {
        let file = object::File::parse(&*self.data).ok()?;
        let sym = file.symbols().find(|s| s.name() == Ok("runtime.types"))?;
        Some(sym.address())
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
