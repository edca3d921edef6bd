//! The circuit breaker of `--budget PCT`. Every 100 ms it reads what each probe has cost
//! the target so far (its hits at the calibrated trap cost of its sites' instruction,
//! plus the eBPF run time the kernel measured: `stats::Meter::collect`), and looks back
//! over a sliding window of one second. When the probes still attached have spent more
//! than PCT of one CPU over a whole window (10 ms a second at 1%), it detaches the
//! costliest ones, one unit at a time, until what is left costs less than PCT at the
//! rate of the window, and says which, what they cost, and why. Tracing goes on with the
//! rest; when nothing is left, the trace ends as if the target had.
//!
//! A unit is what can be detached alone: one probe at one function (the sites of a
//! program attached at several functions count apart, their link replaced by a smaller
//! one without a hit missed or counted twice), or a whole program, with whatever must go
//! with it (`plan::Accounting::ties`: a return probe using `elapsed` and the timing of
//! its entries; every probe sharing `self` variables).

use super::stats::{Detached, Meter, Stats};
use crate::output::stats::{percent, thousands};
use crate::plan::{Plan, ProbeAttach, SiteRef};
use crate::runtime::{Loaded, RuntimeError};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How far back the breaker looks.
pub const WINDOW: Duration = Duration::from_secs(1);
/// How often it looks.
pub const TICK: Duration = Duration::from_millis(100);

/// What can be detached alone.
#[derive(Clone, Debug)]
struct Unit {
    sites: Vec<SiteRef>,
    attached: bool,
}

/// One look: the cost and hits of every unit so far.
struct Sample {
    at: Instant,
    cost: Vec<f64>,
    hits: Vec<u64>,
}

pub struct Governor {
    percent: f64,
    units: Vec<Unit>,
    /// What the programs were called in the script, by program.
    names: Vec<(String, String)>,
    /// Programs attached at more than one function.
    shared: Vec<String>,
    samples: VecDeque<Sample>,
    next: Instant,
}

/// A unit the breaker detached: what to detach, and what to say.
#[derive(Clone, Debug)]
pub struct Decision {
    pub sites: Vec<SiteRef>,
    pub detached: Detached,
    pub message: String,
}

impl Governor {
    /// The breaker for `plan`'s probes, or `None` when none attach to the target.
    pub fn new(plan: &Plan, percent: f64) -> Option<Governor> {
        let acct = &plan.accounting;
        let mut units: Vec<Unit> = Vec::new();
        let mut shared = Vec::new();
        for probe in &plan.probes {
            let ProbeAttach::Uprobe(points) = &probe.attach else { continue };
            let mut functions: Vec<&str> = points.iter().map(|p| p.function.as_str()).collect();
            functions.sort();
            functions.dedup();
            let program = probe.program.clone();
            // Sites of one program count and detach apart only when the program checks
            // its generation (its link can be replaced exactly).
            if acct.hits && functions.len() > 1 && acct.generation_key(&program).is_some() {
                shared.push(program.clone());
                for f in functions {
                    let site = SiteRef { program: program.clone(), function: Some(f.to_string()) };
                    units.push(Unit { sites: vec![site], attached: true });
                }
            } else {
                units.push(Unit { sites: vec![SiteRef { program, function: None }], attached: true });
            }
        }
        for tie in &acct.ties {
            merge_tied(&mut units, tie);
        }
        let names = plan.probes.iter().map(|p| (p.program.clone(), p.describe.clone())).collect();
        (!units.is_empty()).then(|| Governor {
            percent,
            units,
            names,
            shared,
            samples: VecDeque::new(),
            next: Instant::now(),
        })
    }

    /// Whether it is time to look again.
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Marks every unit of `program` detached (its link had to go whole).
    fn detached_program(&mut self, program: &str) {
        for u in &mut self.units {
            if u.sites.iter().any(|s| s.program == program) {
                u.attached = false;
            }
        }
    }

    /// Whether any unit is still attached.
    pub fn anything_left(&self) -> bool {
        self.units.iter().any(|u| u.attached)
    }

    /// Looks at `stats` (read now) and decides what to detach, marking it detached.
    pub fn check(&mut self, stats: &Stats, now: Instant) -> Vec<Decision> {
        self.next = now + TICK;
        let (cost, hits): (Vec<f64>, Vec<u64>) = self.units.iter().map(|u| unit_cost(u, stats)).unzip();
        self.samples.push_back(Sample { at: now, cost, hits });
        // Keep the newest sample at least a window old, as the window's start.
        while self.samples.len() > 2 && now.duration_since(self.samples[1].at) >= WINDOW {
            self.samples.pop_front();
        }
        let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) else { return Vec::new() };
        let span = last.at.duration_since(first.at).as_secs_f64();
        if span <= 0.0 {
            return Vec::new();
        }
        let spent: Vec<f64> = first.cost.iter().zip(&last.cost).map(|(a, b)| (b - a).max(0.0)).collect();
        let hits: Vec<u64> = first.hits.iter().zip(&last.hits).map(|(a, b)| b.saturating_sub(*a)).collect();
        let attached = |i: &usize| self.units[*i].attached;
        let total: f64 = (0..self.units.len()).filter(attached).map(|i| spent[i]).sum();
        let allowance = self.percent / 100.0 * WINDOW.as_nanos() as f64;
        if total <= allowance {
            return Vec::new();
        }
        // Costliest first, until what is left runs under the budget.
        let mut order: Vec<usize> = (0..self.units.len()).filter(attached).filter(|i| spent[*i] > 0.0).collect();
        order.sort_by(|a, b| spent[*b].total_cmp(&spent[*a]));
        let rate = |ns: f64| 100.0 * ns / (span * 1e9);
        let mut left = rate(total);
        let mut decisions = Vec::new();
        for i in order {
            if left <= self.percent {
                break;
            }
            left -= rate(spent[i]);
            self.units[i].attached = false;
            let what = self.describe(&self.units[i]);
            let share = rate(spent[i]);
            let at_ns = stats.elapsed_ns;
            let message = format!(
                "--budget {}%: detached {what}: it cost {}% of a CPU over the last {:.1}s ({} hits/s)",
                percent(self.percent),
                percent(share),
                span,
                thousands((hits[i] as f64 / span).round() as u64),
            );
            let detached = Detached { what, percent: share, at_ns };
            decisions.push(Decision { sites: self.units[i].sites.clone(), detached, message });
        }
        decisions
    }

    /// `on entry main.hot`, `on entry "main.*" at main.hot`; tied units joined with `+`.
    fn describe(&self, unit: &Unit) -> String {
        // Each program once, with the functions whose sites go (a wildcard's shared
        // programs can hold thousands: a few are named, the rest counted).
        let mut parts: Vec<(&str, Vec<&str>)> = Vec::new();
        for site in &unit.sites {
            let name = self.names.iter().find(|(p, _)| *p == site.program).map(|(_, d)| d.as_str()).unwrap_or("?");
            let at = match parts.iter().position(|(n, _)| *n == name) {
                Some(at) => at,
                None => {
                    parts.push((name, Vec::new()));
                    parts.len() - 1
                }
            };
            match &site.function {
                Some(f) if self.shared.contains(&site.program) && !parts[at].1.contains(&f.as_str()) => {
                    parts[at].1.push(f)
                }
                _ => {}
            }
        }
        let one = |(name, functions): &(&str, Vec<&str>)| match functions.len() {
            0 => name.to_string(),
            1..=3 => format!("{name} at {}", functions.join(", ")),
            n => format!("{name} at {} functions ({}, ...)", thousands(n as u64), functions[..3].join(", ")),
        };
        parts.iter().map(one).collect::<Vec<_>>().join(" + ")
    }
}

/// What the trace loop keeps about costs: the meter, and the breaker when there is a
/// budget.
pub struct Costs {
    pub meter: Meter,
    pub governor: Option<Governor>,
}

impl Costs {
    pub fn new(meter: Meter, plan: &Plan) -> Costs {
        let governor = meter.budget_percent.and_then(|percent| Governor::new(plan, percent));
        Costs { meter, governor }
    }

    /// Lets the breaker look, when due. True when nothing is left attached (the trace
    /// then ends, as if the target had).
    pub fn govern(&mut self, loaded: &mut Loaded, plan: &Plan) -> Result<bool, RuntimeError> {
        match self.governor.as_mut() {
            Some(g) => govern(g, loaded, plan, &mut self.meter),
            None => Ok(false),
        }
    }
}

/// One look, when due: detaches what the breaker decides and says so on stderr. Returns
/// true when nothing is left attached.
fn govern(governor: &mut Governor, loaded: &mut Loaded, plan: &Plan, meter: &mut Meter) -> Result<bool, RuntimeError> {
    let now = Instant::now();
    if !governor.due(now) {
        return Ok(false);
    }
    let stats = meter.collect(loaded, plan)?;
    for decision in governor.check(&stats, now) {
        eprintln!("{}", decision.message);
        for (program, functions) in by_program(&decision.sites) {
            match loaded.detach_sites(&program, functions.as_deref()) {
                Ok(_) => {}
                Err(e @ RuntimeError::Reattach { .. }) => {
                    eprintln!("--budget: {e}: they were detached too");
                    governor.detached_program(&program);
                }
                Err(e) => return Err(e),
            }
        }
        meter.detached.push(decision.detached);
    }
    if !governor.anything_left() {
        eprintln!("--budget: no probe is left attached; ending the trace");
        return Ok(true);
    }
    Ok(false)
}

/// The sites of one decision by program, each program's functions together (None: all
/// its sites): one smaller link replaces a program's link once, however many of its
/// functions go, since each replacement registers every remaining site again.
fn by_program(sites: &[SiteRef]) -> Vec<(String, Option<Vec<String>>)> {
    let mut out: Vec<(String, Option<Vec<String>>)> = Vec::new();
    for site in sites {
        let at = match out.iter().position(|(p, _)| *p == site.program) {
            Some(at) => at,
            None => {
                out.push((site.program.clone(), Some(Vec::new())));
                out.len() - 1
            }
        };
        match (&mut out[at].1, &site.function) {
            (Some(functions), Some(f)) => functions.push(f.clone()),
            (whole, None) => *whole = None,
            (None, Some(_)) => {}
        }
    }
    out
}

/// Joins every unit that holds a site of `tie` into one.
fn merge_tied(units: &mut Vec<Unit>, tie: &[SiteRef]) {
    let covers = |u: &Unit| {
        u.sites.iter().any(|s| {
            tie.iter().any(|t| {
                t.program == s.program && (t.function.is_none() || s.function.is_none() || t.function == s.function)
            })
        })
    };
    let (tied, mut rest): (Vec<Unit>, Vec<Unit>) = units.drain(..).partition(covers);
    if !tied.is_empty() {
        // In the tie's order: a cut detaches the unit's programs in it (the lowering
        // lists what reads state before what keeps it).
        let place = |s: &SiteRef| {
            tie.iter().position(|t| {
                t.program == s.program && (t.function.is_none() || s.function.is_none() || t.function == s.function)
            })
        };
        let mut sites: Vec<SiteRef> = tied.into_iter().flat_map(|u| u.sites).collect();
        sites.sort_by_key(|s| place(s).unwrap_or(usize::MAX));
        rest.push(Unit { sites, attached: true });
    }
    *units = rest;
}

/// What a unit has cost so far (ns) and its hits.
fn unit_cost(unit: &Unit, stats: &Stats) -> (f64, u64) {
    let mut cost = 0.0;
    let mut hits = 0;
    for site in &unit.sites {
        let Some(p) = stats.probes.iter().find(|p| p.program == site.program) else { continue };
        match &site.function {
            Some(f) => {
                if let Some(s) = p.sites.iter().find(|s| s.function == *f) {
                    cost += s.cost_ns;
                    hits += s.hits;
                }
            }
            None => {
                cost += p.cost_ns;
                hits += p.hits;
            }
        }
    }
    (cost, hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_detaches_each_program_once() {
        let site = |program: &str, function: Option<&str>| SiteRef {
            program: program.into(),
            function: function.map(str::to_string),
        };
        let sites =
            [site("p0", Some("main.a")), site("p1", Some("main.b")), site("p0", Some("main.c")), site("p2", None)];
        let grouped = by_program(&sites);
        assert_eq!(
            grouped,
            [
                ("p0".to_string(), Some(vec!["main.a".to_string(), "main.c".to_string()])),
                ("p1".to_string(), Some(vec!["main.b".to_string()])),
                ("p2".to_string(), None),
            ]
        );
        // A whole program and one of its functions: the whole program.
        assert_eq!(by_program(&[site("p0", Some("main.a")), site("p0", None)]), [("p0".to_string(), None)]);
    }
    use crate::output::stats::{ProbeStats, SiteStats};
    use crate::plan::{Accounting, AttachPoint, ProbeSpec};

    fn point(function: &str) -> AttachPoint {
        AttachPoint { function: function.into(), address: 0, file_offset: 0, cookie: 0 }
    }

    fn probe(program: &str, describe: &str, functions: &[&str]) -> ProbeSpec {
        ProbeSpec {
            program: program.into(),
            section: format!("uprobe/{program}"),
            attach: ProbeAttach::Uprobe(functions.iter().map(|f| point(f)).collect()),
            describe: describe.into(),
            source_lines: Vec::new(),
        }
    }

    /// Stats of p0 (main.hot, main.cold) after `hot` and `cold` ns of cost.
    fn stats(hot: f64, cold: f64, elapsed: Duration) -> Stats {
        let site = |f: &str, c: f64| SiteStats {
            function: f.into(),
            hits: (c / 1000.0) as u64,
            cost_ns: c,
            ..SiteStats::default()
        };
        let p0 = ProbeStats {
            program: "p0".into(),
            cost_ns: hot + cold,
            sites: vec![site("main.hot", hot), site("main.cold", cold)],
            ..ProbeStats::default()
        };
        Stats { elapsed_ns: elapsed.as_nanos() as u64, probes: vec![p0], ..Stats::default() }
    }

    fn plan() -> Plan {
        let accounting = Accounting { hits: true, generation_programs: vec!["p0".into()], ..Accounting::default() };
        Plan {
            probes: vec![probe("p0", "on entry main.hot, main.cold", &["main.hot", "main.cold"])],
            accounting,
            ..Plan::default()
        }
    }

    #[test]
    fn trips_on_the_hot_site_and_keeps_the_cold_one() {
        let mut g = Governor::new(&plan(), 1.0).unwrap();
        let t0 = Instant::now();
        assert!(g.check(&stats(0.0, 0.0, Duration::ZERO), t0).is_empty());
        // 100 ms later the hot site has cost 50 ms (50% of a CPU), the cold one 10 us.
        let d = g.check(&stats(50e6, 10e3, TICK), t0 + TICK);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].sites, vec![SiteRef { program: "p0".into(), function: Some("main.hot".into()) }]);
        assert_eq!(d[0].detached.what, "on entry main.hot, main.cold at main.hot");
        assert!(d[0].message.contains("50% of a CPU"), "{}", d[0].message);
        assert!(g.anything_left());
        // Detached, it costs nothing more; the cold site alone stays under the budget.
        assert!(g.check(&stats(50e6, 20e3, 2 * TICK), t0 + 2 * TICK).is_empty());
    }

    #[test]
    fn stays_quiet_under_the_budget_and_ends_when_nothing_is_left() {
        let mut g = Governor::new(&plan(), 10.0).unwrap();
        let t0 = Instant::now();
        g.check(&stats(0.0, 0.0, Duration::ZERO), t0);
        // 5% of a CPU for a whole window: under 10%.
        for i in 1..=10 {
            assert!(g.check(&stats(5e6 * i as f64, 0.0, TICK * i), t0 + TICK * i).is_empty());
        }
        // The hot site at 19.5% and the cold one at 12% over the last second: both go,
        // costliest first (12% alone is still over).
        let d = g.check(&stats(5e6 * 10.0 + 150e6, 120e6, TICK * 11), t0 + TICK * 11);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].detached.what.ends_with("at main.hot") && d[1].detached.what.ends_with("at main.cold"));
        assert!(!g.anything_left());
    }

    #[test]
    fn tied_sites_go_together() {
        let mut plan = plan();
        plan.probes.push(probe("p1", "on return main.hot", &["main.hot"]));
        plan.accounting.ties = vec![vec![
            SiteRef { program: "p1".into(), function: Some("main.hot".into()) },
            SiteRef { program: "p0".into(), function: Some("main.hot".into()) },
        ]];
        let g = Governor::new(&plan, 1.0).unwrap();
        assert_eq!(g.units.len(), 2, "{:?}", g.units);
        let tied = g.units.iter().find(|u| u.sites.len() == 2).expect("a tied unit");
        // In the tie's order.
        assert_eq!(g.describe(tied), "on return main.hot + on entry main.hot, main.cold at main.hot");
    }

    #[test]
    fn a_unit_of_many_functions_names_a_few_and_counts_the_rest() {
        let functions: Vec<String> = (0..1500).map(|i| format!("main.f{i}")).collect();
        let names: Vec<&str> = functions.iter().map(String::as_str).collect();
        let mut plan = plan();
        plan.probes.push(probe("p1", "entry times for elapsed", &names));
        plan.accounting.generation_programs.push("p1".into());
        plan.accounting.ties =
            vec![names.iter().map(|f| SiteRef { program: "p1".into(), function: Some(f.to_string()) }).collect()];
        let g = Governor::new(&plan, 1.0).unwrap();
        let tied = g.units.iter().find(|u| u.sites.len() == 1500).expect("the tied unit");
        assert_eq!(g.describe(tied), "entry times for elapsed at 1,500 functions (main.f0, main.f1, main.f2, ...)");
    }
}
