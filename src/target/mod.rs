//! The Go executable being traced: its functions (from the symbol table), their file
//! offsets, the probe sites inside them (entry after the stack check, every RET), and what
//! its DWARF says of parameters, results and `runtime.g`.

mod buildinfo;
mod code;
mod dwarf;
mod elf;
mod symbols;
pub mod types;

use crate::target::dwarf::DwarfInfo;
use crate::target::types::{TypeId, Types};
use std::cell::{OnceCell, RefCell};
use std::path::{Path, PathBuf};

/// A function of the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// The Go name as the linker wrote it: `main.(*T).Add`, `net/http.(*conn).serve`.
    pub name: String,
    /// Virtual address of its first instruction.
    pub addr: u64,
    /// Size of its code in bytes.
    pub size: u64,
}

/// Where the probes of one function go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSites {
    /// The address an entry probe attaches to: after the stack-check prologue, so a call
    /// that goes through runtime.morestack is seen once.
    pub entry: u64,
    /// Every RET instruction's address; empty when the function has none (it ends in a
    /// tail call or never returns).
    pub returns: Vec<u64>,
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

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is not an ELF executable")]
    NotElf { path: PathBuf },
    #[error("{path} is built for {arch}, not x86-64")]
    WrongArch { path: PathBuf, arch: String },
    #[error("{path} is not a Go executable (no .gopclntab or .go.buildinfo)")]
    NotGo { path: PathBuf },
    #[error("{path} has no symbol table: it is stripped (built with -ldflags=-s); rebuild it without -s")]
    NoSymbols { path: PathBuf },
    #[error("bad DWARF in {path}: {message}")]
    Dwarf { path: PathBuf, message: String },
    #[error("cannot disassemble {function}: {message}")]
    Disassembly { function: String, message: String },
}

/// The DWARF of the target, loaded on first use.
enum DwarfState {
    NotLoaded,
    Absent,
    Loaded(Box<DwarfInfo>),
}

/// An opened Go executable. Symbols, segments and the Go version are read by `open`;
/// DWARF only when `params` or `g_layout` first need it.
pub struct Target {
    path: PathBuf,
    data: Vec<u8>,
    /// Sorted by name, then address.
    functions: Vec<Function>,
    /// Indexes into `functions`, sorted by address.
    by_addr: Vec<usize>,
    segments: Vec<elf::Segment>,
    go_version: Option<String>,
    dwarf: RefCell<DwarfState>,
    types: Types,
    g_layout: OnceCell<Option<GLayout>>,
}

impl Target {
    /// Reads and checks `path`: an ELF x86-64 Go executable with a symbol table.
    pub fn open(path: &Path) -> Result<Target, TargetError> {
        let data = std::fs::read(path).map_err(|source| TargetError::Io { path: path.to_path_buf(), source })?;
        let facts = elf::read(path, &data)?;
        let mut by_addr: Vec<usize> = (0..facts.functions.len()).collect();
        by_addr.sort_by_key(|i| facts.functions[*i].addr);
        let mut target = Target {
            path: path.to_path_buf(),
            data,
            functions: facts.functions,
            by_addr,
            segments: facts.segments,
            go_version: None,
            dwarf: RefCell::new(DwarfState::NotLoaded),
            types: Types::default(),
            g_layout: OnceCell::new(),
        };
        target.go_version = target.read_go_version();
        Ok(target)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every function, sorted by name.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// Functions whose name equals `pattern`, or matches it when it holds `*` wildcards
    /// or `[...]` (any type arguments of a generic function); see `symbols` for the rules.
    /// Sorted by name.
    pub fn find(&self, pattern: &str) -> Vec<&Function> {
        symbols::find(&self.functions, pattern)
    }

    /// Up to `n` existing function names closest to `name`, for "did you mean" hints;
    /// names of the same package come first.
    pub fn closest(&self, name: &str, n: usize) -> Vec<&str> {
        symbols::closest(&self.functions, name, n)
    }

    /// The function whose first instruction is at `addr`.
    pub fn function_at(&self, addr: u64) -> Option<&Function> {
        let i = self.by_addr.partition_point(|i| self.functions[*i].addr < addr);
        self.by_addr.get(i).map(|i| &self.functions[*i]).filter(|f| f.addr == addr)
    }

    /// The machine code of `f`, as the file holds it.
    pub fn code(&self, f: &Function) -> Option<&[u8]> {
        self.bytes_at(f.addr, f.size)
    }

    fn bytes_at(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let start = usize::try_from(self.file_offset(addr)?).ok()?;
        // The whole range must come from one segment's file bytes.
        let last = addr.checked_add(len.checked_sub(1)?)?;
        if self.file_offset(last)? != start as u64 + len - 1 {
            return None;
        }
        self.data.get(start..start.checked_add(usize::try_from(len).ok()?)?)
    }

    /// Where the probes of `f` go: the entry after its stack check and every RET.
    pub fn probe_sites(&self, f: &Function) -> Result<ProbeSites, TargetError> {
        let code = self.code(f).ok_or_else(|| TargetError::Disassembly {
            function: f.name.clone(),
            message: format!("its {} bytes at {:#x} are not in the file", f.size, f.addr),
        })?;
        code::probe_sites(&f.name, f.addr, code, |a| self.function_at(a).map(|f| f.name.as_str()))
    }

    /// The offset in the file of the byte at virtual address `addr` (what a uprobe
    /// attaches to), for PIE and non-PIE executables alike.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        elf::file_offset(&self.segments, addr)
    }

    /// Loads the DWARF on first use; None when the binary has none.
    fn dwarf_mut<'s>(
        state: &'s mut DwarfState,
        path: &Path,
        data: &[u8],
    ) -> Result<Option<&'s mut DwarfInfo>, TargetError> {
        if let DwarfState::NotLoaded = state {
            *state = match DwarfInfo::load(path, data) {
                Ok(Some(d)) => DwarfState::Loaded(Box::new(d)),
                Ok(None) => DwarfState::Absent,
                Err(e) => {
                    *state = DwarfState::Absent;
                    return Err(e);
                }
            };
        }
        match state {
            DwarfState::Loaded(d) => Ok(Some(d)),
            _ => Ok(None),
        }
    }

    /// Parameters and results of `function` in DWARF order: the receiver first, then the
    /// arguments, then the results (`is_result`; unnamed ones are `~r0`, `~r1`, ...).
    /// A shape-instantiated generic function (`pkg.F[go.shape.int]`) starts with a
    /// hidden `.dict` parameter of type unsafe.Pointer: the dictionary Go passes in RAX;
    /// pass it to `arch::abi` like any other, hide it from users.
    /// None without DWARF, or when DWARF does not describe the function (assembly).
    /// Parsed lazily: only the compile units and types a script touches.
    pub fn params(&mut self, function: &str) -> Result<Option<Vec<Param>>, TargetError> {
        let Some(dwarf) = Self::dwarf_mut(self.dwarf.get_mut(), &self.path, &self.data)? else { return Ok(None) };
        dwarf.params(function, &mut self.types)
    }

    /// Every Go type parsed so far.
    pub fn types(&self) -> &Types {
        &self.types
    }

    /// Offsets of `goid` and `stack.hi` in runtime.g, from DWARF; None without DWARF.
    pub fn g_layout(&self) -> Option<GLayout> {
        *self.g_layout.get_or_init(|| {
            let mut state = self.dwarf.borrow_mut();
            let dwarf = Self::dwarf_mut(&mut state, &self.path, &self.data).ok()??;
            let members = dwarf.struct_members("runtime", "runtime.g").ok()??;
            let goid = members.iter().find(|m| m.name == "goid")?.offset;
            let stack = members.iter().find(|m| m.name == "stack")?;
            let hi = dwarf.members_at(stack.ty?).ok()?.into_iter().find(|m| m.name == "hi")?.offset;
            Some(GLayout { goid: u32::try_from(goid).ok()?, stack_hi: u32::try_from(stack.offset + hi).ok()? })
        })
    }

    /// The Go version from the build info, e.g. `go1.22.3`.
    pub fn go_version(&self) -> Option<&str> {
        self.go_version.as_deref()
    }

    fn read_go_version(&self) -> Option<String> {
        let section = elf::section(&self.path, &self.data, ".go.buildinfo").ok()??;
        buildinfo::go_version(&section, |addr, len| self.bytes_at(addr, len as u64).map(<[u8]>::to_vec))
    }
}
