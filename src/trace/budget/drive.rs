//! What the trace loop keeps about costs (`Costs`: the meter and the breaker) and one
//! look of the breaker acted on: a duty cycle driven, a cut detached program by program,
//! a cycle's record kept up to date in the meter.

use super::{by_program, duty, Act, Governor};
use crate::plan::Plan;
use crate::runtime::{Loaded, RuntimeError};
use crate::trace::stats::Meter;
use std::time::Instant;

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
        Costs { meter, governor, emptied: false, start_tables, duty_at: None }
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
    let now = Instant::now();
    if !governor.due(now) {
        return Ok(false);
    }
    // The target's CPU read now (the loop reads it at most every 20 ms, and a look that
    // found it unchanged over the first window would take the target to spend nothing),
    // with the duty cycle's phase (its own measure pairs the parts: trace::paired).
    meter.read_cpu(governor.phase());
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
