//! gtrace's own metrics, exported beside the script's maps: what is attached, what was
//! printed, what each probe hit, cost and lost, what maps refused. One struct
//! (`SelfMetrics`) filled when the metrics are read; the kernel's counters come from the
//! trace loop's `Stats` (`from_stats`), published every second.

use super::model::{Family, Kind, Point, Sample};
use crate::output::stats::Stats;
use crate::plan::{MapRole, Plan};

/// What gtrace knows about its own run when metrics are read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SelfMetrics {
    /// Probes attached (uprobe sites, plus begin/end/interval triggers).
    pub probes_attached: u64,
    /// Lines printed by print/printf.
    pub events_printed: u64,
    /// Printed lines the OTLP pusher could not keep (its queue was full).
    pub log_records_dropped: u64,
    /// Counters the programs keep about themselves (hits, events lost, map updates
    /// refused), by name, with labels: filled from the kernel's counters where the plan
    /// has them.
    pub counters: Vec<SelfCounter>,
}

/// One of gtrace's own counters, with labels (e.g. `probe`).
#[derive(Clone, Debug, PartialEq)]
pub struct SelfCounter {
    /// Without `gtrace_`, the unit and `_total`: `events_lost`.
    pub name: String,
    pub help: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// The value is seconds.
    pub seconds: bool,
    /// A counter (`_total`), or a gauge.
    pub kind: Kind,
}

/// The kernel's counters of a trace as gtrace's own counters: per probe its hits and
/// estimated cost (when the kernel's statistics are on: --stats, or a budget), events
/// the ring buffer refused, events --rate dropped and reads of target memory that
/// failed; per map the updates it refused;
/// a gauge of 1 per probe unit the budget detached (`gtrace_probe_detached`), with
/// the maps it wrote, whose data is partial from then on; and per probe the budget
/// duty-cycled, the share of the time since the cycle began that it was attached
/// (`gtrace_probe_duty_cycle`, with its maps: their counts are of that time only).
pub fn from_stats(stats: &Stats, plan: &Plan) -> Vec<SelfCounter> {
    let counter = |name: &str, help: &str, label: (&str, &str), value: f64, seconds: bool| SelfCounter {
        name: name.to_string(),
        help: help.to_string(),
        labels: vec![(label.0.to_string(), label.1.to_string())],
        value,
        seconds,
        kind: Kind::Counter,
    };
    let mut out = Vec::new();
    for p in &stats.probes {
        let probe = ("probe", p.probe.as_str());
        if stats.run_stats {
            out.push(counter("probe_hits", "Times the probe ran", probe, p.hits as f64, false));
            let help = "What the probe cost the target (traps and eBPF time), estimated";
            out.push(counter("probe_cost", help, probe, p.cost_ns / 1e9, true));
        }
        let help = "Printed events lost: the ring buffer was full";
        out.push(counter("events_lost", help, probe, p.events_lost as f64, false));
        let help = "Printed events dropped by --rate";
        out.push(counter("events_rate_dropped", help, probe, p.rate_dropped as f64, false));
        let help = "Reads of the target's memory that failed: their values read as zero";
        out.push(counter("reads_failed", help, probe, p.reads_failed as f64, false));
    }
    for m in &stats.maps {
        let help = "Map updates the kernel refused: the map was full, or had no memory ready for a new key";
        out.push(counter("map_updates_refused", help, ("map", m.map.as_str()), m.refused as f64, false));
    }
    for d in stats.detached.iter().filter(|d| !d.is_cut()) {
        let share = d.duty.map_or(1.0, |duty| duty.attached_share());
        for program in &d.programs {
            let Some(probe) = plan.probes.iter().find(|p| p.program == *program) else { continue };
            let help = "A probe the budget duty-cycled: the share of the time since the cycle began that it was attached; the maps it wrote count that time only";
            let mut c = counter("probe_duty_cycle", help, ("probe", probe.describe.as_str()), share, false);
            c.labels.push(("maps".to_string(), partial_maps(plan, std::slice::from_ref(program)).join(",")));
            c.kind = Kind::Gauge;
            out.push(c);
        }
    }
    for d in stats.detached.iter().filter(|d| d.is_cut()) {
        let help = "A probe the budget detached (1): the maps it wrote hold partial data since then";
        let mut c = counter("probe_detached", help, ("probe", d.what.as_str()), 1.0, false);
        c.labels.push(("maps".to_string(), partial_maps(plan, &d.programs).join(",")));
        c.kind = Kind::Gauge;
        out.push(c);
    }
    out
}

/// The user maps (`@name`) that `programs` use, but the private ones (`@_name`: a
/// library's scratch tables, never printed or exported, so nothing to mark).
fn partial_maps(plan: &Plan, programs: &[String]) -> Vec<String> {
    let used: Vec<&String> =
        plan.probes.iter().filter(|p| programs.contains(&p.program)).flat_map(|p| p.maps.iter()).collect();
    let user = plan.maps.iter().filter(|m| m.role.is_shown_user() && used.contains(&&m.object_name));
    user.filter_map(|m| match &m.role {
        MapRole::User { name, .. } => Some(format!("@{name}")),
        _ => None,
    })
    .collect()
}

/// The families gtrace may export (for the name check made before attaching).
pub fn own_families() -> Vec<(String, Kind, bool)> {
    let fixed = FIXED.iter().map(|(name, kind, _)| (format!("gtrace_{name}"), *kind, false));
    let counted = [
        ("probe_hits", false),
        ("probe_cost", true),
        ("events_lost", false),
        ("events_rate_dropped", false),
        ("reads_failed", false),
        ("map_updates_refused", false),
    ];
    let counted = counted.iter().map(|(name, seconds)| (format!("gtrace_{name}"), Kind::Counter, *seconds));
    let gauges = ["gtrace_probe_detached", "gtrace_probe_duty_cycle"].map(|g| (g.to_string(), Kind::Gauge, false));
    fixed.chain(counted).chain(gauges).collect()
}

const FIXED: [(&str, Kind, &str); 3] = [
    ("probes_attached", Kind::Gauge, "Probes gtrace attached"),
    ("events_printed", Kind::Counter, "Lines printed by print and printf"),
    ("otlp_log_records_dropped", Kind::Counter, "Printed lines not sent over OTLP: the queue was full"),
];

impl SelfMetrics {
    /// The families, each sample with `labels` (`binary`, `pid`).
    pub fn families(&self, labels: &[(String, String)]) -> Vec<Family> {
        let values = [self.probes_attached, self.events_printed, self.log_records_dropped];
        let mut out: Vec<Family> = FIXED
            .iter()
            .zip(values)
            .map(|((name, kind, help), v)| Family {
                base: format!("gtrace_{name}"),
                help: help.to_string(),
                kind: *kind,
                seconds: false,
                samples: vec![Sample { labels: labels.to_vec(), point: Point::Number(v as f64) }],
            })
            .collect();
        for c in &self.counters {
            let base = format!("gtrace_{}", c.name);
            let mut sample_labels = c.labels.clone();
            sample_labels.extend(labels.iter().cloned());
            let sample = Sample { labels: sample_labels, point: Point::Number(c.value) };
            match out.iter_mut().find(|f| f.base == base) {
                Some(f) => f.samples.push(sample),
                None => out.push(Family {
                    base,
                    help: c.help.clone(),
                    kind: c.kind,
                    seconds: c.seconds,
                    samples: vec![sample],
                }),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_probe_is_a_gauge_naming_the_maps_it_wrote() {
        use crate::output::stats::Detached;
        use crate::plan::{MapKind, MapSpec, MapValue, ProbeAttach, ProbeSpec, ValueType};
        let probe = |program: &str, maps: &[&str]| ProbeSpec {
            program: program.into(),
            section: format!("uprobe/{program}"),
            attach: ProbeAttach::Uprobe(Vec::new()),
            describe: format!("on entry main.{program}"),
            source_lines: Vec::new(),
            maps: maps.iter().map(|m| m.to_string()).collect(),
        };
        let user = |object: &str, name: &str| MapSpec {
            object_name: object.into(),
            kind: MapKind::Hash,
            key_size: 8,
            value_size: 8,
            max_entries: 1,
            role: MapRole::User {
                name: name.into(),
                keys: Vec::new(),
                key_names: Vec::new(),
                value: MapValue::Plain(ValueType::Int { size: 8, signed: true }),
                preallocated: false,
            },
        };
        let plan = Plan {
            probes: vec![probe("p0", &["m0", "counters"]), probe("p1", &["m1", "m2"])],
            // `@_t0` is private: never named in a label.
            maps: vec![user("m0", "hot"), user("m1", "cold"), user("m2", "_t0")],
            ..Plan::default()
        };
        let detached = Detached {
            what: "on entry main.p0".into(),
            percent: 3.0,
            at_ns: 1,
            programs: vec!["p0".into()],
            duty: None,
        };
        let duty = crate::output::stats::Duty { fraction: 0.5, since_ns: 4_000_000_000, attached_ns: 1_000_000_000 };
        let cycled = Detached {
            what: "on entry main.p1".into(),
            percent: 9.0,
            at_ns: 2,
            programs: vec!["p1".into()],
            duty: Some(duty),
        };
        let stats = Stats { detached: vec![detached, cycled], ..Stats::default() };
        let cycles: Vec<SelfCounter> =
            from_stats(&stats, &plan).into_iter().filter(|c| c.name == "probe_duty_cycle").collect();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!((cycles[0].kind, cycles[0].value), (Kind::Gauge, 0.25));
        let labels = vec![("probe".into(), "on entry main.p1".into()), ("maps".into(), "@cold".into())];
        assert_eq!(cycles[0].labels, labels);
        let gauges: Vec<SelfCounter> =
            from_stats(&stats, &plan).into_iter().filter(|c| c.name == "probe_detached").collect();
        assert_eq!(gauges.len(), 1);
        assert_eq!(gauges[0].kind, Kind::Gauge);
        assert_eq!(gauges[0].value, 1.0);
        let labels = vec![("probe".into(), "on entry main.p0".into()), ("maps".into(), "@hot".into())];
        assert_eq!(gauges[0].labels, labels);
    }

    #[test]
    fn counters_of_one_name_are_one_family() {
        let m = SelfMetrics {
            probes_attached: 3,
            counters: ["a", "b"]
                .iter()
                .map(|p| SelfCounter {
                    name: "events_lost".into(),
                    help: "lost".into(),
                    labels: vec![("probe".into(), p.to_string())],
                    value: 2.0,
                    seconds: false,
                    kind: Kind::Counter,
                })
                .collect(),
            ..SelfMetrics::default()
        };
        let f = m.families(&[("binary".into(), "x".into())]);
        assert_eq!(f.len(), 4);
        assert_eq!(f[0].samples[0].point, Point::Number(3.0));
        assert_eq!(f[3].base, "gtrace_events_lost");
        assert_eq!(f[3].samples.len(), 2);
        assert_eq!(f[3].samples[1].labels, vec![("probe".into(), "b".into()), ("binary".into(), "x".into())]);
    }
}
