//! The metrics of a trace in one neutral shape, whatever carries them: metric families
//! of counters, gauges and histograms, each sample with its labels. `convert` builds them
//! from maps; `promtext` and `otlp` encode them.

/// The kind of a metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only ever grows (OTLP: a monotonic cumulative sum).
    Counter,
    Gauge,
    Histogram,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The name without unit or `_total`: `gtrace_http_latency`, `gtrace_lat_min`. The
    /// OTLP name; Prometheus's adds the unit and `_total` (`prometheus_name`).
    pub base: String,
    pub help: String,
    pub kind: Kind,
    /// The values are durations, in seconds.
    pub seconds: bool,
    pub samples: Vec<Sample>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Label names and values, in order: the map's keys, then `binary` and `pid`.
    pub labels: Vec<(String, String)>,
    pub point: Point,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Point {
    Number(f64),
    /// `buckets`: (inclusive upper bound, cumulative count) in ascending order, without
    /// the +Inf bucket, whose count is `count`.
    Histogram {
        buckets: Vec<(f64, u64)>,
        count: u64,
        sum: f64,
        /// A `hist()`'s finer buckets (an lhist has none): what OTLP's exponential and
        /// Prometheus's native histograms carry.
        exponential: Option<Exponential>,
    },
}

/// Buckets at an exponential scale (hist.rs): bucket k holds (base^k, base^(k+1)] with
/// base = 2^(2^-scale); `counts[0]` is bucket `offset`. Values <= 0 are in `zero_count`.
#[derive(Clone, Debug, PartialEq)]
pub struct Exponential {
    /// The last value a call with a span added, with the span (`span()`).
    pub exemplar: Option<Exemplar>,
    pub scale: i32,
    pub zero_count: u64,
    pub offset: i32,
    pub counts: Vec<u64>,
    /// The exact extremes, in the family's unit.
    pub min: f64,
    pub max: f64,
}

impl Family {
    /// The Prometheus name: the base, `_seconds` for durations, `_total` for counters
    /// (Prometheus's naming rules: base units, and `_total` on counters).
    pub fn prometheus_name(&self) -> String {
        prometheus_name(&self.base, self.kind, self.seconds)
    }

    /// The OTLP unit (UCUM): `s` for durations, none otherwise.
    pub fn unit(&self) -> &'static str {
        if self.seconds {
            "s"
        } else {
            ""
        }
    }
}

pub fn prometheus_name(base: &str, kind: Kind, seconds: bool) -> String {
    // A map already named for its unit or as a counter (`@rows_total`, `@busy_seconds`)
    // is not named so twice.
    let mut name = base.to_string();
    if kind == Kind::Counter {
        if let Some(bare) = name.strip_suffix("_total") {
            name = bare.to_string();
        }
    }
    if seconds && !name.ends_with("_seconds") {
        name.push_str("_seconds");
    }
    if kind == Kind::Counter {
        name.push_str("_total");
    }
    name
}

/// The series names a family writes in the Prometheus format.
pub fn series_names(base: &str, kind: Kind, seconds: bool) -> Vec<String> {
    let name = prometheus_name(base, kind, seconds);
    match kind {
        Kind::Histogram => vec![format!("{name}_bucket"), format!("{name}_sum"), format!("{name}_count")],
        _ => vec![name],
    }
}

/// Non-cumulative counts of a histogram point as OTLP wants them: one per bound, then
/// the count above the last bound.
pub fn bucket_counts(buckets: &[(f64, u64)], count: u64) -> Vec<u64> {
    let mut out = Vec::with_capacity(buckets.len() + 1);
    let mut below = 0;
    for &(_, cumulative) in buckets {
        out.push(cumulative.saturating_sub(below));
        below = cumulative;
    }
    out.push(count.saturating_sub(below));
    out
}

/// The families the text encoders' tests write (promtext.rs, openmetrics.rs): a counter
/// with `help` and a label to escape, a histogram in seconds (with `exponential`, where
/// an exemplar rides), and a gauge with no samples.
#[cfg(test)]
pub fn test_families(help: &str, exponential: Option<Exponential>) -> Vec<Family> {
    let label = ("path".to_string(), "/a\"b\\c\nd".to_string());
    let buckets = vec![(0.001, 2), (0.002, 5)];
    vec![
        Family {
            base: "gtrace_req".into(),
            help: help.into(),
            kind: Kind::Counter,
            seconds: false,
            samples: vec![Sample { labels: vec![label], point: Point::Number(3.0) }],
        },
        Family {
            base: "gtrace_lat".into(),
            help: "@lat".into(),
            kind: Kind::Histogram,
            seconds: true,
            samples: vec![Sample {
                labels: vec![],
                point: Point::Histogram { buckets, count: 6, sum: 0.0125, exponential },
            }],
        },
        Family { base: "gtrace_empty".into(), help: "".into(), kind: Kind::Gauge, seconds: false, samples: vec![] },
    ]
}

/// The histogram family `gtrace_n` (`@n`, not in seconds) with one sample, `point` at
/// `labels`: what the binary encoders' tests round-trip (promproto.rs, otlp.rs).
#[cfg(test)]
pub fn test_histogram(labels: &[(&str, &str)], point: Point) -> Family {
    let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Family {
        base: "gtrace_n".into(),
        help: "@n".into(),
        kind: Kind::Histogram,
        seconds: false,
        samples: vec![Sample { labels, point }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prometheus_rules() {
        assert_eq!(prometheus_name("gtrace_calls", Kind::Counter, false), "gtrace_calls_total");
        assert_eq!(prometheus_name("gtrace_busy", Kind::Counter, true), "gtrace_busy_seconds_total");
        assert_eq!(prometheus_name("gtrace_rows_total", Kind::Counter, false), "gtrace_rows_total");
        assert_eq!(prometheus_name("gtrace_busy_seconds", Kind::Counter, true), "gtrace_busy_seconds_total");
        assert_eq!(prometheus_name("gtrace_busy_total", Kind::Counter, true), "gtrace_busy_seconds_total");
        assert_eq!(prometheus_name("gtrace_lat", Kind::Histogram, true), "gtrace_lat_seconds");
        assert_eq!(
            series_names("gtrace_n", Kind::Histogram, false),
            ["gtrace_n_bucket", "gtrace_n_sum", "gtrace_n_count"]
        );
    }

    #[test]
    fn cumulative_buckets_back_to_counts() {
        assert_eq!(bucket_counts(&[(0.0, 0), (1.0, 3), (3.0, 3), (7.0, 10)], 12), vec![0, 3, 0, 7, 2]);
        assert_eq!(bucket_counts(&[], 5), vec![5]);
    }
}

/// A value of a histogram with the span of the call that added it.
#[derive(Clone, Debug, PartialEq)]
pub struct Exemplar {
    /// In the histogram's unit (seconds for durations).
    pub value: f64,
    pub time_unix_nano: u64,
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}
