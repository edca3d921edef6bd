//! What the budget took from a trace (trace/budget): the units it detached and the duty
//! cycle it ran instead of a cut, and the one phrase that marks a map they wrote as
//! partial, wherever the map goes.

use super::numbers::{duration_rounded, plural, thousands};
use serde::Serialize;

/// What the budget detached, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Detached {
    /// `on entry main.F`, or `on entry "main.*" at main.hot` for one function's sites.
    pub what: String,
    /// Its estimated cost, in percent of one CPU, over the budget's window.
    pub percent: f64,
    /// Since the probes were attached.
    pub at_ns: u64,
    /// The programs that lost sites: every map they write holds partial data from then on.
    pub programs: Vec<String>,
    /// Duty-cycled from `at_ns` rather than detached (the budget's `duty.rs`): its
    /// programs were attached only part of the time since, and their counts are of that
    /// time alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duty: Option<Duty>,
}

/// A duty cycle's numbers at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Duty {
    /// The fraction of each second the probes are attached now (1 once the cycle ended
    /// with them attached, 0 once they were detached).
    pub fraction: f64,
    /// Time since the cycle began (to now, or to the end of the trace), ns.
    pub since_ns: u64,
    /// Time attached within it, ns.
    pub attached_ns: u64,
}

impl Duty {
    /// The share of the time since the cycle began that the probes were attached.
    pub fn attached_share(&self) -> f64 {
        match self.since_ns {
            0 => 1.0,
            since => (self.attached_ns as f64 / since as f64).min(1.0),
        }
    }
}

impl Detached {
    /// `on entry main.F detached by --budget after 0.2s`, or `duty-cycled by --budget
    /// from 0.4s, attached 38% of the time since`.
    pub fn said(&self) -> String {
        match &self.duty {
            Some(d) => format!(
                "duty-cycled by --budget from {}, attached {}% of the time since",
                duration_rounded(self.at_ns),
                (100.0 * d.attached_share()).round()
            ),
            None => format!("{} detached by --budget after {}", self.what, duration_rounded(self.at_ns)),
        }
    }

    /// A unit detached, not duty-cycled.
    pub fn is_cut(&self) -> bool {
        self.duty.is_none()
    }
}

/// Why the map `object_name` holds partial data: the cuts of programs that use it
/// (`plan.probes[..].maps`), the first named and the rest counted; `None` when no
/// program that uses it lost a site.
pub fn partial(plan: &crate::plan::Plan, object_name: &str, detached: &[Detached]) -> Option<String> {
    let uses =
        |program: &String| plan.probes.iter().any(|p| p.program == *program && p.maps.iter().any(|m| m == object_name));
    let touched: Vec<&Detached> = detached.iter().filter(|d| d.programs.iter().any(uses)).collect();
    // A duty cycle first (what the counts are of), then the first cut and how many more.
    let cycled = touched.iter().filter(|d| !d.is_cut()).map(|d| d.said());
    let mut cuts = touched.iter().filter(|d| d.is_cut());
    let cut = cuts.next().map(|first| match cuts.count() {
        0 => first.said(),
        n => format!("{}, and {} more probe unit{}", first.said(), thousands(n as u64), plural(n as u64)),
    });
    let parts: Vec<String> = cycled.chain(cut).collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}
