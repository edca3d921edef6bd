//! How each user map of a plan is exported, decided before anything attaches: its metric
//! names (`gtrace_<map>`, Prometheus's suffixes), its kind, and whether its values are
//! durations; names that are not valid metric names, or that two maps (or a map and
//! gtrace's own metrics) would share, are errors here.

use super::model::{series_names, Kind};
use super::ExportError;
use crate::plan::{Agg, MapRole, MapValue, Plan, ValueType};
use std::collections::HashMap;

/// How one user map becomes metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct MapExport {
    /// The map's name in the object (`m0`).
    pub object_name: String,
    /// `@name`, for messages.
    pub display: String,
    /// `gtrace_<name>`; the implicit map `@` is named after its aggregation
    /// (`gtrace_count`, `gtrace_hist`), or `gtrace_value` when it holds plain values.
    pub base: String,
    pub shape: Shape,
    /// The values are durations (exported in seconds).
    pub seconds: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// count, sum: a counter.
    Counter,
    /// avg, min, max, and plain numbers: a gauge.
    Gauge,
    /// stats: gauges `_count`, `_sum`, `_min`, `_max`, `_avg`.
    Stats,
    /// hist, lhist: a histogram.
    Histogram,
    /// Plain values that are not numbers (strings, pointers, interfaces, stacks).
    NotExported,
}

/// The parts of a stats() map, each a gauge `<base>_<part>`; only `count` is not in the
/// values' unit.
pub const STATS_PARTS: [&str; 5] = ["count", "sum", "min", "max", "avg"];

impl MapExport {
    /// The families this map exports: (base, kind, in seconds).
    pub fn families(&self) -> Vec<(String, Kind, bool)> {
        match self.shape {
            Shape::Counter => vec![(self.base.clone(), Kind::Counter, self.seconds)],
            Shape::Gauge => vec![(self.base.clone(), Kind::Gauge, self.seconds)],
            Shape::Histogram => vec![(self.base.clone(), Kind::Histogram, self.seconds)],
            Shape::Stats => STATS_PARTS
                .iter()
                .map(|p| (format!("{}_{p}", self.base), Kind::Gauge, self.seconds && *p != "count"))
                .collect(),
            Shape::NotExported => Vec::new(),
        }
    }
}

/// How every user map of `plan` is exported; `own` are gtrace's own families, whose
/// names the maps may not take.
pub fn plan_exports(plan: &Plan, own: &[(String, Kind, bool)]) -> Result<Vec<MapExport>, ExportError> {
    let mut exports = Vec::new();
    for spec in &plan.maps {
        let MapRole::User { name, value, .. } = &spec.role else { continue };
        if !spec.role.is_shown_user() {
            continue;
        }
        let (shape, seconds, implicit) = match value {
            MapValue::Agg { agg, of } => (agg_shape(*agg), *of == ValueType::Duration, agg.name()),
            MapValue::Plain(t) => {
                let numeric = matches!(t, ValueType::Int { .. } | ValueType::Bool | ValueType::Duration);
                let shape = if numeric { Shape::Gauge } else { Shape::NotExported };
                (shape, *t == ValueType::Duration, "value")
            }
        };
        let base = format!("gtrace_{}", if name.is_empty() { implicit } else { name });
        let display = format!("@{name}");
        if !valid_metric_name(&base) {
            return Err(ExportError::MetricName { map: display, name: base });
        }
        exports.push(MapExport { object_name: spec.object_name.clone(), display, base, shape, seconds });
    }
    check_collisions(&exports, own)?;
    Ok(exports)
}

fn agg_shape(agg: Agg) -> Shape {
    match agg {
        Agg::Count | Agg::Sum => Shape::Counter,
        Agg::Avg | Agg::Min | Agg::Max => Shape::Gauge,
        Agg::Stats => Shape::Stats,
        Agg::Hist | Agg::Lhist { .. } => Shape::Histogram,
    }
}

/// Two maps must not write the same series (`@a` counted is `gtrace_a_total`, as is
/// `@a_total` set to a number), nor the same OTLP name.
fn check_collisions(exports: &[MapExport], own: &[(String, Kind, bool)]) -> Result<(), ExportError> {
    let mut seen: HashMap<String, String> = HashMap::new();
    let gtrace = "gtrace's own metrics".to_string();
    let all = own.iter().map(|f| (&gtrace, f.clone())).chain(exports.iter().flat_map(|e| {
        let families = e.families();
        families.into_iter().map(move |f| (&e.display, f))
    }));
    for (owner, (base, kind, seconds)) in all {
        for name in series_names(&base, kind, seconds).into_iter().chain([format!("otlp:{base}")]) {
            if let Some(first) = seen.insert(name.clone(), owner.clone()) {
                let name = name.trim_start_matches("otlp:").to_string();
                return Err(ExportError::Collision { first, second: owner.clone(), name });
            }
        }
    }
    Ok(())
}

/// Prometheus's metric name rule (without the `:` kept for recording rules).
fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{MapKind, MapSpec};

    fn map(name: &str, value: MapValue) -> MapSpec {
        MapSpec {
            object_name: format!("m_{name}"),
            kind: MapKind::PercpuHash,
            key_size: 8,
            value_size: 8,
            max_entries: 1,
            role: MapRole::User { name: name.into(), keys: vec![], key_names: vec![], value, preallocated: false },
        }
    }

    fn agg(agg: Agg, durations: bool) -> MapValue {
        let of = if durations { ValueType::Duration } else { ValueType::Int { size: 8, signed: true } };
        MapValue::Agg { agg, of }
    }

    fn exports(maps: Vec<MapSpec>) -> Result<Vec<MapExport>, ExportError> {
        plan_exports(&Plan { maps, ..Plan::default() }, &[("gtrace_probes_attached".into(), Kind::Gauge, false)])
    }

    #[test]
    fn a_private_map_is_not_exported() {
        let e = exports(vec![map("_t0", MapValue::Plain(ValueType::Duration)), map("calls", agg(Agg::Count, false))]);
        let names: Vec<String> = e.unwrap().iter().map(|m| m.display.clone()).collect();
        assert_eq!(names, ["@calls"]);
    }

    #[test]
    fn each_aggregation_has_its_kind_and_unit() {
        let e = exports(vec![
            map("calls", agg(Agg::Count, false)),
            map("lat", agg(Agg::Hist, true)),
            map("", agg(Agg::Hist, false)),
            map("s", agg(Agg::Stats, true)),
            map("name", MapValue::Plain(ValueType::Str { max: 8 })),
        ])
        .unwrap();
        assert_eq!(e[0].families(), vec![("gtrace_calls".into(), Kind::Counter, false)]);
        assert_eq!(e[1].families(), vec![("gtrace_lat".into(), Kind::Histogram, true)]);
        assert_eq!(e[2].base, "gtrace_hist");
        let stats = e[3].families();
        assert_eq!(stats[0], ("gtrace_s_count".into(), Kind::Gauge, false));
        assert_eq!(stats[4], ("gtrace_s_avg".into(), Kind::Gauge, true));
        assert_eq!(e[4].shape, Shape::NotExported);
    }

    #[test]
    fn two_maps_writing_one_series_are_refused() {
        let err = exports(vec![map("a", agg(Agg::Count, false)), map("a_total", agg(Agg::Max, false))]).unwrap_err();
        assert!(err.to_string().contains("gtrace_a_total"), "{err}");
        let err = exports(vec![map("h", agg(Agg::Hist, false)), map("h_count", agg(Agg::Max, false))]).unwrap_err();
        assert!(err.to_string().contains("gtrace_h_count"), "{err}");
        let err = exports(vec![map("probes_attached", agg(Agg::Max, false))]).unwrap_err();
        assert!(err.to_string().contains("gtrace's own metrics"), "{err}");
    }

    #[test]
    fn a_map_name_that_is_not_a_metric_name_is_refused() {
        let err = exports(vec![map("größe", agg(Agg::Count, false))]).unwrap_err();
        assert!(matches!(err, ExportError::MetricName { .. }), "{err}");
    }
}
