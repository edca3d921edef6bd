//! The Go executable being traced: its functions (from the symbol table), their file
//! offsets, the probe sites inside them (entry after the stack check, every RET), and what
//! its DWARF says of parameters, results and `runtime.g`.

pub mod types;

use crate::target::types::{TypeId, Types};
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

/// Offsets of the fields of `runtime.g` that gtrace reads.
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
    #[error("{path} has no symbol table")]
    NoSymbols { path: PathBuf },
    #[error("bad DWARF in {path}: {message}")]
    Dwarf { path: PathBuf, message: String },
    #[error("cannot disassemble {function}: {message}")]
    Disassembly { function: String, message: String },
}

pub struct Target {
    path: PathBuf,
}

impl Target {
    pub fn open(path: &Path) -> Result<Target, TargetError> {
        let _ = path;
        unimplemented!("target::Target::open is being written")
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Every function, sorted by name.
    pub fn functions(&self) -> &[Function] {
        unimplemented!()
    }
    /// Functions whose name equals `pattern`, or matches it when it holds `*` wildcards.
    pub fn find(&self, pattern: &str) -> Vec<&Function> {
        let _ = pattern;
        unimplemented!()
    }
    /// Up to `n` existing function names closest to `name`, for "did you mean" hints.
    pub fn closest(&self, name: &str, n: usize) -> Vec<&str> {
        let _ = (name, n);
        unimplemented!()
    }
    pub fn probe_sites(&self, f: &Function) -> Result<ProbeSites, TargetError> {
        let _ = f;
        unimplemented!()
    }
    /// The offset in the file of the byte at virtual address `addr` (what a uprobe
    /// attaches to), for PIE and non-PIE executables alike.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        let _ = addr;
        unimplemented!()
    }
    /// Parameters (receiver first) and results of `f`, from DWARF; None without DWARF.
    /// Parsed lazily: only the compile units and types a script touches.
    pub fn params(&mut self, function: &str) -> Result<Option<Vec<Param>>, TargetError> {
        let _ = function;
        unimplemented!()
    }
    /// Every Go type parsed so far.
    pub fn types(&self) -> &Types {
        unimplemented!()
    }
    pub fn g_layout(&self) -> Option<GLayout> {
        unimplemented!()
    }
    /// The Go version from the build info, e.g. `go1.22.3`.
    pub fn go_version(&self) -> Option<&str> {
        unimplemented!()
    }
}
