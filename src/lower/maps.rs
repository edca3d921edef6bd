//! The maps a script's programs use, with their object names and layouts: one per user
//! map, plus the entry-time table for `elapsed`, the event ring buffer, and per-CPU
//! scratch and zero buffers.

use crate::check::maps::{MapTable, MapValueTy};
use crate::plan::{Field, MapKind, MapRole, MapSpec, MapValue};

/// How many keys a user map holds before updates fail. Documented in docs/language.md.
pub const USER_MAP_ENTRIES: u32 = 16_384;
/// Entry timestamps of calls in flight (LRU: calls that never return are evicted).
pub const ENTRY_TIME_ENTRIES: u32 = 65_536;
/// The ring buffer of events, in bytes (a power of two multiple of the page size).
pub const EVENTS_BYTES: u32 = 1 << 22;

pub const EVENTS: &str = "events";
pub const ENTRY_TIMES: &str = "entry_times";
pub const SCRATCH: &str = "scratch";
pub const ZEROS: &str = "zeros";
pub const SELF_VARS: &str = "self_vars";
/// `self` variables of live goroutines (freed when a goroutine exits).
pub const SELF_ENTRIES: u32 = 65_536;

/// A user map as the programs see it.
#[derive(Clone, Debug)]
pub struct UserMap {
    pub object_name: String,
    pub key_fields: Vec<Field>,
    pub key_size: u32,
    pub value: MapValueTy,
}

#[derive(Debug, Default)]
pub struct Maps {
    pub user: std::collections::BTreeMap<String, UserMap>,
    pub specs: Vec<MapSpec>,
    pub zeros_size: u32,
}

impl Maps {
    pub fn new(table: &MapTable, with_entry_times: bool) -> Maps {
        let mut maps = Maps::default();
        for (i, (name, info)) in table.maps.iter().enumerate() {
            let object_name = format!("m{i}");
            let mut key_fields = Vec::new();
            let mut offset = 0;
            for k in &info.keys {
                key_fields.push(Field { offset, ty: k.value_type() });
                offset += k.record_size();
            }
            // A map without keys has one 8-byte zero key.
            let key_size = offset.max(8);
            let (kind, value_size, value) = match &info.value {
                MapValueTy::Agg { agg, of } => {
                    maps.zeros_size = maps.zeros_size.max(agg.value_size());
                    (MapKind::PercpuHash, agg.value_size(), MapValue::Agg { agg: *agg, of: of.value_type() })
                }
                MapValueTy::Plain(t) => (MapKind::Hash, t.record_size(), MapValue::Plain(t.value_type())),
            };
            maps.specs.push(MapSpec {
                object_name: object_name.clone(),
                kind,
                key_size,
                value_size,
                max_entries: USER_MAP_ENTRIES,
                role: MapRole::User {
                    name: name.clone(),
                    keys: key_fields.clone(),
                    key_names: info.key_names.iter().map(|n| n.name.clone()).collect(),
                    value,
                },
            });
            maps.user.insert(name.clone(), UserMap { object_name, key_fields, key_size, value: info.value.clone() });
        }
        if with_entry_times {
            maps.specs.push(MapSpec {
                object_name: ENTRY_TIMES.into(),
                kind: MapKind::LruHash,
                key_size: 16,
                value_size: 8,
                max_entries: ENTRY_TIME_ENTRIES,
                role: MapRole::EntryTimes,
            });
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

    /// The `self` variables: keyed by (goid, variable index), each value the size of the
    /// largest variable's record.
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
