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
    Mapped(crate::runtime::mapped::Mapped),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &*self.0 {
            Held::Owned(v) => v,
            Held::Mapped(m) => m.bytes(),
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
        if let Held::Mapped(m) = &*self.0 {
            m.shed();
        }
    }

    /// `shed` for bytes `start..start + len` (clipped to the file) only.
    pub fn shed_range(&self, start: usize, len: usize) {
        if let Held::Mapped(m) = &*self.0 {
            m.shed_range(start, len);
        }
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
    Ok(Bytes(std::sync::Arc::new(Held::Mapped(crate::runtime::mapped::Mapped::map(&file, meta.len()).map_err(io)?))))
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
}
