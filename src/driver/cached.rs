//! The cache of what runs learned of a binary (src/cache), as the command line uses it:
//! read as soon as the binary's build ids are, before its symbol table (`Early`), and
//! taken once the binary is opened (unless `--no-cache`), written back once the
//! compiler has asked all it will, when the run learned something new (DWARF, or where
//! a pattern's functions were inlined). A cache file
//! that is not used is as no file (it is written again); a write that fails is said in
//! one line (the run goes on). A directory another user could write is not used (said
//! in one line); a DWARF error while the cache's DWARF is in use compiles again without
//! it (`compile_seeded` in mod.rs).

use crate::cache::format::MAPS_KEPT;
use crate::cache::{sites_crc, sites_fit, Entry, For, Store, Untrusted};
use crate::cli::Cli;
use crate::gobin::{BuildIds, Target};
use crate::input::Stamp;
use crate::object::MapDef;

/// The cache for this run's binary and what it held.
pub(super) struct Cached {
    store: Store,
    loaded: Entry,
}

/// Reads the cache for `target` into it (the file `early` read, when it read one for
/// this binary, from the directory it checked); None with `--no-cache` or without a
/// cache directory.
pub(super) fn open(cli: &Cli, target: &Target, early: Option<Early>) -> Option<Cached> {
    if cli.no_cache {
        return None;
    }
    // The directory is checked once a run: by `read_early` when it ran.
    let (store, early) = match early {
        Some(Early { store, binary, entry }) => (store, Some((binary, entry))),
        None => (trusted(Store::user()?), None),
    };
    // A directory another user could write is neither read nor written; said every run.
    let store = match store {
        Ok(store) => store,
        Err(e) => {
            eprintln!("gtrace: {e} ({})", e.hint());
            return None;
        }
    };
    // A file that is not what this gtrace writes for this binary is not used, and is
    // written again below: the run is as without a cache.
    let binary = For::new(target.build_ids(), target.file_size());
    let mut loaded = match early.filter(|(read_for, _)| *read_for == binary) {
        Some((_, entry)) => entry.unwrap_or_default(),
        None => store.load(target).ok().flatten().unwrap_or_default(),
    };
    // Written from this very file, unchanged since (`Entry::stamp`): its CRCs are this
    // file's, not summed again (21 MB of `.gopclntab` and 6 MB of DWARF on Caddy).
    let same_file = target.stamp().is_some_and(|now| loaded.stamp == Some(now));
    if let Some(crc) = loaded.code_crc.filter(|_| same_file) {
        target.known_code_crc(crc);
    }
    // Sites found in another build's code (build ids may name two builds: `sites_fit`),
    // or not in this binary's: the file is not used at all.
    if !sites_fit(&loaded, target) || !target.seed_inlined(&loaded.inlined) {
        loaded = Entry::default();
    }
    if let Some(mut seed) = loaded.dwarf.clone() {
        // The stamp is the binary's: DWARF from a debug file is checked.
        seed.info_crc_known = same_file && target.debug_file().is_none();
        target.seed_dwarf(seed);
    }
    Some(Cached { store, loaded })
}

/// The cache file for a binary, read as soon as its build ids and size are known,
/// before its symbol table (`Target::open_inflating`): what only a first run does may
/// then start at once (inflating `.debug_info`), and so may the large maps the last
/// trace of the script had (`maps_for`, `runtime::premake`). The file passed every check
/// `Store::load` makes (format, this gtrace's build, this binary, its checksum); `open`
/// still makes the checks that need the binary read (its inlined sites), and whatever
/// was started from a file it then sets aside is only a guess: a wrong one costs time.
pub(super) struct Early {
    /// The cache directory, or why it is not to be used (`open` says it).
    store: Result<Store, Untrusted>,
    binary: For,
    /// None: no file, or one not used.
    entry: Option<Entry>,
}

/// The cache file for a binary with `ids` of `size` bytes (`Early`); None with
/// `--no-cache` or without a cache directory. A directory not to be used is read no
/// further (`open` says why).
pub(super) fn read_early(cli: &Cli, ids: &BuildIds, size: u64) -> Option<Early> {
    if cli.no_cache {
        return None;
    }
    let store = trusted(Store::user()?);
    let binary = For::new(ids, size);
    let entry = store.as_ref().ok().and_then(|s| s.load_for(&binary).ok().flatten());
    Some(Early { store, binary, entry })
}

/// `store`, if it may be used (`Store::trusted`).
fn trusted(store: Store) -> Result<Store, Untrusted> {
    store.trusted().map(|()| store)
}

impl Early {
    /// Whether this run has no cache file for its binary (`--no-cache`, no cache
    /// directory or one not to be used, no file, one not used): a first run, which
    /// inflates the DWARF it will read at once. (A file without DWARF leaves it to the
    /// first question, as one with DWARF: tests/corrupted.rs reads both ways.)
    pub(super) fn absent(early: Option<&Early>) -> bool {
        early.is_none_or(|e| e.entry.is_none())
    }

    /// The large maps the last trace of the script keyed `key` had, if the file kept them.
    pub(super) fn maps_for(&self, key: u32) -> Option<&[MapDef]> {
        maps_for(self.entry.as_ref()?, key)
    }
}

/// The large maps `entry` keeps for the script keyed `key`.
fn maps_for(entry: &Entry, key: u32) -> Option<&[MapDef]> {
    entry.maps.iter().find(|(k, _)| *k == key).map(|(_, defs)| defs.as_slice())
}

impl Cached {
    /// Whether the cache brought DWARF (a DWARF error may then be the cache's).
    pub(super) fn has_dwarf(&self) -> bool {
        self.loaded.dwarf.is_some()
    }

    /// The large maps the last trace of the script keyed `key` had, if the file kept them.
    pub(super) fn maps_for(&self, key: u32) -> Option<&[MapDef]> {
        maps_for(&self.loaded, key)
    }

    /// Writes what the run learned, when it is more than the cache held; a whole file
    /// on another thread when `background` (`cache::written` waits for it). `maps`: a
    /// trace's script key and its object's large maps, kept for the next trace.
    pub(super) fn save(&self, target: &Target, background: bool, maps: Option<(u32, Vec<MapDef>)>) {
        // The units are copied out only when the run reached more than the cache held.
        let dwarf = if target.dwarf_grew() { target.dwarf_learned() } else { None };
        let inlined = target.inlined_learned();
        let kept = self.kept_maps(maps);
        let stamp = self.stamp_kept(target, dwarf.is_some());
        // The units the cache held (read from its file when written again) count as
        // learned only when the run reached more.
        let stamp_new = stamp.is_some() && stamp != self.loaded.stamp;
        if dwarf.is_none() && inlined == self.loaded.inlined && kept == self.loaded.maps && !stamp_new {
            return;
        }
        // Only the inlined sites, the maps or the stamp are new: the file's DWARF is
        // copied as it is, unread.
        if dwarf.is_none() && self.loaded.dwarf.is_some() {
            let read = self.loaded.dwarf.as_ref().and_then(|d| d.info_crc);
            match self.store.save_sites(target, &inlined, &kept, (stamp, read)) {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => return eprintln!("gtrace: {e} ({})", e.hint()),
            }
        }
        let code_crc = sites_crc(target, &inlined);
        let dwarf = dwarf.or_else(|| self.loaded.dwarf.clone());
        let learned = Entry { dwarf, inlined, code_crc, maps: kept, stamp };
        if background {
            return self.store.save_in_background(target, learned);
        }
        if let Err(e) = self.store.save(target, &learned) {
            eprintln!("gtrace: {e} ({})", e.hint());
        }
    }
}

impl Cached {
    /// The binary's stamp the file keeps (`Entry::stamp`), if the CRCs it will hold are
    /// this file's: the inlined sites' always (summed this run, or known for this
    /// stamp), the DWARF's if the file keeps none, if this run's DWARF is written
    /// (`learned`) or was read (its CRC checked), or if the file held it for this stamp.
    fn stamp_kept(&self, target: &Target, learned: bool) -> Option<Stamp> {
        // A debug file's DWARF is not the binary's to vouch for.
        let now = target.stamp().filter(|_| target.debug_file().is_none())?;
        let held = self.loaded.stamp == Some(now) || self.loaded.dwarf.is_none();
        (learned || held || target.dwarf_read()).then_some(now)
    }

    /// The large maps the file keeps after this run: `maps` (a trace's) first, then the
    /// others it held, `MAPS_KEPT` scripts at most. A trace with no large maps keeps
    /// none for its key (nothing to make ahead).
    fn kept_maps(&self, maps: Option<(u32, Vec<MapDef>)>) -> Vec<(u32, Vec<MapDef>)> {
        let Some((key, defs)) = maps else { return self.loaded.maps.clone() };
        let others = self.loaded.maps.iter().filter(|(k, _)| *k != key).cloned();
        let new = (!defs.is_empty()).then_some((key, defs));
        new.into_iter().chain(others).take(MAPS_KEPT).collect()
    }
}

/// A key of what decides a trace's maps as far as the command line says it, before the
/// script is compiled: the script's name and text and the options of the compile. Two
/// runs with one key usually make the same maps; when not, the maps made ahead are not
/// used (`runtime::premake`): a key is a guess, never trusted.
pub(super) fn plan_key(root: &crate::library::Root, opts: &crate::compile::Options) -> u32 {
    let options =
        format!("{:?} {:?} {} {:?} {:?}", opts.include, opts.sets, opts.otlp, opts.string_limit, opts.lowering);
    let text = [root.name.as_bytes(), b"\0", root.text.as_bytes(), b"\0", options.as_bytes()].concat();
    crate::gobin::crc32(&text)
}

/// Waits for the cache file being written on another thread, if any, and says if it
/// could not be written.
pub(crate) fn written() {
    if let Err(e) = crate::cache::written() {
        eprintln!("gtrace: {e} ({})", e.hint());
    }
}
