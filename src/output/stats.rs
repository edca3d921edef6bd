//! gtrace's report on itself: per probe its hits, eBPF time, estimated cost and what it
//! lost (`--stats`, a table on stderr or a JSON object), and the one line that says at
//! exit whatever was lost, with or without `--stats`. The numbers are collected by
//! `trace::stats`; this is only what they mean and how they print.

pub use super::cuts::{partial, Detached, Duty};
pub use super::losses::{MapStats, UnsentLogs, UnsentSpans, CARRIED_TABLE, DEEP_FRAMES_TABLE, INFLIGHT_TABLE};
use super::numbers::{elide, percent, plural, thousands};
use super::text::duration;
use crate::arch::trap::{ByKind, TrapKind};
use serde::Serialize;

/// gtrace's own numbers at one moment of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Since the probes were attached.
    pub elapsed_ns: u64,
    /// What one uprobe trap costs here, by kind of instruction (calibrated at
    /// start-up), when measured.
    pub trap: Option<crate::runtime::TrapCost>,
    /// The kernel's per-program statistics are on: eBPF time per hit is known.
    pub run_stats: bool,
    pub probes: Vec<ProbeStats>,
    /// Maps that refused updates.
    pub maps: Vec<MapStats>,
    /// `--rate N`.
    pub rate: Option<u32>,
    /// `--budget` in force, in percent of one CPU.
    pub budget_percent: Option<f64>,
    /// What the budget detached, in order.
    pub detached: Vec<Detached>,
    /// `--cgroup`: the probes are scoped to a cgroup.
    pub cgroup: bool,
    /// What the traced process spent on CPU, by its threads' own accounting (-p and -c;
    /// `None` with -b or when it cannot be read).
    pub target: Option<super::measured::TargetMeasure>,
    /// `--otlp`: printed lines that never reached the collector, known at exit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp: Option<UnsentLogs>,
    /// `--otlp`: spans that never reached the collector, known at exit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spans: Option<UnsentSpans>,
}

/// One program: a probe of the script, or gtrace's entry timing or `self` cleanup.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProbeStats {
    pub program: String,
    /// The script's probe header (`on entry main.F`).
    pub probe: String,
    /// It runs in the target (a uprobe there), not in gtrace (`on begin`, `on end`, `on
    /// interval`, which cost the target nothing and are never detached).
    pub in_target: bool,
    /// Hits: the sites' own counts when they count them, else the kernel's run count.
    pub hits: u64,
    /// What its hits cost the target: a trap each (at the cost of its site's kind of
    /// instruction), plus the program's run time. ns.
    pub cost_ns: f64,
    /// Its traps at the calibrated cost, before any correction, ns (in `cost_ns` scaled).
    pub traps_ns: f64,
    /// The same by kind of trap.
    #[serde(skip)]
    pub traps_by_kind: ByKind,
    /// Per probed function (hits counted when sites count them).
    pub sites: Vec<SiteStats>,
    /// The kernel's run time and run count of the program.
    pub run_ns: u64,
    pub run_count: u64,
    /// Hits the kernel skipped (another BPF program was running on the CPU).
    pub missed: u64,
    /// Events the full ring buffer refused.
    pub events_lost: u64,
    /// Printed events `--rate` dropped.
    pub rate_dropped: u64,
    /// Map updates the kernel refused (a full map).
    pub refused: u64,
    /// Hits that stopped short (a value that could not be read, a slotted map's slot held
    /// by another probe through every try), by why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<(String, u64)>,
    /// Reads of the target's memory that failed (not through nil): their values read
    /// as zero, and print as 0 or empty.
    pub reads_failed: u64,
    /// Still attached (not detached by the budget).
    pub attached: bool,
    /// Hits by tasks outside the `--cgroup` cgroup: returned at once and not in `hits`,
    /// but their traps are in `cost_ns` (at the first site's trap cost).
    pub other_cgroup: u64,
    /// What a hit that is its thread's first after it woke pays beyond its trap
    /// (`trace::woken`, with a duty cycle's factor), ns; set before `price`.
    #[serde(skip)]
    pub woken_each_ns: f64,
    /// Of the hits its sites do not count apart (and those by other cgroups), how many
    /// paid that, as the trace went (`woken::Ledger`); set before `price`.
    #[serde(skip)]
    pub woken_rest: f64,
    /// What its hits paid after wake-ups, ns (in `cost_ns`, never corrected).
    pub woken_ns: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SiteStats {
    pub function: String,
    pub hits: u64,
    /// What a trap costs at its sites (their kind of instruction), as calibrated, ns.
    pub trap_ns: f64,
    /// The kind of instruction under its probes (how the kernel runs it), when known.
    pub kind: Option<crate::arch::trap::TrapKind>,
    /// Its hits' traps and their share of the program's run time, and what they paid
    /// after wake-ups, ns.
    pub cost_ns: f64,
    pub attached: bool,
    /// How many of its hits paid a wake-up, as the trace went (`woken::Ledger`); set
    /// before `price`.
    #[serde(skip)]
    pub woken_hits: f64,
}

/// A kind of trap as `--stats` says it.
fn trap_name(kind: crate::arch::trap::TrapKind) -> &'static str {
    use crate::arch::trap::TrapKind;
    match kind {
        TrapKind::Step => "step",
        TrapKind::Push => "push",
        TrapKind::Branch => "branch",
    }
}

impl ProbeStats {
    /// `12 reads of target memory failed in on entry main.f (values printed as zero or
    /// empty)`.
    pub fn failed_reads(&self) -> String {
        let n = self.reads_failed;
        format!(
            "{} read{} of target memory failed in {} (values printed as zero or empty)",
            thousands(n),
            plural(n),
            self.probe
        )
    }

    /// The kinds of trap of its sites: one name when they share it, else each with how
    /// many sites have it (`2 push, 1 step`); `-` in gtrace itself.
    pub fn trap_kinds(&self) -> String {
        let mut kinds: Vec<(&str, usize)> = Vec::new();
        for s in &self.sites {
            let Some(k) = s.kind else { continue };
            match kinds.iter_mut().find(|(n, _)| *n == trap_name(k)) {
                Some((_, c)) => *c += 1,
                None => kinds.push((trap_name(k), 1)),
            }
        }
        match kinds.as_slice() {
            [] => "-".into(),
            [(one, _)] => one.to_string(),
            many => many.iter().map(|(n, c)| format!("{c} {n}")).collect::<Vec<_>>().join(", "),
        }
    }

    /// How many of its hits paid a wake-up, as the trace went (`woken::Ledger`).
    pub fn woken_paid(&self) -> f64 {
        self.sites.iter().map(|s| s.woken_hits).sum::<f64>() + self.woken_rest
    }

    /// The eBPF program's own time per run.
    pub fn ns_per_hit(&self) -> Option<f64> {
        (self.run_count > 0).then(|| self.run_ns as f64 / self.run_count as f64)
    }

    /// Fills in `traps_ns`, `traps_by_kind`, `woken_ns` and `cost_ns` of the probe and
    /// its sites from their hits and trap costs, each trap at the calibrated cost of its
    /// kind times that kind's factor in `scales` (the correction from what the target
    /// measured, 1 before any), each hit that paid a wake-up (`woken_hits` of a site,
    /// `woken_rest`) with `woken_each_ns` more.
    pub fn price(&mut self, scales: &ByKind) {
        let per_run = self.ns_per_hit().unwrap_or(0.0);
        let woken = self.woken_each_ns;
        let mut by_kind = ByKind::default();
        for s in &mut self.sites {
            let kind = s.kind.unwrap_or_default();
            s.cost_ns = s.hits as f64 * (s.trap_ns * scales.of(kind) + per_run) + s.woken_hits * woken;
            by_kind.add(kind, s.hits as f64 * s.trap_ns);
        }
        let counted: u64 = self.sites.iter().map(|s| s.hits).sum();
        // Hits the sites did not count apart (no per-site counters), and those by tasks
        // of other cgroups: at the first site's trap cost.
        let first = self.sites.first();
        let (first_trap, first_kind) = first.map_or((0.0, TrapKind::Step), |s| (s.trap_ns, s.kind.unwrap_or_default()));
        let rest = self.hits.saturating_sub(counted) + self.other_cgroup;
        by_kind.add(first_kind, rest as f64 * first_trap);
        self.traps_by_kind = by_kind;
        self.traps_ns = by_kind.sum();
        self.woken_ns = self.woken_paid() * woken;
        self.cost_ns = by_kind.scaled(scales) + self.run_ns as f64 + self.woken_ns;
    }
}

impl Stats {
    pub(super) fn share(&self, cost_ns: f64) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            100.0 * cost_ns / self.elapsed_ns as f64
        }
    }

    pub fn events_lost(&self) -> u64 {
        self.probes.iter().map(|p| p.events_lost).sum()
    }

    pub fn rate_dropped(&self) -> u64 {
        self.probes.iter().map(|p| p.rate_dropped).sum()
    }

    pub fn missed(&self) -> u64 {
        self.probes.iter().map(|p| p.missed).sum()
    }

    /// Everything lost, in one line (`None` when nothing was):
    /// `lost 1,204 events: ring buffer full; 3 updates of @paths refused: map full at
    /// 65,536 keys`.
    pub fn lost_line(&self) -> Option<String> {
        let mut parts = Vec::new();
        let events = self.events_lost();
        if events > 0 {
            parts.push(format!("lost {} event{}: ring buffer full", thousands(events), plural(events)));
        }
        let dropped = self.rate_dropped();
        if dropped > 0 {
            let rate = self.rate.map(|r| format!(" {}", thousands(r.into()))).unwrap_or_default();
            parts.push(format!(
                "dropped {} printed event{}: --rate{rate} a second per probe",
                thousands(dropped),
                plural(dropped)
            ));
        }
        for m in &self.maps {
            m.losses(&mut parts);
        }
        if let Some(spans) = &self.spans {
            parts.push(spans.describe());
        }
        if let Some(otlp) = &self.otlp {
            parts.push(otlp.describe());
        }
        for p in &self.probes {
            for (why, n) in p.skipped.iter().filter(|(_, n)| *n > 0) {
                parts.push(format!("skipped {} hit{} of {}: {why}", thousands(*n), plural(*n), p.probe));
            }
        }
        for p in self.probes.iter().filter(|p| p.reads_failed > 0) {
            parts.push(p.failed_reads());
        }
        let missed = self.missed();
        if missed > 0 {
            parts.push(format!(
                "missed {} hit{}: the kernel skipped the probe while another BPF program ran on the CPU",
                thousands(missed),
                plural(missed)
            ));
        }
        let budget = self.budget_percent.map(|b| format!(" {}%", percent(b))).unwrap_or_default();
        for d in self.detached.iter().filter(|d| !d.is_cut()) {
            parts.push(format!("{}: {} (their counts are of that time only)", d.said(), d.what));
        }
        let cuts: Vec<&Detached> = self.detached.iter().filter(|d| d.is_cut()).collect();
        if !cuts.is_empty() {
            let mut what: Vec<String> = cuts.iter().take(3).map(|d| d.what.clone()).collect();
            if cuts.len() > 3 {
                what.push(format!("and {} more (--stats lists them)", thousands(cuts.len() as u64 - 3)));
            }
            parts.push(format!("detached by --budget{budget}: {}", what.join(", ")));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// A probe's row: its description, with which of its programs where it has several
    /// (one per group of sites, as `on line` may), and whether it was detached.
    fn row_name(&self, p: &ProbeStats) -> String {
        let twins = self.probes.iter().filter(|q| q.probe == p.probe).count() > 1;
        let probe = match p.sites.as_slice() {
            [one] if twins => format!("{} [{} at {}]", p.probe, p.program, one.function),
            _ if twins => format!("{} [{}]", p.probe, p.program),
            _ => p.probe.clone(),
        };
        // A duty cycle's probe parked at the end is cycled, not detached.
        let cycled = self.detached.iter().filter_map(|d| d.duty.filter(|_| d.programs.contains(&p.program)));
        match (p.attached, cycled.last()) {
            (_, Some(d)) if d.fraction > 0.0 && d.fraction < 1.0 => {
                format!("{probe} (duty-cycled, {}% now)", (100.0 * d.fraction).round())
            }
            (true, _) => probe,
            (false, _) => format!("{probe} (detached)"),
        }
    }

    /// The costliest sites of a probe over several functions, then how many more.
    fn site_rows(&self, p: &ProbeStats, rows: &mut Vec<[String; 8]>) {
        let mut sites: Vec<_> = p.sites.iter().filter(|_| p.sites.len() > 1).collect();
        sites.sort_by(|a, b| b.cost_ns.total_cmp(&a.cost_ns).then(b.hits.cmp(&a.hits)));
        let more = sites.len().saturating_sub(MAX_SITE_ROWS);
        let blank = String::new;
        for s in sites.into_iter().take(MAX_SITE_ROWS) {
            let cost = s.cost_ns;
            let name = if s.attached { format!("  {}", s.function) } else { format!("  {} (detached)", s.function) };
            let share = format!("{}%", percent(self.share(cost)));
            let trap = s.kind.map_or_else(blank, |k| trap_name(k).to_string());
            rows.push([name, thousands(s.hits), trap, blank(), duration(cost.round() as i64), share, blank(), blank()]);
        }
        if more > 0 {
            let line = format!("  ... {} more function{}", thousands(more as u64), plural(more as u64));
            rows.push([line, blank(), blank(), blank(), blank(), blank(), blank(), blank()]);
        }
    }

    /// The `--stats` table: a row per probe, under it a row per function for the
    /// `MAX_SITE_ROWS` costliest of a probe over several, names cut to `MAX_NAME`.
    pub fn table(&self) -> String {
        let mut rows: Vec<[String; 8]> = vec![[
            "probe".into(),
            "hits".into(),
            "trap".into(),
            "eBPF/hit".into(),
            "est. cost".into(),
            "of a CPU".into(),
            "dropped".into(),
            "refused".into(),
        ]];
        // gtrace's own triggers only when they lost something.
        let shown = self.probes.iter().filter(|p| p.in_target || p.events_lost + p.rate_dropped + p.refused > 0);
        for p in shown {
            let cost = p.cost_ns;
            let name = self.row_name(p);
            rows.push([
                name,
                thousands(p.hits),
                p.trap_kinds(),
                p.ns_per_hit().map(|n| duration(n.round() as i64)).unwrap_or_else(|| "-".into()),
                duration(cost.round() as i64),
                format!("{}%", percent(self.share(cost))),
                thousands(p.events_lost + p.rate_dropped),
                thousands(p.refused),
            ]);
            self.site_rows(p, &mut rows);
        }
        elide_names(&mut rows);
        let widths: Vec<usize> = (0..8).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        let mut out = format!("--stats: {} traced", duration(self.elapsed_ns as i64));
        match &self.trap {
            Some(t) => out.push_str(&format!(
                "; a uprobe trap costs {} here on an instruction the kernel single-steps, {} on a PUSH, {} on a branch, {} more when its thread just woke (measured at start-up{})",
                duration(t.step_ns as i64),
                duration(t.push_ns as i64),
                duration(t.branch_ns as i64),
                duration(t.woken_ns as i64),
                across_cpus(t),
            )),
            None => out.push_str("; the trap cost was not measured: costs are eBPF time only"),
        }
        if !self.run_stats {
            out.push_str("; the kernel's BPF statistics are off: no eBPF time");
        }
        out.push('\n');
        for r in &rows {
            let mut line = format!("{:<w$}", r[0], w = widths[0]);
            for c in 1..8 {
                line.push_str(&format!("  {:>w$}", r[c], w = widths[c]));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if let Some(target) = &self.target {
            out.push_str(&target.line(self));
        }
        for (d, duty) in self.detached.iter().filter_map(|d| Some((d, d.duty?))) {
            out.push_str(&format!(
                "--budget: {}, {}% of each second now: {} (their counts are of the attached time only)\n",
                d.said(),
                (100.0 * duty.fraction).round(),
                d.what
            ));
        }
        for p in self.probes.iter().filter(|p| p.reads_failed > 0) {
            out.push_str(&format!("{}\n", p.failed_reads()));
        }
        if self.cgroup {
            let others: u64 = self.probes.iter().map(|p| p.other_cgroup).sum();
            out.push_str(&format!(
                "--cgroup: {} hit{} by tasks in other cgroups returned at once (not in `hits`; their traps are in `est. cost`)\n",
                thousands(others),
                plural(others)
            ));
        }
        out
    }
}

/// How the calibration's CPUs differed: `, the mean of 2 CPUs: 9.2us to 13.1us
/// single-stepped` (nothing on one CPU).
fn across_cpus(t: &crate::runtime::TrapCost) -> String {
    if t.cpus < 2 {
        return String::new();
    }
    let (lo, hi) = t.step_range_ns;
    format!(", the mean of {} CPUs: {} to {} single-stepped", t.cpus, duration(lo as i64), duration(hi as i64))
}

/// Functions shown under a probe in the `--stats` table (the costliest).
const MAX_SITE_ROWS: usize = 10;
/// The widest name in the `--stats` table: longer ones keep their start and end.
const MAX_NAME: usize = 72;

/// Cuts each row's name to `MAX_NAME`, but where two different names would be cut to
/// the same text, keeps both whole: rows must be told apart.
fn elide_names(rows: &mut [[String; 8]]) {
    let cut: Vec<String> = rows.iter().map(|r| elide(&r[0], MAX_NAME)).collect();
    let mut seen: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
    for (i, c) in cut.iter().enumerate() {
        seen.entry(c.as_str()).or_default().push(i);
    }
    let ambiguous: std::collections::HashSet<usize> = (seen.values())
        .filter(|rows_of| rows_of.iter().any(|i| rows[*i][0] != rows[rows_of[0]][0]))
        .flatten()
        .copied()
        .collect();
    for (i, r) in rows.iter_mut().enumerate() {
        if !ambiguous.contains(&i) {
            r[0] = cut[i].clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Refusal;

    #[test]
    fn names_cut_to_the_same_text_are_kept_whole() {
        let long = |middle: &str| {
            format!("on entry \"example.com/a/very/long/module/path/{middle}/and/more/of/it/still/going/on/pkg.(*T).Method\"")
        };
        let row = |name: String| {
            let mut row: [String; 8] = Default::default();
            row[0] = name;
            row
        };
        let mut rows = vec![row(long("one")), row(long("two")), row("on entry main.f".into())];
        elide_names(&mut rows);
        assert_eq!(rows[0][0], long("one"));
        assert_eq!(rows[1][0], long("two"));
        assert_eq!(rows[2][0], "on entry main.f");
        // Alone, a long name is cut in the middle.
        let mut rows = vec![row(long("one"))];
        elide_names(&mut rows);
        assert!(rows[0][0].contains("...") && rows[0][0].chars().count() == MAX_NAME, "{}", rows[0][0]);
    }

    #[test]
    fn programs_of_one_probe_are_told_apart() {
        let probe = |program: &str, function: &str| ProbeStats {
            program: program.into(),
            probe: "on line \"main.go:9\"".into(),
            in_target: true,
            attached: true,
            sites: vec![SiteStats { function: function.into(), attached: true, ..SiteStats::default() }],
            ..ProbeStats::default()
        };
        let stats = Stats { probes: vec![probe("p0", "main.a"), probe("p0_1", "main.b")], ..Stats::default() };
        let table = stats.table();
        assert!(table.contains("on line \"main.go:9\" [p0 at main.a]"), "{table}");
        assert!(table.contains("on line \"main.go:9\" [p0_1 at main.b]"), "{table}");
    }

    #[test]
    fn numbers_print_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_204), "1,204");
        assert_eq!(thousands(65_536), "65,536");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(percent(73.46), "73");
        assert_eq!(percent(4.25), "4.2");
        assert_eq!(percent(1.0), "1");
        assert_eq!(percent(0.31), "0.31");
        assert_eq!(percent(0.0041), "0.004");
        assert_eq!(percent(0.0), "0");
    }

    #[test]
    fn a_wide_probe_shows_its_costliest_functions_and_long_names_cut() {
        let sites: Vec<SiteStats> = (0..25u64)
            .map(|i| SiteStats {
                function: format!("example.com/a/very/long/module/path/pkg.(*Server[go.shape.string]).handler{i:02}"),
                hits: i,
                cost_ns: i as f64,
                attached: true,
                ..SiteStats::default()
            })
            .collect();
        let p = ProbeStats {
            in_target: true,
            hits: 300,
            probe: "on entry \"pkg.*\"".into(),
            sites,
            ..ProbeStats::default()
        };
        let table = Stats { elapsed_ns: 1, probes: vec![p], ..Stats::default() }.table();
        assert!(table.contains("handler24") && table.contains("handler15"), "{table}");
        assert!(!table.contains("handler14"), "only the 10 costliest: {table}");
        assert!(table.contains("  ... 15 more functions"), "{table}");
        assert!(table.lines().all(|l| l.chars().count() < MAX_NAME + 80), "{table}");
        assert_eq!(elide("abcdefghij", 7), "ab...ij");
        assert_eq!(elide("abc", 7), "abc");
    }

    #[test]
    fn the_lost_line_says_each_loss_once() {
        let mut s = Stats { rate: Some(100), ..Stats::default() };
        assert_eq!(s.lost_line(), None);
        s.probes.push(ProbeStats { events_lost: 1_204, rate_dropped: 7, ..ProbeStats::default() });
        let map = |map: &str, capacity, causes: Vec<(Refusal, u64)>| MapStats {
            map: map.into(),
            capacity,
            refused: causes.iter().map(|(_, n)| n).sum(),
            causes,
            ..MapStats::default()
        };
        s.maps.push(map("@paths", 65_536, vec![(Refusal::Full, 3)]));
        s.maps.push(map("self", 10, vec![(Refusal::Full, 1)]));
        s.maps.push(map("@quiet", 10, vec![]));
        assert_eq!(
            s.lost_line().unwrap(),
            "lost 1,204 events: ring buffer full; dropped 7 printed events: --rate 100 a second per probe; \
             3 updates of @paths refused: map full at 65,536 keys (--map-size @paths=N holds more); \
             1 update of self variables refused: table full at 10 entries (--map-size self=N holds more)"
        );
    }

    #[test]
    fn costs_are_traps_plus_run_time() {
        let site = |function: &str, hits, trap_ns| SiteStats {
            function: function.into(),
            hits,
            trap_ns,
            attached: true,
            ..SiteStats::default()
        };
        let mut p = ProbeStats {
            in_target: true,
            hits: 1_000,
            run_ns: 50_000,
            run_count: 1_000,
            sites: vec![site("main.F", 990, 2_000.0), site("main.G", 10, 500.0)],
            ..ProbeStats::default()
        };
        p.price(&ByKind::ONE);
        assert_eq!(p.ns_per_hit(), Some(50.0));
        assert_eq!(p.sites[0].cost_ns, 990.0 * 2_050.0);
        assert_eq!(p.sites[1].cost_ns, 10.0 * 550.0);
        assert_eq!(p.cost_ns, 990.0 * 2_000.0 + 10.0 * 500.0 + 50_000.0);
        let s = Stats { elapsed_ns: (p.cost_ns * 2.0) as u64, probes: vec![p.clone()], ..Stats::default() };
        let table = s.table();
        assert!(table.contains("50%") && table.contains("  main.G"), "{table}");
        assert!(!table.contains("--cgroup"), "{table}");
        // Hits in other cgroups: not hits, but their traps cost (at the first site's).
        let mut scoped = ProbeStats { other_cgroup: 100, ..p };
        scoped.price(&ByKind::ONE);
        assert_eq!(scoped.hits, 1_000);
        assert_eq!(scoped.cost_ns, 990.0 * 2_000.0 + 10.0 * 500.0 + 100.0 * 2_000.0 + 50_000.0);
        let s = Stats { probes: vec![scoped], cgroup: true, ..Stats::default() };
        assert!(s.table().contains("--cgroup: 100 hits by tasks in other cgroups returned at once"), "{}", s.table());
    }

    #[test]
    fn each_site_pays_the_wake_ups_its_own_hits_paid() {
        // A wildcard cut down to main.F: G's 10,000 hits shared 100 wake-ups with F's
        // 100 before the cut, then F's 900 hits after it each followed one.
        let site = |function: &str, hits, woken_hits| SiteStats {
            function: function.into(),
            hits,
            trap_ns: 1_000.0,
            woken_hits,
            ..SiteStats::default()
        };
        let mut p = ProbeStats {
            in_target: true,
            hits: 11_000,
            other_cgroup: 50,
            sites: vec![site("main.F", 1_000, 900.0 + 100.0 * 100.0 / 10_100.0), site("main.G", 10_000, 99.0)],
            woken_rest: 10.0,
            woken_each_ns: 2_000.0,
            ..ProbeStats::default()
        };
        p.price(&ByKind::ONE);
        let f = &p.sites[0];
        assert!((f.cost_ns / 1_000.0 - (1_000.0 + 2_000.0 * (0.9 + 0.1 / 101.0))).abs() < 1e-6, "{f:?}");
        assert_eq!(p.sites[1].cost_ns, 10_000.0 * 1_000.0 + 99.0 * 2_000.0);
        assert!((p.woken_paid() - (f.woken_hits + 99.0 + 10.0)).abs() < 1e-9);
        assert!((p.woken_ns - 2_000.0 * p.woken_paid()).abs() < 1e-6);
        assert!((p.cost_ns - (11_050.0 * 1_000.0 + p.woken_ns)).abs() < 1e-6, "{p:?}");
    }
}
