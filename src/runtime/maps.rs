//! Reading and clearing BPF maps as raw bytes, whatever their key and value sizes: the
//! `bpf(BPF_MAP_*_ELEM)` syscalls on the map's fd, with per-CPU values split per CPU.

use super::error::RuntimeError;
use crate::plan::MapSpec;
use aya::maps::MapData;
use std::io;
use std::os::fd::{AsFd, AsRawFd};

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// The map-element part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    /// `value` or `next_key`.
    value: u64,
    flags: u64,
}

/// The batch part of `union bpf_attr` (`BPF_MAP_LOOKUP_BATCH`).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// One loaded map and what the plan says about it.
pub(crate) struct MapHandle {
    pub spec: MapSpec,
    pub data: MapData,
}

/// Every key with its values: one value per possible CPU for a per-CPU map, else one.
pub type Entries = Vec<(Vec<u8>, Vec<Vec<u8>>)>;

impl MapHandle {
    fn fd(&self) -> i32 {
        self.data.fd().as_fd().as_raw_fd()
    }

    fn syscall(&self, cmd: libc::c_long, key: *const u8, value: *mut u8, flags: u64) -> io::Result<()> {
        let mut attr = MapElemAttr {
            map_fd: self.fd() as u32,
            key: key as u64,
            value: value as u64,
            flags,
            ..MapElemAttr::default()
        };
        // SAFETY: `attr` is a valid bpf_attr prefix for the map element commands; the key
        // and value pointers point to buffers of the map's key size and (per-CPU) value
        // size, which the kernel reads or writes within those bounds.
        let ret = unsafe {
            libc::syscall(libc::SYS_bpf, cmd, &mut attr as *mut MapElemAttr, std::mem::size_of::<MapElemAttr>() as u32)
        };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn err(&self, op: &'static str, source: io::Error) -> RuntimeError {
        RuntimeError::MapSyscall { map: self.spec.object_name.clone(), op, source }
    }

    /// How many values one lookup returns, and the stride between them.
    fn value_layout(&self) -> Result<(usize, usize), RuntimeError> {
        let size = self.spec.value_size as usize;
        if self.spec.kind.is_percpu() {
            let cpus = possible_cpus()?;
            Ok((cpus, size.div_ceil(8) * 8))
        } else {
            Ok((1, size))
        }
    }

    /// The next key after `key` (the first key for `None`); `None` at the end.
    fn next_key(&self, key: Option<&[u8]>) -> Result<Option<Vec<u8>>, RuntimeError> {
        let mut next = vec![0u8; self.spec.key_size as usize];
        let key_ptr = key.map_or(std::ptr::null(), |k| k.as_ptr());
        match self.syscall(BPF_MAP_GET_NEXT_KEY, key_ptr, next.as_mut_ptr(), 0) {
            Ok(()) => Ok(Some(next)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(self.err("BPF_MAP_GET_NEXT_KEY", e)),
        }
    }

    pub(super) fn keys(&self) -> Result<Vec<Vec<u8>>, RuntimeError> {
        let mut keys = Vec::new();
        // Entries deleted while we iterate make the kernel restart from the first key;
        // never loop for ever on a map that keeps changing.
        let limit = self.spec.max_entries as usize * 2 + 16;
        let mut cur = self.next_key(None)?;
        while let Some(key) = cur {
            if keys.len() >= limit {
                break;
            }
            cur = self.next_key(Some(&key))?;
            keys.push(key);
        }
        Ok(keys)
    }

    /// The values under `key`, or `None` if it has gone.
    pub(super) fn lookup(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, RuntimeError> {
        let (count, stride) = self.value_layout()?;
        let mut buf = vec![0u8; count * stride];
        match self.syscall(BPF_MAP_LOOKUP_ELEM, key.as_ptr(), buf.as_mut_ptr(), 0) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(self.err("BPF_MAP_LOOKUP_ELEM", e)),
        }
        let size = self.spec.value_size as usize;
        Ok(Some(buf.chunks(stride).map(|c| c[..size].to_vec()).collect()))
    }

    pub fn entries(&self) -> Result<Entries, RuntimeError> {
        let mut out = Vec::new();
        let by_function = self.is_array() && matches!(self.spec.role, crate::plan::MapRole::User { .. });
        for key in self.keys()? {
            match self.lookup(&key)? {
                // A user map kept as an array indexed by function (plan::MapSpec): its
                // keys are read as the 8-byte function index the plan describes, and an
                // element never updated (zero on every CPU) is no entry.
                Some(values) if by_function => {
                    if values.iter().any(|v| v.iter().any(|b| *b != 0)) {
                        let index = u32::from_ne_bytes(key[..4].try_into().unwrap_or_default());
                        out.push((u64::from(index).to_ne_bytes().to_vec(), values));
                    }
                }
                Some(values) => out.push((key, values)),
                None => {}
            }
        }
        Ok(out)
    }

    fn is_array(&self) -> bool {
        matches!(self.spec.kind, crate::plan::MapKind::Array | crate::plan::MapKind::PercpuArray)
    }

    /// The u64 at the start of every element of an array, summed over CPUs for a per-CPU
    /// array, by index: one `BPF_MAP_LOOKUP_BATCH` (Linux 5.6), else a lookup a key.
    pub fn array_sums(&self) -> Result<Vec<u64>, RuntimeError> {
        let n = self.spec.max_entries as usize;
        let (count, stride) = self.value_layout()?;
        let sum = |values: &[u8]| -> u64 {
            values
                .chunks(stride)
                .map(|v| v.get(..8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8]))))
                .sum()
        };
        let mut keys = vec![0u32; n];
        let mut values = vec![0u8; n * count * stride];
        let mut out_batch = 0u32;
        let mut attr = BatchAttr {
            out_batch: &mut out_batch as *mut u32 as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: n as u32,
            map_fd: self.fd() as u32,
            ..BatchAttr::default()
        };
        // SAFETY: `attr` is a valid bpf_attr prefix for BPF_MAP_LOOKUP_BATCH; `keys` holds
        // `count` u32 keys and `values` `count` values of the map's (per-CPU) value size,
        // `out_batch` one u32 key: the kernel writes within those bounds.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                &mut attr as *mut BatchAttr,
                std::mem::size_of::<BatchAttr>() as u32,
            )
        };
        let done = ret == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT);
        if done && attr.count as usize == n {
            return Ok(values.chunks(count * stride).map(sum).collect());
        }
        // One lookup a key (older kernels).
        let mut sums = Vec::with_capacity(n);
        for key in 0..n as u32 {
            let v = self.lookup(&key.to_ne_bytes())?.unwrap_or_default();
            sums.push(
                v.iter().map(|b| b.get(..8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))).sum(),
            );
        }
        Ok(sums)
    }

    /// Writes `value` into element `index` of an array (one value for every CPU of a
    /// per-CPU array).
    pub fn set_array_u64(&self, index: u32, value: u64) -> Result<(), RuntimeError> {
        let (count, stride) = self.value_layout()?;
        let mut buf = vec![0u8; count * stride];
        for chunk in buf.chunks_mut(stride) {
            chunk[..8].copy_from_slice(&value.to_ne_bytes());
        }
        self.syscall(BPF_MAP_UPDATE_ELEM, index.to_ne_bytes().as_ptr(), buf.as_mut_ptr(), 0)
            .map_err(|e| self.err("BPF_MAP_UPDATE_ELEM", e))
    }

    /// Writes `value` under `key` (a map that is not per-CPU).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<(), RuntimeError> {
        let mut value = value.to_vec();
        self.syscall(BPF_MAP_UPDATE_ELEM, key.as_ptr(), value.as_mut_ptr(), 0)
            .map_err(|e| self.err("BPF_MAP_UPDATE_ELEM", e))
    }

    /// Deletes `key` from a hash map; false when it was not there.
    pub fn delete(&self, key: &[u8]) -> Result<bool, RuntimeError> {
        match self.syscall(BPF_MAP_DELETE_ELEM, key.as_ptr(), std::ptr::null_mut(), 0) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(self.err("BPF_MAP_DELETE_ELEM", e)),
        }
    }

    /// Deletes every entry of a hash map; zeroes every element of an array.
    pub fn clear(&self) -> Result<(), RuntimeError> {
        let keys = self.keys()?;
        if self.is_array() {
            let (count, stride) = self.value_layout()?;
            let mut zero = vec![0u8; count * stride];
            for key in keys {
                self.syscall(BPF_MAP_UPDATE_ELEM, key.as_ptr(), zero.as_mut_ptr(), 0)
                    .map_err(|e| self.err("BPF_MAP_UPDATE_ELEM", e))?;
            }
        } else {
            for key in keys {
                self.delete(&key)?;
            }
        }
        Ok(())
    }
}

/// The number of possible CPUs: the number of values in a per-CPU map lookup.
pub fn possible_cpus() -> Result<usize, RuntimeError> {
    aya::util::nr_cpus().map_err(|(_, source)| RuntimeError::Os { action: "reading possible CPUs", source })
}
