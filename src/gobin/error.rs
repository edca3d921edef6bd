//! Why a binary cannot be read, or a fact of it not found: one enum, each case with the
//! path it concerns and, where there is one, what the user can do (`hint`).

use std::path::PathBuf;

use super::pclntab;

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
    #[error("cannot decompress section {section} of {path}: {problem}")]
    Inflate { path: PathBuf, section: &'static str, problem: String },
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
            TargetError::Inflate { .. } => Some(
                "the binary's DWARF is damaged: a script that reads no Go value still runs; \
                 for the rest, build it again or give its DWARF with --debug-file",
            ),
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
