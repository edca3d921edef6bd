//! Where the Go runtime keeps a map's entries, for `m[k]` (src/lower/gomap.rs): the
//! headers' offsets that a lookup or a scan of the map reads. Go 1.17 to 1.23 keep buckets
//! (runtime/map.go: `hmap` with `B`, `flags`, `hash0`, `buckets`, `oldbuckets`); Go 1.24
//! and later swiss tables (internal/runtime/maps: `Map` with `seed`, `dirPtr`, `dirLen`,
//! `globalShift`; `table` with `groups`, a `groupsReference` of `data` and `lengthMask`).
//! The offsets come from DWARF, else from a table by Go version (measured on go1.17.13,
//! go1.23.12, go1.24.13, go1.26 and go1.27.4 builds; tests/gomaps.rs compares it with
//! DWARF). The slots' own layout (keys, elements, control bytes) follows from the key
//! and element types (lower/mapwalk.rs).

use crate::gobin::{go_minor, Target};
use serde::{Deserialize, Serialize};

/// The offsets a map scan reads, by layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MapLayout {
    /// runtime.hmap (Go 1.17 to 1.23); `hash0` is the map's hash seed (a uint32).
    Buckets { flags: u32, b: u32, hash0: u32, buckets: u32, oldbuckets: u32 },
    /// internal/runtime/maps (Go 1.24 and later): `Map.seed`, `Map.dirPtr`,
    /// `Map.dirLen`, `Map.globalShift`, and in a `table` its groups' `data` and
    /// `lengthMask`.
    Swiss { seed: u32, dir_ptr: u32, dir_len: u32, global_shift: u32, groups_data: u32, groups_mask: u32 },
}

/// The layout for Go 1.`minor` without DWARF; None for releases outside 1.17 to 1.27.
pub fn by_version(minor: u32) -> Option<MapLayout> {
    match minor {
        17..=23 => Some(MapLayout::Buckets { flags: 8, b: 9, hash0: 12, buckets: 16, oldbuckets: 24 }),
        24..=27 => Some(MapLayout::Swiss {
            seed: 8,
            dir_ptr: 16,
            dir_len: 24,
            global_shift: 33,
            groups_data: 16,
            groups_mask: 24,
        }),
        _ => None,
    }
}

impl Target {
    /// The map layout of this binary: from DWARF, else by Go version; None when neither
    /// knows it.
    pub fn map_layout(&self) -> Option<MapLayout> {
        self.map_layout_from_dwarf().or_else(|| by_version(go_minor(self.go_version()?)?))
    }

    /// The map layout gtrace assumes for binaries of Go `version` (`go1.23.12`) without
    /// DWARF.
    pub fn map_layout_for_version(version: &str) -> Option<MapLayout> {
        by_version(go_minor(version)?)
    }

    /// The map layout as DWARF gives it: the kind of map the Go version has is looked
    /// up first (a type DWARF lacks is looked for in every unit).
    pub fn map_layout_from_dwarf(&self) -> Option<MapLayout> {
        let swiss_first = self.go_version().and_then(go_minor).is_some_and(|m| m >= 24);
        let mut state = self.dwarf.borrow_mut();
        let dwarf = Self::dwarf_mut(&mut state, self.dwarf_source().0, self.dwarf_source().1).ok()??;
        match swiss_first {
            true => swiss_from(dwarf).or_else(|| buckets_from(dwarf)),
            false => buckets_from(dwarf).or_else(|| swiss_from(dwarf)),
        }
    }
}

fn member_at(members: &[crate::gobin::dwarf::types::Member], name: &str) -> Option<u32> {
    members.iter().find(|m| m.name == name).and_then(|m| u32::try_from(m.offset).ok())
}

/// Go 1.17 to 1.23's maps: `runtime.hmap`.
fn buckets_from(dwarf: &mut crate::gobin::dwarf::DwarfInfo) -> Option<MapLayout> {
    let at = member_at;
    let h = dwarf.struct_members("runtime", "runtime.hmap").ok()??;
    Some(MapLayout::Buckets {
        flags: at(&h, "flags")?,
        b: at(&h, "B")?,
        hash0: at(&h, "hash0")?,
        buckets: at(&h, "buckets")?,
        oldbuckets: at(&h, "oldbuckets")?,
    })
}

/// Go 1.24's swiss tables: `internal/runtime/maps`.
fn swiss_from(dwarf: &mut crate::gobin::dwarf::DwarfInfo) -> Option<MapLayout> {
    let at = member_at;
    const PKG: &str = "internal/runtime/maps";
    let map = dwarf.struct_members(PKG, "internal/runtime/maps.Map").ok()??;
    let table = dwarf.struct_members(PKG, "internal/runtime/maps.table").ok()??;
    let groups = dwarf.struct_members(PKG, "internal/runtime/maps.groupsReference").ok()??;
    let base = at(&table, "groups")?;
    Some(MapLayout::Swiss {
        seed: at(&map, "seed")?,
        dir_ptr: at(&map, "dirPtr")?,
        dir_len: at(&map, "dirLen")?,
        global_shift: at(&map, "globalShift")?,
        groups_data: base + at(&groups, "data")?,
        groups_mask: base + at(&groups, "lengthMask")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_before_go_1_24_swiss_tables_after() {
        assert!(matches!(by_version(17), Some(MapLayout::Buckets { buckets: 16, .. })));
        assert!(matches!(by_version(23), Some(MapLayout::Buckets { .. })));
        assert!(matches!(by_version(24), Some(MapLayout::Swiss { dir_len: 24, .. })));
        assert_eq!(by_version(16), None);
        assert_eq!(by_version(40), None);
    }
}
