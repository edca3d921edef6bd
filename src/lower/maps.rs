//! The maps a script's programs use, with their object names and layouts: one per user
//! map, plus the entry-time table for `elapsed`, the event ring buffer, and per-CPU
//! scratch and zero buffers.

use crate::check::maps::{MapInfo, MapTable, MapValueTy};
use crate::check::{Checked, InstanceKind};
use crate::plan::{Field, MapKind, MapRole, MapSpec, MapValue};

/// How many keys a user map holds before updates fail, unless `--map-size` says
/// otherwise. Documented in docs/language.md.
pub const USER_MAP_ENTRIES: u32 = 16_384;
/// How many of each kind of in-flight state gtrace keeps beyond the goroutines' array
/// (frames.rs), unless `--map-size inflight=N` says otherwise: records of goroutines
/// with timed calls in flight whose array slot another goroutine holds, timed calls
/// deeper than a record holds (recursion), and parameters carried from entries to
/// returns. Each is a hash keyed by g pointers (with a depth, and the process), which
/// the Go runtime never frees (allgs only grows; a dead goroutine's g is reused by a
/// new one): so what they hold is bounded by the target's most goroutines at once (times its
/// depth), and nothing is evicted or deleted. They are not preallocated: room costs
/// 16 bytes of buckets a key until used. An entry that finds a table full is counted
/// and said (its call's return is not seen).
pub const INFLIGHT_ENTRIES: u32 = 262_144;
/// The most bytes (per CPU) a map keyed by the function alone may take as a per-CPU array,
/// allocated whole at load: past it (a hist() of 8 KiB over more than 518 functions) the
/// map is a hash that grows as functions are hit. Documented in docs/language.md.
pub const BY_FUNCTION_ARRAY_BYTES: u64 = 4 << 20;
/// The ring buffer of events, in bytes (a power of two multiple of the page size).
pub const EVENTS_BYTES: u32 = 1 << 22;
/// The ring buffer of a plan whose programs emit no event (the runtime drains it all the
/// same): 64 KiB, a power-of-two multiple of every page size Linux uses (4, 16 and
/// 64 KiB), where 4 MiB would be mapped whole into gtrace's memory, twice (8 MB of its
/// RSS, as much as the rest of a trace of Caddy).
pub const EVENTS_BYTES_UNUSED: u32 = 1 << 16;

pub const EVENTS: &str = "events";
pub const GOROUTINES: &str = "goroutines";
pub const GOROUTINES_SPILL: &str = "goroutines_spill";
pub const FRAMES: &str = "frames";
pub const CARRIED: &str = "carried";
pub const SCRATCH: &str = "scratch";
pub const ZEROS: &str = "zeros";
pub const SELF_VARS: &str = "self_vars";
/// `self` variables of live goroutines (freed when a goroutine exits): (goroutine,
/// variable) pairs, unless `--map-size self=N` says otherwise. Hash maps are not
/// preallocated, so room that is not used costs only the table's buckets (16 bytes a
/// key of room).
pub const SELF_ENTRIES: u32 = 262_144;
/// The largest `--map-size`: a hash table's buckets (16 bytes each, as many as its keys
/// rounded up to a power of two) are allocated when it is created.
pub const MAX_MAP_SIZE: u32 = 1 << 26;

/// The most bytes a per-CPU user map may take (its keys times its value size times the
/// CPUs) to be preallocated. Not preallocated, a new key's per-CPU value is allocated in
/// the probe, which cannot wait: the kernel takes it from a few kept ready per CPU,
/// refilled behind it from the percpu allocator's populated pages, and a burst of new
/// keys finds none (ENOMEM, counted). Preallocated, every value exists from the start.
pub const PREALLOC_BYTES: u64 = 64 << 20;

/// The most keys of values of `value_size` bytes a per-CPU map may hold on `cpus` CPUs
/// and be preallocated (0 when the CPUs are unknown).
pub fn preallocated_keys(value_size: u32, cpus: u32) -> u64 {
    if cpus == 0 {
        return 0;
    }
    PREALLOC_BYTES / (u64::from(value_size.next_multiple_of(8)) * u64::from(cpus))
}

/// What the kernel's hash table adds to each element's key and value (`struct
/// htab_elem`: its list node, a free-list link and the hash, 48 bytes on 64-bit hosts).
pub const HTAB_ELEM_BYTES: u64 = 48;

/// Whether a plain (not per-CPU) hash of `entries` keys of `key_size` and values of
/// `value_size` bytes is preallocated: when all of it fits `PREALLOC_BYTES` (the default
/// 16,384 keys of a start time by a pointer take 1 MiB). Preallocated, an update takes an
/// element from a per-CPU free list and a delete gives it back; not preallocated, each new
/// key is allocated in the probe and each delete freed after a grace period: on this
/// project's loaded VM `@t[req] = nsecs` at echo's every request (a new key each time)
/// cost 1.4 us of eBPF a run, 0.77 preallocated, against 0.13 for the empty program (the
/// kernel's run_time_ns / run_cnt, issue 19; with a delete at each request's end, as
/// `gtrace http` does, the two were within the host's noise).
pub fn hash_preallocated(key_size: u32, value_size: u32, entries: u32) -> bool {
    let element = HTAB_ELEM_BYTES + u64::from(key_size.next_multiple_of(8)) + u64::from(value_size.next_multiple_of(8));
    u64::from(entries) * element <= PREALLOC_BYTES
}

/// The most bytes a per-CPU map of large values (a `hist`'s 8 KB) takes preallocated
/// when no `--map-size` names it: its default size shrinks to what fits (2,072 keys of
/// histograms on 2 CPUs), never under `MIN_PREALLOCATED_KEYS`.
pub const LARGE_DEFAULT_BYTES: u64 = 32 << 20;
/// Fewer keys than this and a large-valued map keeps the default size, not preallocated.
pub const MIN_PREALLOCATED_KEYS: u64 = 256;

/// The size of a per-CPU user map no `--map-size` names: the default, or for values too
/// large to preallocate at the default (a `hist`), as many keys as `LARGE_DEFAULT_BYTES`
/// preallocates on `cpus` CPUs when that is at least `MIN_PREALLOCATED_KEYS`. Not
/// preallocated, a burst of new keys finds no memory ready in the probe (ENOMEM:
/// counted and said, but lost); preallocated, a key past the size is refused as full,
/// said with the `--map-size` that holds more.
pub fn default_percpu_entries(value_size: u32, cpus: u32) -> u32 {
    if u64::from(USER_MAP_ENTRIES) <= preallocated_keys(value_size, cpus) || cpus == 0 {
        return USER_MAP_ENTRIES;
    }
    let keys = LARGE_DEFAULT_BYTES / (u64::from(value_size.next_multiple_of(8)) * u64::from(cpus));
    if keys < MIN_PREALLOCATED_KEYS {
        return USER_MAP_ENTRIES;
    }
    keys.min(u64::from(USER_MAP_ENTRIES)) as u32
}

/// `--map-size`: how many keys maps hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapSizes {
    /// `--map-size N`: every user map.
    pub all: Option<u32>,
    /// `--map-size @NAME=N`: one map (`NAME` without the `@`; empty for `@`).
    pub maps: Vec<(String, u32)>,
    /// `--map-size self=N`: the table of `self` variables.
    pub self_vars: Option<u32>,
    /// `--map-size inflight=N`: the tables of calls in flight.
    pub inflight: Option<u32>,
}

/// One `--map-size` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapSize {
    All(u32),
    Map { name: String, entries: u32 },
    SelfVars(u32),
    Inflight(u32),
}

impl MapSize {
    /// `N`, `@NAME=N`, `@=N`, `self=N` or `inflight=N`; N may have `_` between digits.
    pub fn parse(text: &str) -> Result<MapSize, String> {
        let number = |n: &str| -> Result<u32, String> {
            let digits: String = n.chars().filter(|c| *c != '_').collect();
            let v: u64 = digits.parse().map_err(|_| format!("`{n}` is not a number of keys"))?;
            if v == 0 || v > u64::from(MAX_MAP_SIZE) {
                return Err(format!("a map holds 1 to {MAX_MAP_SIZE} keys, not {n}"));
            }
            Ok(v as u32)
        };
        match text.split_once('=') {
            None => number(text).map(MapSize::All),
            Some(("self", n)) => number(n).map(MapSize::SelfVars),
            Some(("inflight", n)) => number(n).map(MapSize::Inflight),
            Some((map, n)) => match map.strip_prefix('@') {
                Some(name) if name.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                    Ok(MapSize::Map { name: name.to_string(), entries: number(n)? })
                }
                _ => Err(format!("`{map}` is not a map: write @NAME=N, self=N, inflight=N, or just N for every map")),
            },
        }
    }
}

impl MapSizes {
    pub fn from_args(args: &[MapSize]) -> MapSizes {
        let mut sizes = MapSizes::default();
        for a in args {
            match a {
                MapSize::All(n) => sizes.all = Some(*n),
                MapSize::Map { name, entries } => sizes.maps.push((name.clone(), *entries)),
                MapSize::SelfVars(n) => sizes.self_vars = Some(*n),
                MapSize::Inflight(n) => sizes.inflight = Some(*n),
            }
        }
        sizes
    }

    /// How many keys the user map `@name` holds (the last `@name=N` wins).
    pub fn of_map(&self, name: &str) -> u32 {
        self.given(name).unwrap_or(USER_MAP_ENTRIES)
    }

    /// The size `--map-size` gives the user map `@name`, if it names one.
    fn given(&self, name: &str) -> Option<u32> {
        let named = self.maps.iter().rev().find(|(n, _)| n == name).map(|(_, v)| *v);
        named.or(self.all)
    }

    pub fn of_self(&self) -> u32 {
        self.self_vars.unwrap_or(SELF_ENTRIES)
    }

    pub fn of_inflight(&self) -> u32 {
        self.inflight.unwrap_or(INFLIGHT_ENTRIES)
    }

    /// The `@NAME=N` that name no map of `plan`.
    pub fn unknown(&self, plan: &crate::plan::Plan) -> Vec<String> {
        let known = |n: &str| plan.maps.iter().any(|m| matches!(&m.role, MapRole::User { name, .. } if name == n));
        self.maps.iter().filter(|(n, _)| !known(n)).map(|(n, _)| format!("@{n}")).collect()
    }
}

/// A user map as the programs see it.
#[derive(Clone, Debug)]
pub struct UserMap {
    pub object_name: String,
    pub key_fields: Vec<Field>,
    pub key_size: u32,
    pub value: MapValueTy,
    /// A per-CPU array indexed by the function (`MapInfo::by_function`).
    pub by_function: bool,
    /// A per-CPU array of one element: a map without keys (`MapInfo::single`).
    pub single: bool,
    /// The map of its exemplars (a `hist()` updated where spans are made).
    pub exemplars: Option<String>,
    /// Its array of slots, when its keys are kept there first (slotted.rs).
    pub slots: Option<Slots>,
    /// A hash whose elements are deleted while the probes run (`delete`, `take`,
    /// `clear`): the kernel may give a deleted element to another key at once, so a
    /// program preempted between its lookup and its update could add to that key's
    /// value. Its updates keep the preemption guard (guard.rs), which leaves that
    /// window the nanoseconds between two instructions, not a preemption's length.
    pub freed: bool,
}

/// A private map's array of slots (slotted.rs): its object name, the map's name (as
/// the script writes it, without `@`), and 2^bits slots.
#[derive(Clone, Debug)]
pub struct Slots {
    pub object_name: String,
    pub name: String,
    pub bits: u32,
}

#[derive(Debug, Default)]
pub struct Maps {
    pub user: std::collections::BTreeMap<String, UserMap>,
    pub specs: Vec<MapSpec>,
    pub zeros_size: u32,
    /// The goroutines' records hold panic state (the script has `on panic` probes).
    pub records_with_panics: bool,
}

impl Maps {
    /// The maps of `table` for a plan of `functions` functions; with `records`, the
    /// goroutines' records of timed calls (of that many bytes) and the deep frames.
    pub fn new(table: &MapTable, records: Option<u32>, functions: usize) -> Maps {
        let mut maps = Maps::default();
        for (i, (name, info)) in table.maps.iter().enumerate() {
            maps.add_user(format!("m{i}"), name, info, table, functions);
        }
        if let Some(size) = records {
            maps.add_goroutine_records(size);
        }
        maps.specs.push(MapSpec {
            object_name: EVENTS.into(),
            kind: MapKind::Ringbuf,
            key_size: 0,
            value_size: 0,
            max_entries: EVENTS_BYTES,
            role: MapRole::Events,
        });
        if maps.zeros_size > 0 {
            maps.specs.push(MapSpec {
                object_name: ZEROS.into(),
                kind: MapKind::PercpuArray,
                key_size: 4,
                value_size: maps.zeros_size,
                max_entries: 1,
                role: MapRole::Scratch,
            });
        }
        maps
    }

    /// The script's map `name`, as object `object_name`: its kind (a per-CPU array when
    /// it has no keys or only the function, a hash otherwise), key layout and value.
    fn add_user(&mut self, object_name: String, name: &str, info: &MapInfo, table: &MapTable, functions: usize) {
        let mut key_fields = Vec::new();
        let mut offset = 0;
        for k in &info.keys {
            key_fields.push(Field { offset, ty: k.value_type() });
            offset += k.record_size();
        }
        // A map without keys has one 8-byte zero key; one keyed by the function alone
        // is a per-CPU array indexed by it (no hashing, no insertion: the verifier
        // inlines the lookup), sized once every function is known (`size_arrays`);
        // an aggregation without keys, a per-CPU array of one element.
        let array_bytes = match &info.value {
            MapValueTy::Agg { agg, .. } => u64::from(agg.value_size()) * functions.max(1) as u64,
            MapValueTy::Plain(_) => 0,
        };
        let by_function = info.by_function(table.deleted.contains(name))
            && !table.func_dictionaries
            && array_bytes <= BY_FUNCTION_ARRAY_BYTES;
        let single = info.single(table.deleted.contains(name));
        let key_size = if by_function || single { 4 } else { offset.max(8) };
        let (kind, value_size, value) = match &info.value {
            MapValueTy::Agg { agg, of } if by_function || single => {
                (MapKind::PercpuArray, agg.value_size(), MapValue::Agg { agg: *agg, of: of.value_type() })
            }
            MapValueTy::Agg { agg, of } => {
                self.zeros_size = self.zeros_size.max(agg.value_size());
                (MapKind::PercpuHash, agg.value_size(), MapValue::Agg { agg: *agg, of: of.value_type() })
            }
            MapValueTy::Plain(t) => (MapKind::Hash, t.record_size(), MapValue::Plain(t.value_type())),
        };
        self.specs.push(MapSpec {
            object_name: object_name.clone(),
            kind,
            key_size,
            value_size,
            max_entries: USER_MAP_ENTRIES,
            role: MapRole::User {
                name: name.to_string(),
                keys: key_fields.clone(),
                key_names: info.key_names.iter().map(|n| n.name.clone()).collect(),
                value,
                preallocated: false,
            },
        });
        self.user.insert(
            name.to_string(),
            UserMap {
                object_name,
                key_fields,
                key_size,
                value: info.value.clone(),
                by_function,
                single,
                exemplars: None,
                slots: None,
                freed: !(by_function || single) && (table.deleted.contains(name) || table.cleared.contains(name)),
            },
        );
    }

    /// Keeps the keys of each private map that only probes use by one element, keyed by
    /// one 8-byte value (a pointer) and holding 8-byte numbers, in an array of slots
    /// first, its hash the spill (slotted.rs), sized by `sizes`: 2^bits slots, the
    /// largest power of two not over the map's size (at most 2^`slotted::MAX_BITS`), and
    /// the spill its size, so that it never refuses a key it would have held as a hash.
    /// A library's maps and a user's alike: each operation holds its key's slot's lock
    /// (slotted.rs), so one key's operations at once on several CPUs are exact.
    pub fn add_slots(&mut self, table: &MapTable, sizes: &MapSizes) {
        for (name, info) in &table.maps {
            if !slotted(name, info, table.whole.contains(name)) {
                continue;
            }
            let Some(um) = self.user.get_mut(name) else { continue };
            let slots = Slots {
                object_name: format!("{}_slots", um.object_name),
                name: name.clone(),
                bits: super::slotted::slot_bits(sizes.of_map(name)),
            };
            self.specs.push(MapSpec {
                object_name: slots.object_name.clone(),
                kind: MapKind::Array,
                key_size: 4,
                value_size: super::slotted::SLOT_BYTES,
                max_entries: 1 << slots.bits,
                role: MapRole::Slots { of: um.object_name.clone() },
            });
            um.slots = Some(slots);
        }
    }

    /// The goroutines' records of timed calls (`size` bytes each: an array slot by a
    /// hash of g and the process, a hash by (g, process) for the rest) and their deep
    /// frames (frames.rs), keyed by (g, depth, process).
    fn add_goroutine_records(&mut self, size: u32) {
        self.records_with_panics = size > super::layout::RECORD;
        self.specs.push(MapSpec {
            object_name: GOROUTINES.into(),
            kind: MapKind::Array,
            key_size: 4,
            value_size: size,
            max_entries: 1 << super::layout::SLOT_BITS,
            role: MapRole::Goroutines,
        });
        self.specs.push(MapSpec {
            object_name: GOROUTINES_SPILL.into(),
            kind: MapKind::Hash,
            key_size: super::layout::KEY,
            value_size: size,
            max_entries: INFLIGHT_ENTRIES,
            role: MapRole::Goroutines,
        });
        self.specs.push(MapSpec {
            object_name: FRAMES.into(),
            kind: MapKind::Hash,
            key_size: 16,
            value_size: super::layout::FRAME as u32,
            max_entries: INFLIGHT_ENTRIES,
            role: MapRole::Frames,
        });
        self.zeros_size = self.zeros_size.max(size);
    }

    /// The parameters carried from entries to returns (carry.rs): records of `size`
    /// bytes keyed by (g, frame index, process).
    pub fn add_carried(&mut self, size: u32) {
        self.specs.push(MapSpec {
            object_name: CARRIED.into(),
            kind: MapKind::Hash,
            key_size: 16,
            value_size: size.max(8),
            max_entries: INFLIGHT_ENTRIES,
            role: MapRole::Carried,
        });
    }

    /// The exemplars of the `hist()` map `@name`: a hash keyed as it is (a u32 for a map
    /// that is an array), one `layout::EXEMPLAR` a key.
    pub fn add_exemplars(&mut self, name: &str) {
        let Some(um) = self.user.get_mut(name) else { return };
        let object_name = format!("{}_ex", um.object_name);
        um.exemplars = Some(object_name.clone());
        let key_size = if um.by_function || um.single { 4 } else { um.key_size.max(1) };
        let of = um.object_name.clone();
        self.specs.push(MapSpec {
            object_name,
            kind: MapKind::Hash,
            key_size,
            value_size: super::layout::EXEMPLAR,
            max_entries: USER_MAP_ENTRIES,
            role: MapRole::Exemplars { of },
        });
    }

    /// The `self` variables: keyed by (g, variable index, process), each value the size
    /// of the largest variable's record.
    pub fn add_self_vars(&mut self, value_size: u32) {
        self.specs.push(MapSpec {
            object_name: SELF_VARS.into(),
            kind: MapKind::Hash,
            key_size: 16,
            value_size: value_size.max(8),
            max_entries: SELF_ENTRIES,
            role: MapRole::SelfVars,
        });
    }

    /// Gives the user maps, the `self` table and the tables of calls in flight the sizes
    /// `sizes` asks for; a map indexed by function holds one element per function of the
    /// plan (`functions`), one without keys one element. A per-CPU hash whose every value over `cpus` CPUs fits
    /// `PREALLOC_BYTES` is preallocated, and so is a plain hash that fits it whole.
    pub fn apply_sizes(&mut self, sizes: &MapSizes, functions: usize, cpus: u32) {
        for spec in &mut self.specs {
            if let MapRole::User { name, preallocated, .. } = &mut spec.role {
                if spec.kind == MapKind::PercpuHash {
                    spec.max_entries = match sizes.given(name) {
                        Some(n) => n,
                        None => default_percpu_entries(spec.value_size, cpus),
                    };
                    *preallocated = u64::from(spec.max_entries) <= preallocated_keys(spec.value_size, cpus);
                    continue;
                }
                if spec.kind == MapKind::Hash {
                    spec.max_entries = sizes.of_map(name);
                    *preallocated = hash_preallocated(spec.key_size, spec.value_size, spec.max_entries);
                    continue;
                }
            }
            match &spec.role {
                MapRole::User { keys, .. } if spec.kind == MapKind::PercpuArray => {
                    spec.max_entries = if keys.is_empty() { 1 } else { functions.max(1) as u32 }
                }
                MapRole::User { name, .. } => spec.max_entries = sizes.of_map(name),
                MapRole::SelfVars => spec.max_entries = sizes.of_self(),
                MapRole::Goroutines | MapRole::Frames | MapRole::Carried if spec.kind == MapKind::Hash => {
                    spec.max_entries = sizes.of_inflight()
                }
                _ => {}
            }
        }
    }

    /// The ring buffer at its least, for a plan whose programs emit no event.
    pub fn shrink_events(&mut self) {
        for spec in self.specs.iter_mut().filter(|s| matches!(s.role, MapRole::Events)) {
            spec.max_entries = EVENTS_BYTES_UNUSED;
        }
    }

    /// The per-CPU array stack slots spill to (lower/ir) when a program's values live at
    /// once need more than its 512 bytes of stack: one element of `size` bytes.
    pub fn add_spill(&mut self, size: u32) {
        self.specs.push(MapSpec {
            object_name: super::ir::SPILL.into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: size.max(8),
            max_entries: 1,
            role: MapRole::Scratch,
        });
    }

    /// The per-CPU scratch buffer events are built in: added last, once every program
    /// is generated and the largest event is known.
    pub fn add_scratch(&mut self, size: u32) {
        self.specs.push(MapSpec {
            object_name: SCRATCH.into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: size.max(8),
            max_entries: 1,
            role: MapRole::Scratch,
        });
    }
}

/// Whether the map `name` is kept in slots: private (`@_name`), never named whole
/// (`print(@_m)`, `clear(@_m)`: the spill alone is not the map), one key of 8 bytes (a
/// pointer or an integer) and plain 8-byte numbers (an integer, a duration, a pointer).
fn slotted(name: &str, info: &MapInfo, whole: bool) -> bool {
    use crate::check::ty::Ty;
    let number = |t: &Ty| matches!(t, Ty::Int { .. } | Ty::Duration | Ty::Pointer { .. }) && t.record_size() == 8;
    let key = matches!(info.keys.as_slice(), [k @ (Ty::Int { .. } | Ty::Pointer { .. })] if k.record_size() == 8);
    name.starts_with('_') && !whole && key && matches!(&info.value, MapValueTy::Plain(t) if number(t))
}

/// The object name of the `PanicFunctions` map of `on panic` instance `i`.
pub(super) fn panic_functions_name(i: usize) -> String {
    format!("panic_fns{i}")
}

/// The `PanicFunctions` map of each `on panic` instance: which functions of
/// `plan.functions` it reports.
pub(super) fn panic_functions_maps(checked: &Checked, functions: &[String]) -> Vec<MapSpec> {
    let panics = checked.instances.iter().enumerate().filter(|(_, inst)| inst.kind == InstanceKind::Panic);
    let index: std::collections::HashMap<&str, u32> =
        functions.iter().enumerate().map(|(i, f)| (f.as_str(), i as u32)).collect();
    panics
        .map(|(i, inst)| {
            // `new_plan` put every function of every instance in `functions`.
            let index = |name: &str| *index.get(name).expect("an instance's function is in the plan");
            MapSpec {
                object_name: panic_functions_name(i),
                kind: MapKind::Hash,
                key_size: 4,
                value_size: 4,
                max_entries: inst.functions.len().max(1) as u32,
                role: MapRole::PanicFunctions { functions: inst.functions.iter().map(|f| index(&f.name)).collect() },
            }
        })
        .collect()
}
