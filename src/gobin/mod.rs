//! The Go executable being traced, read without running it and never written: a folder
//! a job.
//! - `elf/`: the file itself: the ELF container (`file`), its memory image, the symbol
//!   table and the names a script gives (`symbols`), Go's function table (`pclntab`, found
//!   in a stripped binary by `open`), the runtime's moduledata, the build info and the
//!   debug file kept aside; `open` puts them together into a `Target`.
//! - `dwarf/`: what DWARF says (gimli, lazy): parameters, types, locations at an address,
//!   lines, scopes, package-level variables (`globals`); `query` is `Target`'s door to it.
//! - `layouts/`: the Go runtime's own structures per release, from DWARF or a table by
//!   version: `runtime.g`, panics, maps and their hash keys, runtime type names, generic
//!   dictionaries.
//! - `sites/`: where probes go: the entry and every RET, inlined calls' entries on the
//!   control flow graph (`cfg`, `inlentry`, `inlined`), source lines (`lines`,
//!   `linesites`), and the frame and stack slots a value is read from there (`frame`,
//!   `slots`).
//!
//! This file: `Target` (what `open` read, the caches the lazy parts fill) and the plain
//! facts every job shares.

mod dwarf;
mod elf;
mod error;
mod layouts;
mod rtypes;
mod sites;
mod view;

#[cfg(test)]
pub mod fake;

pub use crate::arch::ProbeSites;
pub(crate) use dwarf::types::dictionary_position;
pub use dwarf::{crc32, DwarfSeed, NoVariable, StoredUnits, UnitBytes, Variable};
pub use elf::arena::Name;
pub use elf::debugfile::DebugSearch;
pub(crate) use elf::symbols::{is_pattern as symbols_is_pattern, package_of};
pub use elf::BuildIds;
pub use elf::{PclntabError, SourceFrame};
pub use error::TargetError;
pub(crate) use layouts::rtype as runtime_type;
pub use layouts::rtype::{needs_layout, RuntimeType};
pub use layouts::{
    any_type_args, dictionaries_by_generic, generic_name, instantiation, AesGlobals, ArgumentKinds, Dictionary,
    MapLayout, OtelContext, PanicLayout, Recovery,
};
pub use rtypes::NoRuntimeType;
pub use sites::{InlinedEntry, InlinedSite, LineError, LineSite, Local, LocalState, Placement, ValueLocation};
pub use view::GoBinary;

use crate::gotypes::{TypeId, Types};
use dwarf::DwarfState;
use elf::{debugfile, image, moduledata, pclntab, symbols};
use sites::cfg;
use std::cell::{OnceCell, RefCell};
use std::path::{Path, PathBuf};

/// A function of the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// The Go name as the linker wrote it: `main.(*T).Add`, `net/http.(*conn).serve`.
    pub name: Name,
    /// Virtual address of its first instruction.
    pub addr: u64,
    /// Size of its code in bytes.
    pub size: u64,
    /// Its calling convention, where the binary says.
    pub abi: Abi,
}

/// How a function takes its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abi {
    /// Go's register ABI (every Go function since Go 1.17 on amd64, 1.18 on arm64).
    Internal,
    /// The stack ABI of assembly functions.
    Abi0,
    /// Not recorded: Go 1.17 tables do not mark assembly, and symbols name only some ABI0
    /// functions (`.abi0`).
    Unknown,
}

/// A parameter or result of a function, from DWARF.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// The Go name; unnamed results are `~r0`, `~r1`, ...
    pub name: String,
    pub ty: TypeId,
    pub is_result: bool,
}

/// Offsets of the fields of `runtime.g` that gtrace reads: `goid` and `stack.hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GLayout {
    pub goid: u32,
    pub stack_hi: u32,
}

/// An opened Go executable. Symbols, segments and the Go version are read by `open`;
/// DWARF only when `params` or `g_layout` first need it.
pub struct Target {
    path: PathBuf,
    arch: crate::arch::Arch,
    /// The file's bytes (mapped, or in memory: the reader does not care).
    data: crate::input::Bytes,
    /// Sorted by address (then name), found by name through tables made on first use.
    functions: elf::names::Functions,
    segments: Vec<elf::Segment>,
    /// The `*_RELATIVE` dynamic relocations of a PIE: address → value.
    relative: std::collections::HashMap<u64, u64>,
    go_version: Option<String>,
    module_path: Option<String>,
    build_ids: BuildIds,
    has_dwarf: bool,
    /// The DWARF kept aside (`--debug-file`, or found by build id), when it is used.
    debug_file: Option<debugfile::DebugFile>,
    /// Whether the functions come from `.gopclntab` (no symbol table).
    from_pclntab: bool,
    /// Where the function table and the sections it needs are.
    layout: Layout,
    /// Data sections, searched for the function table when no section is named for it.
    all_data: Vec<moduledata::Range>,
    /// Which inline trees name which callees; read on first use.
    inlined: OnceCell<sites::InlinedTable>,
    /// `find_inlined`'s answers so far (and from the cache), by pattern.
    inlined_found: RefCell<std::collections::BTreeMap<String, Vec<InlinedSite>>>,
    /// A CRC-32 of `.gopclntab`, computed on first use (sites/inlined.rs `code_crc`).
    code_crc: OnceCell<u32>,
    dwarf: RefCell<DwarfState>,
    /// The Go types parsed so far (only those a script reached), indexed by `TypeId`.
    types: RefCell<Types>,
    g_layout: OnceCell<Option<GLayout>>,
    /// `runtime.types`, looked up on first use (see rtype.rs).
    types_base: OnceCell<Option<u64>>,
    /// Every function of `.gopclntab` in address order, read on first use (frame.rs).
    records: OnceCell<Vec<pclntab::FuncRecord>>,
    /// The `pcsp` runs of the functions asked about so far, by entry (frame.rs).
    sp_deltas: RefCell<std::collections::HashMap<u64, Vec<(u64, u64, i32)>>>,
    /// Control flow graphs built so far, by function entry (frame.rs).
    cfgs: RefCell<std::collections::HashMap<u64, Option<std::sync::Arc<cfg::Cfg>>>>,
    /// The module data found for each function table address asked about (a scan of the
    /// data sections, slow on a PIE whose every word is looked up in its relocations).
    moduledata_of: RefCell<Vec<(u64, Option<u64>)>>,
    /// `moduledata.gofunc`, found on first use (srcline.rs).
    gofunc: OnceCell<Option<u64>>,
    /// The runtime's type data, found on first use (rtypes).
    type_data: OnceCell<Option<rtypes::TypeData>>,
    /// Runtime type descriptors decoded so far, by address (rtypes).
    decoded: RefCell<std::collections::HashMap<u64, TypeId>>,
}

/// Addresses of what reading the function table needs.
struct Layout {
    text: u64,
    pclntab: Option<u64>,
    rodata: Option<moduledata::Range>,
    data: Vec<moduledata::Range>,
}

/// The minor release of a Go version string: 17 for `go1.17.13`, 26 for `go1.26rc1`;
/// None for `devel` builds and anything else.
pub fn go_minor(version: &str) -> Option<u32> {
    let rest = version.strip_prefix("go1.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl Target {
    /// The instruction set the binary is built for.
    pub fn arch(&self) -> crate::arch::Arch {
        self.arch
    }

    /// How this binary's Go functions take their arguments: the register ABI, or the
    /// stack where Go had none yet (arm64 before Go 1.18).
    pub fn go_conv(&self) -> crate::arch::abi::Conv {
        GoBinary::go_conv(self)
    }

    /// How `f` takes its arguments: on the stack if it is assembly (ABI0), else as this
    /// binary's Go functions do.
    pub fn conv_of(&self, f: &Function) -> crate::arch::abi::Conv {
        GoBinary::conv_of(self, f)
    }

    /// Whether the binary has DWARF (`.debug_info`). Without it, `params` is None and
    /// parameters can only be offered by position (`arg0`, `arg1`, ... in ABI order).
    pub fn has_dwarf(&self) -> bool {
        self.has_dwarf
    }

    /// Whether the binary has no symbol table, so its functions come from `.gopclntab`.
    pub fn is_stripped(&self) -> bool {
        self.from_pclntab
    }

    /// The build ids that identify this build of the binary.
    pub fn build_ids(&self) -> &BuildIds {
        &self.build_ids
    }

    /// The main module's path from the build info: `example.com/app`.
    pub fn module_path(&self) -> Option<&str> {
        self.module_path.as_deref()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every function, sorted by name (the order is made on the first call).
    pub fn functions(&self) -> Vec<&Function> {
        self.functions.sorted_by_name()
    }

    /// Functions whose name equals `pattern`, or matches it when it holds `*` wildcards
    /// or `[...]` (any type arguments of a generic function); see `symbols` for the rules.
    /// Sorted by name.
    pub fn find(&self, pattern: &str) -> Vec<&Function> {
        self.functions.find(pattern)
    }

    /// Up to `n` existing function names closest to `name`, for "did you mean" hints;
    /// names of the same package come first.
    pub fn closest(&self, name: &str, n: usize) -> Vec<&str> {
        symbols::closest(&self.functions.sorted_by_name(), name, n)
    }

    /// The function whose first instruction is at `addr`.
    pub fn function_at(&self, addr: u64) -> Option<&Function> {
        self.functions.at(addr)
    }

    /// The function whose code holds `addr` (for symbolizing stacks).
    pub fn function_containing(&self, addr: u64) -> Option<&Function> {
        self.functions.containing(addr)
    }

    /// The machine code of `f`, as the file holds it.
    pub fn code(&self, f: &Function) -> Option<&[u8]> {
        if f.size == 0 {
            return None;
        }
        self.bytes_at(f.addr, f.size)
    }

    fn bytes_at(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let image = image::Image { data: &self.data, segments: &self.segments, relative: &self.relative };
        image.bytes(addr, len)
    }

    /// The offset in the file of the byte at virtual address `addr` (what a uprobe
    /// attaches to), for PIE and non-PIE executables alike.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        elf::file_offset(&self.segments, addr)
    }

    /// The size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.data.len() as u64
    }

    /// The file's `Stamp` as it was opened, if it had settled (None for bytes in memory).
    pub fn stamp(&self) -> Option<crate::input::Stamp> {
        self.data.stamp()
    }

    /// The Go version from the build info, e.g. `go1.22.3`.
    pub fn go_version(&self) -> Option<&str> {
        self.go_version.as_deref()
    }
}
