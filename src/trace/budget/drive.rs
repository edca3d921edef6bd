//! What the trace loop keeps about costs (`Costs`: the meter and the breaker) and one
//! look of the breaker acted on: a duty cycle driven, a cut detached program by program,
//! a cycle's record kept up to date in the meter.

use super::{by_program, duty, Act, Governor};
use crate::plan::Plan;
use crate::runtime::priority::Raised;
use crate::runtime::{Loaded, RuntimeError};
use crate::trace::stats::Meter;
use std::time::{Duration, Instant};

/// What the trace loop keeps about costs: the meter, and the breaker when there is a
/// budget.
pub struct Costs {
    pub meter: Meter,
    pub governor: Option<Governor>,
    /// The budget has left nothing attached (said once).
    emptied: bool,
    /// What a duty cycle empties before each re-attach (duty::start_tables).
    start_tables: Vec<String>,
    /// The duty cycle's record in `meter.detached`, once one ran.
    duty_at: Option<usize>,
    /// The loop's thread raised from the attach until the breaker's first look is done.
    startup: Option<Raised>,
}

/// What a look of the breaker leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    /// Probes are still attached (or there is no budget).
    Some,
    /// This look detached the last probes.
    NothingNow,
    /// Nothing was attached before this look either.
    Nothing,
}

impl Costs {
    pub fn new(meter: Meter, plan: &Plan) -> Costs {
        let governor = meter.budget_percent.and_then(|percent| Governor::new(plan, percent));
        let start_tables = duty::start_tables(plan);
        Costs { meter, governor, emptied: false, start_tables, duty_at: None, startup: None }
    }

    /// Drives a duty cycle, lets the breaker look when due, and says what is left
    /// attached.
    pub fn govern(&mut self, loaded: &mut Loaded, plan: &Plan) -> Result<Left, RuntimeError> {
        if self.emptied {
            self.mark_duty(Instant::now());
            return Ok(Left::Nothing);
        }
        let Some(g) = self.governor.as_mut() else { return Ok(Left::Some) };
        g.drive(loaded, &self.start_tables, Instant::now())?;
        let left = govern(g, loaded, plan, &mut self.meter);
        self.drop_raised_once_looked();
        if self.duty_at.is_none() {
            self.duty_at = self.meter.detached.iter().position(|d| !d.is_cut());
        }
        self.mark_duty(Instant::now());
        if left? {
            self.emptied = true;
            return Ok(Left::NothingNow);
        }
        Ok(Left::Some)
    }

    /// As the probes attach: the breaker's first window begins now, with the counters as
    /// they are (read without waiting for the trap's calibration). When they cannot be
    /// read, it begins at the first look, as later windows do.
    pub fn begin_window(&mut self, loaded: &Loaded, plan: &Plan) {
        let Some(g) = self.governor.as_mut() else { return };
        let now = Instant::now();
        if let Ok(first) = self.meter.read_unpriced(loaded, plan) {
            g.begin_at(first, now);
        }
    }

    /// Keeps `raised` (the loop's thread raised as the probes attached: `runtime::priority`)
    /// until the breaker's first look is done, when there is a breaker. The trace's
    /// start-up after the attach (5-24 ms of CPU: the compiler's tables freed, the
    /// symbolizer, the outputs) and the loop's wake-up for the first look waited 90-170 ms
    /// for a CPU on a saturated host, and the first look with them (docs/performance.md,
    /// "The breaker's first look on a saturated host"). What the loop does meanwhile is
    /// bounded by the first look's time, a tick after the attach when it is not late.
    pub fn raised_until_first_look(&mut self, raised: Option<Raised>) {
        if self.governor.is_some() {
            self.startup = raised;
        }
    }

    /// The loop's thread back to its normal priority once the first look is done (after
    /// the look's own raise in `govern` was put back).
    pub(super) fn drop_raised_once_looked(&mut self) {
        if self.governor.as_ref().is_none_or(Governor::looked) {
            self.startup = None;
        }
    }

    /// How long the loop may wait for events, at most `most`: no longer than until the
    /// breaker's next look is due, so that a look is not late by the loop's wait.
    pub fn wait(&self, most: Duration) -> Duration {
        match &self.governor {
            Some(g) if !self.emptied => g.until_due(Instant::now()).min(most),
            _ => most,
        }
    }

    /// The duty cycle's record brought up to `now`.
    fn mark_duty(&mut self, now: Instant) {
        let duty = self.governor.as_ref().and_then(|g| g.duty(now));
        if let Some(d) = self.duty_at.and_then(|at| self.meter.detached.get_mut(at)) {
            d.duty = duty.or(d.duty);
        }
    }

    /// The trace is over: a duty cycle's clock stops now (its parked probes are not put
    /// back) and its record says so.
    pub fn stop(&mut self, loaded: &mut Loaded) {
        self.startup = None;
        let now = Instant::now();
        if let Some(g) = self.governor.as_mut() {
            g.stop_clock(now);
        }
        loaded.forget_parked();
        self.mark_duty(now);
    }
}

/// One look, when due: detaches what the breaker decides, each program once for the
/// whole decision, and says so in one line on stderr. Returns true when nothing is left
/// attached.
fn govern(governor: &mut Governor, loaded: &mut Loaded, plan: &Plan, meter: &mut Meter) -> Result<bool, RuntimeError> {
    let due = Instant::now();
    if !governor.due(due) {
        return Ok(false);
    }
    // A look is not held back by the host's load (`runtime::priority`): its work is
    // bounded (the counters read once, a decision over the units, a detach of what it
    // cuts), and the loop sleeps between looks.
    let _raised = crate::runtime::priority::raise();
    // The first window's start priced, once the calibration is in (waited for here,
    // before the window's end is taken).
    if let Some((mut first, at)) = governor.first.take() {
        meter.price(&mut first);
        governor.begin_priced(&first, at);
    }
    let _calibrated = meter.trap();
    // The target's CPU read now (the loop reads it at most every 20 ms: a look that
    // found it unchanged over the first window would take the target to spend nothing,
    // and one read up to 20 ms before the look would take it to spend less), with the
    // duty cycle's phase (its own measure pairs the parts: trace::paired).
    meter.read_cpu(governor.phase());
    let now = Instant::now();
    let mut stats = meter.collect(loaded, plan)?;
    // The trap cost is checked against what the target spent before it is acted on.
    meter.observe(&mut stats);
    if let Some(decision) = governor.check(&stats, now) {
        eprintln!("{}", decision.message);
        match decision.act {
            Act::Detach => governor.cycle_cut(loaded, now),
            Act::Cycle | Act::Steady => {
                // One record of a duty cycle, however many times one starts.
                if !meter.detached.iter().any(|d| !d.is_cut()) {
                    meter.detached.extend(decision.detached);
                }
                return Ok(false);
            }
        }
        for (program, functions) in by_program(&decision.sites) {
            match loaded.detach_sites(&program, functions.as_deref()) {
                Ok(_) => {}
                Err(e @ RuntimeError::Reattach { .. }) => {
                    eprintln!("--budget: {e}: they were detached too");
                    governor.detached_program(&program, loaded);
                }
                Err(e) => return Err(e),
            }
        }
        meter.detached.extend(decision.detached);
    }
    Ok(!governor.anything_left())
}
