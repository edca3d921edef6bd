//! What the traced process really spends on a CPU while traced, against what it spent
//! before the probes were attached: the check on the cost estimate (`--stats` prints
//! both) and the correction of the calibrated trap cost the budget acts on.
//!
//! The process's CPU time (its threads' schedstat, `runtime::cpu_ns`) is read when gtrace
//! starts (-p), when the probes attach, and every 20 ms while tracing. What it spends
//! above its share before attaching is what the probes really cost it, as long as its
//! load stays what it was. The eBPF time is measured by the kernel, so only the trap cost
//! is an estimate: at each look of the budget (`observe`), over everything since the
//! attach (a trap's cost moves slowly; a window of one second is mostly the target's own
//! noise), the trap cost is scaled so that traps plus eBPF time equal the measured extra.
//! It is corrected only once half a second has passed and the estimate is at least
//! `MEASURABLE` (below it the target's noise is larger than the probes), and within
//! `SCALE_RANGE`, so that a load that changed since attaching is not taken whole for the
//! probes' cost.

use crate::output::measured::TargetMeasure;
use std::time::{Duration, Instant};

/// The shortest window before attaching that gives a share of a CPU to compare with.
pub const SHORTEST_BEFORE: Duration = Duration::from_millis(50);
/// The shortest time traced that a correction is made from.
const SHORTEST_TRACED: Duration = Duration::from_millis(500);
/// An estimate under this share of a CPU (percent) is not checked.
pub const MEASURABLE: f64 = 1.0;
/// The bounds of the correction.
/// The bounds of the correction: the calibrated estimate was within these of what
/// targets spent (5-25% high on a test program, a third low on a database server), and
/// a load that changed since attaching moves the measure by more.
pub const SCALE_RANGE: (f64, f64) = (0.67, 1.5);

/// A reading of the process's CPU time.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    pub at: Instant,
    pub cpu_ns: u64,
}

impl Reading {
    /// `pid`'s CPU time now, when it can be read.
    pub fn now(pid: u32) -> Option<Reading> {
        crate::runtime::cpu_ns(pid).map(|cpu_ns| Reading { at: Instant::now(), cpu_ns })
    }

    /// Its share of a CPU since `earlier`, as a fraction.
    fn rate_since(&self, earlier: &Reading) -> Option<f64> {
        let wall = self.at.checked_duration_since(earlier.at)?.as_nanos() as f64;
        (wall > 0.0).then(|| self.cpu_ns.saturating_sub(earlier.cpu_ns) as f64 / wall)
    }
}

#[derive(Clone, Debug)]
pub struct TargetCpu {
    pid: u32,
    /// Its share of a CPU before attaching (a fraction).
    before: Option<f64>,
    attached: Reading,
    newest: Reading,
    scale: Option<f64>,
}

impl TargetCpu {
    /// Starts watching `pid` as the probes attach; `before` is a reading taken when
    /// gtrace started, for the share of a CPU it had untraced.
    pub fn start(pid: u32, before: Option<Reading>) -> Option<TargetCpu> {
        let attached = Reading::now(pid)?;
        let before = before
            .filter(|b| attached.at.duration_since(b.at) >= SHORTEST_BEFORE)
            .and_then(|b| attached.rate_since(&b));
        Some(TargetCpu { pid, before, attached, newest: attached, scale: None })
    }

    /// Reads the CPU time again, at most every 20 ms (its threads' files are read each
    /// time); the last reading stands once the process has ended.
    pub fn sample(&mut self) {
        if self.newest.at.elapsed() < Duration::from_millis(20) {
            return;
        }
        if let Some(r) = Reading::now(self.pid).filter(|r| r.cpu_ns > 0) {
            self.newest = r;
        }
    }

    /// One look of the budget: the probes' estimated traps (uncorrected) and eBPF time
    /// since they were attached, ns. Corrects the trap cost once it can be told.
    pub fn observe(&mut self, traps_ns: f64, run_ns: f64) {
        let (Some(before), Some(rate)) = (self.before, self.newest.rate_since(&self.attached)) else { return };
        let wall = self.newest.at.duration_since(self.attached.at);
        if wall < SHORTEST_TRACED {
            return;
        }
        let per_wall_ns = |ns: f64| ns / wall.as_nanos() as f64;
        if let Some(seen) = scale_seen(rate - before, per_wall_ns(traps_ns), per_wall_ns(run_ns)) {
            self.scale = Some(seen);
        }
    }

    /// The factor the calibrated trap cost is multiplied by (1 before it is measured).
    pub fn scale(&self) -> f64 {
        self.scale.unwrap_or(1.0)
    }

    /// What `--stats` says of the target.
    pub fn measure(&self) -> TargetMeasure {
        TargetMeasure {
            cpu_ns: self.newest.cpu_ns.saturating_sub(self.attached.cpu_ns),
            before_percent: self.before.map(|b| 100.0 * b),
            trap_scale: self.scale,
        }
    }
}

/// The trap cost's scale that makes the estimate (`traps` at the calibrated cost, plus
/// `run` eBPF time, both in CPU a wall ns) equal the `extra` CPU the target spent above
/// its share before attaching; `None` when the estimate is too small to tell.
pub fn scale_seen(extra: f64, traps: f64, run: f64) -> Option<f64> {
    if 100.0 * (traps + run) < MEASURABLE || traps <= 0.0 {
        return None;
    }
    Some(((extra - run) / traps).clamp(SCALE_RANGE.0, SCALE_RANGE.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_makes_traps_and_ebpf_time_equal_the_extra_cpu() {
        // 35% of a CPU estimated in traps, 5% in eBPF; the target spent 30% more.
        let s = scale_seen(0.30, 0.35, 0.05).unwrap();
        assert!((s * 0.35 + 0.05 - 0.30).abs() < 1e-9, "{s}");
        // Bounded: a load that tripled since attaching is not all the probes'.
        assert_eq!(scale_seen(5.0, 0.40, 0.05), Some(SCALE_RANGE.1));
        assert_eq!(scale_seen(0.0, 0.40, 0.05), Some(SCALE_RANGE.0));
        // Under 1% of a CPU: not measurable against the target's noise.
        assert_eq!(scale_seen(0.30, 0.004, 0.001), None);
        assert_eq!(scale_seen(0.30, 0.0, 0.05), None);
    }

    #[test]
    fn looks_correct_only_with_a_share_before_and_after_half_a_second() {
        let t0 = Instant::now();
        let reading = |ms: u64, cpu_ms: u64| Reading { at: t0 + Duration::from_millis(ms), cpu_ns: cpu_ms * 1_000_000 };
        let mut cpu =
            TargetCpu { pid: 0, before: Some(0.10), attached: reading(0, 0), newest: reading(0, 0), scale: None };
        // Every 100 ms: 40 ms of CPU (10 before attaching, so 30 ms more); the estimate
        // says 35 ms of traps and 5 ms of eBPF time each 100 ms.
        for i in 0..=10u64 {
            cpu.newest = reading(100 * i, 40 * i);
            cpu.observe(35e6 * i as f64, 5e6 * i as f64);
            if i < 5 {
                assert_eq!(cpu.scale, None, "traced under half a second at look {i}");
            }
        }
        let s = cpu.scale();
        assert!((s - 25.0 / 35.0).abs() < 1e-9, "{s}");
        assert_eq!(cpu.measure().cpu_ns, 400_000_000);
        assert_eq!(cpu.measure().before_percent, Some(10.0));
        // Without a share before attaching (a command started traced): never corrected.
        let mut started = TargetCpu { before: None, scale: None, ..cpu };
        started.observe(35e6 * 10.0, 5e6 * 10.0);
        assert_eq!(started.scale(), 1.0);
    }
}
