//! Duty-cycling under `--budget`: when a cut would take every probe that was hit over the
//! window (the user would be left nothing: `gtrace http` on a busy server), the probes
//! stay and are attached a fraction `f` of each second (`PERIOD`) instead, the `f` that
//! brings their cost at the window's rate under `MARGIN` of the budget, if it is at least
//! `FLOOR` (below it they are cut as before). At each later look `f` is decided again from
//! what they cost while attached: it may rise back to 1 (the cycle ends, they stay
//! attached) or fall below the floor (they are detached). One line a decision, none a
//! cycle.
//!
//! Counts are of the attached time only (not scaled); `Clock` keeps how long that was,
//! and every output says it (`output::stats::Duty`). Before each re-attach the tables that
//! carry a start to its end are emptied (`start_tables`): a start whose end fell in a
//! detached interval would otherwise pair with a later end at the same key (Go reuses a
//! request's address) and make a wrong latency. So a duty cycle sees a call, a request,
//! only when its start and its end fall in one attached interval.

use super::{Decision, Governor, MARGIN, WINDOW};
use crate::output::numbers::{percent, thousands};
use crate::output::stats::{Detached, Duty};
use crate::plan::{MapRole, Plan, ProbeAttach};
use crate::runtime::{Loaded, RuntimeError};
use crate::trace::paired::Phase;
use std::time::{Duration, Instant};

/// A duty cycle's period: attached for `f` of it, detached for the rest.
pub const PERIOD: Duration = Duration::from_secs(1);
/// The least fraction of each second worth attaching for: below it the probes are cut.
pub const FLOOR: f64 = 0.1;
/// The least attached time over a window from which the cost while attached is judged.
const MIN_ON: Duration = Duration::from_millis(50);

/// What the breaker does with probes whose cut would leave nothing that was hit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// They fit attached the whole time: they stay (a cycle ends).
    Steady,
    /// Attached this fraction of each second.
    Cycle(f64),
    /// Even `FLOOR` of each second costs more than the budget allows: cut them.
    Cut,
}

/// The rule while cycling: the cycle ends only once the probes attached the whole time
/// would cost at most `MARGIN` of `under` (3.2% of a CPU at `--budget 5%`), else it goes
/// on, up to the whole of each second. A cycle starts above the budget: on Caddy a
/// cycle begun at 5.2% measured 3.4-4% while attached (a window past the budget is
/// a high one), and ended at `under` itself it began again a few seconds later, a line
/// each time.
pub fn rule_while_cycling(attached: f64, under: f64) -> Rule {
    if attached <= under * MARGIN {
        return Rule::Steady;
    }
    match rule(attached, under) {
        Rule::Steady => Rule::Cycle(1.0),
        other => other,
    }
}

/// The rule for probes that cost `attached` (percent of a CPU while attached) under a
/// bound of `under` percent.
pub fn rule(attached: f64, under: f64) -> Rule {
    if attached <= under {
        return Rule::Steady;
    }
    let f = under / attached;
    if f >= FLOOR {
        Rule::Cycle(f)
    } else {
        Rule::Cut
    }
}

/// The phase of a duty cycle: when it began, the fraction now.
#[derive(Clone, Copy, Debug)]
pub struct Cycle {
    pub fraction: f64,
    origin: Instant,
    /// Decided steady: the probes go back and stay, then the cycle is over.
    ending: bool,
}

impl Cycle {
    /// When the period after the one `now` is in begins: when parked probes come back.
    pub fn next_start(&self, now: Instant) -> Instant {
        let periods = (now.duration_since(self.origin).as_secs_f64() / PERIOD.as_secs_f64()).floor() as u32;
        self.origin + PERIOD * (periods + 1)
    }

    /// Whether the probes should be attached at `now`.
    pub fn wants(&self, now: Instant) -> bool {
        let phase = now.duration_since(self.origin).as_secs_f64() % PERIOD.as_secs_f64();
        self.ending || phase < self.fraction * PERIOD.as_secs_f64()
    }
}

/// How long the cycled probes were attached since the first cycle began: what their
/// counts are of.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    began: Instant,
    /// When the probes were last put back (or the cycle began).
    on_since: Instant,
    /// Detached time before `off_since`.
    off: Duration,
    /// Detached since then (the probes are parked).
    off_since: Option<Instant>,
    /// The trace's end.
    ended: Option<Instant>,
}

impl Clock {
    fn new(now: Instant) -> Clock {
        Clock { began: now, on_since: now, off: Duration::ZERO, off_since: None, ended: None }
    }

    pub fn is_on(&self) -> bool {
        self.off_since.is_none()
    }

    pub fn parked(&mut self, now: Instant) {
        self.off_since.get_or_insert(now);
    }

    pub fn attached(&mut self, now: Instant) {
        if let Some(since) = self.off_since.take() {
            self.off += now.saturating_duration_since(since);
            self.on_since = now;
        }
    }

    /// Time since the first cycle began, and attached within it.
    pub fn times(&self, now: Instant) -> (Duration, Duration) {
        let end = self.ended.unwrap_or(now);
        let since = end.saturating_duration_since(self.began);
        let off = self.off + self.off_since.map_or(Duration::ZERO, |s| end.saturating_duration_since(s));
        (since, since.saturating_sub(off))
    }
}

impl Governor {
    /// The probes' attached time so far when a duty cycle has run (for the window).
    pub(super) fn on_ns(&self, now: Instant) -> Option<u64> {
        self.clock.map(|c| c.times(now).1.as_nanos() as u64)
    }

    /// The phase of the cycle running, for its own measure of the probes' cost
    /// (`trace::paired`): None when none runs or it is ending.
    pub fn phase(&self) -> Option<Phase> {
        let (cycle, clock) = (self.cycle.filter(|c| !c.ending)?, self.clock?);
        Some(match clock.off_since {
            None => Phase { on: true, since: clock.on_since, back: None },
            Some(off) => Phase { on: false, since: off, back: Some(cycle.next_start(off)) },
        })
    }

    /// The duty cycle's numbers now, if one ran.
    pub fn duty(&self, now: Instant) -> Option<Duty> {
        let (since, on) = self.clock?.times(now);
        let fraction = match (&self.cycle, self.anything_left()) {
            (Some(c), _) if !c.ending => c.fraction,
            (_, true) => 1.0,
            (_, false) => 0.0,
        };
        Some(Duty { fraction, since_ns: since.as_nanos() as u64, attached_ns: on.as_nanos() as u64 })
    }

    /// Starts cycling every attached unit at `fraction`, the window starting anew: the
    /// decision that says so (its one `Detached` is the cycle's record).
    pub(super) fn start_cycle(
        &mut self,
        fraction: f64,
        now: Instant,
        (at_ns, span): (u64, f64),
        cost: f64,
        hits_s: u64,
    ) -> Decision {
        self.cycle = Some(Cycle { fraction, origin: now, ending: false });
        let clock = self.clock.get_or_insert_with(|| Clock::new(now));
        clock.attached(now);
        self.restart_window();
        // The window starts at this look, with the clock.
        let on = self.on_ns(now);
        if let Some(newest) = self.samples.back_mut() {
            newest.on_ns = on;
        }
        let units: Vec<usize> = (0..self.units.len()).filter(|i| self.units[*i].attached).collect();
        let mut programs: Vec<String> = Vec::new();
        for s in units.iter().flat_map(|i| &self.units[*i].sites) {
            if !programs.contains(&s.program) {
                programs.push(s.program.clone());
            }
        }
        let what = self.probes_named(&programs);
        let message = format!(
            "--budget {}%: {what} cost {}% of a CPU over the last {span:.1}s ({} hits/s), and a cut would leave nothing: duty-cycled instead, attached {}% of each second (their counts are of that time only)",
            percent(self.percent),
            percent(cost),
            thousands(hits_s),
            (100.0 * fraction).round(),
        );
        let duty = Duty { fraction, since_ns: 0, attached_ns: 0 };
        let record = Detached { what, percent: cost, at_ns, programs, duty: Some(duty) };
        Decision { sites: Vec::new(), detached: vec![record], message, act: super::Act::Cycle }
    }

    /// The script's probes of `programs`, the first three named, then how many more.
    fn probes_named(&self, programs: &[String]) -> String {
        let mut named: Vec<&str> = Vec::new();
        for p in programs {
            let d = self.names.iter().find(|(n, _)| n == p).map_or("?", |(_, d)| d.as_str());
            if !named.contains(&d) {
                named.push(d);
            }
        }
        match named.len() {
            0..=3 => named.join(", "),
            n => format!("{} and {} more", named[..3].join(", "), n - 3),
        }
    }

    /// A look while cycling: `spent_high` over the window of `span` s, of which the
    /// probes were attached `on` ns. Sets the fraction anew, or ends the cycle (they
    /// fit: a decision that says so), or cuts every unit (below the floor).
    pub(super) fn recheck(
        &mut self,
        span: f64,
        on: u64,
        (spent_high, woken_ns): (&[f64], f64),
        spent: &[f64],
        at_ns: u64,
    ) -> Option<Decision> {
        let cycle = self.cycle.as_mut()?;
        if cycle.ending || span < (WINDOW - super::TICK / 2).as_secs_f64() || on < MIN_ON.as_nanos() as u64 {
            return None;
        }
        let attached: Vec<usize> = (0..self.units.len()).filter(|i| self.units[*i].attached).collect();
        // With the wake-ups the window's hits paid (all while attached).
        let cost_on = 100.0 * (attached.iter().map(|i| spent_high[*i]).sum::<f64>() + woken_ns) / on as f64;
        let budget = percent(self.percent);
        match rule_while_cycling(cost_on, self.percent * MARGIN) {
            Rule::Cycle(f) => {
                cycle.fraction = f;
                None
            }
            Rule::Steady => {
                cycle.ending = true;
                let message = format!(
                    "--budget {budget}%: the duty cycle ends: attached, the probes cost {}% of a CPU now; they stay attached",
                    percent(cost_on)
                );
                Some(Decision { sites: Vec::new(), detached: Vec::new(), message, act: super::Act::Steady })
            }
            Rule::Cut => {
                self.cycle = None;
                let rate = |ns: f64| 100.0 * ns / (span * 1e9);
                let mut detached = Vec::new();
                let mut sites = Vec::new();
                for i in attached {
                    self.units[i].attached = false;
                    let what = self.describe(&self.units[i]);
                    let programs = super::programs_of(&self.units[i].sites);
                    detached.push(Detached { what, percent: rate(spent[i]), at_ns, programs, duty: None });
                    sites.extend(self.units[i].sites.iter().cloned());
                }
                let message = format!(
                    "--budget {budget}%: duty-cycled, the probes cost {}% of a CPU while attached: even {}% of each second passes the budget; detached {}: {}",
                    percent(cost_on),
                    (100.0 * FLOOR).round(),
                    match detached.len() {
                        1 => "1 probe unit".to_string(),
                        n => format!("{} probe units", thousands(n as u64)),
                    },
                    super::top_three(&detached),
                );
                Some(Decision { sites, detached, message, act: super::Act::Detach })
            }
        }
    }

    /// Drives the cycle at `now`: parks the probes at the end of the attached part,
    /// puts them back (`clear` emptied first) at the start of the next; the cycle is over
    /// once an ending one has them back. A re-attach that fails leaves them detached,
    /// said once.
    pub(super) fn drive(&mut self, loaded: &mut Loaded, clear: &[String], now: Instant) -> Result<(), RuntimeError> {
        let (Some(cycle), Some(clock)) = (self.cycle, self.clock.as_mut()) else { return Ok(()) };
        match (clock.is_on(), cycle.wants(now)) {
            (true, false) => match loaded.park_target(clear, cycle.next_start(now)) {
                Ok(()) => clock.parked(now),
                Err(e) => self.lost(loaded, &e),
            },
            (false, _) => match loaded.unparked() {
                Ok(Some(at)) => clock.attached(at),
                Ok(None) => {}
                Err(e) => self.lost(loaded, &e),
            },
            _ => {}
        }
        if cycle.ending && self.clock.is_some_and(|c| c.is_on()) {
            self.cycle = None;
            self.restart_window();
        }
        Ok(())
    }

    /// A duty cycle that could not take its probes off or put them back: they stay
    /// detached, said once.
    fn lost(&mut self, loaded: &mut Loaded, e: &RuntimeError) {
        eprintln!("--budget: the duty-cycled probes could not be detached or attached again ({e}): they stay detached");
        loaded.forget_parked();
        loaded.detach_target();
        self.cycle = None;
        self.units.iter_mut().for_each(|u| u.attached = false);
    }

    /// The trace is over: the clock stops (what the counts are of ends here).
    pub fn stop_clock(&mut self, now: Instant) {
        if let Some(c) = self.clock.as_mut() {
            c.ended.get_or_insert(now);
        }
    }

    /// After a cut: a cycle's parked probes, if it cut them, are not put back, and once
    /// nothing is left its clock counts no more attached time.
    pub(super) fn cycle_cut(&mut self, loaded: &mut Loaded, now: Instant) {
        if self.cycle.is_none() {
            loaded.forget_parked();
        }
        if !self.anything_left() {
            if let Some(c) = self.clock.as_mut() {
                c.parked(now);
            }
        }
    }
}

/// The tables a duty cycle empties before each re-attach: gtrace's records of calls in
/// flight (`elapsed`, carried parameters), `self` variables, and the script's private
/// maps (`@_name`, with their slots) that only probes in the target use (not one that an
/// `on begin` fills, as http's say-once flag). Each may hold a start whose end fell in a
/// detached interval.
pub fn start_tables(plan: &Plan) -> Vec<String> {
    let own: Vec<&String> = (plan.probes.iter())
        .filter(|p| !matches!(p.attach, ProbeAttach::Uprobe(_)))
        .flat_map(|p| p.maps.iter())
        .collect();
    let private = |object: &str| {
        !own.iter().any(|o| *o == object)
            && plan.maps.iter().any(|m| {
                m.object_name == object && matches!(&m.role, MapRole::User { name, .. } if name.starts_with('_'))
            })
    };
    (plan.maps.iter())
        .filter(|m| match &m.role {
            MapRole::Goroutines | MapRole::Frames | MapRole::Carried | MapRole::SelfVars => true,
            MapRole::User { .. } => private(&m.object_name),
            MapRole::Slots { of } => private(of) && !own.iter().any(|o| *o == &m.object_name),
            _ => false,
        })
        .map(|m| m.object_name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Act;
    use super::*;
    use crate::output::stats::{ProbeStats, SiteStats, Stats};
    use crate::plan::{Accounting, AttachPoint, ProbeSpec};

    #[test]
    fn the_rule_keeps_what_fits_cycles_what_a_fraction_fits_and_cuts_below_the_floor() {
        assert_eq!(rule(1.5, 1.6), Rule::Steady);
        assert_eq!(rule(0.0, 1.6), Rule::Steady);
        assert_eq!(rule(4.0, 1.6), Rule::Cycle(0.4));
        // The floor itself still cycles; below it, the cut.
        assert_eq!(rule(16.0, 1.6), Rule::Cycle(0.1));
        assert_eq!(rule(16.5, 1.6), Rule::Cut);
        // While cycling, between the margin of the bound and the bound: on, still marked.
        assert_eq!(rule_while_cycling(1.5, 1.6), Rule::Cycle(1.0));
        assert_eq!(rule_while_cycling(1.28, 1.6), Rule::Steady);
        assert_eq!(rule_while_cycling(4.0, 1.6), Rule::Cycle(0.4));
        assert_eq!(rule_while_cycling(16.5, 1.6), Rule::Cut);
    }

    /// `on entry main.begin` (p0) and `on entry main.end` (p1), each a unit of its own.
    fn plan() -> Plan {
        let probe = |program: &str, function: &str| ProbeSpec {
            program: program.into(),
            section: format!("uprobe/{program}"),
            attach: ProbeAttach::Uprobe(vec![AttachPoint {
                function: function.into(),
                address: 0,
                file_offset: 0,
                cookie: 0,
            }]),
            describe: format!("on entry {function}"),
            source_lines: Vec::new(),
            maps: Vec::new(),
        };
        let accounting = Accounting { hits: true, ..Accounting::default() };
        Plan { probes: vec![probe("p0", "main.begin"), probe("p1", "main.end")], accounting, ..Plan::default() }
    }

    /// Stats after `begin` and `end` ns of cost (a hit a microsecond) at `elapsed`.
    fn stats(begin: f64, end: f64, elapsed: Duration) -> Stats {
        let probe = |program: &str, function: &str, cost: f64| ProbeStats {
            program: program.into(),
            cost_ns: cost,
            hits: (cost / 1000.0) as u64,
            sites: vec![SiteStats {
                function: function.into(),
                hits: (cost / 1000.0) as u64,
                cost_ns: cost,
                ..SiteStats::default()
            }],
            ..ProbeStats::default()
        };
        let probes = vec![probe("p0", "main.begin", begin), probe("p1", "main.end", end)];
        Stats { elapsed_ns: elapsed.as_nanos() as u64, probes, ..Stats::default() }
    }

    const S: Duration = Duration::from_secs(1);

    /// A breaker at 2% that has seen `begin` and `end` ns of cost over the first second.
    fn after_a_second(begin: f64, end: f64) -> (Governor, Option<Decision>, Instant) {
        let mut g = Governor::new(&plan(), 2.0).unwrap();
        let t0 = Instant::now();
        assert!(g.check(&stats(0.0, 0.0, Duration::ZERO), t0).is_none());
        let d = g.check(&stats(begin, end, S), t0 + S);
        (g, d, t0 + S)
    }

    #[test]
    fn a_cut_of_everything_hit_is_a_duty_cycle_when_a_fraction_fits() {
        // 4% of a CPU against 2% (1.6% with the margin): attached 40% of each second.
        let (g, d, _) = after_a_second(20e6, 20e6);
        let d = d.expect("a decision");
        assert_eq!(d.act, Act::Cycle, "{d:?}");
        assert!(d.sites.is_empty(), "nothing is detached: {d:?}");
        assert!(g.anything_left());
        let record = &d.detached[0];
        assert_eq!(record.programs, ["p0", "p1"]);
        assert_eq!(record.what, "on entry main.begin, on entry main.end");
        assert!((record.duty.unwrap().fraction - 0.4).abs() < 1e-9, "{record:?}");
        assert!(d.message.contains("duty-cycled instead, attached 40% of each second"), "{}", d.message);
    }

    #[test]
    fn below_the_floor_everything_is_cut() {
        // 40% of a CPU: 4% of each second would fit, under the 10% floor.
        let (g, d, _) = after_a_second(200e6, 200e6);
        let d = d.expect("a decision");
        assert_eq!(d.act, Act::Detach, "{d:?}");
        assert_eq!(d.detached.len(), 2);
        assert!(d.detached.iter().all(|r| r.duty.is_none()));
        assert!(!g.anything_left());
    }

    #[test]
    fn a_cut_that_keeps_a_probe_that_was_hit_is_a_cut() {
        // The end is cheap (0.5% of a CPU) and stays; the begin goes, exactly.
        let (g, d, _) = after_a_second(40e6, 5e6);
        let d = d.expect("a decision");
        assert_eq!(d.act, Act::Detach, "{d:?}");
        assert_eq!(d.sites, vec![crate::plan::SiteRef { program: "p0".into(), function: None }]);
        assert!(g.anything_left());
    }

    #[test]
    fn while_cycling_the_fraction_follows_the_cost_while_attached() {
        let (mut g, _, t1) = after_a_second(20e6, 20e6);
        // Attached 0.4 s of the next second (the clock moved as drive() moves it), at
        // the same rate: 16 ms more.
        g.clock.as_mut().unwrap().parked(t1 + S * 2 / 5);
        g.clock.as_mut().unwrap().attached(t1 + S);
        assert!(g.check(&stats(28e6, 28e6, 2 * S), t1 + S).is_none(), "the same cost: the same fraction");
        assert!((g.duty(t1 + S).unwrap().fraction - 0.4).abs() < 1e-6, "{:?}", g.duty(t1 + S));
        // The load falls to a quarter: 1% of a CPU while attached for the next 0.4 s
        // fits whole with room (under the margin of the margin, 1.28%).
        g.clock.as_mut().unwrap().parked(t1 + S * 7 / 5);
        g.clock.as_mut().unwrap().attached(t1 + 2 * S);
        let d = g.check(&stats(30e6, 30e6, 3 * S), t1 + 2 * S).expect("the cycle ends");
        assert_eq!(d.act, Act::Steady, "{d:?}");
        assert!(g.anything_left());
    }

    /// `stats`, with every ns of cost a trap (1 us a hit, a PUSH) and the target's
    /// duty-cycle factor `factor` (trace::paired), if any.
    fn trapped(begin: f64, end: f64, elapsed: Duration, factor: Option<f64>) -> Stats {
        let mut s = stats(begin, end, elapsed);
        // Priced as the meter prices them: at the factor.
        let f = factor.unwrap_or(1.0);
        for p in &mut s.probes {
            p.in_target = true;
            p.traps_by_kind = crate::arch::trap::ByKind { push: p.cost_ns, ..Default::default() };
            p.cost_ns *= f;
            for site in &mut p.sites {
                site.trap_ns = 1000.0;
                site.kind = Some(crate::arch::trap::TrapKind::Push);
                site.cost_ns *= f;
            }
        }
        let duty =
            factor.map(|f| crate::output::measured::DutyMeasure { periods: 5, factor: Some(f), ..Default::default() });
        s.target = Some(crate::output::measured::TargetMeasure { duty, ..Default::default() });
        s
    }

    #[test]
    fn while_cycling_the_fraction_and_the_end_act_on_the_cycles_own_measure() {
        // As above, the load falls to a quarter: 1% of a CPU while attached by the
        // estimate, which ends the cycle; but the cycle measured the probes at 3x their
        // estimate (trace::paired): 3% while attached, so it goes on, at 1.6 / 3.
        for (factor, steady) in [(None, true), (Some(3.0), false)] {
            let mut g = Governor::new(&plan(), 2.0).unwrap();
            let t0 = Instant::now();
            assert!(g.check(&trapped(0.0, 0.0, Duration::ZERO, None), t0).is_none());
            let d = g.check(&trapped(20e6, 20e6, S, None), t0 + S).expect("a cycle");
            assert_eq!(d.act, Act::Cycle);
            let t1 = t0 + S;
            g.clock.as_mut().unwrap().parked(t1 + S * 2 / 5);
            g.clock.as_mut().unwrap().attached(t1 + S);
            let d = g.check(&trapped(22e6, 22e6, 2 * S, factor), t1 + S);
            assert_eq!(d.as_ref().map(|d| d.act), steady.then_some(Act::Steady), "{factor:?}: {d:?}");
            if !steady {
                let f = g.duty(t1 + S).unwrap().fraction;
                assert!((f - 1.6 / 3.0).abs() < 1e-6, "{f}");
            }
        }
    }

    #[test]
    fn while_cycling_a_cost_past_the_floor_cuts_everything() {
        let (mut g, _, t1) = after_a_second(20e6, 20e6);
        g.clock.as_mut().unwrap().parked(t1 + S * 2 / 5);
        g.clock.as_mut().unwrap().attached(t1 + S);
        // 0.4 s attached cost 80 ms: 20% of a CPU while attached, 8% of each second fits.
        let d = g.check(&stats(60e6, 60e6, 2 * S), t1 + S).expect("a cut");
        assert_eq!(d.act, Act::Detach, "{d:?}");
        assert_eq!(d.detached.len(), 2);
        assert!(d.message.contains("even 10% of each second passes the budget"), "{}", d.message);
        assert!(!g.anything_left());
    }

    #[test]
    fn the_clock_counts_attached_time_only() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0);
        c.parked(t0 + S / 2);
        c.attached(t0 + S);
        c.parked(t0 + S * 3 / 2);
        assert_eq!(c.times(t0 + 2 * S), (2 * S, S));
        c.ended = Some(t0 + 2 * S);
        assert_eq!(c.times(t0 + 5 * S), (2 * S, S));
        let cycle = Cycle { fraction: 0.3, origin: t0, ending: false };
        assert!(cycle.wants(t0 + S / 5) && !cycle.wants(t0 + S / 2) && cycle.wants(t0 + S * 11 / 10));
        assert_eq!(cycle.next_start(t0 + S / 2), t0 + S);
    }
}
