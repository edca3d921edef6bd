//! The trap's calibration over a trace's start (`runtime::calibrate` measures): on a
//! thread of its own, its link made while the programs load (`begin`: the link's wait
//! for an RCU grace period passes beside the verifier's; a link made within a grace
//! period of the last one waits for none, so the probes' links, made a few
//! milliseconds later, wait for none either), its measurement once the probes are
//! attached (`Calibration::measure`), so that it adds nothing before `Attached`: the
//! tight loops and the calls after a sleep take 5-10 ms of a 2-CPU machine, a seventh
//! of a one-probe start. What reads a cost waits for it (`stats::Meter::trap`): the
//! budget's first look, `--stats`, the exporters and the live view never price a hit
//! without its trap. So the measurement runs at a raised priority
//! (`runtime::priority`: its work is bounded, and it sleeps only between its calls after
//! a sleep): at the normal priority on a loaded host its loops, pinned to each CPU in
//! turn, waited for those CPUs (3-4 ms of CPU took 18-498 ms at a load average of 8-17
//! on 2 CPUs: docs/performance.md, "The breaker's first look on a saturated host"), and
//! the breaker's first look with them.

use crate::runtime::{Loaded, RuntimeError, TrapCost};
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// The calibration's thread, from its link to its measurement.
#[derive(Debug)]
pub struct Calibration {
    thread: Option<JoinHandle<Result<TrapCost, RuntimeError>>>,
    /// Tells the thread to measure (dropped unsent: it ends without measuring).
    go: Option<Sender<()>>,
}

/// What measures, once the link is made (on the calibration's thread).
type Measurement = Box<dyn FnOnce() -> Result<TrapCost, RuntimeError>>;

/// A test hook, not an option: set to a number, every calibrated trap cost is multiplied
/// by it, so that tests/estimate.rs can show the correction recovering from a
/// calibration that is off by that much. Nothing else reads it.
pub const TEST_SCALE_ENV: &str = "GTRACE_TEST_HOOK_TRAP_COST_SCALE";

/// A test hook, not an option: set to a number of milliseconds, the calibration waits
/// that long after it is told to measure, so that tests/calibration.rs can show what
/// reads a cost waiting for it (a slow host's calibration). Nothing else reads it.
pub const TEST_DELAY_ENV: &str = "GTRACE_TEST_HOOK_CALIBRATION_DELAY_MS";

/// Once the maps are made and before the programs load, when costs will be read
/// (`--stats`, a budget, an exporter, the live view): starts the calibration's thread,
/// which makes its link and waits to be told to measure.
pub fn begin(wanted: bool) -> Calibration {
    if !wanted {
        return Calibration::none();
    }
    Calibration::on_thread(|| {
        let linked = crate::runtime::calibration_link()?;
        Ok(Box::new(move || linked.measure()))
    })
}

/// Once loaded and before attaching, when costs will be read: turns the kernel's
/// per-program statistics on (the calibration's empty program's own run time is taken
/// off with them, and the probes' eBPF time is read). What cannot be had is said, and the
/// trace goes on without it.
pub fn run_stats_on(loaded: &mut Loaded, calibration: &Calibration) {
    if calibration.thread.is_none() {
        return;
    }
    if let Err(e) = loaded.enable_run_stats() {
        let cause = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default();
        eprintln!("gtrace: {e}: eBPF time is not measured ({cause})");
    }
}

impl Calibration {
    /// No calibration: costs are eBPF time only.
    pub fn none() -> Calibration {
        Calibration { thread: None, go: None }
    }

    /// On a thread of its own: `link` at once (the link made), then, once told
    /// (`measure`) and after the delay hook, the measurement it returned.
    fn on_thread<L>(link: L) -> Calibration
    where
        L: FnOnce() -> Result<Measurement, RuntimeError> + Send + 'static,
    {
        let (go, told) = channel::<()>();
        let thread = std::thread::spawn(move || {
            let linked = link();
            // Not held back by the host's load, from the moment it is told (the budget's
            // first look waits for it): told as the probes attach, its wake-up at the
            // normal priority waited up to 49 ms for a CPU on a saturated host.
            let _raised = crate::runtime::priority::raise();
            told.recv().map_err(|_| RuntimeError::Os {
                action: "calibrating the trap cost",
                source: std::io::Error::from(std::io::ErrorKind::Interrupted),
            })?;
            if let Some(ms) = std::env::var(TEST_DELAY_ENV).ok().and_then(|v| v.parse::<u64>().ok()) {
                std::thread::sleep(Duration::from_millis(ms));
            }
            linked?()
        });
        Calibration { thread: Some(thread), go: Some(go) }
    }

    /// Tells the thread to measure, now that the probes are attached: never while the
    /// verifier runs or the kernel zeroes maps, nor over the window the target's
    /// untraced share is read in.
    pub fn measure(&mut self) {
        if let Some(go) = self.go.take() {
            let _ = go.send(());
        }
    }

    /// What a trap costs here, once measured (times the test hook's factor, when set);
    /// told to measure first if it was not. None, said, when it could not be measured.
    pub fn finish(mut self) -> Option<TrapCost> {
        self.measure();
        let result = self.thread.take()?.join().ok()?;
        let hook = std::env::var(TEST_SCALE_ENV).ok().and_then(|v| v.parse::<f64>().ok()).filter(|f| *f > 0.0);
        match result {
            Ok(trap) => Some(hook.map_or(trap, |f| trap.scaled(f))),
            Err(e) => {
                eprintln!("gtrace: cannot measure what a uprobe trap costs here: {e}; costs count eBPF time only");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::stats::Meter;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn cost(woken_ns: f64) -> TrapCost {
        TrapCost {
            step_ns: 9000.0,
            push_ns: 900.0,
            branch_ns: 800.0,
            untraced_ns: 2.0,
            link: "uprobe_multi",
            cpus: 2,
            step_range_ns: (8000.0, 10_000.0),
            woken_ns,
        }
    }

    /// A calibration whose link is made at once and whose measurement takes `ms`;
    /// `measured` says whether it ran.
    fn slow(ms: u64, measured: Arc<AtomicBool>) -> Calibration {
        Calibration::on_thread(move || {
            Ok(Box::new(move || {
                std::thread::sleep(Duration::from_millis(ms));
                measured.store(true, Ordering::SeqCst);
                Ok(cost(2200.0))
            }))
        })
    }

    #[test]
    fn the_meters_first_reading_waits_for_a_calibration_still_measuring() {
        // Told to measure after the attach, as the trace does; read at once (the
        // budget's first look): the cost read is the one measured, never none.
        let measured = Arc::new(AtomicBool::new(false));
        let mut calibration = slow(200, measured.clone());
        calibration.measure();
        let meter = Meter::new(&crate::plan::Plan::default(), calibration, Some(5.0));
        assert_eq!(meter.trap(), Some(cost(2200.0)));
        assert!(measured.load(Ordering::SeqCst));
        // Read once: the same after.
        assert_eq!(meter.trap().map(|t| t.woken_ns), Some(2200.0));
    }

    #[test]
    fn counters_read_before_the_calibration_is_in_are_priced_with_it() {
        // The budget's first window begins as the probes attach, read without waiting
        // (`Meter::read_unpriced`: no trap cost yet), and is priced at its first look.
        use crate::arch::trap::TrapKind;
        use crate::trace::stats::{ProbeStats, SiteStats, Stats};
        let measured = Arc::new(AtomicBool::new(false));
        let mut calibration = slow(50, measured.clone());
        calibration.measure();
        let meter = Meter::new(&crate::plan::Plan::default(), calibration, Some(2.0));
        let site =
            SiteStats { function: "main.hot".into(), hits: 1000, kind: Some(TrapKind::Step), ..Default::default() };
        let probe =
            ProbeStats { program: "p0".into(), in_target: true, hits: 1000, sites: vec![site], ..Default::default() };
        let mut stats = Stats { probes: vec![probe], ..Default::default() };
        meter.price(&mut stats);
        assert!(measured.load(Ordering::SeqCst));
        assert_eq!(stats.trap, Some(cost(2200.0)));
        let p = &stats.probes[0];
        assert_eq!(p.sites[0].trap_ns, 9000.0);
        // 1,000 single-stepped traps at the calibrated 9 us, no wake-ups.
        assert_eq!(p.cost_ns, 1000.0 * 9000.0);
        assert_eq!(p.woken_ns, 0.0);
    }

    #[test]
    fn a_calibration_never_told_to_measure_measures_when_read() {
        let measured = Arc::new(AtomicBool::new(false));
        let meter = Meter::new(&crate::plan::Plan::default(), slow(10, measured.clone()), None);
        assert!(!measured.load(Ordering::SeqCst));
        assert_eq!(meter.trap(), Some(cost(2200.0)));
    }

    #[test]
    fn it_does_not_measure_before_it_is_told() {
        // The link is made at once; the measurement waits for `measure`.
        let measured = Arc::new(AtomicBool::new(false));
        let mut calibration = slow(0, measured.clone());
        std::thread::sleep(Duration::from_millis(100));
        assert!(!measured.load(Ordering::SeqCst));
        calibration.measure();
        assert_eq!(calibration.finish(), Some(cost(2200.0)));
        assert!(measured.load(Ordering::SeqCst));
    }

    #[test]
    fn no_calibration_reads_none_and_one_that_failed_reads_none() {
        assert_eq!(Meter::new(&crate::plan::Plan::default(), Calibration::none(), None).trap(), None);
        let failed =
            Calibration::on_thread(|| Err(RuntimeError::TriggerNotFound { function: "gtrace_calibrate_step" }));
        assert_eq!(failed.finish(), None);
    }
}
