//! gtrace's own numbers while it traces: every probe's hits, eBPF time, estimated cost
//! and losses, and every map's refused updates. They come from the kernel (the counters
//! the programs keep, `plan::Accounting`, and the kernel's per-program statistics) and
//! from the trap cost calibrated at start-up.
//!
//! `Meter::collect` is the one place they are read; what it returns (`Stats`, rendered
//! by `output::stats`) feeds the `--stats` table, the line of losses at exit, the budget,
//! and any exporter of gtrace's own metrics (probes, hits, losses, cost).

pub use super::calibration::{Calibration, TEST_SCALE_ENV};
use crate::arch::trap::{ByKind, TrapKind};
pub use crate::output::stats::{Detached, MapStats, ProbeStats, SiteStats, Stats};
use crate::plan::{Accounting, Counter, MapRole, MapSpec, Plan, ProbeAttach, ProbeSpec, Refusal};
use crate::runtime::{Loaded, RuntimeError, TrapCost};
use crate::trace::measured::{Baseline, Estimate, Reading, TargetCpu};
use crate::trace::woken;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What gtrace knows of its trace beyond the kernel's counters: when it started, what a
/// trap costs at each probed function, the budget and what it detached.
#[derive(Debug)]
pub struct Meter {
    pub started: Instant,
    /// What a trap costs here, once read (`trap`).
    trap: OnceLock<Option<TrapCost>>,
    /// The calibration, measured on its thread once the probes are attached (taken when
    /// the trap cost is first read).
    calibration: Mutex<Option<Calibration>>,
    /// The kind of instruction under each (program, function)'s probes.
    kinds: HashMap<(String, String), TrapKind>,
    pub budget_percent: Option<f64>,
    pub detached: Vec<Detached>,
    /// Each hit counter's slot by (program, function).
    hit_slots: HashMap<(String, String), usize>,
    /// The traced process's own CPU time (`watch_cpu`), and from it the correction of
    /// the trap cost.
    target: Option<TargetCpu>,
    /// What the hits paid after wake-ups, interval by interval: each reading of the
    /// counters (`collect_at`) ends one.
    woken: Mutex<Accrued>,
}

/// The wake-ups paid so far, and when the counters were last read for them.
#[derive(Debug, Default)]
struct Accrued {
    ledger: woken::Ledger,
    at: Option<Instant>,
}

/// How often the counters are read for the wake-ups when nothing else reads them (a
/// look of the budget, an exporter's publication and the live view end an interval
/// too): an interval's wake-ups are shared by its own hits, so a trace whose hit rate
/// changes pays each part's (`Meter::accrue_due`).
pub const ACCRUE_EVERY: Duration = Duration::from_millis(100);

impl Meter {
    /// The meter of `plan`'s probes: `calibration` is measured meanwhile, and the first
    /// reading of a cost waits for it (`trap`).
    pub fn new(plan: &Plan, calibration: Calibration, budget_percent: Option<f64>) -> Meter {
        let mut kinds = HashMap::new();
        for probe in &plan.probes {
            let ProbeAttach::Uprobe(points) = &probe.attach else { continue };
            for p in points {
                let key = (probe.program.clone(), p.function.clone());
                // The kind of instruction under the site, as the plan says (single-stepped
                // when it does not).
                kinds.entry(key).or_insert_with(|| plan.trap_kinds.get(&p.address).copied().unwrap_or_default());
            }
        }
        let hit_slots = plan.accounting.hits_slots();
        Meter {
            started: Instant::now(),
            trap: OnceLock::new(),
            calibration: Mutex::new(Some(calibration)),
            kinds,
            budget_percent,
            detached: Vec::new(),
            hit_slots,
            target: None,
            woken: Mutex::new(Accrued::default()),
        }
    }

    /// What a trap costs here (None when it could not be measured). The calibration is
    /// measured after the attach, so that it costs the start-up nothing; the first
    /// reading waits for it, so that every cost read (the budget's first look, `--stats`,
    /// an exporter, the live view) has it: none is ever priced without the traps.
    pub fn trap(&self) -> Option<TrapCost> {
        *self.trap.get_or_init(|| {
            let pending = self.calibration.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            pending.and_then(Calibration::finish)
        })
    }

    /// What a trap costs at `program`'s probes of `function`, at `trap`.
    fn trap_ns(&self, trap: Option<TrapCost>, program: &str, function: &str) -> f64 {
        let kind = self.kinds.get(&(program.to_string(), function.to_string())).copied();
        trap.map_or(0.0, |t| t.of(kind.unwrap_or(TrapKind::Step)))
    }

    /// Reads every counter and statistic now.
    pub fn collect(&self, loaded: &Loaded, plan: &Plan) -> Result<Stats, RuntimeError> {
        self.collect_at(loaded, plan, self.trap())
    }

    /// Reads every counter and statistic now without waiting for the trap's
    /// calibration: the hits are priced at no trap cost until `price` prices them (the
    /// budget's window begins with this read, as the probes attach).
    pub fn read_unpriced(&self, loaded: &Loaded, plan: &Plan) -> Result<Stats, RuntimeError> {
        self.collect_at(loaded, plan, None)
    }

    /// Prices `stats`, read by `read_unpriced`, at the calibrated trap cost (waiting for
    /// it). Its hits pay no wake-ups: none of the target's threads was counted waking
    /// before it was read.
    pub fn price(&self, stats: &mut Stats) {
        let trap = self.trap();
        stats.trap = trap;
        for p in stats.probes.iter_mut().filter(|p| p.in_target) {
            for s in &mut p.sites {
                s.trap_ns = self.trap_ns(trap, &p.program, &s.function);
            }
            p.woken_each_ns = 0.0;
            p.price(&ByKind::ONE);
        }
    }

    /// Every counter and statistic now, the hits priced at `trap`.
    fn collect_at(&self, loaded: &Loaded, plan: &Plan, trap: Option<TrapCost>) -> Result<Stats, RuntimeError> {
        let acct = &plan.accounting;
        let counters = if acct.counters.is_empty() { Vec::new() } else { loaded.array_sums(&acct.counters)? };
        let value = |slot: usize| counters.get(slot).copied().unwrap_or(0);
        let scales = self.target.as_ref().map_or(ByKind::ONE, TargetCpu::scales);
        let mut probes: Vec<ProbeStats> =
            plan.probes.iter().map(|probe| self.probe_stats(probe, (loaded, trap), acct, &value, &scales)).collect();
        self.price_woken(&mut probes, trap, &scales);
        let maps = plan.maps.iter().filter_map(|m| map_stats(m, plan, &value)).collect();
        Ok(Stats {
            elapsed_ns: self.elapsed().as_nanos() as u64,
            trap,
            run_stats: loaded.run_stats_on(),
            probes,
            maps,
            rate: acct.rate,
            budget_percent: self.budget_percent,
            detached: self.detached.clone(),
            cgroup: !plan.cgroup.is_empty(),
            target: self.target.as_ref().map(TargetCpu::measure),
            otlp: None,
            spans: None,
        })
    }

    /// What the probes' hits paid because some are their thread's first after it woke
    /// (`woken`): this reading ends an interval, whose wake-ups its own hits share
    /// (`woken::Ledger`); the probes priced again with what each site's hits paid so
    /// far. Nothing without a target whose threads can be read; at no cost without a
    /// calibration (the wake-ups are counted all the same).
    fn price_woken(&self, probes: &mut [ProbeStats], trap: Option<TrapCost>, scales: &ByKind) {
        let Some(t) = self.target.as_ref() else { return };
        let mut accrued = self.woken.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        accrued.at = Some(Instant::now());
        let paid = accrued.ledger.accrue(&woken_counts(probes), t.slices_read());
        let each = trap.map_or(0.0, |t| t.woken_ns) * t.woken_scale();
        let mut paid = paid.iter().copied();
        for p in probes.iter_mut().filter(|p| p.in_target) {
            for s in &mut p.sites {
                s.woken_hits = paid.next().unwrap_or(0.0);
            }
            p.woken_rest = paid.next().unwrap_or(0.0);
            p.woken_each_ns = each;
            p.price(scales);
        }
    }

    /// Ends an interval of the wake-ups (`price_woken`) when none has for
    /// `ACCRUE_EVERY`: the trace loop's turn, with a target whose threads are read and
    /// hits counted per site (`--stats`, a budget). The target's CPU is read with the
    /// counters.
    pub fn accrue_due(&mut self, loaded: &Loaded, plan: &Plan) {
        let last = self.woken.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).at;
        let due = last.is_none_or(|at| at.elapsed() >= ACCRUE_EVERY);
        let Some(t) = self.target.as_mut().filter(|_| due && plan.accounting.hits) else { return };
        t.read();
        // Read at no trap cost: only the counts are kept.
        let _ = self.collect_at(loaded, plan, None);
    }

    /// One program's numbers. A program that runs in gtrace itself (`on begin`, `on
    /// end`, `on interval`) costs the target nothing; only its losses count.
    fn probe_stats(
        &self,
        probe: &ProbeSpec,
        (loaded, trap): (&Loaded, Option<TrapCost>),
        acct: &Accounting,
        value: &dyn Fn(usize) -> u64,
        scales: &ByKind,
    ) -> ProbeStats {
        let program = probe.program.as_str();
        let run = loaded.run_stats(program);
        let counted = |f: &dyn Fn(&Counter) -> bool| -> u64 {
            acct.slots.iter().enumerate().filter(|(_, c)| f(c)).map(|(i, _)| value(i)).sum()
        };
        let mut stats = ProbeStats {
            program: program.to_string(),
            probe: probe.describe.clone(),
            in_target: false,
            hits: run.run_count,
            run_ns: run.run_ns,
            run_count: run.run_count,
            missed: run.missed,
            events_lost: counted(&|c| matches!(c, Counter::EventsLost { program: p } if p == program)),
            rate_dropped: counted(&|c| matches!(c, Counter::RateDropped { program: p } if p == program)),
            refused: counted(&|c| matches!(c, Counter::Refused { program: p, .. } if p == program)),
            skipped: skipped(&acct.slots, program, value),
            other_cgroup: counted(&|c| matches!(c, Counter::OtherCgroup { program: p } if p == program)),
            reads_failed: counted(&|c| matches!(c, Counter::ReadFailed { program: p } if p == program)),
            attached: true,
            ..ProbeStats::default()
        };
        let ProbeAttach::Uprobe(points) = &probe.attach else { return stats };
        // Each function once: its sites (an entry and its inlined copies, RETs) share
        // one hit counter, wherever the plan lists them.
        let mut seen = std::collections::HashSet::new();
        let functions: Vec<&str> = points.iter().map(|p| p.function.as_str()).filter(|f| seen.insert(*f)).collect();
        let attached = loaded.attached_functions(program);
        // A program at one function whose hits the kernel counts: each run is a hit.
        let by_kernel = acct.hits_by_kernel(program).then_some(run.run_count);
        stats.sites = functions
            .iter()
            .map(|f| SiteStats {
                function: f.to_string(),
                hits: by_kernel.unwrap_or_else(|| {
                    self.hit_slots.get(&(program.to_string(), f.to_string())).map_or(0, |s| value(*s))
                }),
                trap_ns: self.trap_ns(trap, program, f),
                kind: self.kinds.get(&(program.to_string(), f.to_string())).copied(),
                cost_ns: 0.0,
                attached: attached.contains(f),
                woken_hits: 0.0,
            })
            .collect();
        if acct.hits {
            stats.hits = stats.sites.iter().map(|s| s.hits).sum();
        }
        stats.in_target = true;
        stats.attached = !attached.is_empty();
        stats.price(scales);
        stats
    }

    /// From now on, what `pid` spends on CPU is read beside the estimate; `before` is
    /// its share of a CPU untraced, `waits_from` its CPU time when gtrace started.
    pub fn watch_cpu(&mut self, pid: u32, before: Option<Baseline>, waits_from: Option<Reading>) {
        self.target = TargetCpu::start(pid, before, waits_from);
    }

    /// Reads the watched process's CPU time (at most every 20 ms).
    pub fn sample_cpu(&mut self) {
        if let Some(t) = self.target.as_mut() {
            t.sample();
        }
    }

    /// Reads it now (a look of the budget: its hits and its CPU time read together),
    /// with the duty cycle's phase then (`trace::paired`).
    pub fn read_cpu(&mut self, phase: Option<crate::trace::paired::Phase>) {
        if let Some(t) = self.target.as_mut() {
            t.read();
            t.phase(phase);
        }
    }

    /// One look of the budget at `stats` (read now): checks the estimate against what
    /// the target spent, corrects the trap cost of each kind from then on, and prices
    /// `stats` again with the correction.
    pub fn observe(&mut self, stats: &mut Stats) {
        let woken_each_ns = self.trap().map_or(0.0, |t| t.woken_ns);
        let Some(t) = self.target.as_mut() else { return };
        let mut e = Estimate { woken_each_ns, ..Estimate::default() };
        for p in stats.probes.iter().filter(|p| p.in_target) {
            e.traps_ns = e.traps_ns.plus(&p.traps_by_kind);
            e.ebpf_ns += p.run_ns as f64;
            e.hits += p.hits + p.other_cgroup;
            // What the hits paid after wake-ups, uncorrected (as `price_woken` priced
            // them interval by interval).
            e.woken_ns += p.woken_paid() * woken_each_ns;
        }
        t.observe(&e);
        let scales = t.scales();
        for p in stats.probes.iter_mut().filter(|p| p.in_target) {
            p.woken_each_ns = woken_each_ns * t.woken_scale();
            p.price(&scales);
        }
        stats.target = Some(t.measure());
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The hit counts the wake-ups are shared by, in a fixed order: each probe in the
/// target, its sites' hits, then the hits they do not count apart and those by other
/// cgroups (`price_woken` gives back what each paid in the same order).
fn woken_counts(probes: &[ProbeStats]) -> Vec<u64> {
    let mut counts = Vec::new();
    for p in probes.iter().filter(|p| p.in_target) {
        counts.extend(p.sites.iter().map(|s| s.hits));
        let counted: u64 = p.sites.iter().map(|s| s.hits).sum();
        counts.push(p.hits.saturating_sub(counted) + p.other_cgroup);
    }
    counts
}

/// Before attaching, where programs' hits are their runs as the kernel counts them
/// (`Accounting::kernel_hits`): turns the kernel's per-program statistics on, or fails,
/// rather than read those hits as none.
pub fn hold_kernel_hits(loaded: &mut Loaded, plan: &Plan) -> Result<(), RuntimeError> {
    match plan.accounting.kernel_hits.is_empty() {
        true => Ok(()),
        false => loaded.enable_run_stats_for(
            "turning on the kernel's BPF statistics (BPF_ENABLE_STATS, CAP_SYS_ADMIN), which count the hits of \
             the probes at one function",
        ),
    }
}

/// At exit: the `--stats` table, then whatever was lost in one line on stderr (said
/// with or without `--stats`), printed lines the OTLP exporter never sent (`otlp`)
/// included.
/// The outer error is reading the numbers, the inner one writing them.
pub fn report(
    meter: &mut Meter,
    loaded: &Loaded,
    plan: &Plan,
    (stats_wanted, otlp): (bool, crate::export::Unsent),
    sink: &mut dyn crate::output::Sink,
) -> Result<Result<(), crate::output::OutputError>, RuntimeError> {
    let mut stats = meter.collect(loaded, plan)?;
    // A duty cycle's parts end with the trace: nothing pairs across its end.
    if let Some(t) = meter.target.as_mut() {
        t.phase(None);
    }
    meter.observe(&mut stats);
    (stats.otlp, stats.spans) = otlp;
    if let Some(line) = stats.lost_line() {
        eprintln!("{line}");
    }
    Ok(if stats_wanted { sink.stats(&stats) } else { Ok(()) })
}

/// What the kernel refused of map `m`, by cause: a user map, the `self` table, or a table
/// of calls in flight (with the functions whose calls it missed).
fn map_stats(m: &MapSpec, plan: &Plan, value: &dyn Fn(usize) -> u64) -> Option<MapStats> {
    use crate::lower::maps::{CARRIED, FRAMES, GOROUTINES_SPILL};
    use crate::output::stats::{CARRIED_TABLE, DEEP_FRAMES_TABLE, INFLIGHT_TABLE};
    let name = match (&m.role, m.object_name.as_str()) {
        (MapRole::User { name, .. }, _) => format!("@{name}"),
        (MapRole::SelfVars, _) => "self".to_string(),
        (MapRole::Goroutines, GOROUTINES_SPILL) => INFLIGHT_TABLE.to_string(),
        (MapRole::Frames, FRAMES) => DEEP_FRAMES_TABLE.to_string(),
        (MapRole::Carried, CARRIED) => CARRIED_TABLE.to_string(),
        _ => return None,
    };
    let mut causes: Vec<(Refusal, u64)> = Vec::new();
    let mut programs: Vec<&str> = Vec::new();
    for (i, c) in plan.accounting.slots.iter().enumerate() {
        let Counter::Refused { program, map, why } = c else { continue };
        let n = value(i);
        if *map != m.object_name || n == 0 {
            continue;
        }
        match causes.iter_mut().find(|(w, _)| w == why) {
            Some((_, sum)) => *sum += n,
            None => causes.push((*why, n)),
        }
        if !programs.contains(&program.as_str()) {
            programs.push(program);
        }
    }
    causes.sort();
    let refused = causes.iter().map(|(_, n)| n).sum();
    let calls_of = if matches!(m.role, MapRole::User { .. } | MapRole::SelfVars) {
        Vec::new()
    } else {
        programs.iter().flat_map(|p| functions_of(plan, p)).collect()
    };
    let per_cpu = matches!(m.role, MapRole::User { preallocated: false, .. }) && m.kind.is_percpu();
    let (value_size, cpus) = match per_cpu {
        true => (m.value_size, crate::runtime::possible_cpus().map_or(0, |n| n as u32)),
        false => (0, 0),
    };
    // A slotted map holds its slots' keys besides its spill's (lower/slotted.rs).
    let slots = plan.maps.iter().filter(|s| matches!(&s.role, MapRole::Slots { of } if *of == m.object_name));
    let capacity = m.max_entries + slots.map(|s| s.max_entries).sum::<u32>();
    Some(MapStats { map: name, capacity, refused, causes, calls_of, value_size, cpus })
}

/// The functions `program` is attached at (each once), or its probe's description when
/// it is attached at many.
fn functions_of(plan: &Plan, program: &str) -> Vec<String> {
    let Some(probe) = plan.probes.iter().find(|p| p.program == program) else { return Vec::new() };
    let mut functions: Vec<String> = Vec::new();
    if let ProbeAttach::Uprobe(points) = &probe.attach {
        for p in points {
            if !functions.contains(&p.function) {
                functions.push(p.function.clone());
            }
        }
    }
    if functions.is_empty() || functions.len() > 3 {
        return vec![format!("`{}`", probe.describe)];
    }
    functions
}

/// The hits of `program` that stopped short, by why (`Counter::Skipped`).
fn skipped(slots: &[Counter], program: &str, value: &dyn Fn(usize) -> u64) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for (i, c) in slots.iter().enumerate() {
        if let Counter::Skipped { program: p, why } = c {
            if p == program {
                match out.iter_mut().find(|(w, _)| w == why) {
                    Some((_, n)) => *n += value(i),
                    None => out.push((why.clone(), value(i))),
                }
            }
        }
    }
    out
}
