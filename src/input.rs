//! Reading the files a user names: the traced executable, scripts, libraries, plans.
//! Only regular files are read, and never more than a cap, so that a directory, a FIFO
//! or `/dev/zero` is a clear error at once rather than a hang or memory without bound.
//! The kind and the size a file claims are checked before a byte is read: a sparse
//! 50 GB file is refused at once, not after reading the cap.
//! Script text must be UTF-8; where it is not, the error points at the first bad byte.

use crate::diag::{Diagnostic, Sources};
use crate::syntax::ast::Span;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest executable gtrace reads (Go binaries are tens to hundreds of MB).
pub const MAX_BINARY: u64 = 4 << 30;
/// The largest script, library or plan gtrace reads.
pub const MAX_TEXT: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{} is {kind}, not a file", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("{} is larger than gtrace reads ({})", path.display(), size_words(*max))]
    TooLarge { path: PathBuf, max: u64 },
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl InputError {
    pub fn path(&self) -> &Path {
        match self {
            InputError::NotAFile { path, .. } | InputError::TooLarge { path, .. } | InputError::Io { path, .. } => path,
        }
    }
}

/// What kind of file `meta` describes, for messages: `a directory`, `a named pipe (FIFO)`.
pub fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// `4 GiB`, `64 MiB`, or the bytes.
fn size_words(n: u64) -> String {
    match n {
        _ if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        _ if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        _ => format!("{n} bytes"),
    }
}

/// The metadata of `path` when it is a regular file (symbolic links followed); checked
/// before the file is opened: opening a FIFO would wait for a writer.
fn regular(path: &Path) -> Result<std::fs::Metadata, InputError> {
    let meta = std::fs::metadata(path).map_err(|source| InputError::Io { path: path.to_path_buf(), source })?;
    if !meta.is_file() {
        return Err(InputError::NotAFile { path: path.to_path_buf(), kind: kind_of(&meta) });
    }
    Ok(meta)
}

/// The first `n` bytes of the regular file `path` (all of it when shorter): enough to
/// tell what a file is before reading it whole.
pub fn read_head(path: &Path, n: u64) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io { path: path.to_path_buf(), source };
    regular(path)?;
    let mut head = Vec::new();
    std::fs::File::open(path).map_err(io)?.take(n).read_to_end(&mut head).map_err(io)?;
    Ok(head)
}

/// The bytes of the regular file `path` (symbolic links followed), at most `max` of them:
/// a file whose size is larger is refused before it is opened.
pub fn read_file(path: &Path, max: u64) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io { path: path.to_path_buf(), source };
    let meta = regular(path)?;
    if meta.len() > max {
        return Err(InputError::TooLarge { path: path.to_path_buf(), max });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let mut data = Vec::with_capacity(usize::try_from(meta.len().min(max)).unwrap_or(0));
    // A regular file can still grow, or claim a size it does not have (/proc): the cap
    // holds whatever the size says.
    file.take(max.saturating_add(1)).read_to_end(&mut data).map_err(io)?;
    if data.len() as u64 > max {
        return Err(InputError::TooLarge { path: path.to_path_buf(), max });
    }
    Ok(data)
}

/// The bytes of a file the reader holds whole: mapped read-only (the executable and a
/// debug file, `map_file`) or in memory (anything else, and tests): the reader sees a
/// slice either way. A clone shares them (DWARF keeps the compressed `.debug_info` it may
/// inflate later this way, not as a copy).
#[derive(Clone)]
pub struct Bytes(std::sync::Arc<Held>);

enum Held {
    Owned(Vec<u8>),
    /// A mapped file, and its `Stamp` when it had settled as it was mapped.
    Mapped(crate::runtime::mapped::Mapped, Option<Stamp>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &*self.0 {
            Held::Owned(v) => v,
            Held::Mapped(m, _) => m.bytes(),
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes(std::sync::Arc::new(Held::Owned(v)))
    }
}

impl Bytes {
    /// Gives back the memory the bytes hold where that costs nothing to undo: a mapped
    /// file's pages (read again when touched); bytes in memory stay.
    pub fn shed(&self) {
        if let Held::Mapped(m, _) = &*self.0 {
            m.shed();
        }
    }

    /// `shed` for bytes `start..start + len` (clipped to the file) only.
    pub fn shed_range(&self, start: usize, len: usize) {
        if let Held::Mapped(m, _) = &*self.0 {
            m.shed_range(start, len);
        }
    }

    /// The file's `Stamp` as it was mapped, if it had settled; None for bytes in memory.
    pub fn stamp(&self) -> Option<Stamp> {
        match &*self.0 {
            Held::Mapped(_, stamp) => *stamp,
            Held::Owned(_) => None,
        }
    }
}

/// Which file, and which version of it: its device and inode, size, and times of last
/// change (data: mtime; anything, a write or `utimes` included: ctime, which no user
/// can set). What was computed from a file's bytes (a cache's CRCs: src/cache) holds
/// for a file of the same stamp, as git's index trusts a file's stat. Taken only from
/// a file whose ctime is a second or more in the past as it is mapped (`settled`): a
/// change in the same clock tick as the stamp could not be told apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl Stamp {
    /// `meta`'s stamp, if its last change was a second or more before `now`.
    pub fn settled(meta: &std::fs::Metadata, now: std::time::SystemTime) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let since = now.duration_since(std::time::UNIX_EPOCH).ok()?;
        let settled = i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()) + 1_000_000_000;
        (settled <= since.as_nanos() as i128).then_some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// The regular file `path` (symbolic links followed), mapped read-only: refused as
/// `read_file` refuses (not a file, larger than `max`); an empty file is read (nothing
/// to map).
pub fn map_file(path: &Path, max: u64) -> Result<Bytes, InputError> {
    let io = |source| InputError::Io { path: path.to_path_buf(), source };
    regular(path)?;
    let file = std::fs::File::open(path).map_err(io)?;
    // The size of the file opened, not of whatever the path names by now.
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(InputError::NotAFile { path: path.to_path_buf(), kind: kind_of(&meta) });
    }
    if meta.len() > max {
        return Err(InputError::TooLarge { path: path.to_path_buf(), max });
    }
    if meta.len() == 0 {
        return Ok(Bytes::from(Vec::new()));
    }
    let stamp = Stamp::settled(&meta, std::time::SystemTime::now());
    let mapped = crate::runtime::mapped::Mapped::map(&file, meta.len()).map_err(io)?;
    Ok(Bytes(std::sync::Arc::new(Held::Mapped(mapped, stamp))))
}

/// `bytes` as script text named `name`; when they are not UTF-8, an error at the first
/// bad byte, in a file added to `sources` (its text decoded with replacement characters,
/// so the error shows the line it is on).
pub fn script_text(sources: &mut Sources, name: &str, bytes: Vec<u8>) -> Result<String, Diagnostic> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let bad = bytes[at];
            let file = sources.add(name, String::from_utf8_lossy(&bytes).into_owned());
            // The prefix is valid, so the bad byte's replacement character starts at `at`.
            let start = u32::try_from(at).unwrap_or(u32::MAX);
            let span = Span { file, start, end: start.saturating_add('\u{fffd}'.len_utf8() as u32) };
            Err(Diagnostic::error(
                span,
                format!("invalid UTF-8: byte {bad:#04x} does not start a valid UTF-8 character"),
            )
            .label("not UTF-8")
            .hint("scripts are UTF-8 text; write other bytes in strings as escapes (\\xHH)"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_fifos_and_devices_are_refused_before_reading() {
        let dir = std::env::temp_dir().join(format!("gtrace-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (path, kind) in [
            (dir.as_path(), "a directory"),
            (fifo.as_path(), "a named pipe (FIFO)"),
            (Path::new("/dev/zero"), "a character device"),
        ] {
            match read_file(path, MAX_TEXT) {
                Err(InputError::NotAFile { kind: k, .. }) => assert_eq!(k, kind),
                other => panic!("{path:?}: {other:?}"),
            }
        }
        std::fs::remove_file(&fifo).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn reads_are_capped() {
        let file = std::env::temp_dir().join(format!("gtrace-input-cap-{}", std::process::id()));
        std::fs::write(&file, vec![b'x'; 100]).unwrap();
        assert_eq!(read_file(&file, 100).unwrap().len(), 100);
        assert!(matches!(read_file(&file, 99), Err(InputError::TooLarge { max: 99, .. })));
        assert_eq!(read_head(&file, 4).unwrap(), b"xxxx");
        assert_eq!(read_head(&file, 1000).unwrap().len(), 100);
        std::fs::remove_file(&file).unwrap();
        // A /proc file says it has 0 bytes and has more.
        assert!(!read_file(Path::new("/proc/self/status"), MAX_TEXT).unwrap().is_empty());
    }

    #[test]
    fn invalid_utf8_points_at_its_line_and_column() {
        let mut sources = Sources::default();
        let d = script_text(&mut sources, "x.gt", b"on begin {\n  print(\"\xff\")\n}\n".to_vec()).unwrap_err();
        assert_eq!(sources.line_col(d.span.file, d.span.start), (2, 10));
        assert!(d.message.contains("0xff"), "{}", d.message);
        assert_eq!(script_text(&mut sources, "y.gt", b"ok".to_vec()).unwrap(), "ok");
    }
    #[test]
    fn a_file_is_stamped_once_settled_and_its_stamp_changes_with_it() {
        let dir = std::env::temp_dir().join(format!("gtrace-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"one").unwrap();
        let meta = || std::fs::metadata(&path).unwrap();
        let changed = meta().modified().unwrap();
        let second = std::time::Duration::from_secs(1);
        // Changed less than a second ago: no stamp.
        assert_eq!(Stamp::settled(&meta(), changed), None);
        assert_eq!(Stamp::settled(&meta(), changed + second / 2), None);
        let first = Stamp::settled(&meta(), changed + 2 * second).expect("settled");
        assert_eq!(Stamp::settled(&meta(), changed + 3 * second), Some(first));
        // Written in place (same inode, same size): another stamp.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"two").unwrap();
        let later = std::time::SystemTime::now() + 2 * second;
        let again = Stamp::settled(&meta(), later).expect("settled");
        assert_eq!((again.ino, again.size), (first.ino, first.size));
        assert_ne!(again, first);
        // Mapped: the file's stamp, not yet settled; bytes in memory have none.
        assert_eq!(map_file(&path, 16).unwrap().stamp(), None);
        assert_eq!(Bytes::from(b"two".to_vec()).stamp(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
