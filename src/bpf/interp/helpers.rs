//! The kernel helpers the interpreter knows (`helper`): map lookups, updates and
//! deletes of arrays and hashes (`hash_helper`, with the kernel's errnos), reads of the
//! target's memory, the attach cookie, the pid and the clock.

use super::memory::Memory;
use super::{HashSpec, InterpError, World, MAPS, MAP_SPAN};
use crate::bpf::helpers::{
    BPF_FUNC_get_attach_cookie, BPF_FUNC_get_current_pid_tgid, BPF_FUNC_ktime_get_ns, BPF_FUNC_map_delete_elem,
    BPF_FUNC_map_lookup_elem, BPF_FUNC_map_update_elem, BPF_FUNC_probe_read_user, BPF_EXIST, BPF_NOEXIST,
};
use crate::bpf::insn::*;

/// What `probe_read_user` returns for memory it cannot read.
const EFAULT: u64 = -14i64 as u64;

/// A helper call: R1-R5 its arguments (clobbered after it), its result for R0.
pub(super) fn helper(
    id: i32,
    r: &mut [u64; 11],
    mem: &mut Memory,
    world: &World,
    pc: usize,
    reads: &mut Vec<(u64, u64)>,
) -> Result<u64, InterpError> {
    // The map R1 names, by the address its ld_imm64 gave (`map_value_addr`).
    let map = r[1]
        .checked_sub(MAPS)
        .map(|d| d / MAP_SPAN)
        .and_then(|i| (r[1] == MAPS + i * MAP_SPAN && (i as usize) < world.maps.len()).then_some(i as usize));
    let hash = map.and_then(|i| world.hashes.iter().find(|(n, _)| *n == world.maps[i].0).map(|(_, h)| (i, *h)));
    let array = map.and_then(|i| world.arrays.iter().find(|(n, _)| *n == world.maps[i].0).map(|(_, s)| *s));
    if id == BPF_FUNC_map_lookup_elem {
        let name = map.map_or(String::new(), |i| world.maps[i].0.clone());
        let size = hash.map_or(4, |(_, spec)| u64::from(spec.key_size));
        let key = mem.slice(pc, r[2], size)?.to_vec();
        mem.lookups.push((name, key));
    }
    let result = match id {
        id if [BPF_FUNC_map_lookup_elem, BPF_FUNC_map_update_elem, BPF_FUNC_map_delete_elem].contains(&id)
            && hash.is_some() =>
        {
            let (i, spec) = hash.expect("a hash");
            hash_helper(id, i, spec, r, mem, pc)?
        }
        id if id == BPF_FUNC_map_lookup_elem && array.is_some() => {
            let size = u64::from(array.expect("an array"));
            let index = mem.load(pc, r[2], 4)?;
            let len = map.map_or(0, |i| mem.regions[i + 1].1.len() as u64);
            if (index + 1) * size <= len {
                r[1] + index * size
            } else {
                0
            }
        }
        // The map's address as R1 holds it is its value's: an array map's one entry.
        id if id == BPF_FUNC_map_lookup_elem => r[1],
        id if id == BPF_FUNC_map_update_elem => {
            mem.slice(pc, r[2], 4)?;
            // The value is as long as the map's.
            let len = mem.regions.iter().find(|(base, _)| *base == r[1]).map_or(0, |(_, b)| b.len() as u64);
            let value = mem.slice(pc, r[3], len)?.to_vec();
            mem.slice(pc, r[1], len)?.copy_from_slice(&value);
            0
        }
        id if id == BPF_FUNC_get_attach_cookie => world.cookie,
        id if id == BPF_FUNC_get_current_pid_tgid => world.pid_tgid,
        id if id == BPF_FUNC_ktime_get_ns => world.now,
        id if id == BPF_FUNC_probe_read_user => {
            let (dst, len, from) = (r[1], r[2], r[3]);
            reads.push((from, len));
            let bytes = world
                .user
                .iter()
                .find(|(base, b)| from >= *base && from.saturating_add(len) <= *base + b.len() as u64)
                .map(|(base, b)| &b[(from - base) as usize..(from - base + len) as usize]);
            match bytes {
                Some(bytes) => {
                    mem.slice(pc, dst, len)?.copy_from_slice(bytes);
                    0
                }
                None if world.unmapped_fails => {
                    mem.slice(pc, dst, len)?.fill(0);
                    EFAULT
                }
                None => return Err(InterpError::UserFault { pc, addr: from, len }),
            }
        }
        _ => return Err(InterpError::Unknown { pc, code: BPF_JMP | BPF_CALL }),
    };
    r[1..6].fill(0);
    Ok(result)
}

/// A helper on hash map `i` of the world: R2 the key, R3 the value and R4 the flags of
/// an update; what the kernel returns (an element's address, 0, minus an errno).
fn hash_helper(
    id: i32,
    i: usize,
    spec: HashSpec,
    r: &[u64; 11],
    mem: &mut Memory,
    pc: usize,
) -> Result<u64, InterpError> {
    mem.touched.push((i, id != BPF_FUNC_map_lookup_elem));
    let key = mem.slice(pc, r[2], u64::from(spec.key_size))?.to_vec();
    let found = mem.tables.get(&i).and_then(|t| t.get(&key)).copied();
    let errno = |e: i64| (-e) as u64;
    Ok(match id {
        id if id == BPF_FUNC_map_lookup_elem => found.unwrap_or(0),
        id if id == BPF_FUNC_map_delete_elem => match found {
            Some(_) => {
                mem.tables.get_mut(&i).expect("its table").remove(&key);
                0
            }
            None => errno(2),
        },
        _ => {
            let value = mem.slice(pc, r[3], u64::from(spec.value_size))?.to_vec();
            let flags = r[4] as i32;
            let held = mem.tables.get(&i).map_or(0, |t| t.len());
            match found {
                Some(_) if flags == BPF_NOEXIST => errno(17),
                None if flags == BPF_EXIST => errno(2),
                None if held >= spec.max_entries as usize => errno(7),
                // A per-CPU hash's element is written in place (the kernel's
                // `__htab_percpu_map_update_elem` copies into the one it holds): a
                // pointer an earlier lookup gave reads the new value.
                Some(at) if spec.per_cpu => {
                    mem.slice(pc, at, value.len() as u64)?.copy_from_slice(&value);
                    0
                }
                // The kernel links a new element in and unlinks the old one (its memory
                // freed or reused later): a pointer an earlier lookup gave still reaches
                // the old value, never the new.
                Some(_) | None => {
                    mem.insert(i, key, value);
                    0
                }
            }
        }
    })
}
