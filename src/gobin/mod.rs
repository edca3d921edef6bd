//! The Go executable being traced: its functions (from the symbol table, or from Go's own
//! function table when stripped), their file offsets, the probe sites inside them (entry
//! after the stack check, every RET, every place the function was inlined), and what its
//! DWARF says of parameters, results and `runtime.g` (a table by Go version without DWARF).

mod buildinfo;
mod cfg;
mod debugfile;
mod dwarf;
mod elf;
mod frame;
mod generics;
mod glayout;
mod hashkeys;
mod image;
mod inlentry;
mod inlined;
mod lines;
mod linesites;
mod maplayout;
mod moduledata;
mod otel;
mod panicinfo;
mod pclntab;
mod rtype;
mod slots;
mod srcline;
mod symbols;
mod variables;
mod waitreasons;

pub use crate::arch::ProbeSites;
pub use debugfile::DebugSearch;
pub(crate) use dwarf::types::dictionary_position;
pub use elf::BuildIds;
pub use generics::{any_type_args, instantiation, Dictionary};
pub use hashkeys::AesGlobals;
pub use maplayout::MapLayout;
pub use otel::OtelContext;
pub use panicinfo::{PanicLayout, Recovery};
pub use pclntab::{PclntabError, SourceFrame};
pub(crate) use symbols::{is_pattern as symbols_is_pattern, package_of};
pub use variables::{NoVariable, Variable};

use crate::gobin::dwarf::DwarfInfo;
pub use crate::gobin::frame::ValueLocation;
pub use crate::gobin::inlentry::{InlinedEntry, Placement};
pub use crate::gobin::inlined::InlinedSite;
pub use crate::gobin::lines::{LineError, LineSite, Local, LocalState};
use crate::gotypes::{GoType, TypeId, TypeKind, Types};
use std::cell::{OnceCell, Ref, RefCell};
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

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not a regular file, too large, or unreadable.
    #[error(transparent)]
    File(#[from] crate::input::InputError),
    #[error("{path} is not an ELF executable")]
    NotElf { path: PathBuf },
    #[error("{path} is a script ({interpreter}), not a Go executable")]
    Script { path: PathBuf, interpreter: String },
    #[error("{path} is truncated: it has {size} bytes, and its ELF headers describe {expected}")]
    Truncated { path: PathBuf, size: u64, expected: u64 },
    #[error("{path} is built for {arch}, which gtrace cannot read")]
    WrongArch { path: PathBuf, arch: String },
    #[error("{path} is not a Go executable (no .gopclntab or .go.buildinfo); gtrace traces programs built by the Go toolchain")]
    NotGo { path: PathBuf },
    #[error("{path} was built by {version}; gtrace supports Go 1.17 and later (the register ABI): rebuild it with a newer Go")]
    TooOld { path: PathBuf, version: String },
    #[error("cannot read the Go function table (.gopclntab) of {path}: {source}")]
    BadPclntab { path: PathBuf, source: pclntab::PclntabError },
    #[error("bad DWARF in {path}: {source}")]
    Dwarf { path: PathBuf, source: gimli::Error },
    #[error("bad DWARF in {path}: {what} at .debug_info+{offset:#x}")]
    DwarfReference { path: PathBuf, what: &'static str, offset: usize },
    #[error("cannot read section {section} of {path}: {source}")]
    Section { path: PathBuf, section: String, source: object::read::Error },
    #[error("cannot disassemble {function}: {source}")]
    Disassembly { function: String, source: crate::arch::DecodeError },
    #[error("cannot disassemble {function}: its {size} bytes at {addr:#x} are not in the file")]
    CodeNotInFile { function: String, size: u64, addr: u64 },
    #[error("{debug} is not the debug file of {binary}: the binary has {binary_ids}, the debug file {debug_ids}")]
    DebugMismatch { binary: PathBuf, debug: PathBuf, binary_ids: String, debug_ids: String },
    #[error("{path} has no DWARF (.debug_info)")]
    NoDwarfIn { path: PathBuf },
}

impl TargetError {
    /// What the user can do about it, where there is something to say.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            TargetError::NotGo { .. } => Some("gtrace traces Go executables (Go 1.17 or later)"),
            TargetError::DebugMismatch { .. } => {
                Some("give the debug file made from this very build: a build with -ldflags='-s -w' has other build ids than one without, so build once without -s -w, keep its DWARF aside with `objcopy --only-keep-debug BINARY FILE`, and ship that binary stripped (`objcopy --strip-debug BINARY`: the build ids stay)")
            }
            TargetError::NoDwarfIn { .. } => Some("a debug file is what `objcopy --only-keep-debug` writes"),
            TargetError::WrongArch { .. } => Some("gtrace reads Go executables built for amd64 or arm64 (GOARCH)"),
            TargetError::TooOld { .. } => {
                Some("gtrace needs Go's register ABI: rebuild the program with Go 1.17 or later")
            }
            TargetError::Script { .. } => Some(
                "trace the Go program the script runs: `-b PROGRAM` for every process that runs it, \
                 or `-c 'PROGRAM ARGS'` to start it yourself",
            ),
            TargetError::Truncated { .. } => {
                Some("the file was cut short (an interrupted copy or download?): copy or build it again")
            }
            TargetError::File(crate::input::InputError::NotAFile { .. }) => {
                Some("give the Go executable itself (-b PATH, -c 'PATH ARGS' or -p PID)")
            }
            TargetError::BadPclntab { .. } => {
                Some("the function table could not be read; if this is a Go binary, please report it")
            }
            _ => None,
        }
    }
}

impl From<TargetError> for crate::diag::Failure {
    fn from(e: TargetError) -> crate::diag::Failure {
        crate::diag::Failure::system(&e, e.hint())
    }
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
    arch: crate::arch::Arch,
    data: Vec<u8>,
    /// Sorted by name, then address.
    functions: Vec<Function>,
    /// Indexes into `functions`, sorted by address.
    by_addr: Vec<usize>,
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
    /// Every inlined call with code, sorted by callee then address; read on first use.
    inlined: OnceCell<Vec<pclntab::InlinedCall>>,
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
    /// `moduledata.gofunc`, found on first use (srcline.rs).
    gofunc: OnceCell<Option<u64>>,
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
fn go_minor(version: &str) -> Option<u32> {
    let rest = version.strip_prefix("go1.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl Target {
    /// Reads and checks `path`: an ELF executable of an architecture gtrace reads, built
    /// by Go 1.17 or later. Its
    /// functions come from the symbol table, or from `.gopclntab` when it is stripped.
    pub fn open(path: &Path) -> Result<Target, TargetError> {
        Target::open_with(path, &DebugSearch::default())
    }

    /// `open`, with DWARF from a debug file when `debug` names one or finds one by the
    /// binary's build id.
    pub fn open_with(path: &Path, debug: &DebugSearch) -> Result<Target, TargetError> {
        let data = elf::read_file(path)?;
        let facts = elf::read(path, &data)?;
        let own_dwarf = elf::section(path, &data, ".debug_info")?.is_some();
        let debug_file = debugfile::find(path, &facts.build_ids, own_dwarf, debug)?;
        let has_dwarf = own_dwarf || debug_file.is_some();
        let mut target = Target {
            path: path.to_path_buf(),
            arch: facts.arch,
            data,
            functions: facts.functions,
            by_addr: Vec::new(),
            segments: facts.segments,
            relative: facts.relative,
            go_version: None,
            module_path: None,
            build_ids: facts.build_ids,
            has_dwarf,
            debug_file,
            from_pclntab: false,
            layout: Layout { text: facts.text, pclntab: facts.pclntab, rodata: facts.rodata, data: facts.data },
            all_data: facts.all_data,
            inlined: OnceCell::new(),
            dwarf: RefCell::new(DwarfState::NotLoaded),
            types: RefCell::new(Types::default()),
            g_layout: OnceCell::new(),
            types_base: OnceCell::new(),
            records: OnceCell::new(),
            sp_deltas: RefCell::new(std::collections::HashMap::new()),
            cfgs: RefCell::new(std::collections::HashMap::new()),
            gofunc: OnceCell::new(),
        };
        target.read_build_info();
        if target.layout.pclntab.is_none() {
            target.layout.pclntab = target.search_pclntab();
        }
        if let Some(version) = target.go_version.as_deref() {
            if go_minor(version).is_some_and(|m| m < 17) {
                return Err(TargetError::TooOld { path: target.path.clone(), version: version.to_string() });
            }
        }
        let records = target.func_records()?;
        if target.functions.is_empty() {
            target.from_pclntab = true;
            target.functions = records
                .iter()
                .map(|r| Function {
                    name: r.name.clone(),
                    addr: r.entry,
                    size: r.end - r.entry,
                    abi: match r.asm {
                        Some(true) => Abi::Abi0,
                        Some(false) => Abi::Internal,
                        None => Abi::Unknown,
                    },
                })
                .collect();
            target.functions.sort_by(|a, b| a.name.cmp(&b.name).then(a.addr.cmp(&b.addr)));
            target.functions.dedup();
        } else {
            // Symbols name functions; the table knows which are assembly.
            let asm: std::collections::HashMap<u64, bool> =
                records.iter().filter_map(|r| Some((r.entry, r.asm?))).collect();
            for f in &mut target.functions {
                if f.abi == Abi::Unknown {
                    f.abi = match asm.get(&f.addr) {
                        Some(true) => Abi::Abi0,
                        Some(false) => Abi::Internal,
                        None => Abi::Unknown,
                    };
                }
            }
        }
        let mut by_addr: Vec<usize> = (0..target.functions.len()).collect();
        by_addr.sort_by_key(|i| target.functions[*i].addr);
        target.by_addr = by_addr;
        Ok(target)
    }

    fn image(&self) -> image::Image<'_> {
        image::Image { data: &self.data, segments: &self.segments, relative: &self.relative }
    }

    fn bad_pclntab(&self, source: pclntab::PclntabError) -> TargetError {
        TargetError::BadPclntab { path: self.path.clone(), source }
    }

    /// Every function of `.gopclntab`; an empty list when there is none (a Go binary
    /// whose table was removed still has its symbols).
    fn func_records(&self) -> Result<Vec<pclntab::FuncRecord>, TargetError> {
        let Some(addr) = self.layout.pclntab else {
            return if self.functions.is_empty() {
                Err(self.bad_pclntab(pclntab::PclntabError::Missing))
            } else {
                Ok(Vec::new())
            };
        };
        let image = self.image();
        let table = match self.pclntab(&image, addr) {
            Ok((t, _)) => t,
            Err(pclntab::PclntabError::TooOld) => {
                let version = self.go_version.clone().unwrap_or_else(|| "a Go older than 1.16".to_string());
                return Err(TargetError::TooOld { path: self.path.clone(), version });
            }
            Err(e) => return Err(self.bad_pclntab(e)),
        };
        table.functions().map_err(|e| self.bad_pclntab(e))
    }

    /// The function table in a binary that has no section named for it: the first
    /// 8-aligned Go 1.16+ header in a data section whose functions all read.
    fn search_pclntab(&self) -> Option<u64> {
        let image = self.image();
        for section in &self.all_data {
            let Some(bytes) = image.bytes(section.addr, section.size) else { continue };
            let first = section.addr.next_multiple_of(8) - section.addr;
            for off in (first as usize..bytes.len().saturating_sub(8)).step_by(8) {
                let head = &bytes[off..off + 8];
                let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
                let known = matches!(magic, 0xffff_fffa | 0xffff_fff0 | 0xffff_fff1);
                if known && head[4..] == [0, 0, self.arch.pc_quantum(), 8] {
                    let addr = section.addr + off as u64;
                    if self.pclntab(&image, addr).is_ok_and(|(t, _)| t.functions().is_ok_and(|f| !f.is_empty())) {
                        return Some(addr);
                    }
                }
            }
        }
        None
    }

    /// The function table at `addr` with the right base for its entries, and the address
    /// of the runtime's moduledata if found.
    fn pclntab<'i>(
        &self,
        image: &'i image::Image<'i>,
        addr: u64,
    ) -> Result<(pclntab::Pclntab<'i>, Option<u64>), pclntab::PclntabError> {
        let mut table = pclntab::Pclntab::parse(image, addr, self.layout.text)?;
        let md = moduledata::find(image, addr, table.funcnametab(), &self.layout.data);
        if let Some(text) = md.and_then(|md| moduledata::text(image, md)) {
            table.set_text_start(text);
        }
        Ok((table, md))
    }

    /// The instruction set the binary is built for.
    pub fn arch(&self) -> crate::arch::Arch {
        self.arch
    }

    /// How this binary's Go functions take their arguments: the register ABI, or the
    /// stack where Go had none yet (arm64 before Go 1.18).
    pub fn go_conv(&self) -> crate::arch::abi::Conv {
        crate::arch::abi::Conv::for_go(self.arch, self.go_version.as_deref().and_then(go_minor))
    }

    /// How `f` takes its arguments: on the stack if it is assembly (ABI0), else as this
    /// binary's Go functions do.
    pub fn conv_of(&self, f: &Function) -> crate::arch::abi::Conv {
        match f.abi {
            Abi::Abi0 => crate::arch::abi::Conv::stack(self.arch),
            Abi::Internal | Abi::Unknown => self.go_conv(),
        }
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

    /// The function whose code holds `addr` (for symbolizing stacks).
    pub fn function_containing(&self, addr: u64) -> Option<&Function> {
        let i = self.by_addr.partition_point(|i| self.functions[*i].addr <= addr);
        let f = &self.functions[*self.by_addr.get(i.checked_sub(1)?)?];
        (addr < f.addr + f.size.max(1)).then_some(f)
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

    /// Where the probes of `f` go: the entry after its stack check and every RET.
    pub fn probe_sites(&self, f: &Function) -> Result<ProbeSites, TargetError> {
        let code = self.code(f).ok_or_else(|| TargetError::CodeNotInFile {
            function: f.name.clone(),
            size: f.size,
            addr: f.addr,
        })?;
        self.arch
            .probe_sites(f.addr, code, |a| self.function_at(a).map(|f| f.name.as_str()))
            .map_err(|source| TargetError::Disassembly { function: f.name.clone(), source })
    }

    /// Why a uprobe must not go at `addr` (see `Arch::uprobe_refusal`), judged from the
    /// instruction the file holds there and the code of its function before it; None
    /// when it may.
    pub fn uprobe_refusal(&self, addr: u64) -> Option<crate::arch::Refusal> {
        let max = self.arch.max_insn_bytes() as u64;
        // The instruction's bytes, as many as the segment holds (up to the longest).
        let code = (1..=max).rev().find_map(|len| self.bytes_at(addr, len)).unwrap_or(&[]);
        let start = self.function_containing(addr).map_or(addr, |f| f.addr);
        let from = start.max(addr.saturating_sub(self.arch.refusal_context_bytes() as u64));
        let before = self.bytes_at(from, addr - from).unwrap_or(&[]);
        self.arch.uprobe_refusal(before, code)
    }

    /// The offset in the file of the byte at virtual address `addr` (what a uprobe
    /// attaches to), for PIE and non-PIE executables alike.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        elf::file_offset(&self.segments, addr)
    }

    /// Where the DWARF is: the debug file kept aside, or the binary itself.
    fn dwarf_source(&self) -> (&Path, &[u8]) {
        match &self.debug_file {
            Some(d) => (&d.path, &d.data),
            None => (&self.path, &self.data),
        }
    }

    /// The debug file DWARF is read from, when it is not the binary.
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug_file.as_ref().map(|d| d.path.as_path())
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
    /// hidden `.dict` parameter of type unsafe.Pointer: the dictionary Go passes first;
    /// pass it to `arch::abi` like any other, hide it from users.
    /// None without DWARF, or when DWARF does not describe the function (assembly).
    /// Parsed lazily: only the compile units and types a script touches.
    pub fn params(&self, function: &str) -> Result<Option<Vec<Param>>, TargetError> {
        let mut state = self.dwarf.borrow_mut();
        let Some(dwarf) = Self::dwarf_mut(&mut state, self.dwarf_source().0, self.dwarf_source().1)? else {
            return Ok(None);
        };
        dwarf.params(function, &mut self.types.borrow_mut())
    }

    /// A signed machine word: the type of positional `argN` without DWARF.
    pub fn word_type(&self) -> TypeId {
        let mut types = self.types.borrow_mut();
        let word = GoType { name: "word".into(), size: 8, kind: TypeKind::Int { signed: true } };
        match types.items.iter().position(|t| *t == word) {
            Some(i) => TypeId(i as u32),
            None => types.add(word),
        }
    }

    /// Every Go type parsed so far. Parsing more (`params`) while this is held panics:
    /// copy what you need, as the checker does into `Checked::types`.
    pub fn types(&self) -> Ref<'_, Types> {
        self.types.borrow()
    }

    /// Offsets of `goid` and `stack.hi` in runtime.g: from DWARF, or without it from a
    /// table by Go version (see `glayout`); None when neither knows.
    pub fn g_layout(&self) -> Option<GLayout> {
        *self.g_layout.get_or_init(|| {
            self.g_layout_from_dwarf().or_else(|| glayout::by_version(go_minor(self.go_version.as_deref()?)?))
        })
    }

    /// The layout of runtime.g that gtrace assumes for binaries of Go `version`
    /// (`go1.21.13`) without DWARF.
    pub fn g_layout_for_version(version: &str) -> Option<GLayout> {
        glayout::by_version(go_minor(version)?)
    }

    /// Offsets of `goid` and `stack.hi` in runtime.g as DWARF gives them.
    pub fn g_layout_from_dwarf(&self) -> Option<GLayout> {
        {
            let mut state = self.dwarf.borrow_mut();
            let dwarf = Self::dwarf_mut(&mut state, self.dwarf_source().0, self.dwarf_source().1).ok()??;
            let members = dwarf.struct_members("runtime", "runtime.g").ok()??;
            let goid = members.iter().find(|m| m.name == "goid")?.offset;
            let stack = members.iter().find(|m| m.name == "stack")?;
            let hi = dwarf.members_at(stack.ty?).ok()?.into_iter().find(|m| m.name == "hi")?.offset;
            Some(GLayout { goid: u32::try_from(goid).ok()?, stack_hi: u32::try_from(stack.offset + hi).ok()? })
        }
    }

    /// The Go version from the build info, e.g. `go1.22.3`.
    pub fn go_version(&self) -> Option<&str> {
        self.go_version.as_deref()
    }

    fn read_build_info(&mut self) {
        let Ok(Some(section)) = elf::section(&self.path, &self.data, ".go.buildinfo") else { return };
        let read = |addr: u64, len: usize| self.bytes_at(addr, len as u64).map(<[u8]>::to_vec);
        let version = buildinfo::go_version(&section, read);
        let module = buildinfo::module_path(&section, read);
        self.go_version = version;
        self.module_path = module;
    }
}
