//! DWARF kept aside: production binaries are often stripped, their DWARF kept in a
//! separate file (`objcopy --only-keep-debug`). That file is given with `--debug-file`,
//! or found by the binary's GNU build id under a debug directory, as gdb does:
//! `DIR/.build-id/ab/cdef0123….debug` (DIR is /usr/lib/debug unless `--debug-dir` says
//! otherwise). A debug file must carry the binary's build ids; one that does not is
//! refused with both.

use super::file::{self as elf, BuildIds};
use crate::gobin::TargetError;
use std::path::{Path, PathBuf};

/// Where DWARF kept aside is looked for.
#[derive(Clone, Debug)]
pub struct DebugSearch {
    /// `--debug-file`: this file, whatever the binary has.
    pub file: Option<PathBuf>,
    /// Directories holding `.build-id/` trees, searched in order when the binary has no
    /// DWARF of its own.
    pub dirs: Vec<PathBuf>,
}

impl Default for DebugSearch {
    fn default() -> DebugSearch {
        DebugSearch { file: None, dirs: vec![PathBuf::from("/usr/lib/debug")] }
    }
}

/// A file that holds the binary's DWARF.
pub(crate) struct DebugFile {
    pub path: PathBuf,
    pub data: crate::input::Bytes,
}

/// The DWARF file for a binary with `ids` (`has_dwarf`: whether it has its own), per
/// `search`; None when the binary's own DWARF (or none) is to be used.
pub(crate) fn find(
    binary: &Path,
    ids: &BuildIds,
    has_dwarf: bool,
    search: &DebugSearch,
) -> Result<Option<DebugFile>, TargetError> {
    let candidate = match &search.file {
        Some(file) => file.clone(),
        None if has_dwarf => return Ok(None),
        None => match ids.gnu.as_deref().and_then(|id| by_build_id(id, &search.dirs)) {
            Some(found) => found,
            None => return Ok(None),
        },
    };
    let data = elf::read_file(&candidate)?;
    let theirs = elf::read_build_ids(&candidate, &data)?;
    if ids.same_build(&theirs) != Some(true) {
        return Err(TargetError::DebugMismatch {
            binary: binary.to_path_buf(),
            debug: candidate,
            binary_ids: ids.to_string(),
            debug_ids: theirs.to_string(),
        });
    }
    if elf::section(&candidate, &data, ".debug_info")?.is_none() {
        return Err(TargetError::NoDwarfIn { path: candidate });
    }
    Ok(Some(DebugFile { path: candidate, data }))
}

/// `DIR/.build-id/ab/cdef….debug` for the first DIR that has it.
fn by_build_id(id: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    if id.len() < 3 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (head, rest) = id.split_at(2);
    dirs.iter().map(|d| d.join(".build-id").join(head).join(format!("{rest}.debug"))).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_are_split_after_two_hex_digits() {
        let dir = std::env::temp_dir().join(format!("gtrace-debugdir-{}", std::process::id()));
        let want = dir.join(".build-id/ab/cdef01.debug");
        std::fs::create_dir_all(want.parent().unwrap()).unwrap();
        std::fs::write(&want, b"x").unwrap();
        assert_eq!(by_build_id("abcdef01", std::slice::from_ref(&dir)), Some(want));
        assert_eq!(by_build_id("abcdef02", std::slice::from_ref(&dir)), None);
        assert_eq!(by_build_id("../etc", std::slice::from_ref(&dir)), None);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
