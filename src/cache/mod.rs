//! What a run learned of a Go binary, kept for the next run on the same build: a file a
//! binary, named by its build id, under the user's cache directory
//! (`$XDG_CACHE_HOME/gtrace`, else `~/.cache/gtrace`). It holds the DWARF units and
//! lookups the run reached (`gobin::DwarfSeed`) and where its patterns' functions were
//! inlined (`Target::find_inlined`), so the next run decompresses and walks none of it
//! and reads no inline tree; and the large maps of the last traces' objects, so that the
//! next trace of a script makes them while it compiles (`runtime::premake`: used only if
//! its object's are exactly those). Opening the file reads its description only; a unit's bytes
//! are read from it when a question reaches the unit (`format::decode`). A binary
//! without a build id is not cached.
//!
//! Several gtrace may share the directory at once: a file is written whole to a
//! temporary name and renamed over the old one, so a reader sees an old file or a new
//! one, never half of one. The directory is bounded (`BOUND`): after a write, the files
//! used least recently go first. A file that is not exactly what this gtrace writes for
//! this binary (`format::decode`: truncated, corrupted, another format, another gtrace,
//! another binary) is ignored, and replaced at the next write. Only a directory and
//! files this user alone may write are used (`trust`).

pub mod format;
mod trust;

pub use format::{Entry, For, Rejected};
pub use trust::Untrusted;

use crate::gobin::{InlinedSite, Target};
use std::path::{Path, PathBuf};

/// The most the cache directory holds, in bytes.
pub const BOUND: u64 = 256 << 20;

/// A cache directory.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
    bound: u64,
    /// Set once the directory, as it exists, passed `trusted`: not checked again.
    checked: std::cell::OnceCell<()>,
}

/// Why a cache file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("could not write the cache {path}: {source}")]
pub struct WriteError {
    path: PathBuf,
    source: std::io::Error,
}

impl WriteError {
    pub fn hint(&self) -> &'static str {
        "the trace is not affected; --no-cache runs without one"
    }
}

impl Store {
    /// The user's cache directory: `$XDG_CACHE_HOME/gtrace`, else `$HOME/.cache/gtrace`
    /// (XDG's rules: a relative XDG_CACHE_HOME is ignored). None without either.
    pub fn user() -> Option<Store> {
        let xdg = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
        let home = || std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute()).map(|h| h.join(".cache"));
        Some(Store::at(&xdg.or_else(home)?.join("gtrace")))
    }

    /// The cache directory `dir`.
    pub fn at(dir: &Path) -> Store {
        Store { dir: dir.to_path_buf(), bound: BOUND, checked: std::cell::OnceCell::new() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Ok if the directory may be used (`trust`): absent, or a real directory of this
    /// user's own that no one else may write, under directories no one else may
    /// change. Nothing is read from or written into one that may not. Checked once a
    /// run: a directory that passed is not checked again (one that was absent is, once
    /// created).
    pub fn trusted(&self) -> Result<(), Untrusted> {
        if self.checked.get().is_some() {
            return Ok(());
        }
        trust::check_dir(&self.dir)?;
        if self.dir.is_dir() {
            let _ = self.checked.set(());
        }
        Ok(())
    }

    /// The file for `target`: named by its GNU build id, else its Go build id; None
    /// when it has neither.
    pub fn file_for(&self, target: &Target) -> Option<PathBuf> {
        self.file_for_ids(target.build_ids())
    }

    /// The file for a binary with `ids` (`file_for`).
    pub fn file_for_ids(&self, ids: &crate::gobin::BuildIds) -> Option<PathBuf> {
        let id = ids.gnu.clone().or_else(|| ids.go.clone())?;
        let name: String = id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(128).collect();
        Some(self.dir.join(format!("{name}.gtc")))
    }

    /// What an earlier run kept for `target`, or why nothing is used (no file is not
    /// an error: Ok(None)).
    pub fn load(&self, target: &Target) -> Result<Option<Entry>, Rejected> {
        self.load_for(&binary(target))
    }

    /// `load` for the binary `binary` names (its build ids and size): what can be read
    /// before the binary's symbol table is.
    pub fn load_for(&self, binary: &For) -> Result<Option<Entry>, Rejected> {
        let ids = crate::gobin::BuildIds { gnu: binary.gnu.clone(), go: binary.go.clone() };
        let Some(path) = self.file_for_ids(&ids).filter(|_| self.trusted().is_ok()) else { return Ok(None) };
        let Some(file) = trust::open_file(&path) else { return Ok(None) };
        // Used now: the last to be evicted (through the file opened, not its name).
        let _ = file.set_modified(std::time::SystemTime::now());
        Ok(Some(format::decode(file, binary)?))
    }

    /// Writes `entry` for `target` (whole, then renamed into place), then evicts the
    /// least recently used files past the bound. Nothing for a binary without build id.
    pub fn save(&self, target: &Target, entry: &Entry) -> Result<(), WriteError> {
        let Some(path) = self.file_for(target) else { return Ok(()) };
        // Sized at once: grown by doubling, the lookups (7 MB after `-l '*'` on Caddy)
        // were copied and their pages touched twice over.
        self.save_to(path, &binary(target), entry, Vec::with_capacity(format::rest_size(entry)))
    }

    /// `save` on another thread, which `written` waits for: a first run on Caddy spent
    /// 15-20 ms of its main thread encoding and writing 5.7 MB before loading, which the
    /// loading (the kernel's work) now overlaps.
    pub fn save_in_background(&self, target: &Target, entry: Entry) {
        let Some(path) = self.file_for(target) else { return };
        let (store, binary) = (self.clone(), binary(target));
        // The blobs' buffer is this (the main) thread's: `format::encode_parts_in` says why.
        let blobs = Vec::with_capacity(format::rest_size(&entry));
        let spawned = std::thread::Builder::new().spawn(move || store.save_to(path, &binary, &entry, blobs));
        let mut slot = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        // A thread that cannot be started writes nothing: the next run writes the file.
        if let Some(earlier) = std::mem::replace(&mut *slot, spawned.ok()) {
            let _ = earlier.join();
        }
    }

    fn save_to(&self, path: PathBuf, binary: &For, entry: &Entry, blobs: Vec<u8>) -> Result<(), WriteError> {
        let bad = |source| WriteError { path: path.clone(), source };
        trust::create_dir(&self.dir).map_err(bad)?;
        self.trusted().map_err(|e| bad(std::io::Error::other(e.to_string())))?;
        let encoded = format::encode_parts_in(format::WRITER, binary, entry, blobs);
        let len = encoded.len();
        if len > format::LARGEST {
            let problem = format!("{len} bytes, more than a cache file holds ({})", format::LARGEST);
            return Err(bad(std::io::Error::other(problem)));
        }
        self.replace(&path, &mut |out| encoded.write_to(out))
    }

    /// Writes the file for `target` again with `inlined` as its inlined sites, `maps`
    /// as its large maps and `stamp` as the binary's (`Entry::stamp`), its DWARF
    /// blobs copied from the file as it is now, unread (by the kernel: no copy in this
    /// process), if they are still the DWARF of `info_crc` that the run read. Ok(false)
    /// when that file is not one this gtrace would use (nothing written: `save` writes
    /// it whole).
    pub fn save_sites(
        &self,
        target: &Target,
        inlined: &[(String, Vec<InlinedSite>)],
        maps: &[(u32, Vec<crate::object::MapDef>)],
        stamp: (Option<crate::input::Stamp>, Option<u32>),
    ) -> Result<bool, WriteError> {
        let Some(path) = self.file_for(target) else { return Ok(true) };
        if self.trusted().is_err() {
            return Ok(false);
        }
        let Some(file) = trust::open_file(&path) else { return Ok(false) };
        let Ok(old) = format::with_sites(file, &binary(target), (inlined, sites_crc(target, inlined)), maps, stamp)
        else {
            return Ok(false);
        };
        if old.head.len() as u64 + old.blobs_len > format::LARGEST {
            return Ok(false);
        }
        let mut from = old.file;
        self.replace(&path, &mut |out| {
            use std::io::{Read, Seek, Write};
            out.write_all(&old.head)?;
            from.seek(std::io::SeekFrom::Start(old.blobs_at))?;
            if std::io::copy(&mut (&mut from).take(old.blobs_len), out)? != old.blobs_len {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            Ok(())
        })?;
        Ok(true)
    }

    /// Replaces the file at `path` by what `fill` writes: into a temporary name beside
    /// it, this process's own (removed if anything fails), then renamed over it; then
    /// evicts what the bound allows no more.
    fn replace(
        &self,
        path: &Path,
        fill: &mut dyn FnMut(&mut std::fs::File) -> std::io::Result<()>,
    ) -> Result<(), WriteError> {
        let unique = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let tmp = path.with_extension(format!("{}.{}.tmp", std::process::id(), unique.subsec_nanos()));
        let written =
            trust::create_file(&tmp).and_then(|mut out| fill(&mut out)).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(source) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(WriteError { path: path.to_path_buf(), source });
        }
        self.evict(path);
        Ok(())
    }

    /// Removes the least recently used cache files (never `keep`) until the directory
    /// holds at most the bound; temporary files another gtrace left over an hour ago
    /// go too.
    fn evict(&self, keep: &Path) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else { return };
        let now = std::time::SystemTime::now();
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = Vec::new();
        for e in dir.flatten() {
            let (path, Ok(meta)) = (e.path(), e.metadata()) else { continue };
            let modified = meta.modified().unwrap_or(now);
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".tmp") && now.duration_since(modified).is_ok_and(|d| d.as_secs() > 3600) {
                let _ = std::fs::remove_file(&path);
            } else if name.ends_with(".gtc") && meta.is_file() {
                files.push((modified, meta.len(), path));
            }
        }
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.bound {
                break;
            }
            if path != keep && std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// The cache file `Store::save_in_background` is writing, if any.
static WRITING: std::sync::Mutex<Option<std::thread::JoinHandle<Result<(), WriteError>>>> = std::sync::Mutex::new(None);

/// Waits for the cache file `Store::save_in_background` is writing, if any: whether it
/// was written (Ok when there was none, or it was waited for already).
pub fn written() -> Result<(), WriteError> {
    let writing = WRITING.lock().unwrap_or_else(|e| e.into_inner()).take();
    match writing.map(|w| w.join()) {
        Some(Ok(result)) => result,
        // A writer that panicked left its temporary file (evicted within the hour).
        Some(Err(_)) | None => Ok(()),
    }
}

/// What a file's inlined sites are kept with, `Entry::code_crc`: `Target::code_crc` of
/// the binary they were found in (build ids alone may name two builds); None without
/// sites (then it is not computed).
pub fn sites_crc(target: &Target, inlined: &[(String, Vec<InlinedSite>)]) -> Option<u32> {
    (!inlined.is_empty()).then(|| target.code_crc())
}

/// Whether `entry`'s inlined sites, if it has any, were found in `target`'s code
/// (`sites_crc`): sites found in another build's code are not used.
pub fn sites_fit(entry: &Entry, target: &Target) -> bool {
    sites_crc(target, &entry.inlined).is_none_or(|crc| entry.code_crc == Some(crc))
}

/// The binary as a cache file names it (its DWARF is named in the DWARF part, checked
/// when DWARF is read).
fn binary(target: &Target) -> For {
    For::new(target.build_ids(), target.file_size())
}
