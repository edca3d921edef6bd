//! What of the cache gtrace trusts, and how its files are opened. The directory is used
//! only if it is a real directory (not a symbolic link) owned by the effective user and
//! writable by no one else; a file is read only if it is a regular file (not a link, a
//! FIFO that would hang the run, a device) owned by that user and writable by no one
//! else. Every directory above it must be this user's or root's, and writable by no one
//! else unless sticky (`/tmp`): who may write a parent may rename the cache directory
//! away and put their own in its place. Files are opened without following a link and
//! without waiting. Anyone else who could write a cache could forge one that passes
//! every checksum (or, under `sudo -E`, steer root's writes and evictions).

use std::fs::{File, Metadata};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why the cache directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    #[error("the cache directory {} is not used: it is a symbolic link", dir.display())]
    Link { dir: PathBuf },
    #[error("the cache directory {} is not used: it is not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("the cache directory {} is not used: owned by uid {owner}, not by this user (uid {euid})", dir.display())]
    Owner { dir: PathBuf, owner: u32, euid: u32 },
    #[error("the cache directory {} is not used: writable by group or others (mode {mode:o})", dir.display())]
    Writable { dir: PathBuf, mode: u32 },
    #[error("the cache directory {} is not used: {problem}", dir.display())]
    Unreadable { dir: PathBuf, problem: String },
    #[error("the cache directory {} is not used: {} above it is {problem}", dir.display(), parent.display())]
    Parent { dir: PathBuf, parent: PathBuf, problem: String },
}

impl Untrusted {
    pub fn hint(&self) -> String {
        match self {
            Untrusted::Writable { dir, .. } => format!("`chmod go-w {}`, or --no-cache", dir.display()),
            Untrusted::Parent { parent, .. } => {
                format!("`chmod go-w {}` (or `+t`), XDG_CACHE_HOME elsewhere, or --no-cache", parent.display())
            }
            _ => "XDG_CACHE_HOME naming a directory of your own, or --no-cache".into(),
        }
    }
}

/// Whether this user alone owns and may write what `meta` describes.
fn own(meta: &Metadata) -> bool {
    meta.uid() == crate::runtime::capabilities::effective_uid() && meta.mode() & 0o022 == 0
}

/// Ok if the cache directory `dir` may be used: absent (to be created), or a directory
/// of this user's own that no one else may write, under directories no one else may
/// change (`check_parents`).
pub fn check_dir(dir: &Path) -> Result<(), Untrusted> {
    check_parents(dir)?;
    let meta = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Untrusted::Unreadable { dir: dir.into(), problem: e.to_string() }),
        Ok(meta) => meta,
    };
    let (euid, dir) = (crate::runtime::capabilities::effective_uid(), dir.to_path_buf());
    if meta.file_type().is_symlink() {
        Err(Untrusted::Link { dir })
    } else if !meta.is_dir() {
        Err(Untrusted::NotADirectory { dir })
    } else if meta.uid() != euid {
        Err(Untrusted::Owner { dir, owner: meta.uid(), euid })
    } else if meta.mode() & 0o022 != 0 {
        Err(Untrusted::Writable { dir, mode: meta.mode() & 0o7777 })
    } else {
        Ok(())
    }
}

/// Ok if every directory above `dir` that exists is this user's or root's and writable
/// by no one else, or sticky (others may not rename what is not theirs in it): those on
/// the path as written, and those its links lead to. A link on the path is as safe as
/// the directory that holds it (who may write that may point the link elsewhere, in the
/// middle of a run), and that directory is checked as the next one up.
fn check_parents(dir: &Path) -> Result<(), Untrusted> {
    let Some(existing) = dir.ancestors().skip(1).find(|a| a.exists()) else { return Ok(()) };
    let bad = |parent: &Path, problem: String| Untrusted::Parent { dir: dir.into(), parent: parent.into(), problem };
    let real = existing.canonicalize().map_err(|e| bad(existing, e.to_string()))?;
    let euid = crate::runtime::capabilities::effective_uid();
    for parent in existing.ancestors().chain(real.ancestors()) {
        let meta = std::fs::symlink_metadata(parent).map_err(|e| bad(parent, e.to_string()))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        if meta.uid() != euid && meta.uid() != 0 {
            return Err(bad(parent, format!("owned by uid {}, neither this user (uid {euid}) nor root", meta.uid())));
        }
        if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
            return Err(bad(parent, format!("writable by group or others (mode {:o})", meta.mode() & 0o7777)));
        }
    }
    Ok(())
}

/// Creates the cache directory `dir` (and its parents) if absent, for this user only.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// The cache file at `path`, opened to read, if it is a regular file of this user's own
/// that no one else may write; None otherwise, or when there is none.
pub fn open_file(path: &Path) -> Option<File> {
    let file = File::options().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW).open(path).ok()?;
    let meta = file.metadata().ok()?;
    (meta.file_type().is_file() && own(&meta)).then_some(file)
}

/// A new file at `path` (never one already there, nor through a link), for this user
/// only, to write.
pub fn create_file(path: &Path) -> std::io::Result<File> {
    File::options().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path)
}
