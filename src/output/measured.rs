//! What the traced process really spent on a CPU while traced, beside what the probes are
//! estimated to have cost it: the line of `--stats` that checks the estimate. The
//! numbers are read by `trace::measured`; this is what they mean and how they print.

use super::stats::{percent, Stats};
use super::text::duration;
use serde::Serialize;

/// The target's own CPU accounting over a trace (-p and -c; not with -b).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TargetMeasure {
    /// CPU time its threads spent since the probes were attached, ns.
    pub cpu_ns: u64,
    /// Its share of a CPU before the probes were attached (from gtrace's start to the
    /// attach), in percent; `None` for a command started traced, or a window too short.
    pub before_percent: Option<f64>,
    /// The factor the calibrated trap cost was corrected by, from what the target spent
    /// above its share before attaching; `None` while it has not been measured (an
    /// estimate under 1% of a CPU cannot be told from the target's own noise).
    pub trap_scale: Option<f64>,
}

impl TargetMeasure {
    /// `target: 1.63s of CPU while traced (41% of a CPU), 5% before attaching: 36% more,
    /// by its threads' own accounting; the probes' estimate at the calibrated trap cost:
    /// 33% of a CPU (the trap cost scaled by 1.09 to match)`.
    pub fn line(&self, stats: &Stats) -> String {
        let in_target = || stats.probes.iter().filter(|p| p.in_target);
        let calibrated: f64 = in_target().map(|p| p.traps_ns + p.run_ns as f64).sum();
        let traced = stats.share(self.cpu_ns as f64);
        let measured = match self.before_percent {
            Some(before) => {
                format!(", {}% before attaching: {}% more", percent(before), percent((traced - before).max(0.0)))
            }
            None => String::new(),
        };
        let scaled = match (self.trap_scale, self.before_percent) {
            (Some(scale), _) => format!(" (the trap cost scaled by {scale:.2} to match)"),
            (None, None) => " (not checked: no share of a CPU before attaching to compare with)".into(),
            (None, Some(_)) => format!(
                " (not corrected: under {}% of a CPU, or traced under 0.5s)",
                percent(crate::trace::measured::MEASURABLE)
            ),
        };
        format!(
            "target: {} of CPU while traced ({}% of a CPU){measured}, by its threads' own accounting; the probes' estimate at the calibrated trap cost: {}% of a CPU{scaled}\n",
            duration(self.cpu_ns as i64),
            percent(traced),
            percent(stats.share(calibrated)),
        )
    }
}
