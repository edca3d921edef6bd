//! What the traced process really spent on a CPU while traced, beside what the probes are
//! estimated to have cost it: the line of `--stats` that checks the estimate. The
//! numbers are read by `trace::measured`; this is what they mean and how they print.

use super::numbers::{percent, thousands};
use super::stats::Stats;
use super::text::duration;
use crate::arch::trap::ByKind;
use serde::Serialize;

/// The target's own CPU accounting over a trace (-p and -c; not with -b).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TargetMeasure {
    /// CPU time its threads spent since the probes were attached, ns.
    pub cpu_ns: u64,
    /// How many times its threads were put on a CPU since then while the probes were
    /// attached (`trace::woken`; not while a duty cycle had them off).
    pub slices: u64,
    /// How long its threads waited on a run queue for a CPU since then, ns (the
    /// budget's look at a window the host held it back in: `trace::budget::held`).
    #[serde(skip)]
    pub wait_ns: u64,
    /// Its share of a CPU before the probes were attached (from gtrace's start to the
    /// attach), in percent; `None` for a command started traced, or a window too short.
    pub before_percent: Option<f64>,
    /// The factor the calibrated trap cost was corrected by, common to every kind of
    /// trap, from what the target spent above its share before attaching; `None` while
    /// it has not been measured (an estimate under 1% of a CPU cannot be told from the
    /// target's own noise).
    pub trap_scale: Option<f64>,
    /// The factor of each kind of trap (the common one where the kinds cannot be told
    /// apart: `trace::correction`).
    pub trap_scales: Option<ByKind>,
    /// Intervals of the trace the correction was made from, and those set aside (their
    /// measure said the target's load changed, or that the host held it back: not the
    /// traps' cost).
    pub intervals: u32,
    pub set_aside: u32,
    /// What a duty cycle measured of the probes, each attached part against the
    /// detached parts around it (`trace::paired`); `None` when none was paired.
    pub duty: Option<DutyMeasure>,
}

/// A duty cycle's own measure of the probes' cost (`trace::paired`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DutyMeasure {
    /// Periods paired.
    pub periods: u32,
    /// While attached, percent of a CPU: what the target spent more than in the
    /// detached parts around, and what the estimate said of the same time (uncorrected).
    pub measured_percent: f64,
    pub estimated_percent: f64,
    /// The factor on the estimate beyond eBPF time (traps and wake-ups), once enough
    /// periods were paired: from then on it stands for the correction.
    pub factor: Option<f64>,
}

impl TargetMeasure {
    /// The factor each kind of trap is priced at: a duty cycle's measure once it has
    /// one, else the correction's; `None` before either.
    pub fn scales(&self) -> Option<ByKind> {
        match self.duty.and_then(|d| d.factor) {
            Some(f) => Some(ByKind::all(f)),
            None => self.trap_scales,
        }
    }

    /// Two lines: what the target spent, then the probes' cost three ways, side by side:
    ///
    /// `target: 1.63s of CPU while traced (41% of a CPU), 5% before attaching, by its threads' own accounting`
    /// `  the probes' cost: 33% of a CPU estimated at the calibrated trap cost, 35% corrected, 36% measured (above its share before); trap cost x1.09 (step x1.12, push x1.01) from 4 intervals`
    ///
    /// Where intervals were set aside, the last figure is not called a measure of the
    /// probes (`30% above its share before (not the probes' cost alone: ...)`).
    pub fn line(&self, stats: &Stats) -> String {
        let in_target = || stats.probes.iter().filter(|p| p.in_target);
        let calibrated: f64 = in_target().map(|p| p.traps_ns + p.run_ns as f64 + p.woken_ns).sum();
        let woken: f64 = in_target().map(|p| p.woken_ns).sum();
        let corrected: f64 = in_target().map(|p| p.cost_ns).sum();
        let traced = stats.share(self.cpu_ns as f64);
        let before = match self.before_percent {
            Some(b) => format!(", {}% before attaching", percent(b)),
            None => String::new(),
        };
        // Where intervals were set aside, what the target spent above its share before
        // holds a change of its own load (or time a CPU held it back): not a measure of
        // the probes, and not called one.
        let measured = match self.before_percent {
            Some(b) if self.set_aside > 0 => format!(
                "{}% above its share before (not the probes' cost alone: its load changed or a CPU held it back while traced)",
                percent((traced - b).max(0.0))
            ),
            Some(b) => format!("{}% measured (above its share before)", percent((traced - b).max(0.0))),
            None => "not measured (no share of a CPU before attaching to compare with)".into(),
        };
        let corrected = match (self.scales(), self.before_percent) {
            (Some(_), _) => format!("{}% corrected", percent(stats.share(corrected))),
            (None, None) => "not corrected".into(),
            (None, Some(_)) => format!(
                "not corrected (under {}% of a CPU, traced under 0.5s, or set aside)",
                percent(crate::trace::correction::MEASURABLE)
            ),
        };
        // The part of the estimate that is hits after a wake-up (`trace::woken`).
        let after_wake = match woken > 0.0 {
            true => format!(" ({}% for hits after {} wake-ups)", percent(stats.share(woken)), thousands(self.slices)),
            false => String::new(),
        };
        format!(
            "target: {} of CPU while traced ({}% of a CPU){before}, by its threads' own accounting\n  the probes' cost: {}% of a CPU estimated at the calibrated trap cost{after_wake}, {corrected}, {measured}{}\n",
            duration(self.cpu_ns as i64),
            percent(traced),
            percent(stats.share(calibrated)),
            self.how_corrected(),
        ) + &self.duty_line()
    }

    /// `  duty-cycled, while attached: 12% of a CPU measured (each attached part less the
    /// detached ones around it, 9 periods), 4.1% estimated; traps and wake-ups priced x2.90
    /// from it`, or nothing when no period was paired.
    fn duty_line(&self) -> String {
        let Some(d) = self.duty else { return String::new() };
        let priced = match d.factor {
            Some(f) => format!("; traps and wake-ups priced x{f:.2} from it"),
            None => format!(" (priced from it after {} periods)", crate::trace::paired::LEAST_PERIODS),
        };
        format!(
            "  duty-cycled, while attached: {}% of a CPU measured (each attached part less the detached ones around it, {} period{}), {}% estimated{priced}\n",
            percent(d.measured_percent),
            d.periods,
            if d.periods == 1 { "" } else { "s" },
            percent(d.estimated_percent),
        )
    }

    /// `; trap cost x1.09 (step x1.12, push x1.01) from 4 intervals, 1 set aside (the
    /// target's load changed, or a CPU held it back)`, or nothing.
    fn how_corrected(&self) -> String {
        let mut out = String::new();
        if let (Some(common), Some(scales)) = (self.trap_scale, self.trap_scales) {
            out = format!("; trap cost x{common:.2}");
            let kinds = [("step", scales.step), ("push", scales.push), ("branch", scales.branch)];
            let apart: Vec<String> = kinds
                .iter()
                .filter(|(_, s)| (s - common).abs() >= 0.005)
                .map(|(n, s)| format!("{n} x{s:.2}"))
                .collect();
            if !apart.is_empty() {
                out += &format!(" ({})", apart.join(", "));
            }
            out += &format!(" from {} interval{}", self.intervals, if self.intervals == 1 { "" } else { "s" });
        }
        if self.set_aside > 0 {
            out += &format!(
                "{}{} interval{} set aside (the target's load changed, or a CPU held it back)",
                if out.is_empty() { "; " } else { ", " },
                self.set_aside,
                if self.set_aside == 1 { "" } else { "s" }
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::stats::ProbeStats;

    #[test]
    fn the_estimate_the_correction_and_the_measure_side_by_side() {
        // 1 s traced; traps 200 ms at the calibrated cost, 50 ms of eBPF, corrected x1.2.
        let probe =
            ProbeStats { in_target: true, traps_ns: 200e6, run_ns: 50_000_000, cost_ns: 290e6, ..Default::default() };
        let stats = Stats { elapsed_ns: 1_000_000_000, probes: vec![probe], ..Stats::default() };
        let scales = ByKind { step: 1.3, push: 1.2, branch: 1.2 };
        let target = TargetMeasure {
            cpu_ns: 350_000_000,
            slices: 0,
            wait_ns: 0,
            before_percent: Some(5.0),
            trap_scale: Some(1.2),
            trap_scales: Some(scales),
            intervals: 3,
            set_aside: 1,
            duty: None,
        };
        let line = target.line(&stats);
        assert!(line.starts_with("target: 350ms of CPU while traced (35% of a CPU), 5% before attaching"), "{line}");
        assert!(
            line.contains("25% of a CPU estimated at the calibrated trap cost, 29% corrected, 30% above its share before (not the probes' cost alone"),
            "{line}"
        );
        assert!(line.contains("trap cost x1.20 (step x1.30) from 3 intervals, 1 interval set aside"), "{line}");
        // No interval set aside: the rest is the probes' cost, measured.
        let line = TargetMeasure { set_aside: 0, ..target }.line(&stats);
        assert!(line.contains("29% corrected, 30% measured (above its share before)"), "{line}");
        // A command started traced: neither measured nor corrected.
        let started = TargetMeasure {
            before_percent: None,
            trap_scale: None,
            trap_scales: None,
            intervals: 0,
            set_aside: 0,
            ..target
        };
        let line = started.line(&stats);
        assert!(line.contains("not corrected, not measured (no share of a CPU before attaching"), "{line}");
    }

    #[test]
    fn a_duty_cycles_own_measure_prints_beside_the_estimate_and_prices_it() {
        let probe =
            ProbeStats { in_target: true, traps_ns: 20e6, run_ns: 10_000_000, cost_ns: 60e6, ..Default::default() };
        let stats = Stats { elapsed_ns: 1_000_000_000, probes: vec![probe], ..Stats::default() };
        let duty = DutyMeasure { periods: 9, measured_percent: 12.0, estimated_percent: 4.1, factor: Some(2.9) };
        let target = TargetMeasure { before_percent: None, duty: Some(duty), ..TargetMeasure::default() };
        let line = target.line(&stats);
        assert!(line.contains(", 6% corrected, not measured (no share"), "{line}");
        assert!(
            line.ends_with("  duty-cycled, while attached: 12% of a CPU measured (each attached part less the detached ones around it, 9 periods), 4.1% estimated; traps and wake-ups priced x2.90 from it\n"),
            "{line}"
        );
        assert_eq!(target.scales(), Some(ByKind::all(2.9)));
        // Too few periods yet: said, not priced.
        let early = TargetMeasure { duty: Some(DutyMeasure { periods: 1, factor: None, ..duty }), ..target };
        assert!(early.line(&stats).contains("1 period), 4.1% estimated (priced from it after 3 periods)"));
        assert_eq!(early.scales(), None);
    }
}
