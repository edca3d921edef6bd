//! Multi-uprobe links (`BPF_LINK_TYPE_UPROBE_MULTI`, Linux 6.6 and later): one link
//! attaches one program at many file offsets of a binary, with a cookie per offset, in
//! one `bpf(BPF_LINK_CREATE)` call, and detaches all of them when its fd is closed.
//!
//! aya 0.14 does not wrap these links, and it loads every uprobe program with no
//! `expected_attach_type` (its section parser knows no `uprobe.multi/` prefix), while the
//! kernel only lets a program loaded with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`
//! into such a link (and refuses such a program a perf-event link). So the program is
//! loaded a second time here, with raw `bpf(BPF_PROG_LOAD)`: its instructions come from
//! the object's `uprobe/NAME` section, with every map relocation resolved to the fd of
//! the map aya created. The aya-loaded copy stays for the per-probe fallback.

use crate::plan::{Plan, ProbeAttach};
use aya::maps::Map;
use aya::Ebpf;
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};
use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `enum bpf_cmd` and `enum bpf_attach_type` values from linux/bpf.h.
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PROG_TYPE_KPROBE: u32 = 2;
pub(crate) const BPF_TRACE_UPROBE_MULTI: u32 = 48;
/// `src_reg` of an `ld_imm64` whose immediate is a map fd.
const BPF_PSEUDO_MAP_FD: u8 = 1;
const INSN_SIZE: usize = 8;

/// The start of `union bpf_attr` as `BPF_PROG_LOAD` reads it, up to
/// `expected_attach_type`; the kernel takes the fields after it as zero.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` as `BPF_LINK_CREATE` reads it for a multi-uprobe link.
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    path: u64,
    offsets: u64,
    ref_ctr_offsets: u64,
    cookies: u64,
    cnt: u32,
    uprobe_flags: u32,
    pid: u32,
    _pad: u32,
}

/// `bpf(cmd, attr, size)`; a new fd on success.
fn bpf<T>(cmd: libc::c_long, attr: &T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid, initialised `repr(C)` prefix of `union bpf_attr` of the
    // size passed; every pointer inside it points to memory that outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success these commands return a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// Set (to anything) to never use multi-uprobe links: every probe gets its own
/// perf-event link, as on kernels before 6.6. For measuring the difference.
pub const DISABLE_ENV: &str = "GTRACE_NO_UPROBE_MULTI";

/// Loads a multi-uprobe copy of every uprobe program of `plan` (see `load_programs`),
/// its maps being those aya created for `ebpf`.
pub(crate) fn load_for_plan(ebpf: &Ebpf, object: &[u8], plan: &Plan) -> HashMap<String, OwnedFd> {
    if std::env::var_os(DISABLE_ENV).is_some() {
        return HashMap::new();
    }
    let programs: Vec<(&str, &str)> = plan
        .probes
        .iter()
        // gtrace's own triggers (on begin, on end, on interval) are uprobes too: a
        // multi-uprobe link needs no CAP_SYS_ADMIN, a perf-event one does (since the fix
        // for CVE-2025-38466).
        .filter(|p| {
            matches!(
                p.attach,
                ProbeAttach::Uprobe(_) | ProbeAttach::Begin | ProbeAttach::End | ProbeAttach::Interval { .. }
            )
        })
        .map(|p| (p.program.as_str(), p.section.as_str()))
        .collect();
    if programs.is_empty() {
        return HashMap::new();
    }
    let map_fds = ebpf.maps().filter_map(|(name, map)| Some((name.to_string(), map_fd(map)?))).collect();
    load_programs(object, &programs, &map_fds)
}

/// The fd of a map of a kind gtrace creates (`plan::MapKind`).
pub(super) fn map_fd(map: &Map) -> Option<BorrowedFd<'_>> {
    use std::os::fd::AsFd;
    match map {
        Map::HashMap(d)
        | Map::PerCpuHashMap(d)
        | Map::LruHashMap(d)
        | Map::Array(d)
        | Map::PerCpuArray(d)
        | Map::RingBuf(d)
        // --cgroup's scope: without it here the multi-uprobe copies failed to load and
        // every --cgroup run attached perf-event uprobes (needing CAP_SYS_ADMIN).
        | Map::CgroupArray(d) => Some(d.fd().as_fd()),
        _ => None,
    }
}

/// Loads every program of `programs` (name, section) found in `object` as a multi-uprobe
/// program, its map
/// loads pointing at `map_fds` (by map symbol). A program the kernel refuses (an older
/// kernel, or anything else) is left out: the caller falls back to per-probe links.
pub(crate) fn load_programs(
    object: &[u8],
    programs: &[(&str, &str)],
    map_fds: &HashMap<String, BorrowedFd<'_>>,
) -> HashMap<String, OwnedFd> {
    let Ok(file) = object::File::parse(object) else {
        return HashMap::new();
    };
    let license = file
        .section_by_name("license")
        .and_then(|s| s.data().ok())
        .and_then(|d| CString::new(d.split(|b| *b == 0).next().unwrap_or_default()).ok())
        .unwrap_or_else(|| c"GPL".to_owned());
    let relocated: Vec<(&str, Vec<u8>)> = programs
        .iter()
        .filter_map(|(name, section)| Some((*name, relocated_insns(&file, section, map_fds)?)))
        .collect();
    load_in_parallel(&relocated, &license)
}

/// Loads every program of `programs` (name, relocated instructions) as a multi-uprobe
/// program, on as many threads as there are CPUs (four at most): the kernel verifies
/// programs side by side, and the verifier is most of a load. Which programs load does
/// not depend on the threads: each is loaded once, alone, as it would be one by one.
fn load_in_parallel(programs: &[(&str, Vec<u8>)], license: &CString) -> HashMap<String, OwnedFd> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4).min(programs.len());
    // The largest first, each to the thread with the fewest instructions so far.
    let mut order: Vec<usize> = (0..programs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(programs[i].1.len()));
    let mut shares: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); threads];
    for i in order {
        if let Some(share) = shares.iter_mut().min_by_key(|(size, _)| *size) {
            share.0 += programs[i].1.len();
            share.1.push(i);
        }
    }
    let load_share = |share: &[usize]| -> Vec<(String, OwnedFd)> {
        share
            .iter()
            .filter_map(|&i| {
                let (name, insns) = &programs[i];
                load_program(name, insns, license).ok().map(|fd| (name.to_string(), fd))
            })
            .collect()
    };
    let (first, rest) = shares.split_first().map_or((&[][..], &[][..]), |(f, r)| (&f.1[..], r));
    std::thread::scope(|scope| {
        // A share no thread could be started for is loaded here, after the first.
        let (started, left): (Vec<_>, Vec<_>) = rest
            .iter()
            .map(|(_, share)| (share, std::thread::Builder::new().spawn_scoped(scope, || load_share(share))))
            .partition(|(_, thread)| thread.is_ok());
        let mut loaded: HashMap<String, OwnedFd> = load_share(first).into_iter().collect();
        for (share, _) in left {
            loaded.extend(load_share(share));
        }
        for (_, thread) in started {
            // A thread that panicked loaded nothing the caller can use: its programs
            // fall back to aya's copies.
            loaded.extend(thread.ok().and_then(|t| t.join().ok()).unwrap_or_default());
        }
        loaded
    })
}

/// The instructions in `section` with every map relocation resolved to a map fd (its
/// kfunc calls are linked before: `kfuncs::link`).
fn relocated_insns(
    file: &object::File<'_>,
    section: &str,
    map_fds: &HashMap<String, BorrowedFd<'_>>,
) -> Option<Vec<u8>> {
    let section = file.section_by_name(section)?;
    let mut insns = section.data().ok()?.to_vec();
    for (offset, reloc) in section.relocations() {
        // A kfunc call: its BTF id is in the instruction already (kfuncs.rs).
        if reloc.flags() == (object::RelocationFlags::Elf { r_type: object::elf::R_BPF_64_32 }) {
            continue;
        }
        let RelocationTarget::Symbol(index) = reloc.target() else {
            return None;
        };
        let map = file.symbol_by_index(index).ok()?.name().ok()?;
        let fd = map_fds.get(map)?.as_raw_fd();
        let at = usize::try_from(offset).ok()?;
        let insn = insns.get_mut(at..at + INSN_SIZE)?;
        // regs: dst in the low nibble, src in the high one; imm at bytes 4..8.
        insn[1] = (insn[1] & 0x0f) | (BPF_PSEUDO_MAP_FD << 4);
        insn[4..8].copy_from_slice(&fd.to_le_bytes());
    }
    Some(insns)
}

/// `BPF_PROG_LOAD` of a kprobe-type program with `expected_attach_type =
/// BPF_TRACE_UPROBE_MULTI`.
fn load_program(name: &str, insns: &[u8], license: &CString) -> io::Result<OwnedFd> {
    load_kprobe_program(name, insns, license, BPF_TRACE_UPROBE_MULTI)
}

/// `BPF_PROG_LOAD` of a kprobe-type program (uprobes are kprobe programs) for links of
/// `expected_attach_type` (0: a perf-event link).
pub(crate) fn load_kprobe_program(
    name: &str,
    insns: &[u8],
    license: &CString,
    expected_attach_type: u32,
) -> io::Result<OwnedFd> {
    let mut prog_name = [0u8; 16];
    // The kernel accepts letters, digits, `_` and `.` in a program name, 15 at most;
    // keep the letters, digits and `_`.
    for (slot, b) in prog_name.iter_mut().zip(name.bytes().filter(|b| b.is_ascii_alphanumeric() || *b == b'_')).take(15)
    {
        *slot = b;
    }
    let attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_KPROBE,
        insn_cnt: (insns.len() / INSN_SIZE) as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name,
        expected_attach_type,
        ..Default::default()
    };
    bpf(BPF_PROG_LOAD, &attr)
}

/// A multi-uprobe link; closing it detaches every offset at once.
pub(crate) struct MultiLink {
    _fd: OwnedFd,
    points: usize,
}

impl MultiLink {
    /// How many offsets the link covers.
    pub(crate) fn points(&self) -> usize {
        self.points
    }
}

/// Attaches `program` at every file offset of `binary` in `offsets`, each with the cookie
/// at the same index, firing in process `pid` only (0: every process).
pub(crate) fn attach(
    program: BorrowedFd<'_>,
    binary: &Path,
    offsets: &[u64],
    cookies: &[u64],
    pid: u32,
) -> io::Result<MultiLink> {
    if offsets.is_empty() || offsets.len() != cookies.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let path = CString::new(binary.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let attr = LinkCreateAttr {
        prog_fd: program.as_raw_fd() as u32,
        attach_type: BPF_TRACE_UPROBE_MULTI,
        path: path.as_ptr() as u64,
        offsets: offsets.as_ptr() as u64,
        cookies: cookies.as_ptr() as u64,
        cnt: offsets.len() as u32,
        pid,
        ..Default::default()
    };
    let fd = bpf(BPF_LINK_CREATE, &attr)?;
    Ok(MultiLink { _fd: fd, points: offsets.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_have_the_kernel_layout() {
        // linux/bpf.h: expected_attach_type at byte 68 of BPF_PROG_LOAD's attr; the
        // uprobe_multi struct at byte 16 of BPF_LINK_CREATE's, pid at 56.
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, path), 16);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, cookies), 40);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, cnt), 48);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, pid), 56);
    }

    #[test]
    fn mismatched_offsets_and_cookies_are_refused_before_the_kernel() {
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = std::os::fd::AsFd::as_fd(&file);
        let err = attach(fd, Path::new("/bin/true"), &[1, 2], &[1], 0).err().unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        let err = attach(fd, Path::new("/bin/true"), &[], &[], 0).err().unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }
}
