//! `.debug_info` inflated on a thread of its own from the moment the binary is opened,
//! for a run that will read it whole and has nothing to spare it (a script that reads
//! Go values, and no cache file for this build: a first run, or `--no-cache`): the
//! symbol table and the first questions are read meanwhile (`Target::open_inflating`).
//! The DWARF reader takes the bytes when a question first needs them (`DwarfInfo::load`)
//! instead of inflating them then. The thread inflates as the reader would
//! (`units::inflate_zlib`); what it could not inflate is said as the reader says it. A
//! thread that could not start, or that panicked, leaves the inflating to the reader.

use super::units::inflate_zlib;
use super::R;
use crate::gobin::elf;
use std::path::Path;
use std::thread::JoinHandle;

/// The binary's `.debug_info` being inflated on another thread.
pub(crate) struct Inflating {
    thread: JoinHandle<Result<R, String>>,
    /// The compressed section it inflates: where it lies in the file's bytes.
    section: std::ops::Range<usize>,
}

impl std::fmt::Debug for Inflating {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Inflating({:?})", self.section)
    }
}

impl Inflating {
    /// Starts inflating the `.debug_info` of the ELF in `data`, when it is zlib (what Go
    /// writes) inside the file's bytes; None when it has none, is compressed otherwise
    /// or not at all, its headers do not read, or no thread starts (the reader inflates
    /// it itself then, and says what is wrong with it).
    pub(crate) fn start(path: &Path, data: &crate::input::Bytes) -> Option<Inflating> {
        let compressed = elf::compressed_section(path, data, ".debug_info").ok()??;
        if compressed.format != object::CompressionFormat::Zlib {
            return None;
        }
        let section = within(data, compressed.data)?;
        let (file, at, size) = (data.clone(), section.clone(), compressed.uncompressed_size);
        let inflate = move || inflate_zlib(&file[at], size);
        let thread = std::thread::Builder::new().name("gtrace-inflate".into()).spawn(inflate).ok()?;
        Some(Inflating { thread, section })
    }

    /// The inflated section, or why it could not be, when it is `compressed` of `data`
    /// (what the reader was about to inflate). None when it is another section (a debug
    /// file's), or the thread panicked: the reader inflates it then. Waits for the thread.
    pub(crate) fn take(self, data: &[u8], compressed: &[u8]) -> Option<Result<R, String>> {
        if within(data, compressed)? != self.section {
            return None;
        }
        self.thread.join().ok()
    }
}

/// Where `part` lies in `whole`, when it is a slice of it.
fn within(whole: &[u8], part: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let range = start..start.checked_add(part.len())?;
    (range.end <= whole.len()).then_some(range)
}
