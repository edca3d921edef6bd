//! How the cache's files are opened: never following a symbolic link, never waiting
//! (a FIFO under a cache file's name would hang the run), and only a regular file is
//! read.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The cache file at `path`, opened to read, if it is a regular file (not a link, a
/// FIFO, a device or a directory); None otherwise, or when there is none.
pub fn open_file(path: &Path) -> Option<File> {
    let file = File::options().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW).open(path).ok()?;
    let meta = file.metadata().ok()?;
    meta.file_type().is_file().then_some(file)
}
