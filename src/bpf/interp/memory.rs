//! The interpreter's writable memory: regions at made-up addresses (the stack, each
//! map's value, each hash element), the hashes' tables, the lookups made and the maps
//! each step touched.

use super::{map_index, InterpError, World, CTX, ELEMENTS, ELEMENT_SPAN, MAPS, MAP_SPAN, STACK_SIZE, STACK_TOP};
use std::collections::BTreeMap;

/// The machine's writable memory: the stack, then each map's value, then the hash
/// maps' elements; the lookups made.
#[derive(Clone)]
pub(super) struct Memory {
    pub(super) regions: Vec<(u64, Vec<u8>)>,
    pub(super) lookups: Vec<(String, Vec<u8>)>,
    /// Each hash map's elements (by its index in the world's maps): key, value address.
    pub(super) tables: BTreeMap<usize, BTreeMap<Vec<u8>, u64>>,
    /// Hash elements made so far (each a new region).
    pub(super) made: u64,
    /// The maps (by index in the world's) whose memory was touched since it was last
    /// emptied (a value or element loaded or stored, a hash's helper), and whether
    /// that changed it.
    pub(super) touched: Vec<(usize, bool)>,
}

impl Memory {
    /// The stack, then each map's value, then the hashes' elements held before the run.
    pub(super) fn new(world: &World) -> Memory {
        let stack = (STACK_TOP - STACK_SIZE, vec![0; STACK_SIZE as usize]);
        let mut mem =
            Memory { regions: vec![stack], lookups: Vec::new(), tables: BTreeMap::new(), made: 0, touched: Vec::new() };
        // Regions that overlapped would make one map's stores another's.
        let room = ((CTX - MAPS) / MAP_SPAN) as usize;
        assert!(world.maps.len() <= room, "the interpreter lays out at most {room} maps, not {}", world.maps.len());
        for (i, (name, value)) in world.maps.iter().enumerate() {
            assert!(
                value.len() as u64 <= MAP_SPAN,
                "map {name}'s value ({} bytes) is over the interpreter's room",
                value.len()
            );
            mem.regions.push((MAPS + (i as u64) * MAP_SPAN, value.clone()));
        }
        for (name, key, value) in &world.held {
            mem.insert(map_index(world, name), key.clone(), value.clone());
        }
        mem
    }

    /// Puts a new element (`key`, `value`) in hash map `i`, in a region of its own.
    pub(super) fn insert(&mut self, i: usize, key: Vec<u8>, value: Vec<u8>) {
        assert!(
            value.len() as u64 <= ELEMENT_SPAN,
            "a hash element of {} bytes is over the interpreter's room",
            value.len()
        );
        let at = ELEMENTS + self.made * ELEMENT_SPAN;
        self.made += 1;
        self.regions.push((at, value));
        self.tables.entry(i).or_default().insert(key, at);
    }

    /// Hash map `i`'s elements: key bytes, value bytes.
    pub(super) fn elements(&self, i: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let table = self.tables.get(&i).cloned().unwrap_or_default();
        table
            .into_iter()
            .map(|(k, at)| (k, self.regions.iter().find(|(b, _)| *b == at).expect("element").1.clone()))
            .collect()
    }

    pub(super) fn slice(&mut self, pc: usize, addr: u64, len: u64) -> Result<&mut [u8], InterpError> {
        if (MAPS..CTX).contains(&addr) {
            self.touched.push((((addr - MAPS) / MAP_SPAN) as usize, false));
        } else if addr >= ELEMENTS {
            let element = addr & !(ELEMENT_SPAN - 1);
            let owner = self.tables.iter().find(|(_, t)| t.values().any(|at| *at == element));
            self.touched.extend(owner.map(|(i, _)| (*i, false)));
        }
        for (base, bytes) in &mut self.regions {
            if addr >= *base && addr + len <= *base + bytes.len() as u64 {
                let at = (addr - *base) as usize;
                return Ok(&mut bytes[at..at + len as usize]);
            }
        }
        Err(InterpError::Fault { pc, addr, len })
    }

    pub(super) fn load(&mut self, pc: usize, addr: u64, len: u64) -> Result<u64, InterpError> {
        let mut word = [0u8; 8];
        word[..len as usize].copy_from_slice(self.slice(pc, addr, len)?);
        Ok(u64::from_le_bytes(word))
    }

    pub(super) fn store_bytes(&mut self, pc: usize, addr: u64, bytes: &[u8]) -> Result<(), InterpError> {
        let touched = self.touched.len();
        self.slice(pc, addr, bytes.len() as u64)?.copy_from_slice(bytes);
        self.touched[touched..].iter_mut().for_each(|t| t.1 = true);
        Ok(())
    }

    pub(super) fn store(&mut self, pc: usize, addr: u64, len: u64, value: u64) -> Result<(), InterpError> {
        self.store_bytes(pc, addr, &value.to_le_bytes()[..len as usize])
    }
}
