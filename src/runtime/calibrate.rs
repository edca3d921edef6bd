//! What one uprobe trap costs on this machine, measured at start-up on gtrace's own
//! calibration functions (`arch::*::trap`, one of each kind of instruction) with and
//! without an empty uprobe on their first instruction, so that the estimate holds on
//! bare metal and in VMs alike.
//!
//! Under a hypervisor the cost is not one number: each virtual CPU runs on a host CPU
//! whose other work comes and goes, and a single-stepped trap on a contended one costs
//! more. On this project's 2-CPU VM, measured in turn on each CPU a few milliseconds
//! apart, a single-stepped trap cost 9.2-9.4 µs on one CPU while it cost 12.5-13.7 µs on
//! the other, for seconds at a time; measured on whichever CPU the scheduler gave the
//! calibration, the same load read 9.2, 13 or 18 µs from one start to the next (a target
//! spread over both paid 9-10.7). So the calibration pins itself to each CPU it may run
//! on in turn (up to `MAX_CPUS`, spread over them), several short rounds on each,
//! interleaved so that each CPU's rounds are spread over the calibration, and takes:
//! - on each CPU, the median of its rounds: a round is a batch of calls in this thread's
//!   CPU time, and what disturbs one (an interrupt, a cold cache) only adds to it, so the
//!   median leaves one disturbed round out; not the minimum, which would be the best
//!   case of a cost that really moves with the host's load;
//! - over the CPUs, the mean: the target's threads run on all of them, each a part of
//!   the time, and pay the trap at that CPU's cost; not the fastest CPU's cost (the
//!   target pays the slow one's too) nor the slowest's.
//!
//! What is left (the target's threads may favour one CPU, the host's load moves during
//! the trace) is for the correction from the target's measured CPU (`trace::correction`).
//! Against what a test program paid, twelve traces read a median 1.02x (0.77-1.40: the
//! spread of virtual CPUs caught in a slow moment, or not; docs/performance.md, "The
//! trap's calibration"); on a tight loop of calls, within 4%.
//!
//! A tight loop keeps the trap's kernel path in the CPU's caches; a thread that slept
//! finds it cold. So a few calls are also timed right after the calibration thread
//! slept, on each CPU: what they cost beyond the tight loop's call is `woken_ns`, which
//! the estimate adds on the target's hits that follow a wake-up (`trace::woken`).

use super::error::RuntimeError;
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

/// At most this many CPUs are measured, spread evenly over those gtrace may run on.
const MAX_CPUS: usize = 8;
/// Rounds of each kind on each CPU.
const ROUNDS: usize = 5;
/// Calls of each kind, not counted, on a CPU the calibration just moved to.
const WARM_UP: usize = 4;
/// The CPU time a round aims at, ns (a batch of calls sized from one call).
const ROUND_NS: f64 = 100_000.0;
/// Calls timed right after the thread slept, on each CPU, with the probe.
const WOKEN_CALLS: usize = 9;
/// How long the thread sleeps before each of them (the kernel's timer slack adds about
/// 50 us): long enough that the CPU runs something else or idles meanwhile. How cold the
/// trap then is grows with the sleep: on a test program a trap after a sleep of 10 us
/// cost 1.3 us more than in a tight loop, after 50 us 1.6, after 200 us 1.8, after 1 ms
/// 2.2; Caddy under load paid 1.7-2.2 us more on hits after its threads woke. 9 calls on
/// each of 2 CPUs add about 5 ms to the calibration, which measures once the probes are
/// attached (`trace::calibration`).
const WOKEN_SLEEP: std::time::Duration = std::time::Duration::from_micros(200);

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
    /// How many CPUs it was measured on (0: the calibration could not pin itself to one,
    /// and measured wherever the scheduler ran it).
    pub cpus: usize,
    /// A single-stepped trap's cost on the cheapest and the dearest CPU measured, ns.
    pub step_range_ns: (f64, f64),
    /// What a trap costs beyond the above when it is its thread's first after the
    /// thread slept (the trap's kernel path, cold after other work ran on the CPU or it
    /// idled), ns: a server's thread pays it about once each time it wakes for work.
    pub woken_ns: f64,
}

impl TrapCost {
    pub fn of(&self, kind: TrapKind) -> f64 {
        match kind {
            TrapKind::Step => self.step_ns,
            TrapKind::Push => self.push_ns,
            TrapKind::Branch => self.branch_ns,
        }
    }

    /// Every kind's cost times `factor` (the test hook `trace::stats::TEST_SCALE_ENV`).
    pub fn scaled(&self, factor: f64) -> TrapCost {
        let (lo, hi) = self.step_range_ns;
        TrapCost {
            step_ns: self.step_ns * factor,
            push_ns: self.push_ns * factor,
            branch_ns: self.branch_ns * factor,
            step_range_ns: (lo * factor, hi * factor),
            woken_ns: self.woken_ns * factor,
            ..*self
        }
    }
}

/// The empty program's links; dropping them detaches.
enum CalibrationLink {
    Multi(#[allow(dead_code)] MultiLink),
    PerfEvents(#[allow(dead_code)] Vec<OwnedFd>),
}

/// Times calls of gtrace's calibration functions without and with an empty uprobe on
/// their first instruction, one of each kind, on each CPU in turn (a few milliseconds on
/// a machine where a trap costs microseconds, plus loading the program and making the
/// link). Turn the kernel's statistics on first: the empty program's own run time is
/// then taken off. Call it on a thread of its own: it moves that thread from CPU to CPU
/// (and puts it back where it was allowed to run).
pub fn calibrate_trap() -> Result<TrapCost, RuntimeError> {
    calibration_link()?.measure()
}

/// The calibration's empty uprobe attached, not yet measured with: the calls untraced
/// timed, the program loaded and its link made. Making a uprobe link waits for an RCU
/// grace period (the first registration after a quiet while, milliseconds): this is the
/// part that can be done ahead, while gtrace waits on something else.
pub struct CalibrationLinked {
    triggers: [Trigger; 3],
    untraced: [f64; 3],
    program: OwnedFd,
    link: CalibrationLink,
    how: &'static str,
}

/// Times the calls untraced (a few nanoseconds each, 15,000 calls), then loads the
/// empty program and attaches it.
pub fn calibration_link() -> Result<CalibrationLinked, RuntimeError> {
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
    Ok(CalibrationLinked { triggers, untraced, program, link, how })
}

impl CalibrationLinked {
    /// Measures the trap: on each CPU in turn, rounds of calls with the uprobe on.
    pub fn measure(self) -> Result<TrapCost, RuntimeError> {
        let CalibrationLinked { triggers, untraced, program, link, how } = self;
        // The first hit of a new uprobe is slow (the kernel sets it up); not counted.
        triggers.iter().for_each(|t| t.fire());
        let allowed = allowed_cpus();
        let cpus = spread(&allowed, MAX_CPUS);
        let mut rounds = rounds_on(&triggers, &cpus);
        let woken_traced = woken_calls(triggers[2], &cpus);
        pin_to(&allowed);
        rounds.retain(|r| !r[0].is_empty());
        let pinned = rounds.len();
        if rounds.is_empty() {
            // Not allowed to choose a CPU (a seccomp filter, a cpuset that moved):
            // wherever the scheduler runs it.
            rounds.push(triggers.map(|t| (0..ROUNDS).map(|_| median_call(t, 40, 1)).collect()));
        }
        let own = super::accounting::run_stats_of(program.as_fd()).ok().filter(|s| s.run_count > 0);
        let own_ns = own.map_or(0.0, |s| s.run_ns as f64 / s.run_count as f64);
        let per_cpu: Vec<[f64; 3]> = rounds.iter().map(|r| [0, 1, 2].map(|k| median(&r[k]))).collect();
        let ns = |k: usize, traced: f64| (traced - untraced[k] - own_ns).max(0.0);
        let cost = |k: usize| ns(k, per_cpu.iter().map(|c| c[k]).sum::<f64>() / per_cpu.len() as f64);
        let steps = per_cpu.iter().map(|c| ns(0, c[0]));
        let step_range_ns = (steps.clone().fold(f64::INFINITY, f64::min), steps.fold(0.0, f64::max));
        // The call itself, cold after the sleep, is counted in: a tenth or two of a
        // microsecond more (the side the budget errs on), for half the calibration's time.
        let woken_ns = woken_extra(&woken_traced, cost(2) + own_ns + untraced[2]);
        // Detaching waits for the kernel's grace periods (milliseconds): not on the way in.
        std::thread::spawn(move || drop((link, program)));
        Ok(TrapCost {
            step_ns: cost(0),
            push_ns: cost(1),
            branch_ns: cost(2),
            untraced_ns: untraced[0],
            link: how,
            cpus: pinned,
            step_range_ns,
            woken_ns,
        })
    }
}

/// `ROUNDS` rounds of each kind on each of `cpus`, interleaved: per CPU, per kind, the
/// ns of one call of each round (a CPU this thread could not move to has none).
fn rounds_on(triggers: &[Trigger; 3], cpus: &[usize]) -> Vec<[Vec<f64>; 3]> {
    let mut rounds: Vec<[Vec<f64>; 3]> = Vec::new();
    let mut batches: Vec<[usize; 3]> = Vec::new();
    for _ in 0..ROUNDS {
        for (i, cpu) in cpus.iter().enumerate() {
            if !pin_to(&[*cpu]) {
                continue;
            }
            // A thread just moved finds the trap's kernel data in another CPU's cache:
            // a few calls of each kind first, not counted.
            for t in triggers {
                (0..WARM_UP).for_each(|_| t.fire());
            }
            if rounds.len() <= i {
                rounds.resize_with(i + 1, Default::default);
                batches.resize(i + 1, [0; 3]);
            }
            for (k, t) in triggers.iter().enumerate() {
                if batches[i][k] == 0 {
                    // The first call on a CPU sizes its batches (and is not counted).
                    let one = median_call(*t, 1, 1).max(1.0);
                    batches[i][k] = ((ROUND_NS / one) as usize).clamp(8, 4000);
                }
                rounds[i][k].push(median_call(*t, batches[i][k], 1));
            }
        }
    }
    rounds
}

/// On each of `cpus` in turn (or where the thread runs, when it cannot be pinned), the
/// median of `WOKEN_CALLS` calls of `trigger`, each timed right after the thread slept,
/// ns. By the wall clock (the vDSO's, which does not enter the kernel), not the thread's
/// CPU time, whose every reading is a system call that would warm the kernel's entry
/// path before the trap; the median leaves out a call the thread was preempted in.
fn woken_calls(trigger: Trigger, cpus: &[usize]) -> Vec<f64> {
    let mut medians = Vec::new();
    for cpu in cpus {
        if !pin_to(&[*cpu]) && !medians.is_empty() {
            break;
        }
        let times: Vec<f64> = (0..WOKEN_CALLS)
            .map(|_| {
                std::thread::sleep(WOKEN_SLEEP);
                let start = std::time::Instant::now();
                black_box(trigger).fire();
                start.elapsed().as_nanos() as f64
            })
            .collect();
        medians.push(median(&times));
    }
    medians
}

/// What a trap costs beyond `warm_ns` (the call, its trap and the empty program's run,
/// as timed in a tight loop) when its thread just woke: the mean over CPUs of the calls
/// timed after a sleep with the probe (`traced`), less `warm_ns`; never below 0.
fn woken_extra(traced: &[f64], warm_ns: f64) -> f64 {
    if traced.is_empty() {
        return 0.0;
    }
    let mean = traced.iter().sum::<f64>() / traced.len() as f64;
    (mean - warm_ns).max(0.0)
}

/// The median of `values` (0 when there are none).
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// At most `most` of `cpus`, spread evenly over them.
fn spread(cpus: &[usize], most: usize) -> Vec<usize> {
    let step = cpus.len().div_ceil(most.max(1)).max(1);
    cpus.iter().step_by(step).copied().collect()
}

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads `set` within its size (CPU_SETSIZE bits).
    (0..libc::CPU_SETSIZE as usize).filter(|c| unsafe { libc::CPU_ISSET(*c, &set) }).collect()
}

/// Moves this thread to run only on `cpus` (it is on one of them when this returns);
/// false when the kernel refuses.
fn pin_to(cpus: &[usize]) -> bool {
    if cpus.is_empty() {
        return false;
    }
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus {
        // SAFETY: CPU_SET writes within `set` (it ignores CPUs past CPU_SETSIZE).
        unsafe { libc::CPU_SET(*c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size given; 0 is this thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// The median of `rounds` batches of `calls` calls, in ns of this thread's CPU time a
/// call. CPU time, not the wall clock: what the target pays for a trap is CPU time on its
/// own threads, and the wall clock of a busy host also counts the time this thread
/// waited for a CPU (several times the trap on a loaded 2-CPU machine).
fn median_call(trigger: Trigger, calls: usize, rounds: usize) -> f64 {
    let times: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = thread_cpu_ns();
            for _ in 0..calls {
                black_box(trigger).fire();
            }
            thread_cpu_ns().saturating_sub(start) as f64 / calls as f64
        })
        .collect();
    median(&times)
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
    }

    #[test]
    fn at_most_so_many_cpus_spread_over_all() {
        let all: Vec<usize> = (0..64).collect();
        assert_eq!(spread(&all, 8), [0, 8, 16, 24, 32, 40, 48, 56]);
        assert_eq!(spread(&[0, 1], 8), [0, 1]);
        assert_eq!(spread(&(0..10).collect::<Vec<_>>(), 8), [0, 2, 4, 6, 8]);
        assert!(spread(&[], 8).is_empty());
    }

    #[test]
    fn a_woken_trap_costs_what_the_traced_calls_add_beyond_the_warm_trap() {
        // Two CPUs: woken calls of 3.4 and 2.6 us traced; a warm call with its trap and
        // empty program, 0.8 us: 2.6 us more on the one, 1.8 on the other.
        assert!((woken_extra(&[3400.0, 2600.0], 800.0) - 2200.0).abs() < 1e-9);
        // Never below 0 (a quiet machine where waking costs nothing), nor from nothing.
        assert_eq!(woken_extra(&[700.0], 800.0), 0.0);
        assert_eq!(woken_extra(&[], 800.0), 0.0);
    }

    #[test]
    fn the_median_leaves_one_disturbed_round_out() {
        assert_eq!(median(&[9.3, 9.2, 27.9, 9.4, 9.3]), 9.3);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn this_thread_can_be_pinned_to_each_cpu_it_may_run_on() {
        // On its own thread: pinning the test harness's thread would outlive the test.
        std::thread::spawn(|| {
            let allowed = allowed_cpus();
            assert!(!allowed.is_empty());
            for cpu in spread(&allowed, MAX_CPUS) {
                assert!(pin_to(&[cpu]));
                // SAFETY: sched_getcpu takes nothing.
                assert_eq!(unsafe { libc::sched_getcpu() }, cpu as i32);
            }
            assert!(pin_to(&allowed));
            assert_eq!(allowed_cpus(), allowed);
        })
        .join()
        .unwrap();
    }
}
