//! Loading the compiled object into the kernel: its kfunc calls linked (kfuncs.rs), maps
//! created, every program of the plan verified, verifier rejections and missing
//! privileges turned into clear errors.

use super::attach::Link;
use super::error::{permission_error, RuntimeError};
use super::events::Events;
use super::kfuncs::{self, Linked};
use super::maps::MapHandle;
use crate::plan::{MapRole, Plan, ProbeSpec};
use aya::maps::{Map, MapData};
use aya::programs::{Program, ProgramError};
use aya::{Ebpf, EbpfLoader, VerifierLogLevel};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::thread::JoinHandle;

/// The object loaded in the kernel: its programs, maps, and the probes attached so far.
/// Dropping it detaches every probe.
pub struct Loaded {
    pub(crate) ebpf: Ebpf,
    pub(crate) plan_probes: Vec<ProbeSpec>,
    pub(crate) maps: HashMap<String, MapHandle>,
    pub(crate) events: Option<Events>,
    pub(crate) links: Vec<Link>,
    /// Copies of the uprobe programs loaded for multi-uprobe links, by program name
    /// (empty when the kernel has no such links).
    pub(crate) multi: HashMap<String, OwnedFd>,
    pub(crate) intervals: Vec<super::events::IntervalTimer>,
    /// The probe points the kernel refused while attaching (see `Loaded::refused`).
    pub(crate) refused: Vec<super::attach::RefusedPoint>,
    /// Held while the kernel's per-program statistics are wanted (`enable_run_stats`).
    pub(crate) stats_fd: Option<OwnedFd>,
    /// The plan's accounting: the generations of programs whose links can be replaced.
    pub(crate) accounting: crate::plan::Accounting,
    /// The live generation at each hit slot whose link was replaced (the slot is a
    /// function's of one program: its sites are in one link).
    pub(crate) generations: HashMap<u32, u8>,
    /// Where the target's probes are attached.
    pub(crate) target: Option<super::attach::AttachTarget>,
    /// The preemption guards the kernel lacks (their calls are no-ops).
    pub(crate) unguarded: Vec<crate::bpf::kfuncs::Kfunc>,
    /// Under -b, what keeps a process from running the file changed under the probes.
    pub(crate) file_guard: Option<super::file_guard::FileGuard>,
    /// The target's probe points when the trace ended and they left the file (-b):
    /// still counted as attached for what is said at exit.
    pub(crate) left_at_end: Vec<(String, Vec<crate::plan::AttachPoint>)>,
    /// Those probes being released on a thread of their own meanwhile: joined before
    /// `detach_all` returns (so on every way out, `Drop`).
    pub(crate) leaving: Option<JoinHandle<()>>,
    /// A duty cycle's probes while they are off the target (park.rs), and the thread
    /// releasing their links.
    pub(crate) parked: Vec<super::park::Parked>,
    pub(crate) parking: Option<super::park::Parking>,
}

/// A loader being prepared on another thread (see `prewarm`).
static PREWARMED: Mutex<Option<JoinHandle<EbpfLoader<'static>>>> = Mutex::new(None);

/// Starts preparing the loader on another thread, so that the work aya does before any
/// object is seen (parsing the kernel's BTF, /sys/kernel/btf/vmlinux: tens of
/// milliseconds, though gtrace's objects never use it) overlaps the compilation, as does
/// gtrace's own reading of it (the ids of its kfuncs). Call it first thing when a trace
/// will be loaded; `load` uses the prepared loader.
pub fn prewarm() {
    let mut slot = PREWARMED.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_none() {
        *slot = Some(std::thread::spawn(|| {
            raise_memlock_limit();
            kfuncs::kernel();
            // aya probes what the kernel supports (BTF kinds, program and map types:
            // some thirty bpf() calls) the first time it loads an object: here instead.
            aya::features();
            // Without aya's parse of the kernel's BTF, which gtrace's objects never use
            // (nobtf.rs): this thread ends once the loader is made.
            super::nobtf::loader_on_this_thread()
        }));
    }
}

/// The prepared loader if `prewarm` ran, else a new one.
fn loader() -> EbpfLoader<'static> {
    let prepared = PREWARMED.lock().unwrap_or_else(|e| e.into_inner()).take();
    prepared.and_then(|t| t.join().ok()).unwrap_or_else(EbpfLoader::new)
}

/// Loads `object`'s maps and every program `plan.probes` names (the kernel's verifier
/// judges each), attaching nothing; and the object as loaded (its kfunc calls linked).
fn load_verified(object: &[u8], plan: &Plan) -> Result<(Ebpf, Linked), RuntimeError> {
    let (mut ebpf, linked) = create_maps(object, plan)?;
    for probe in &plan.probes {
        load_program(&mut ebpf, probe)?;
    }
    Ok((ebpf, linked))
}

/// Creates `object`'s maps, loading none of its programs; and the object as loaded (its
/// kfunc calls linked).
fn create_maps(object: &[u8], plan: &Plan) -> Result<(Ebpf, Linked), RuntimeError> {
    raise_memlock_limit();
    // The large preallocated maps are made on threads meanwhile (bigmaps.rs), joined on
    // every way out.
    let making = super::bigmaps::start(object);
    let linked = kfuncs::link(object, kfuncs::kernel())?;
    let loaded = {
        let mut loader = loader();
        making.as_placeholders(&mut loader);
        loader.verifier_log_level(VerifierLogLevel::DEBUG | VerifierLogLevel::STATS).load(&linked.object)
    };
    let ebpf = making.finish(loaded).map_err(|source| match permission_error(&source) {
        Some(io) => RuntimeError::Permission { action: "creating BPF maps".into(), source: io },
        None => no_ring_buffer(&source, plan).unwrap_or(RuntimeError::Load { source: Box::new(source) }),
    })?;
    Ok((ebpf, linked))
}

/// A kernel that refuses to create the plan's ring buffer as an invalid map (EINVAL):
/// one without the map type (before 5.8), said as that.
fn no_ring_buffer(error: &aya::EbpfError, plan: &Plan) -> Option<RuntimeError> {
    let aya::EbpfError::MapError(aya::maps::MapError::CreateError { name, io_error }) = error else { return None };
    let ring = plan.maps.iter().any(|m| m.object_name == *name && m.kind == crate::plan::MapKind::Ringbuf);
    (ring && io_error.raw_os_error() == Some(libc::EINVAL)).then(|| RuntimeError::Unsupported {
        what: format!(
            "this kernel cannot create the BPF ring buffer `{name}` that gtrace's events go through \
             (BPF_MAP_TYPE_RINGBUF: Linux 5.8 and later)"
        ),
    })
}

/// Has the kernel's verifier judge every program of `object`, then unloads it all:
/// nothing is attached and no map outlives the call (`--check`).
pub fn verify(object: &[u8], plan: &Plan) -> Result<(), RuntimeError> {
    load_verified(object, plan).map(drop)
}

/// Loads `object` and every program `plan.probes` names: each verified once, as the
/// multi-uprobe copy where the kernel takes one (`uprobe_multi`), else as aya's copy
/// (whose refusal is the error said). aya's copy of a program that has a multi-uprobe
/// copy is loaded only if a multi-uprobe link is refused when attaching
/// (`Loaded::uprobe`).
pub fn load(object: &[u8], plan: &Plan) -> Result<Loaded, RuntimeError> {
    load_with(object, plan, &mut || {})
}

/// `load`, calling `maps_made` once every map is made (the kernel done zeroing them),
/// before the programs are verified.
pub fn load_with(object: &[u8], plan: &Plan, maps_made: &mut dyn FnMut()) -> Result<Loaded, RuntimeError> {
    let (mut ebpf, linked) = create_maps(object, plan)?;
    maps_made();
    let multi = super::uprobe_multi::load_for_plan(&ebpf, &linked.object, plan);
    for probe in plan.probes.iter().filter(|p| !multi.contains_key(&p.program)) {
        load_program(&mut ebpf, probe)?;
    }

    let mut maps = HashMap::new();
    let mut events = None;
    for spec in &plan.maps {
        let map = ebpf
            .take_map(&spec.object_name)
            .ok_or_else(|| RuntimeError::NoSuchMap { map: spec.object_name.clone() })?;
        if matches!(spec.role, MapRole::Events) {
            events = Some(Events::new(&spec.object_name, map)?);
        } else {
            maps.insert(spec.object_name.clone(), MapHandle { spec: spec.clone(), data: map_data(map) });
        }
    }

    fill_panic_functions(&maps)?;
    fill_aes_tables(&maps)?;
    Ok(Loaded {
        ebpf,
        plan_probes: plan.probes.clone(),
        maps,
        events,
        links: Vec::new(),
        multi,
        intervals: Vec::new(),
        refused: Vec::new(),
        stats_fd: None,
        accounting: plan.accounting.clone(),
        generations: HashMap::new(),
        target: None,
        unguarded: linked.missing,
        file_guard: None,
        left_at_end: Vec::new(),
        leaving: None,
        parked: Vec::new(),
        parking: None,
    })
}

/// Puts the functions each `on panic` probe reports in its `PanicFunctions` map, before
/// anything is attached (a probe that fired first would report nothing).
fn fill_panic_functions(maps: &HashMap<String, MapHandle>) -> Result<(), RuntimeError> {
    for map in maps.values() {
        if let MapRole::PanicFunctions { functions } = &map.spec.role {
            for f in functions {
                map.update(&f.to_ne_bytes(), &1u32.to_ne_bytes())?;
            }
        }
    }
    Ok(())
}

/// Puts the AES T-tables in the map `m[k]` hashes with, before anything is attached.
fn fill_aes_tables(maps: &HashMap<String, MapHandle>) -> Result<(), RuntimeError> {
    for map in maps.values().filter(|m| matches!(m.spec.role, MapRole::AesTables)) {
        map.update(&0u32.to_ne_bytes(), &crate::lower::aeshash::t_tables())?;
    }
    Ok(())
}

fn load_program(ebpf: &mut Ebpf, probe: &ProbeSpec) -> Result<(), RuntimeError> {
    load_named(ebpf, &probe.program)
}

/// Loads aya's copy of the program `name` (nothing when it is loaded already).
pub(crate) fn load_named(ebpf: &mut Ebpf, name: &str) -> Result<(), RuntimeError> {
    let name = &name.to_string();
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| RuntimeError::BadProgram { program: name.clone(), problem: "is not in the object" })?;
    let result = match program {
        Program::UProbe(p) if p.fd().is_ok() => Ok(()),
        Program::UProbe(p) => p.load(),
        _ => {
            return Err(RuntimeError::BadProgram {
                program: name.clone(),
                problem: "has a section kind that does not fit its probe",
            })
        }
    };
    result.map_err(|source| program_error(name, source))
}

fn program_error(program: &str, source: ProgramError) -> RuntimeError {
    match source {
        ProgramError::LoadError { io_error, verifier_log } => {
            if io_error.raw_os_error() == Some(libc::EPERM) {
                RuntimeError::Permission { action: format!("loading program `{program}`"), source: io_error }
            } else {
                RuntimeError::Verifier { program: program.to_string(), log: verifier_log.to_string() }
            }
        }
        other => match permission_error(&other) {
            Some(io) => RuntimeError::Permission { action: format!("loading program `{program}`"), source: io },
            None => RuntimeError::ProgramLoad { program: program.to_string(), source: Box::new(other) },
        },
    }
}

/// The kernel's handle of a map, whatever its kind.
fn map_data(map: Map) -> MapData {
    match map {
        Map::Array(d)
        | Map::HashMap(d)
        | Map::LruHashMap(d)
        | Map::PerCpuArray(d)
        | Map::PerCpuHashMap(d)
        | Map::PerCpuLruHashMap(d)
        | Map::RingBuf(d)
        | Map::ArrayOfMaps(d)
        | Map::BloomFilter(d)
        | Map::CgroupArray(d)
        | Map::CgroupStorage(d)
        | Map::CgrpStorage(d)
        | Map::CpuMap(d)
        | Map::DevMap(d)
        | Map::DevMapHash(d)
        | Map::HashOfMaps(d)
        | Map::InodeStorage(d)
        | Map::LpmTrie(d)
        | Map::PerCpuCgroupStorage(d)
        | Map::PerfEventArray(d)
        | Map::ProgramArray(d)
        | Map::Queue(d)
        | Map::ReusePortSockArray(d)
        | Map::SockHash(d)
        | Map::SockMap(d)
        | Map::SkStorage(d)
        | Map::Stack(d)
        | Map::StackTraceMap(d)
        | Map::Unsupported(d)
        | Map::XskMap(d) => d,
    }
}

/// Before kernel 5.11 BPF memory counts against RLIMIT_MEMLOCK; raise it as far as allowed.
pub(super) fn raise_memlock_limit() {
    let unlimited = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit/getrlimit with valid pointers to rlimit structs.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) != 0 {
            let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut current) == 0 {
                current.rlim_cur = current.rlim_max;
                libc::setrlimit(libc::RLIMIT_MEMLOCK, &current);
            }
        }
    }
}

/// The index of the last instruction a verifier log mentions (`12: (79) r1 = ...`): the
/// instruction the verifier stopped at.
pub fn failing_insn(log: &str) -> Option<usize> {
    log.lines().rev().find_map(|line| {
        let (index, rest) = line.trim_start().split_once(": ")?;
        let index: usize = index.parse().ok()?;
        // An instruction line shows its opcode in parentheses: `(79)`.
        let opcode = rest.strip_prefix('(')?.get(..3)?;
        (opcode.len() == 3 && opcode.ends_with(')') && opcode[..2].chars().all(|c| c.is_ascii_hexdigit()))
            .then_some(index)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_buffer_the_kernel_cannot_create_is_said_as_that() {
        let mut plan = Plan::default();
        plan.maps.push(crate::plan::MapSpec {
            object_name: "events".into(),
            kind: crate::plan::MapKind::Ringbuf,
            key_size: 0,
            value_size: 0,
            max_entries: 1 << 22,
            role: crate::plan::MapRole::Events,
        });
        let create = |name: &str, errno| {
            aya::EbpfError::MapError(aya::maps::MapError::CreateError {
                name: name.into(),
                io_error: std::io::Error::from_raw_os_error(errno),
            })
        };
        let said = no_ring_buffer(&create("events", libc::EINVAL), &plan).map(|e| e.to_string());
        assert!(said.is_some_and(|s| s.contains("BPF_MAP_TYPE_RINGBUF: Linux 5.8 and later")));
        assert!(no_ring_buffer(&create("events", libc::ENOMEM), &plan).is_none());
        assert!(no_ring_buffer(&create("counters", libc::EINVAL), &plan).is_none());
    }

    #[test]
    fn failing_insn_is_the_last_instruction_line() {
        let log = "func#0 @0\n\
                   0: R1=ctx() R10=fp0\n\
                   0: (b7) r1 = 0                        ; R1_w=0\n\
                   1: (7b) *(u64 *)(r10 -8) = r1         ; R1_w=0 R10=fp0 fp-8_w=0\n\
                   2: (79) r2 = *(u64 *)(r10 -520)\n\
                   invalid read from stack R10 off=-520 size=8\n\
                   processed 3 insns (limit 1000000) max_states_per_insn 0\n";
        assert_eq!(failing_insn(log), Some(2));
        assert_eq!(failing_insn("from 4 to 7: R0=1\n7: (95) exit\nR0 !read_ok\n"), Some(7));
        assert_eq!(failing_insn("nothing here\n"), None);
    }
}
