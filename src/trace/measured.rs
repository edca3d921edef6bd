//! What the traced process really spends on a CPU while traced, against what it spent
//! before the probes were attached: the check on the cost estimate (`--stats` prints
//! both) and the intervals the calibrated trap cost is corrected from (`correction`).
//!
//! The process's CPU time (its threads' schedstat, `runtime::cpu_and_wait_ns`) is read when gtrace
//! starts (-p), when the probes attach, and every 20 ms while tracing (`runtime::CpuReader`:
//! each thread's file kept open). What it spends
//! above its share before attaching (over its life when that agrees with what it spent
//! during gtrace's start-up, or that start-up share for a near-idle target, else over a
//! quiet window: `Baseline`) is what the probes
//! really cost it, as long as its load stays what it was. At each look of the budget (`observe`), once an interval has
//! passed (the first half a second after the attach, then each second), the interval's
//! extra CPU, the probes' eBPF time and their traps by kind go to the correction, which
//! follows the host's load as it goes.

use super::correction::{Correction, Interval, Seen};
use super::paired::{Look, Paired, Phase};
use crate::arch::trap::ByKind;
use crate::output::measured::TargetMeasure;
use std::time::{Duration, Instant};

pub use super::correction::{MEASURABLE, SCALE_RANGE};

/// The shortest window before attaching that gives a share of a CPU to compare with.
pub const SHORTEST_BEFORE: Duration = Duration::from_millis(100);
/// The youngest target whose share over its life may stand for its share untraced: its
/// own start-up (a Go program's init, a server's configuration) weighs little after it.
pub const LIFETIME_FROM: Duration = Duration::from_secs(2);
/// The shortest window of gtrace's own start-up that checks a lifetime share against now.
pub const CHECK_WINDOW: Duration = Duration::from_millis(50);
/// How far above the share read during gtrace's start-up the share over the target's
/// life may be (as a part of it, and a share of a CPU more): that window is read while
/// gtrace compiles and loads on the host's CPUs, which only adds to what the target
/// spends, so a lifetime share well above it says the target's load has fallen.
const LIFETIME_ABOVE: (f64, f64) = (0.25, 0.01);
/// How far below it: gtrace's own work made a steady program spend up to 2.1x its share
/// alone over that window on this 2-CPU VM (7.4-11.6% of a CPU for 5.6%), so only a
/// lifetime share under that (with room) says its load has risen.
const LIFETIME_BELOW: (f64, f64) = (2.5, 0.01);

/// A target that spent under this share of a CPU over gtrace's start-up is near idle:
/// that share (which gtrace's own work only adds to) stands for its share untraced.
const NEAR_IDLE: f64 = 0.01;

/// The target's share of a CPU untraced, as gtrace took it before attaching.
#[derive(Clone, Copy, Debug)]
pub enum Baseline {
    /// Read without waiting (`share_at_once`), a fraction.
    AtOnce(f64),
    /// Over a quiet window from this reading to the attach, gtrace idle.
    Quiet(Reading),
}

/// Whether a target's share of a CPU over its life (`lifetime`) can stand for its share
/// now, given the share it spent over gtrace's start-up (`startup`, inflated by gtrace's
/// own work): not above it by more than `LIFETIME_ABOVE`, nor below it by more than
/// `LIFETIME_BELOW` allows. A share too low (the load rose since) makes the probes look
/// dearer and the budget cut sooner; too high (the load fell) would let them cost the
/// target more than the budget says, so that side is the tight one.
pub fn lifetime_agrees(lifetime: f64, startup: f64) -> bool {
    lifetime <= startup * (1.0 + LIFETIME_ABOVE.0) + LIFETIME_ABOVE.1
        && lifetime >= startup / LIFETIME_BELOW.0 - LIFETIME_BELOW.1
}

/// The target's share of a CPU untraced without a quiet window, when one can be had:
/// its share over its life (`lifetime`, when it is old enough) if that agrees with what
/// it spent over gtrace's start-up (`startup`), else that start-up share when the
/// target was near idle then (`NEAR_IDLE`: at most that much above the truth, as a
/// lifetime share may be). None: a quiet window must measure it.
pub fn share_at_once(lifetime: Option<f64>, startup: f64) -> Option<f64> {
    match lifetime {
        Some(life) if lifetime_agrees(life, startup) => Some(life),
        _ => (startup < NEAR_IDLE).then_some(startup),
    }
}
/// The first interval, from the attach: a correction comes that soon (the budget's
/// first cuts weigh what stays high until then).
const FIRST_INTERVAL: Duration = Duration::from_millis(500);
/// Each interval after it.
const INTERVAL: Duration = Duration::from_secs(1);

/// A reading of the process's CPU time.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    pub at: Instant,
    pub cpu_ns: u64,
    /// Its threads' time waiting on a run queue for a CPU.
    pub wait_ns: u64,
    /// How many times its threads were put on a CPU.
    pub slices: u64,
}

impl Reading {
    /// `pid`'s CPU time now, when it can be read.
    pub fn now(pid: u32) -> Option<Reading> {
        crate::runtime::cpu_and_wait_ns(pid).map(|s| Reading::of(s, Instant::now()))
    }

    fn of(s: crate::runtime::Schedstat, at: Instant) -> Reading {
        Reading { at, cpu_ns: s.cpu_ns, wait_ns: s.wait_ns, slices: s.slices }
    }

    /// Its share of a CPU since `earlier`, as a fraction.
    pub fn rate_since(&self, earlier: &Reading) -> Option<f64> {
        let wall = self.at.checked_duration_since(earlier.at)?.as_nanos() as f64;
        (wall > 0.0).then(|| self.cpu_ns.saturating_sub(earlier.cpu_ns) as f64 / wall)
    }

    /// How long it waited for a CPU since `earlier` for each ns it ran (0 when it did
    /// not run).
    pub fn waits_per_run_since(&self, earlier: &Reading) -> f64 {
        let ran = self.cpu_ns.saturating_sub(earlier.cpu_ns);
        let waited = self.wait_ns.saturating_sub(earlier.wait_ns);
        if ran > 0 {
            waited as f64 / ran as f64
        } else {
            0.0
        }
    }
}

/// The probes' estimate so far, as the budget's look reads it: their traps by kind at
/// the calibrated cost, their eBPF time, what their hits pay after wake-ups, their hits,
/// and what one hit pays after its thread woke (`trace::woken`), ns.
#[derive(Clone, Copy, Debug, Default)]
pub struct Estimate {
    pub traps_ns: ByKind,
    pub ebpf_ns: f64,
    pub woken_ns: f64,
    pub hits: u64,
    pub woken_each_ns: f64,
}

/// Where the current interval began: the reading, and the probes' estimate then.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: Reading,
    traps_ns: ByKind,
    run_ns: f64,
}

#[derive(Clone, Debug)]
pub struct TargetCpu {
    /// Reads the target's threads' schedstat files, kept open.
    reader: crate::runtime::CpuReader,
    /// Its share of a CPU before attaching (a fraction).
    before: Option<f64>,
    /// How long it waited for a CPU for each ns it ran, before attaching: a program that
    /// sleeps and wakes often waits that long untraced (its wake-ups' latency), which is
    /// not the host holding it back.
    waited_before: f64,
    attached: Reading,
    newest: Reading,
    mark: Mark,
    correction: Correction,
    /// A duty cycle's own measure (`trace::paired`), and the cycle's phase now.
    paired: Paired,
    phase: Option<Phase>,
    /// Times its threads were put on a CPU while a duty cycle had the probes off (no
    /// hit can follow those wake-ups), and the count at the last look with whether the
    /// probes were off then.
    slices_off: u64,
    last_look: Option<(u64, bool)>,
}

impl TargetCpu {
    /// Starts watching `pid` as the probes attach; `before` is its share of a CPU
    /// untraced (`trace::untraced_baseline`). How long it waited for a CPU untraced, for
    /// each ns it ran, is read over the recent past, however short: from `waits_from`, a
    /// reading taken when gtrace started (or else the quiet window's start), to the
    /// attach. Not over its life (startup7, reverted): that weighs the host as it was
    /// long ago (tests/go/prod on a loaded host read 0.39-0.88 over its 2.5 s life and
    /// 0.59-6.3 over gtrace's start-up), and on an idle host every traced interval of
    /// tests/estimate.rs was then set aside as held back (2 runs of 3 on a quiet host,
    /// docs/performance.md); nor only over a window of
    /// `SHORTEST_BEFORE` or more (a shorter one, the usual start-up on a small binary
    /// without the quiet window, then counted as no wait at all). A window that read
    /// little or no wait is harmless on an idle host: `correction::HELD` also asks for
    /// waits worth a share of a CPU.
    pub fn start(pid: u32, before: Option<Baseline>, waits_from: Option<Reading>) -> Option<TargetCpu> {
        let attached = Reading::now(pid)?;
        let (share, quiet) = match before {
            Some(Baseline::AtOnce(share)) => (Some(share), None),
            Some(Baseline::Quiet(b)) => {
                let long = attached.at.duration_since(b.at) >= SHORTEST_BEFORE;
                (long.then(|| attached.rate_since(&b)).flatten(), Some(b))
            }
            None => (None, None),
        };
        let waited_before = waits_from.or(quiet).map_or(0.0, |b| attached.waits_per_run_since(&b));
        Some(TargetCpu::new(pid, share, waited_before, attached))
    }

    fn new(pid: u32, before: Option<f64>, waited_before: f64, attached: Reading) -> TargetCpu {
        let mark = Mark { at: attached, traps_ns: ByKind::default(), run_ns: 0.0 };
        let reader = crate::runtime::CpuReader::new(pid);
        TargetCpu {
            reader,
            before,
            waited_before,
            attached,
            newest: attached,
            mark,
            correction: Correction::default(),
            paired: Paired::default(),
            phase: None,
            slices_off: 0,
            last_look: None,
        }
    }

    /// Reads the CPU time again, at most every 20 ms (its threads' files are read each
    /// time); the last reading stands once the process has ended.
    pub fn sample(&mut self) {
        if self.newest.at.elapsed() >= Duration::from_millis(20) {
            self.read();
        }
    }

    /// Reads the CPU time now, whenever it was last read (a look of the budget); the
    /// last reading stands once the process has ended.
    pub fn read(&mut self) {
        let read = self.reader.read().map(|s| Reading::of(s, Instant::now()));
        if let Some(r) = read.filter(|r| r.cpu_ns > 0) {
            self.newest = r;
        }
    }

    /// The duty cycle's phase from now on (None: no cycle running).
    pub fn phase(&mut self, phase: Option<Phase>) {
        self.phase = phase;
    }

    /// One look of the budget at the probes' estimate since they were attached. A duty
    /// cycle's pairs are read from it (`trace::paired`); once an interval has passed, it
    /// goes to the correction and a new one begins.
    pub fn observe(&mut self, e: &Estimate) -> Option<Seen> {
        let look = Look {
            at: self.newest.at,
            cpu_ns: self.newest.cpu_ns,
            slices: self.newest.slices,
            traps_ns: e.traps_ns.sum(),
            run_ns: e.ebpf_ns,
            hits: e.hits,
        };
        self.paired.look(look, self.phase, e.woken_each_ns);
        // The wake-ups since the last look, while the probes were off then.
        if let Some((slices, true)) = self.last_look {
            self.slices_off += look.slices.saturating_sub(slices);
        }
        self.last_look = Some((look.slices, self.phase.is_some_and(|p| !p.on)));
        // What the hits pay after a wake-up is known apart from the traps' cost, as
        // their eBPF time is: this correction is of the traps alone.
        let (traps_ns, run_ns) = (e.traps_ns, e.ebpf_ns + e.woken_ns);
        let before = self.before?;
        let wall = self.newest.at.checked_duration_since(self.mark.at.at)?;
        let first = self.mark.at.at == self.attached.at;
        if wall < if first { FIRST_INTERVAL } else { INTERVAL } {
            return None;
        }
        let wall_ns = wall.as_nanos() as f64;
        let spent = self.newest.cpu_ns.saturating_sub(self.mark.at.cpu_ns) as f64;
        let interval = Interval {
            wall_ns,
            spent_ns: spent,
            // What it waited beyond what it waited untraced for as much running.
            waited_ns: (self.newest.wait_ns.saturating_sub(self.mark.at.wait_ns) as f64 - self.waited_before * spent)
                .max(0.0),
            extra_ns: spent - before * wall_ns,
            run_ns: run_ns - self.mark.run_ns,
            traps_ns: traps_ns.minus(&self.mark.traps_ns),
        };
        self.mark = Mark { at: self.newest, traps_ns, run_ns };
        Some(self.correction.observe(&interval))
    }

    /// How many times its threads were put on a CPU since the attach while the probes
    /// were attached (`trace::woken`: a wake-up while a duty cycle has them off is
    /// followed by no hit, and counted it made every hit of tests/go/paced pay one).
    pub fn slices(&self) -> u64 {
        self.newest.slices.saturating_sub(self.attached.slices).saturating_sub(self.slices_off)
    }

    /// How many times its threads were put on a CPU since the attach, as last read,
    /// whether the probes were attached or not (`trace::woken::Ledger` prices them
    /// interval by interval: an interval with no hit pays none).
    pub fn slices_read(&self) -> u64 {
        self.newest.slices.saturating_sub(self.attached.slices)
    }

    /// The factor each kind's calibrated trap cost is multiplied by (1 before any):
    /// a duty cycle's measure once it has one (its two halves ran under the same load),
    /// else the correction from the share before attaching.
    pub fn scales(&self) -> ByKind {
        match self.paired.factor() {
            Some(f) => ByKind::all(f),
            None => self.correction.scales().unwrap_or(ByKind::ONE),
        }
    }

    /// The factor on what hits pay after wake-ups: a duty cycle's measure, else 1 (the
    /// correction from the share before attaching takes it as known).
    pub fn woken_scale(&self) -> f64 {
        self.paired.factor().unwrap_or(1.0)
    }

    /// What `--stats` says of the target.
    pub fn measure(&self) -> TargetMeasure {
        TargetMeasure {
            cpu_ns: self.newest.cpu_ns.saturating_sub(self.attached.cpu_ns),
            slices: self.slices(),
            wait_ns: self.newest.wait_ns.saturating_sub(self.attached.wait_ns),
            before_percent: self.before.map(|b| 100.0 * b),
            trap_scale: self.correction.common_scale(),
            trap_scales: self.correction.scales(),
            intervals: self.correction.taken,
            set_aside: self.correction.set_aside,
            duty: self.paired.measure(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lifetime_share_stands_only_near_what_gtraces_start_up_read() {
        // The steady program of tests/estimate.rs: 5.6% alone, 7.4-11.6% beside gtrace.
        assert!(lifetime_agrees(0.056, 0.074) && lifetime_agrees(0.056, 0.116));
        // An idle server, idle still.
        assert!(lifetime_agrees(0.001, 0.0));
        // Its load fell (a lifetime share above what it spends now, even with gtrace
        // beside it): never taken.
        assert!(!lifetime_agrees(0.30, 0.10) && !lifetime_agrees(0.05, 0.0));
        // Its load rose well past what gtrace's own work explains.
        assert!(!lifetime_agrees(0.05, 0.40) && !lifetime_agrees(0.0, 0.05));
        // Without a lifetime share that agrees, only a near-idle target is read at once.
        assert_eq!(share_at_once(Some(0.056), 0.09), Some(0.056));
        assert_eq!(share_at_once(Some(0.0103), 0.0), Some(0.0));
        assert_eq!(share_at_once(None, 0.004), Some(0.004));
        assert_eq!(share_at_once(None, 0.09), None);
        assert_eq!(share_at_once(Some(0.01), 0.60), None);
    }

    #[test]
    fn intervals_begin_half_a_second_after_the_attach_then_each_second() {
        let t0 = Instant::now();
        let reading = |ms: u64, cpu_ms: u64| Reading {
            at: t0 + Duration::from_millis(ms),
            cpu_ns: cpu_ms * 1_000_000,
            wait_ns: 0,
            slices: 0,
        };
        let mut cpu = TargetCpu::new(0, Some(0.10), 0.0, reading(0, 0));
        // Every 100 ms: 40 ms of CPU (10 before attaching, so 30 ms more); the estimate
        // says 35 ms of single-stepped traps and 5 ms of eBPF time each 100 ms.
        let mut taken = Vec::new();
        for i in 0..=25u64 {
            cpu.newest = reading(100 * i, 40 * i);
            let traps = ByKind { step: 35e6 * i as f64, ..ByKind::default() };
            let e = Estimate { traps_ns: traps, ebpf_ns: 5e6 * i as f64, ..Estimate::default() };
            if let Some(seen) = cpu.observe(&e) {
                taken.push((i, seen));
            }
        }
        assert_eq!(taken.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [5, 15, 25]);
        for (_, seen) in &taken {
            assert!(matches!(seen, Seen::Taken(f) if (f - 25.0 / 35.0).abs() < 1e-9), "{taken:?}");
        }
        let s = cpu.scales();
        assert!((s.step - 25.0 / 35.0).abs() < 1e-9, "{s:?}");
        assert_eq!(cpu.measure().cpu_ns, 1_000_000_000);
        assert_eq!(cpu.measure().before_percent, Some(10.0));
        assert_eq!(cpu.measure().intervals, 3);
        // Without a share before attaching (a command started traced): never corrected.
        let mut started = TargetCpu { before: None, ..TargetCpu::new(0, None, 0.0, reading(0, 0)) };
        started.newest = reading(2000, 800);
        let e = Estimate { traps_ns: ByKind::all(7e8), ebpf_ns: 1e8, ..Estimate::default() };
        assert_eq!(started.observe(&e), None);
        assert_eq!(started.scales(), ByKind::ONE);
    }
}
