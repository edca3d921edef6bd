//! The only module that touches aya, syscalls and unsafe code: load the object, attach
//! uprobes, read maps and events, start and watch the target process.
//!
//! `load` (its large per-CPU hashes made on threads meanwhile: `bigmaps`) →
//! (`scope_to_cgroup`) → `Loaded::attach` → (`run_begin`, `poll_events` while
//! the target runs, `map_entries`) → `run_end` → drop (detaches). `process` starts or
//! finds the target; `container` names a containerized process's executable; `cgroup`
//! opens and checks `--cgroup`; `signals` turns Ctrl-C into a clean stop; `accounting`
//! reads what probes cost (the kernel's statistics), `calibrate` what a trap costs; `kfuncs`
//! links the programs' kfunc calls (the preemption guards) to the running kernel, and
//! `preemption` says whether it can preempt a uprobe's program where they are missing;
//! `capabilities` names those gtrace lacks when the kernel refuses it; `nobtf` makes
//! aya's loader without its parse of the kernel's BTF, which gtrace never uses; `mapped` maps
//! the target's file read-only for the reader (src/gobin sees a byte slice);
//! `file_guard` keeps a process from running a file changed in place under -b's probes;
//! `detach` takes probes off (under -b at the end, on a thread of its own), `park` takes
//! them off and puts them back for a duty cycle; `schedstat`
//! and `liveness` read the target's CPU time and whether it runs, their files kept open.

mod accounting;
mod age;
mod attach;
mod bigmaps;
mod btfscan;
mod calibrate;
pub mod capabilities;
pub mod cgroup;
mod child_fds;
pub mod clock;
mod container;
mod detach;
mod ended;
mod error;
mod events;
pub mod file_guard;
mod held;
pub mod kfuncs;
pub mod liveness;
mod loader;
pub mod mapped;
mod maps;
mod nobtf;
mod park;
pub mod preemption;
pub mod priority;
pub mod process;
pub mod progstats;
mod reader;
mod replaced;
pub mod schedstat;
pub mod signals;
mod trigger;
mod uprobe_multi;
pub mod zeroed;

pub use accounting::RunStats;
pub use age::process_age;
pub use attach::{RefusedPoint, Scope};
pub use bigmaps::{large_maps, premake};
pub use calibrate::{calibrate_trap, calibration_link, CalibrationLinked, TrapCost};
pub use cgroup::{Cgroup, CgroupError};
pub use container::{exe_names, in_host_pid_namespace, same_namespace, ExeNames};
pub use ended::Sweeper;
pub use error::RuntimeError;
pub use held::{spawn_held, spawn_held_with, Captured, HeldChild};
pub use liveness::Liveness;
pub use loader::{failing_insn, load, load_with, prewarm, verify, Loaded};
pub use mapped::trim_heap;
pub use maps::{possible_cpus, Entries};
pub use process::{
    ended_zombie, is_alive, mapping_start, process_exe, processes_mapping, read_u64, resolve_command, signal_name,
    Ended,
};
pub use reader::MapReader;
pub use schedstat::{cpu_and_wait_ns, CpuReader, Schedstat};
pub use uprobe_multi::DISABLE_ENV as NO_UPROBE_MULTI_ENV;

impl Loaded {
    /// Every key of the map `object_name` with its value bytes: one value per possible CPU
    /// for a per-CPU map, else one.
    pub fn map_entries(&self, object_name: &str) -> Result<Entries, RuntimeError> {
        self.map(object_name)?.entries()
    }

    /// Every u64 counter of the array `object_name`, summed over CPUs, by index.
    pub fn array_sums(&self, object_name: &str) -> Result<Vec<u64>, RuntimeError> {
        self.map(object_name)?.array_sums()
    }

    /// Empties a hash map (deletes every key) or zeroes an array.
    pub fn clear_map(&self, object_name: &str) -> Result<(), RuntimeError> {
        self.map(object_name)?.clear()
    }

    /// Stores the load bias of process `tgid` in the plan's `load_bias` map, if it has
    /// one (see lower/globals.rs); false when it has none.
    pub fn set_load_bias(&self, tgid: u32, bias: u64) -> Result<bool, RuntimeError> {
        let Some(map) = self.maps.values().find(|m| matches!(m.spec.role, crate::plan::MapRole::LoadBias)) else {
            return Ok(false);
        };
        map.update(&tgid.to_ne_bytes(), &bias.to_ne_bytes())?;
        Ok(true)
    }

    /// The load bias the entry-point probe stored for process `tgid` (see
    /// lower/globals.rs), if the plan has that probe and the process ran it.
    pub fn load_bias(&self, tgid: u32) -> Option<u64> {
        let map = self.maps.values().find(|m| matches!(m.spec.role, crate::plan::MapRole::LoadBias))?;
        let values = map.lookup(&tgid.to_ne_bytes()).ok()??;
        Some(u64::from_ne_bytes(values.first()?.get(..8)?.try_into().ok()?))
    }

    /// Scopes every program attached to the target to `cgroup` and the cgroups below
    /// it: its directory's fd goes into slot 0 of the plan's cgroup array `object_name`
    /// (the kernel keeps its own reference to the cgroup).
    pub fn scope_to_cgroup(&self, object_name: &str, cgroup: &Cgroup) -> Result<(), RuntimeError> {
        self.map(object_name)?.update(&0u32.to_ne_bytes(), &cgroup.raw_fd().to_ne_bytes())
    }

    /// Where programs attached with multi-uprobe links run unguarded on a kernel that can
    /// preempt them (no `bpf_preempt_disable`, before 6.10; full, lazy or RT
    /// preemption, or unknown): the model. Call it after `attach`. Not said of
    /// perf-event uprobes (kernels before 6.6, which have no multi-uprobe links): the
    /// kernel runs their programs with preemption disabled (`__uprobe_perf_func` in
    /// kernel/trace/trace_uprobe.c), and tests/vm's stress on 6.1 with preempt=full
    /// found nothing wrong.
    pub fn unguarded_preemption(&self) -> Option<preemption::Preemption> {
        let multi = self.links.iter().any(|l| matches!(l.kind, attach::LinkKind::Multi(_)));
        let model = preemption::Preemption::running();
        (multi && !self.unguarded.is_empty() && model.preemptible()).then_some(model)
    }

    fn map(&self, object_name: &str) -> Result<&maps::MapHandle, RuntimeError> {
        self.maps.get(object_name).ok_or_else(|| RuntimeError::NoSuchMap { map: object_name.to_string() })
    }
}
