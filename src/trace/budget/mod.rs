//! The circuit breaker of `--budget PCT`. Every 100 ms it reads what each probe has cost
//! the target so far (its hits at the calibrated trap cost of its sites' instruction,
//! plus the eBPF run time the kernel measured: `stats::Meter::collect`; what the hits
//! pay after the target's threads wake, `trace::woken`, over all of them), and looks back
//! over a sliding window of one second. When the probes still attached have spent more
//! than PCT of one CPU over a whole window (10 ms at 1%), one decision detaches the set
//! of costliest units that brings what is left under `MARGIN` of PCT at the rate of the
//! window, however many units that takes, and one line says how many, the costliest
//! three and what stays. Each program is detached once for the whole decision. Tracing goes on
//! with the rest; when nothing is left, a -c command runs on to its end untraced, and a
//! -p or -b trace ends as if the target had.
//!
//! A cut that would take every probe that was hit duty-cycles them instead, when a
//! fraction of each second worth having fits (duty.rs).
//!
//! A unit is what can be detached alone (units.rs). What stays is weighed at the speed
//! the target regains once the cut frees it (speedup.rs), so that a server slowed by a
//! wide wildcard is cut once, not again each time it speeds up, and with the wake-ups
//! its hits will pay for once the others are gone (cut.rs).

mod cut;
mod drive;
pub(crate) mod duty;
mod held;
mod speedup;
pub(crate) mod units;

use super::measured::SCALE_RANGE;
use super::stats::{Detached, Stats};
use crate::arch::trap::ByKind;
use crate::output::measured::TargetMeasure;
use crate::output::numbers::{percent, thousands};
use crate::plan::{Plan, SiteRef};
use crate::runtime::Loaded;
use cut::{cut_until, UnitCost, Woken};
pub use drive::{Costs, Left};
use held::Held;
use speedup::Speedup;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use units::Unit;

/// How far back the breaker looks.
pub const WINDOW: Duration = Duration::from_secs(1);
/// How often it looks.
pub const TICK: Duration = Duration::from_millis(100);

/// One look: the cost and hits of every unit so far.
struct Sample {
    at: Instant,
    cost: Vec<Cost>,
    hits: Vec<u64>,
    /// The target's CPU time since the attach, ns (when it is measured).
    target_ns: Option<u64>,
    /// How many times its threads were put on a CPU since the attach (`trace::woken`).
    slices: Option<u64>,
    /// How long its threads waited on a run queue for a CPU since the attach, ns.
    wait_ns: Option<u64>,
    /// The cycled probes' attached time so far, ns (once a duty cycle ran).
    on_ns: Option<u64>,
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
    /// The duty cycle running, if any, and how long its probes were attached.
    cycle: Option<duty::Cycle>,
    clock: Option<duty::Clock>,
    /// The first window's start until the first look prices it (`begin_at`).
    first: Option<(Stats, Instant)>,
}

/// What stays attached after a cut costs at most this share of the budget.
pub const MARGIN: f64 = 0.8;

/// One look's cut: every site to detach (unit by unit, each unit's sites in its tie's
/// order), what each unit was, and the one line that says it.
#[derive(Clone, Debug)]
pub struct Decision {
    pub sites: Vec<SiteRef>,
    pub detached: Vec<Detached>,
    pub message: String,
    pub act: Act,
}

/// What a decision does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// Detaches `sites`.
    Detach,
    /// Duty-cycles every unit attached (`detached` holds the cycle's record).
    Cycle,
    /// Ends the duty cycle: its probes stay attached.
    Steady,
}

/// The three costliest units of a cut, then how many more (`--stats` lists them all).
pub fn top_three(detached: &[Detached]) -> String {
    let mut named: Vec<String> =
        detached.iter().take(3).map(|d| format!("{} ({}%)", d.what, percent(d.percent))).collect();
    if detached.len() > 3 {
        named.push(format!("and {} more (--stats lists them)", thousands(detached.len() as u64 - 3)));
    }
    named.join(", ")
}

/// The programs whose sites a unit holds, each once.
fn programs_of(sites: &[SiteRef]) -> Vec<String> {
    let mut programs: Vec<String> = Vec::new();
    for s in sites {
        if !programs.contains(&s.program) {
            programs.push(s.program.clone());
        }
    }
    programs
}

impl Governor {
    /// The breaker for `plan`'s probes, or `None` when none attach to the target.
    pub fn new(plan: &Plan, percent: f64) -> Option<Governor> {
        let (units, shared) = units::units(plan);
        let names = plan.probes.iter().map(|p| (p.program.clone(), p.describe.clone())).collect();
        (!units.is_empty()).then(|| Governor {
            percent,
            units,
            names,
            shared,
            samples: VecDeque::new(),
            next: Instant::now(),
            cycle: None,
            clock: None,
            first: None,
        })
    }

    /// The first window begins at `at`, as the probes attach, with the counters as they
    /// were then (`first`, read without waiting for the trap's calibration and priced
    /// with it at the first look: `begin_priced`). That look is due a tick later,
    /// whenever the loop gets to it: not a tick after the loop's first turn, which comes
    /// after the trace's start-up and, on a busy host, late.
    fn begin_at(&mut self, first: Stats, at: Instant) {
        self.first = Some((first, at));
        self.next = at + TICK;
    }

    /// The first window's start, once `first` (from `begin_at`) has been priced.
    fn begin_priced(&mut self, first: &Stats, at: Instant) {
        let costed = Costed::new(first);
        self.samples.clear();
        self.push_sample(first, &costed, at);
    }

    /// Whether the first look is done.
    pub fn looked(&self) -> bool {
        self.first.is_none() && !self.samples.is_empty()
    }

    /// Whether it is time to look again.
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// How long until the next look is due (zero when it is).
    pub fn until_due(&self, now: Instant) -> Duration {
        self.next.saturating_duration_since(now)
    }

    /// Marks detached every unit of `program` with a site that is no longer attached (a
    /// link that could not be made smaller went whole, with its other functions).
    fn detached_program(&mut self, program: &str, loaded: &Loaded) {
        let attached = loaded.attached_functions(program);
        for u in &mut self.units {
            let gone = |s: &SiteRef| match &s.function {
                Some(f) => !attached.contains(f.as_str()),
                None => attached.is_empty(),
            };
            if u.sites.iter().any(|s| s.program == program && gone(s)) {
                u.attached = false;
            }
        }
    }

    /// Whether any unit is still attached.
    pub fn anything_left(&self) -> bool {
        self.units.iter().any(|u| u.attached)
    }

    /// Looks at `stats` (read now) and decides what to detach, marking it detached: one
    /// decision for every unit that must go, however many.
    pub fn check(&mut self, stats: &Stats, now: Instant) -> Option<Decision> {
        self.next = now + TICK;
        let costed = Costed::new(stats);
        self.push_sample(stats, &costed, now);
        let (first, last) = (self.samples.front()?, self.samples.back()?);
        let span = last.at.duration_since(first.at).as_secs_f64();
        if span <= 0.0 {
            return None;
        }
        // Both ends at the trap cost's newest correction.
        let scales = costed.scales;
        let spent: Vec<f64> = first.cost.iter().zip(&last.cost).map(|(a, b)| b.since(a, &scales)).collect();
        let hits: Vec<u64> = first.hits.iter().zip(&last.hits).map(|(a, b)| b.saturating_sub(*a)).collect();
        let rate = |ns: f64| 100.0 * ns / (span * 1e9);
        let attached: Vec<usize> = (0..self.units.len()).filter(|i| self.units[*i].attached).collect();
        // What the hits pay after wake-ups, over the window: not any one unit's.
        let woken = Woken {
            each_percent: rate(stats.trap.map_or(0.0, |t| t.woken_ns) * woken_scale(stats)),
            slices: first.slices.zip(last.slices).map_or(0, |(a, b)| b.saturating_sub(a)),
        };
        let attached_hits: u64 = attached.iter().map(|i| hits[*i]).sum();
        let woken_share = |i: usize| match attached_hits {
            0 => 0.0,
            all => woken.of(all) * hits[i] as f64 / all as f64,
        };
        let woken_ns = woken.of(attached_hits) / rate(1.0);
        let spent_ns: f64 = attached.iter().map(|i| spent[*i]).sum::<f64>() + woken_ns;
        let on = first.on_ns.zip(last.on_ns).map_or(0, |(a, b)| b.saturating_sub(a));
        let target = first.target_ns.zip(last.target_ns);
        let (running, uncorrected, high) = weighed_high(stats, scales);
        let spent_high: Vec<f64> = first.cost.iter().zip(&last.cost).map(|(a, b)| b.since(a, &high)).collect();
        if self.cycle.is_some() {
            return self.recheck(span, on, (&spent_high, woken_ns), &spent, stats.elapsed_ns);
        }
        let of_cpu = |ns: f64| ns / (span * 1e9);
        let cpu = (target.filter(|_| running.is_some())).map_or(0.0, |(a, b)| of_cpu(b.saturating_sub(a) as f64));
        let before = running.and_then(|t| t.before_percent).map_or(0.0, |p| p / 100.0);
        // Past the budget once the window holds more than a whole window's allowance
        // (10 ms at 1%; more when the window is longer: a look came late): a short
        // burst at start-up is not a trend, a wildcard that costs half a CPU trips at the
        // first look. A window not yet whole that the host held the target back in is
        // weighed at the target's share before (held.rs).
        let allowance = self.percent / 100.0 * WINDOW.max(Duration::from_secs_f64(span)).as_nanos() as f64;
        let held = match span < WINDOW.as_secs_f64() {
            true => {
                let waited = first.wait_ns.zip(last.wait_ns).map_or(0, |(a, b)| b.saturating_sub(a));
                Held { cpu, waited: of_cpu(waited as f64), before }.factor()
            }
            false => 1.0,
        };
        if spent_ns * held <= allowance {
            return None;
        }
        let total = rate(spent_ns);
        // The same weighing on both sides: traps weighed high in what stays are weighed
        // high in what the target spent on them, not left in its own work; and until
        // corrected, the estimate may run below what the probes cost it (speedup::UNDER).
        let speedup = Speedup::of(
            cpu,
            before,
            of_cpu(spent.iter().sum::<f64>() + woken_ns),
            of_cpu(spent_high.iter().sum::<f64>() + woken_ns),
            !uncorrected,
        );
        // Costliest first, each with its share of the wake-ups (for the order and the
        // line; the cut weighs the wake-ups on what stays as a whole).
        let weighed: Vec<f64> = (0..spent.len()).map(|i| rate(spent[i]) + woken_share(i)).collect();
        let mut order: Vec<usize> = attached.into_iter().filter(|i| weighed[*i] > 0.0).collect();
        order.sort_by(|a, b| weighed[*b].total_cmp(&weighed[*a]));
        let costs: Vec<UnitCost> = (order.iter())
            .map(|i| UnitCost { now: rate(spent[*i]), high: rate(spent_high[*i]), hits: hits[*i] })
            .collect();
        let (n, left, stays) = cut_until(&costs, &woken, self.percent * MARGIN, &speedup);
        // A cut of everything that was hit leaves the user nothing: a duty cycle instead,
        // when the fraction of each second that fits is worth having.
        if n > 0 && n == order.len() {
            if let Some(cycle) = self.cycle_instead(&costs, &woken, now, (stats.elapsed_ns, span, held), total) {
                return Some(cycle);
            }
        }
        let cut = Cut { units: order[..n].to_vec(), weighed: &weighed, hits: &hits, span, at_ns: stats.elapsed_ns };
        self.cut(cut, total - left, stays)
    }

    /// Keeps `stats` as the newest sample, and the newest one at least a window old as
    /// the window's start.
    fn push_sample(&mut self, stats: &Stats, costed: &Costed, now: Instant) {
        let (cost, hits): (Vec<Cost>, Vec<u64>) = self.units.iter().map(|u| costed.unit(u)).unzip();
        let target_ns = stats.target.map(|t| t.cpu_ns);
        let slices = stats.target.map(|t| t.slices);
        let wait_ns = stats.target.map(|t| t.wait_ns);
        let on_ns = self.on_ns(now);
        self.samples.push_back(Sample { at: now, cost, hits, target_ns, slices, wait_ns, on_ns });
        while self.samples.len() > 2 && now.duration_since(self.samples[1].at) >= WINDOW {
            self.samples.pop_front();
        }
    }

    /// A cut of everything that was hit, as a duty cycle when a fraction of each second
    /// fits: what they cost while attached is what they cost now, weighed high as what a
    /// cut keeps is, with the wake-ups their hits pay (and weighed up as the window was,
    /// `held`, when the host held the target back).
    fn cycle_instead(
        &mut self,
        costs: &[UnitCost],
        woken: &Woken,
        now: Instant,
        (at_ns, span, held): (u64, f64, f64),
        total: f64,
    ) -> Option<Decision> {
        let all_hits: u64 = costs.iter().map(|c| c.hits).sum();
        let whole: f64 = (costs.iter().map(|c| c.high).sum::<f64>() + woken.of(all_hits)) * held;
        let duty::Rule::Cycle(f) = duty::rule(whole, self.percent * MARGIN) else { return None };
        let hits_s = (all_hits as f64 / span).round() as u64;
        Some(self.start_cycle(f, now, (at_ns, span), total, hits_s))
    }

    /// Detaches the units of `cut`, one decision and its line (`after`: what stays costs,
    /// `stays`: as `cut_until` says it).
    fn cut(&mut self, cut: Cut, after: f64, stays: (f64, f64)) -> Option<Decision> {
        for i in &cut.units {
            self.units[*i].attached = false;
        }
        let first = *cut.units.first()?;
        // A cut starts a new window: the next decision, if any, weighs what stays at
        // the speed it then runs at, over a whole window.
        self.restart_window();
        let detached: Vec<Detached> = (cut.units.iter())
            .map(|i| Detached {
                what: self.describe(&self.units[*i]),
                percent: cut.weighed[*i],
                at_ns: cut.at_ns,
                programs: programs_of(&self.units[*i].sites),
                duty: None,
            })
            .collect();
        let sites = cut.units.iter().flat_map(|i| self.units[*i].sites.iter().cloned()).collect();
        let first_hits = thousands((cut.hits[first] as f64 / cut.span).round() as u64);
        let message = decision_line(self.percent, cut.span, &detached, &first_hits, after, stays);
        Some(Decision { sites, detached, message, act: Act::Detach })
    }

    /// A new window from the newest look.
    fn restart_window(&mut self) {
        let newest = self.samples.pop_back();
        self.samples.clear();
        self.samples.extend(newest);
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

/// The one line a decision says: the unit it cut and its hits a second (`first_hits`),
/// or how many, what they cost (`gone`), the costliest three and what stays (`stays`:
/// its cost at the speed the target regains, and that factor).
/// What stays is weighed at the speed the target regains without what goes, and its
/// traps at the most the correction may make them until the target's CPU has corrected
/// their cost (half a second after the attach; a first cut comes before): on echo the
/// one function a cut kept at the calibrated cost cost 1.5x that a second later, and was
/// cut alone. Only until the first interval has been measured: one set aside (the
/// target's load changed) does not keep it high. Only for a process gtrace attached to
/// (-p: its share of a CPU before attaching is known): a -c command may be a fixed
/// amount of work that ends the sooner, and what stays of it is weighed at its rate now.
/// Returns the target's measure when it is such a process, whether its traps are not
/// yet corrected, and the scales to weigh them high by.
fn weighed_high(stats: &Stats, scales: ByKind) -> (Option<TargetMeasure>, bool, ByKind) {
    let running = stats.target.filter(|t| t.before_percent.is_some());
    let uncorrected = running.is_some_and(|t| t.scales().is_none() && t.set_aside == 0);
    let high = match uncorrected {
        true => scales.map(|s| SCALE_RANGE.1.max(s)),
        false => scales,
    };
    (running, uncorrected, high)
}

/// The factor on what hits pay after wake-ups (a duty cycle's measure, else 1).
fn woken_scale(stats: &Stats) -> f64 {
    stats.target.and_then(|t| t.duty).and_then(|d| d.factor).unwrap_or(1.0)
}

/// The units a decision cuts (costliest first), with the window's figures for its line.
struct Cut<'a> {
    units: Vec<usize>,
    /// Each unit's share of a CPU, with its share of the wake-ups.
    weighed: &'a [f64],
    /// Each unit's hits over the window.
    hits: &'a [u64],
    /// The window, seconds.
    span: f64,
    /// When, ns since the trace began.
    at_ns: u64,
}

fn decision_line(
    budget: f64,
    span: f64,
    detached: &[Detached],
    first_hits: &str,
    gone: f64,
    stays: (f64, f64),
) -> String {
    match detached {
        [d] => format!(
            "--budget {}%: detached {}: it cost {}% of a CPU over the last {span:.1}s ({first_hits} hits/s)",
            percent(budget),
            d.what,
            percent(d.percent),
        ),
        _ => format!(
            "--budget {}%: detached {} probe units that cost {}% of a CPU over the last {span:.1}s: {}; {}what stays costs {}%",
            percent(budget),
            thousands(detached.len() as u64),
            percent(gone),
            top_three(detached),
            match stays.1 {
                g if g > 1.05 => format!("freed, the target runs up to {g:.1}x faster: "),
                _ => String::new(),
            },
            percent(stays.0),
        ),
    }
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

/// What a unit has cost so far, ns: its traps by kind at the calibrated cost (the
/// correction applies at each look to the whole window) and its eBPF time.
#[derive(Clone, Copy, Debug, Default)]
struct Cost {
    traps: ByKind,
    run: f64,
}

impl Cost {
    /// What was spent since `earlier`, with each kind of trap at `scales` of that kind
    /// times the calibrated cost.
    fn since(&self, earlier: &Cost, scales: &ByKind) -> f64 {
        (self.traps.minus(&earlier.traps).scaled(scales) + self.run - earlier.run).max(0.0)
    }
}

/// The cost and hits of every probe and of every site so far, looked up by name (a wide
/// wildcard has thousands of units: each is found in constant time).
struct Costed<'a> {
    scales: ByKind,
    probes: HashMap<&'a str, (Cost, u64)>,
    sites: HashMap<(&'a str, &'a str), (Cost, u64)>,
}

impl<'a> Costed<'a> {
    fn new(stats: &'a Stats) -> Costed<'a> {
        let scales = stats.target.and_then(|t| t.scales()).unwrap_or(ByKind::ONE);
        // The eBPF time is what the priced cost holds beyond its traps at `scales` and
        // what its hits pay after wake-ups (which the breaker weighs over all units).
        let cost = |traps: ByKind, total: f64, woken: f64| Cost { traps, run: total - traps.scaled(&scales) - woken };
        let probes = (stats.probes.iter())
            .map(|p| (p.program.as_str(), (cost(p.traps_by_kind, p.cost_ns, p.woken_ns), p.hits)))
            .collect();
        let sites = (stats.probes.iter())
            .flat_map(|p| {
                p.sites.iter().map(move |s| {
                    let mut traps = ByKind::default();
                    traps.add(s.kind.unwrap_or_default(), s.hits as f64 * s.trap_ns);
                    let woken = s.woken_hits * p.woken_each_ns;
                    ((p.program.as_str(), s.function.as_str()), (cost(traps, s.cost_ns, woken), s.hits))
                })
            })
            .collect();
        Costed { scales, probes, sites }
    }

    /// What a unit has cost so far and its hits.
    fn unit(&self, unit: &Unit) -> (Cost, u64) {
        let mut total = (Cost::default(), 0);
        for site in &unit.sites {
            let found = match &site.function {
                Some(f) => self.sites.get(&(site.program.as_str(), f.as_str())),
                None => self.probes.get(site.program.as_str()),
            };
            if let Some((cost, hits)) = found {
                total.0.traps = total.0.traps.plus(&cost.traps);
                total.0.run += cost.run;
                total.1 += hits;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests;
