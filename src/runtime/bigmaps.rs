//! The plan's large preallocated per-CPU hash maps created on threads of their own while
//! aya creates the others: the kernel allocates and zeroes every element of such a map
//! at `BPF_MAP_CREATE` (tens of milliseconds for `gtrace http`'s, one `pcpu_alloc` a
//! key), and on several CPUs they are made side by side. The kernel takes one lock for
//! each per-CPU allocation (`pcpu_alloc_mutex`), on which a second thread spins part of
//! the time, but the zeroing is outside it: `gtrace http` on Caddy attached 10 ms sooner
//! (paired median of 21) with a thread a map than with one thread for both
//! (docs/performance.md).
//!
//! aya 0.14 creates every map of an object as it loads it and has no way to be given
//! one made elsewhere. So aya makes each of these maps with one element (a placeholder:
//! the same type, key and value, at no cost), and once it has loaded the object the map
//! made on a thread takes the placeholder's fd number (`dup3`, which closes the
//! placeholder): the fd aya holds, and that its programs' instructions name, is then the
//! full map's. Nothing has loaded a program before that.
//!
//! On a trace the cache knows, they are made earlier still (`premake`): from the
//! description of the last object of the same script the cache kept, as soon as the
//! cache is read, so that the kernel's zeroing overlaps the compile; `start` takes them
//! only if the object's large maps are exactly those (every field of every definition,
//! in order), and otherwise closes them and makes its own.

pub use crate::object::MapDef;
use aya::maps::{MapData, MapError};
use aya::{Ebpf, EbpfLoader};
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A per-CPU hash of at least this many keys is made on a thread: its cost is about one
/// per-CPU allocation a key (`@http_requests`, 16,384 keys: 21 ms at load 5), whatever
/// its value size (`@http_latency`, 2,072 keys of 8 KiB: 13 ms).
const MIN_KEYS: u32 = 1024;
/// At most this many threads (and no more than the CPUs).
const MAX_THREADS: usize = 4;

/// The maps being made on threads, by name; each thread's in the order it makes them.
pub(super) struct Making {
    names: Vec<String>,
    threads: Vec<JoinHandle<Vec<(String, Result<MapData, MapError>)>>>,
    /// Set when the load has failed: a thread makes no more of its maps.
    stop: Arc<AtomicBool>,
}

/// Which of the object's maps are made on threads, by name: every preallocated per-CPU
/// hash of `MIN_KEYS` keys or more, largest first (its keys times its value size).
fn chosen(object: &aya_obj::Object) -> Vec<String> {
    let per_cpu_hash = aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_PERCPU_HASH as u32;
    let no_prealloc = aya_obj::generated::BPF_F_NO_PREALLOC;
    let mut big: Vec<(&String, u64)> = (object.maps.iter())
        .filter(|(_, m)| m.map_type() == per_cpu_hash && m.map_flags() & no_prealloc == 0)
        .filter(|(_, m)| m.max_entries() >= MIN_KEYS)
        .map(|(name, m)| (name, u64::from(m.max_entries()) * u64::from(m.value_size().max(8))))
        .collect();
    big.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    big.into_iter().map(|(name, _)| name.clone()).collect()
}

/// Starts making `object`'s large per-CPU hashes on threads (none when it has none, or
/// cannot be parsed: aya then makes every map, and says what is wrong with the object).
/// Maps made ahead from the cache's description (`premake`) are taken instead when they
/// are exactly these; else they are closed, and these are made now.
pub(super) fn start(object: &[u8]) -> Making {
    // A parse of its own, though aya parses the object again as it loads it: aya 0.14's
    // `EbpfLoader::load` takes bytes only (no entry point for an `Object` parsed before),
    // and the loader must be set up (`as_placeholders`) before it parses, so neither
    // parse can serve the other. Building these maps from the plan instead would be a
    // second account of them that must agree with the object's: this reads the object.
    let Ok(mut parsed) = aya_obj::Object::parse(object) else {
        return Making::none();
    };
    let names = chosen(&parsed);
    let maps: Vec<(String, aya_obj::Map)> =
        names.iter().filter_map(|name| Some((name.clone(), parsed.maps.remove(name)?))).collect();
    let defs: Option<Vec<MapDef>> = maps.iter().map(|(name, map)| def_of(name, map)).collect();
    let premade = PREMADE.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(premade) = premade {
        if defs.as_ref() == Some(&premade.defs) && !premade.defs.is_empty() {
            return premade.making;
        }
        // Not this object's maps: closed on a thread (joining waits for them to be made).
        let _ = std::thread::Builder::new().spawn(move || drop(premade));
    }
    spawn(maps)
}

/// Makes `maps` on threads (one a map, as many as CPUs and `MAX_THREADS` at most), the
/// largest first in turn to each thread.
fn spawn(maps: Vec<(String, aya_obj::Map)>) -> Making {
    let mut making = Making::none();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = maps.len().min(cpus.clamp(1, MAX_THREADS));
    let mut shares: Vec<Vec<(String, aya_obj::Map)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, map) in maps.into_iter().enumerate() {
        shares[i % threads].push(map);
    }
    for share in shares {
        let names: Vec<String> = share.iter().map(|(n, _)| n.clone()).collect();
        let stop = making.stop.clone();
        let spawned = std::thread::Builder::new().spawn(move || make(share, &stop));
        // A thread that cannot be started: aya makes its maps at their size.
        if let Ok(thread) = spawned {
            making.names.extend(names);
            making.threads.push(thread);
        }
    }
    making
}

/// The large maps made ahead of the object (`premake`), taken by `start` when the
/// object's are exactly these.
struct Premade {
    defs: Vec<MapDef>,
    making: Making,
}

static PREMADE: Mutex<Option<Premade>> = Mutex::new(None);

/// The definitions of `object`'s maps that `start` makes on threads, in its order: what
/// a run keeps (in the cache) for the next to `premake`. Empty when it has none or
/// cannot be parsed.
pub fn large_maps(object: &[u8]) -> Vec<MapDef> {
    let Ok(parsed) = aya_obj::Object::parse(object) else { return Vec::new() };
    let defs: Option<Vec<MapDef>> = chosen(&parsed).iter().map(|name| def_of(name, parsed.maps.get(name)?)).collect();
    defs.unwrap_or_default()
}

/// Starts making `defs` (the large maps a past run's object had, as the cache kept
/// them) on threads now, before the script is compiled: the kernel's zeroing of them
/// then overlaps the compile. `start` takes them if the compiled object's large maps are
/// exactly these (each definition equal, in the same order), else closes them: a
/// description that is wrong costs time only. Only maps `start` itself would make on
/// threads are made (a preallocated per-CPU hash of `MIN_KEYS` keys or more).
pub fn premake(defs: Vec<MapDef>) {
    let per_cpu_hash = aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_PERCPU_HASH as u32;
    let no_prealloc = aya_obj::generated::BPF_F_NO_PREALLOC;
    let fits = |d: &MapDef| d.map_type == per_cpu_hash && d.map_flags & no_prealloc == 0 && d.max_entries >= MIN_KEYS;
    if defs.is_empty() || !defs.iter().all(fits) {
        return;
    }
    super::loader::raise_memlock_limit();
    let making = spawn(defs.iter().map(|d| (d.name.clone(), legacy(d))).collect());
    let earlier = PREMADE.lock().unwrap_or_else(|e| e.into_inner()).replace(Premade { defs, making });
    drop(earlier);
}

/// `map`'s definition, when it is a legacy map as gtrace writes them (no inner map, not
/// pinned, no id): what `premake` can make again exactly.
fn def_of(name: &str, map: &aya_obj::Map) -> Option<MapDef> {
    let aya_obj::Map::Legacy(m) = map else { return None };
    let d = &m.def;
    let plain = m.inner_def.is_none() && d.id == 0 && d.pinning == aya_obj::maps::PinningType::None;
    plain.then(|| MapDef {
        name: name.to_string(),
        map_type: d.map_type,
        key_size: d.key_size,
        value_size: d.value_size,
        max_entries: d.max_entries,
        map_flags: d.map_flags,
    })
}

/// A legacy map of definition `d`, as the object's parse gives it.
fn legacy(d: &MapDef) -> aya_obj::Map {
    aya_obj::Map::Legacy(aya_obj::maps::LegacyMap {
        def: aya_obj::maps::bpf_map_def {
            map_type: d.map_type,
            key_size: d.key_size,
            value_size: d.value_size,
            max_entries: d.max_entries,
            map_flags: d.map_flags,
            ..Default::default()
        },
        inner_def: None,
        section_index: 0,
        section_kind: aya_obj::EbpfSectionKind::Maps,
        symbol_index: None,
        data: Vec::new(),
    })
}

/// Makes each map of `share` in turn, as aya would (`MapData::create`, no BTF: gtrace's
/// objects have legacy map definitions), until one is refused or `stop` is set.
fn make(share: Vec<(String, aya_obj::Map)>, stop: &AtomicBool) -> Vec<(String, Result<MapData, MapError>)> {
    let mut made = Vec::new();
    for (name, map) in share {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let result = MapData::create(map, &name, None);
        let refused = result.is_err();
        made.push((name, result));
        if refused {
            break;
        }
    }
    made
}

impl Making {
    fn none() -> Making {
        Making { names: Vec::new(), threads: Vec::new(), stop: Arc::new(AtomicBool::new(false)) }
    }

    /// Has aya make each of these maps with one element only (see the module's comment).
    pub(super) fn as_placeholders<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        for name in &self.names {
            loader.map_max_entries(name, 1);
        }
    }

    /// Waits for every thread; then, if aya loaded the object, puts each map made in
    /// place of its placeholder. On an error, aya's (the threads are told to stop), else
    /// the first map a thread was refused (larger maps first), every map made is closed.
    pub(super) fn finish(mut self, loaded: Result<Ebpf, aya::EbpfError>) -> Result<Ebpf, aya::EbpfError> {
        if loaded.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        let mut made: HashMap<String, MapData> = HashMap::new();
        let mut refused = None;
        for (name, result) in self.join() {
            match result {
                Ok(map) => {
                    made.insert(name, map);
                }
                Err(e) => refused = refused.or(Some(e)),
            }
        }
        // On an error `made` and aya's object are dropped here: their maps closed.
        let ebpf = loaded?;
        if let Some(e) = refused {
            return Err(aya::EbpfError::MapError(e));
        }
        for name in &self.names {
            let Some(map) = made.remove(name) else {
                // Its thread ended without making it (it panicked): said as a refusal.
                let io_error = std::io::Error::other("the thread creating it ended early");
                return Err(aya::EbpfError::MapError(MapError::CreateError { name: name.clone(), io_error }));
            };
            replace(&ebpf, name, &map)?;
        }
        Ok(ebpf)
    }

    /// Every thread's maps, made or refused, in the threads' order (each joined once).
    fn join(&mut self) -> Vec<(String, Result<MapData, MapError>)> {
        // A thread that panicked made nothing that is kept: the maps it had made were
        // dropped (closed) as it unwound.
        std::mem::take(&mut self.threads).into_iter().flat_map(|t| t.join().unwrap_or_default()).collect()
    }
}

/// On a way out that did not `finish` (an error before aya loaded, a panic): the
/// threads are told to stop and joined, and what they made is closed.
impl Drop for Making {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.join());
    }
}

/// Puts `map` in place of aya's placeholder `name`: the placeholder's fd number then
/// names `map` (close-on-exec, as every BPF fd), and the placeholder is closed. `map`'s
/// own fd is closed when it is dropped.
fn replace(ebpf: &Ebpf, name: &str, map: &MapData) -> Result<(), aya::EbpfError> {
    let refused = |io_error| aya::EbpfError::MapError(MapError::CreateError { name: name.to_string(), io_error });
    let placeholder = ebpf.map(name).and_then(super::uprobe_multi::map_fd).map(|fd| fd.as_raw_fd());
    let Some(placeholder) = placeholder else {
        return Err(refused(std::io::Error::from_raw_os_error(libc::ENOENT)));
    };
    // SAFETY: both are open fds this process owns (aya's placeholder, the map made);
    // dup3 makes the placeholder's number refer to the map made and closes what it named.
    let ret = unsafe { libc::dup3(map.fd().as_fd().as_raw_fd(), placeholder, libc::O_CLOEXEC) };
    if ret < 0 {
        return Err(refused(std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{write, BpfObject, MapDef};

    fn map(name: &str, map_type: u32, value_size: u32, max_entries: u32, map_flags: u32) -> MapDef {
        MapDef { name: name.into(), map_type, key_size: 8, value_size, max_entries, map_flags }
    }

    #[test]
    fn the_large_preallocated_per_cpu_hashes_are_chosen_largest_first() {
        // Map types by linux/bpf.h; flag 1 is BPF_F_NO_PREALLOC.
        let (hash, per_cpu_hash, per_cpu_array) = (1, 5, 6);
        let maps = vec![
            map("requests", per_cpu_hash, 8, 16_384, 0),
            map("latency", per_cpu_hash, 8096, 2072, 0),
            map("few", per_cpu_hash, 8, MIN_KEYS - 1, 0),
            map("grows", per_cpu_hash, 8, 16_384, 1),
            map("plain", hash, 8, 16_384, 0),
            map("array", per_cpu_array, 8, 16_384, 0),
        ];
        let object = write(&BpfObject { license: "GPL".into(), maps, programs: Vec::new() }).unwrap();
        let parsed = aya_obj::Object::parse(&object).unwrap();
        assert_eq!(chosen(&parsed), ["latency", "requests"]);
    }
}
