//! What probes cost, as the kernel measures it: each program's run time and run count
//! (`BPF_ENABLE_STATS`: the kernel counts while any process holds the fd it returns, so
//! several gtraces never fight over the `kernel.bpf_stats_enabled` sysctl, which is
//! never written), and the cost of a uprobe trap itself, calibrated at start-up on
//! gtrace's own trigger function with and without an empty uprobe (so the estimate
//! holds on bare metal and in VMs alike).

use super::error::RuntimeError;
use super::loader::Loaded;
use super::trigger::Trigger;
use super::uprobe_multi::{self, load_kprobe_program, MultiLink, BPF_TRACE_UPROBE_MULTI};
use crate::arch::trap::TrapKind;
use crate::bpf::insn::{encode_all, exit, mov64_imm, R0};
use std::ffi::CString;
use std::hint::black_box;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// Where `struct bpf_prog_info` (linux/bpf.h) keeps the statistics, and its size up to
/// them: `run_time_ns` (Linux 5.1), `run_cnt`, `recursion_misses` (5.12).
const INFO_RUN_TIME_NS: usize = 192;
const INFO_RUN_CNT: usize = 200;
const INFO_RECURSION_MISSES: usize = 208;
const INFO_SIZE: usize = 224;

/// `union bpf_attr` as `BPF_OBJ_GET_INFO_BY_FD` reads it.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The kernel's statistics of one program (all its loaded copies together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Time spent running it, while statistics were on.
    pub run_ns: u64,
    /// Runs, while statistics were on.
    pub run_count: u64,
    /// Runs the kernel skipped because a BPF program was already running on that CPU.
    pub missed: u64,
}

impl std::ops::AddAssign for RunStats {
    fn add_assign(&mut self, o: RunStats) {
        self.run_ns += o.run_ns;
        self.run_count += o.run_count;
        self.missed += o.missed;
    }
}

/// Where `struct bpf_prog_info` keeps the program's name (16 bytes, NUL-padded).
const INFO_NAME: usize = 64;

/// `struct bpf_prog_info` of the program behind `fd`, and how many bytes the kernel
/// filled.
fn prog_info(fd: BorrowedFd<'_>) -> io::Result<([u8; INFO_SIZE], usize)> {
    let mut info = [0u8; INFO_SIZE];
    let mut attr =
        InfoAttr { bpf_fd: fd.as_raw_fd() as u32, info_len: INFO_SIZE as u32, info: info.as_mut_ptr() as u64 };
    // SAFETY: `attr` is a valid bpf_attr prefix for BPF_OBJ_GET_INFO_BY_FD; `info` is a
    // buffer of `info_len` bytes that the kernel fills (at most that many).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr,
            std::mem::size_of::<InfoAttr>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((info, attr.info_len as usize))
}

/// The name the program behind `fd` was loaded with.
pub(super) fn program_name_of(fd: BorrowedFd<'_>) -> io::Result<String> {
    let (info, _) = prog_info(fd)?;
    let name = &info[INFO_NAME..INFO_NAME + 16];
    let end = name.iter().position(|b| *b == 0).unwrap_or(16);
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// The statistics of the program behind `fd`.
pub(super) fn run_stats_of(fd: BorrowedFd<'_>) -> io::Result<RunStats> {
    let (info, len) = prog_info(fd)?;
    // A kernel with a shorter struct fills less (info_len says how much).
    let field = |at: usize| -> u64 {
        if len < at + 8 {
            return 0;
        }
        u64::from_ne_bytes(info[at..at + 8].try_into().unwrap_or([0; 8]))
    };
    Ok(RunStats {
        run_ns: field(INFO_RUN_TIME_NS),
        run_count: field(INFO_RUN_CNT),
        missed: field(INFO_RECURSION_MISSES),
    })
}

impl Loaded {
    /// Turns the kernel's per-program statistics on for as long as this `Loaded` lives
    /// (or until `run_stats_off`). An error when the kernel cannot (before Linux 5.8).
    pub fn enable_run_stats(&mut self) -> Result<(), RuntimeError> {
        if self.stats_fd.is_none() {
            let fd = aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| RuntimeError::Os {
                action: "turning on the kernel's BPF statistics (BPF_ENABLE_STATS)",
                source: e.io_error,
            })?;
            self.stats_fd = Some(fd);
        }
        Ok(())
    }

    /// Whether the kernel's statistics are on for us.
    pub fn run_stats_on(&self) -> bool {
        self.stats_fd.is_some()
    }

    /// The kernel's statistics of `program`: its aya-loaded copy and its multi-uprobe
    /// copy together. Zero where the kernel says nothing.
    pub fn run_stats(&self, program: &str) -> RunStats {
        let mut total = RunStats::default();
        if let Some(aya::programs::Program::UProbe(p)) = self.ebpf.program(program) {
            if let Ok(fd) = p.fd() {
                total += run_stats_of(fd.as_fd()).unwrap_or_default();
            }
        }
        if let Some(fd) = self.multi.get(program) {
            total += run_stats_of(fd.as_fd()).unwrap_or_default();
        }
        total
    }
}

/// What one uprobe trap costs on this machine, measured at start-up for each kind of
/// instruction (`arch::trap`): beyond the eBPF program's own run time, in ns.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TrapCost {
    /// On an instruction the kernel single-steps (most of them).
    pub step_ns: f64,
    /// On a PUSH of a register (emulated by newer kernels).
    pub push_ns: f64,
    /// On a relative jump or call, or a NOP (emulated).
    pub branch_ns: f64,
    /// A call of a calibration function without a uprobe, in ns.
    pub untraced_ns: f64,
    /// How the empty uprobe was attached, as gtrace's probes are (`uprobe_multi` link, or
    /// a perf event on older kernels).
    pub link: &'static str,
}

impl TrapCost {
    pub fn of(&self, kind: TrapKind) -> f64 {
        match kind {
            TrapKind::Step => self.step_ns,
            TrapKind::Push => self.push_ns,
            TrapKind::Branch => self.branch_ns,
        }
    }
}

/// The empty program's links; dropping them detaches.
enum CalibrationLink {
    Multi(#[allow(dead_code)] MultiLink),
    PerfEvents(#[allow(dead_code)] Vec<OwnedFd>),
}

/// Times calls of gtrace's calibration functions without and with an empty uprobe on
/// their first instruction, one of each kind (a few milliseconds, most of it loading the
/// program and making the link, on a machine where a trap costs microseconds). Turn the
/// kernel's statistics on first: the empty program's own run time is then taken off.
pub fn calibrate_trap() -> Result<TrapCost, RuntimeError> {
    let triggers = TrapKind::ALL.map(Trigger::Calibrate);
    let mut offsets = Vec::new();
    let mut exe = None;
    for t in triggers {
        let (file, offset) = t.location()?;
        exe = Some(file);
        offsets.push(offset);
    }
    let exe = exe.ok_or(RuntimeError::TriggerNotFound { function: "gtrace_calibrate_step" })?;
    let untraced = triggers.map(|t| median_call(t, 1000, 5));
    let (program, link, how) = attach_empty(&exe, &offsets)?;
    let traced = triggers.map(|t| {
        // The first hit of a new uprobe is slow (the kernel sets it up); not counted.
        t.fire();
        let one = median_call(t, 4, 1).max(1.0);
        let batch = ((200_000.0 / one) as usize).clamp(8, 4000);
        median_call(t, batch, 5)
    });
    let own = run_stats_of(program.as_fd()).ok().filter(|s| s.run_count > 0);
    let own_ns = own.map_or(0.0, |s| s.run_ns as f64 / s.run_count as f64);
    let ns = |i: usize| (traced[i] - untraced[i] - own_ns).max(0.0);
    // Detaching waits for the kernel's grace periods (milliseconds): not on the way in.
    std::thread::spawn(move || drop((link, program)));
    Ok(TrapCost { step_ns: ns(0), push_ns: ns(1), branch_ns: ns(2), untraced_ns: untraced[0], link: how })
}

/// The median of `rounds` batches of `calls` calls, in ns of this thread's CPU time a
/// call. CPU time, not the wall clock: what the target pays for a trap is CPU time on its
/// own threads, and the wall clock of a busy host also counts the time this thread
/// waited for a CPU (several times the trap on a loaded 2-CPU machine). The median, not
/// the fastest: under a hypervisor a trap costs more when the host is busy, and the
/// estimate should be what the target pays, not the best case.
fn median_call(trigger: Trigger, calls: usize, rounds: usize) -> f64 {
    let mut times: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = thread_cpu_ns();
            for _ in 0..calls {
                black_box(trigger).fire();
            }
            thread_cpu_ns().saturating_sub(start) as f64 / calls as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The CPU time this thread has spent so far, in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Loads `r0 = 0; exit` and attaches it at `offsets` of `exe` in this process only: one
/// multi-uprobe link where the kernel has them, else a perf event each.
fn attach_empty(exe: &Path, offsets: &[u64]) -> Result<(OwnedFd, CalibrationLink, &'static str), RuntimeError> {
    let insns = encode_all(&[mov64_imm(R0, 0), exit()]);
    let license = c"GPL".to_owned();
    let os = |action: &'static str| move |source: io::Error| RuntimeError::Os { action, source };
    let pid = std::process::id();
    if std::env::var_os(uprobe_multi::DISABLE_ENV).is_none() {
        if let Ok(fd) = load_kprobe_program("gtrace_calib", &insns, &license, BPF_TRACE_UPROBE_MULTI) {
            let cookies = vec![0; offsets.len()];
            if let Ok(link) = uprobe_multi::attach(fd.as_fd(), exe, offsets, &cookies, pid) {
                return Ok((fd, CalibrationLink::Multi(link), "uprobe_multi"));
            }
        }
    }
    let fd = load_kprobe_program("gtrace_calib", &insns, &license, 0)
        .map_err(os("loading the empty program that calibrates the trap cost"))?;
    let attaching = "attaching the uprobes that calibrate the trap cost";
    let mut events = Vec::new();
    for offset in offsets {
        let event = perf_uprobe(exe, *offset, pid).map_err(os(attaching))?;
        set_bpf(event.as_fd(), fd.as_fd()).map_err(os(attaching))?;
        events.push(event);
    }
    Ok((fd, CalibrationLink::PerfEvents(events), "perf_event"))
}

/// `struct perf_event_attr` up to `config2` (PERF_ATTR_SIZE_VER1, enough for a probe).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    /// `uprobe_path`.
    config1: u64,
    /// `probe_offset`.
    config2: u64,
}

/// A uprobe perf event at `offset` of `exe` in process `pid`.
fn perf_uprobe(exe: &Path, offset: u64, pid: u32) -> io::Result<OwnedFd> {
    let pmu = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")?;
    let type_: u32 = pmu.trim().parse().map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let path = CString::new(exe.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let attr = PerfEventAttr {
        type_,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config1: path.as_ptr() as u64,
        config2: offset,
        ..PerfEventAttr::default()
    };
    /// `PERF_FLAG_FD_CLOEXEC` in linux/perf_event.h.
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    // SAFETY: a valid perf_event_attr of the size it states, with a NUL-terminated path
    // that outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            pid as libc::pid_t,
            -1,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: perf_event_open returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `PERF_EVENT_IOC_SET_BPF` then `PERF_EVENT_IOC_ENABLE`.
fn set_bpf(event: BorrowedFd<'_>, program: BorrowedFd<'_>) -> io::Result<()> {
    const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
    // SAFETY: ioctls on a perf event fd with an integer argument.
    let ok = unsafe {
        libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, program.as_raw_fd()) == 0
            && libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_event_attr_has_the_kernel_layout() {
        // linux/perf_event.h: config1 at 56, config2 at 64 (PERF_ATTR_SIZE_VER1 = 72).
        assert_eq!(std::mem::offset_of!(PerfEventAttr, config1), 56);
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 72);
        assert_eq!(std::mem::size_of::<InfoAttr>(), 16);
    }
}
