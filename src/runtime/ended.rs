//! Forgetting what the programs keep for processes that have ended (under -b, which
//! traces every process of a file with one set of maps): the hash maps keyed by a
//! goroutine and its process (lower/layout.rs: the tgid at `K_TGID` of a 16-byte key),
//! that is the goroutines' spilled records of calls in flight, their deeper frames, the
//! parameters carried to returns and `self` variables. Nothing ever frees a goroutine's
//! record while its process runs (the runtime reuses a dead goroutine's g, with its
//! record: lower/frames.rs), so without this, processes that come and go fill those
//! tables and later calls find no room. A delete is one atomic syscall, and no program
//! touches a key of an ended process (unless its pid is taken again by a new process of
//! the same file before the key is read: then the key is kept, as if alive). The array
//! slots such processes claimed stay claimed (a program claims a slot by a
//! compare-and-exchange that no syscall can take part in): later goroutines whose slot
//! is held keep their records in the hash, as any goroutine whose slot is taken does.

use super::error::RuntimeError;
use super::loader::Loaded;
use crate::plan::{MapKind, MapRole};
use std::collections::HashMap;

use crate::lower::layout::{KEY, K_TGID};

impl Loaded {
    /// Deletes every key of a process for which `ended(tgid)` is true from the hash maps
    /// keyed by goroutine (each tgid asked once); keys of process 0 (-p and -c, which
    /// trace one process and key it 0) are never asked about. Returns how many keys went.
    pub fn forget_ended_processes(&self, ended: impl Fn(u32) -> bool) -> Result<u64, RuntimeError> {
        let mut asked: HashMap<u32, bool> = HashMap::new();
        let mut forgotten = 0;
        let keyed_by_goroutine = |role: &MapRole| {
            matches!(role, MapRole::Goroutines | MapRole::Frames | MapRole::Carried | MapRole::SelfVars)
        };
        for map in self.maps.values() {
            let spec = &map.spec;
            if !keyed_by_goroutine(&spec.role) || spec.kind != MapKind::Hash || spec.key_size != KEY {
                continue;
            }
            for key in map.keys()? {
                let at = K_TGID as usize;
                let Some(tgid) = key.get(at..at + 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap_or([0; 4]))) else {
                    continue;
                };
                if tgid != 0 && *asked.entry(tgid).or_insert_with(|| ended(tgid)) && map.delete(&key)? {
                    forgotten += 1;
                }
            }
        }
        Ok(forgotten)
    }
}
