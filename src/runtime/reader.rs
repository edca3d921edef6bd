//! Reading user maps from another thread (the exporters': `--prometheus`, `--otlp`):
//! handles of their own on duplicated file descriptors of the same kernel maps, so a
//! scrape reads the kernel's current values beside the trace loop without sharing its
//! state. Reading a BPF map is a syscall on its fd, safe from any thread.

use super::error::RuntimeError;
use super::loader::Loaded;
use super::maps::{Entries, MapHandle};
use crate::plan::MapRole;
use aya::maps::MapData;
use std::collections::HashMap;
use std::os::fd::AsFd;

/// The user maps of a loaded object, readable from any thread.
pub struct MapReader {
    maps: HashMap<String, MapHandle>,
}

impl Loaded {
    /// Handles of every user map for another thread to read.
    pub fn map_reader(&self) -> Result<MapReader, RuntimeError> {
        let mut maps = HashMap::new();
        for (name, handle) in &self.maps {
            if !matches!(handle.spec.role, MapRole::User { .. } | MapRole::Exemplars { .. }) {
                continue;
            }
            maps.insert(name.clone(), duplicate(name, handle)?);
        }
        Ok(MapReader { maps })
    }
}

/// A handle of its own on the kernel map `handle` holds (a duplicated descriptor), for
/// another thread.
pub(super) fn duplicate(name: &str, handle: &MapHandle) -> Result<MapHandle, RuntimeError> {
    let os = |source| RuntimeError::Os { action: "duplicating a map's file descriptor", source };
    let fd = handle.data.fd().as_fd().try_clone_to_owned().map_err(os)?;
    let data = MapData::from_fd(fd).map_err(|e| RuntimeError::MapSyscall {
        map: name.to_string(),
        op: "BPF_OBJ_GET_INFO_BY_FD",
        source: std::io::Error::other(e),
    })?;
    Ok(MapHandle { spec: handle.spec.clone(), data })
}

impl MapReader {
    /// Every key of the user map `object_name` with its value bytes (one per possible
    /// CPU for a per-CPU map).
    pub fn entries(&self, object_name: &str) -> Result<Entries, RuntimeError> {
        let map = self.maps.get(object_name).ok_or_else(|| RuntimeError::NoSuchMap { map: object_name.to_string() })?;
        map.entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_can_move_to_another_thread() {
        fn send_and_sync<T: Send + Sync>() {}
        send_and_sync::<MapReader>();
    }
}
