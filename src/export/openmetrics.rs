//! Metric families as OpenMetrics text (1.0.0), for a scraper that asks for
//! `application/openmetrics-text` (Prometheus does, first, by default): the text format
//! with exemplars, which the Prometheus text format (0.0.4) has no room for. A `hist()`
//! whose calls made spans carries its exemplar on the first bucket that holds its value:
//! `gtrace_lat_seconds_bucket{le="0.002"} 5 # {trace_id="...",span_id="..."} 0.0015 1764163200.123`.
//!
//! Written here, not by a crate: prometheus-client's OpenMetrics encoder takes exemplars
//! only from its own metric types (its `Exemplar` has no public constructor), and the
//! `prometheus` crate writes 0.0.4 alone. What is written follows the OpenMetrics 1.0
//! specification: `# TYPE`, `# UNIT` and `# HELP` per family (a counter's family name
//! without `_total`, its sample with it), escaped label values and help, `+Inf` bucket,
//! `# EOF` last.

use super::model::{Exemplar, Family, Kind, Point};
use std::fmt::Write;

/// The `Content-Type` of what `encode` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether an Accept header asks for OpenMetrics text (with a weight above 0).
pub fn accepted(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let params: Vec<String> = range.split(';').map(|p| p.trim().replace(' ', "")).collect();
        params.first().is_some_and(|t| t == "application/openmetrics-text")
            && !params.iter().any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f64>().ok()) == Some(0.0))
    })
}

/// The families as OpenMetrics text; families without samples are left out.
pub fn encode(families: &[Family]) -> Vec<u8> {
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        family(&mut out, f);
    }
    out.push_str("# EOF\n");
    out.into_bytes()
}

fn family(out: &mut String, f: &Family) {
    let series = f.prometheus_name();
    let name = match f.kind {
        Kind::Counter => series.strip_suffix("_total").unwrap_or(&series).to_string(),
        _ => series.clone(),
    };
    let kind = match f.kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Histogram => "histogram",
    };
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if f.seconds && name.ends_with("_seconds") {
        let _ = writeln!(out, "# UNIT {name} seconds");
    }
    let _ = writeln!(out, "# HELP {name} {}", escape(&f.help));
    for s in &f.samples {
        match &s.point {
            Point::Number(v) => {
                let _ = writeln!(out, "{series}{} {}", labels(&s.labels, None), number(*v));
            }
            Point::Histogram { buckets, count, sum, exponential } => {
                let ex = exponential.as_ref().and_then(|e| e.exemplar.as_ref());
                // The exemplar goes on the first bucket that holds its value.
                let first = ex.and_then(|x| buckets.iter().position(|(le, _)| x.value <= *le));
                let bounds = buckets.iter().map(|&(le, c)| (number(le), c)).chain([("+Inf".to_string(), *count)]);
                for (i, (le, c)) in bounds.enumerate() {
                    let _ = write!(out, "{name}_bucket{} {c}", labels(&s.labels, Some(&le)));
                    let on_this = first.map_or(ex.is_some() && i == buckets.len(), |f| f == i);
                    if let Some(x) = ex.filter(|_| on_this) {
                        exemplar(out, x);
                    }
                    out.push('\n');
                }
                let _ = writeln!(out, "{name}_count{} {count}", labels(&s.labels, None));
                let _ = writeln!(out, "{name}_sum{} {}", labels(&s.labels, None), number(*sum));
            }
        }
    }
}

/// ` # {trace_id="...",span_id="..."} VALUE TIMESTAMP` (seconds since the Unix epoch).
fn exemplar(out: &mut String, x: &Exemplar) {
    let hex = crate::output::span::hex;
    let secs = x.time_unix_nano / 1_000_000_000;
    let nanos = x.time_unix_nano % 1_000_000_000;
    let _ = write!(
        out,
        " # {{trace_id=\"{}\",span_id=\"{}\"}} {} {secs}.{nanos:09}",
        hex(&x.trace_id),
        hex(&x.span_id),
        number(x.value)
    );
}

/// `{a="x",b="y"}` (with `le` last), or nothing without labels.
fn labels(pairs: &[(String, String)], le: Option<&str>) -> String {
    let mut all: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    if let Some(le) = le {
        all.push(format!("le=\"{le}\""));
    }
    if all.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", all.join(","))
    }
}

/// Label values and help: backslash, double quote and newline escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::model::{test_families, Exponential};

    #[test]
    fn counters_and_histograms_with_an_exemplar() {
        let ex = Exemplar {
            value: 0.0015,
            time_unix_nano: 1_764_163_200_123_000_000,
            trace_id: [0xab; 16],
            span_id: [1; 8],
        };
        let exponential =
            Exponential { exemplar: Some(ex), scale: 0, zero_count: 0, offset: 0, counts: vec![], min: 0.0, max: 0.0 };
        let families = test_families("@req \"of\" gtrace", Some(exponential));
        let text = String::from_utf8(encode(&families)).unwrap();
        let id = "ab".repeat(16);
        let want = format!(
            "# TYPE gtrace_req counter\n\
             # HELP gtrace_req @req \\\"of\\\" gtrace\n\
             gtrace_req_total{{path=\"/a\\\"b\\\\c\\nd\"}} 3\n\
             # TYPE gtrace_lat_seconds histogram\n\
             # UNIT gtrace_lat_seconds seconds\n\
             # HELP gtrace_lat_seconds @lat\n\
             gtrace_lat_seconds_bucket{{le=\"0.001\"}} 2\n\
             gtrace_lat_seconds_bucket{{le=\"0.002\"}} 5 # {{trace_id=\"{id}\",span_id=\"0101010101010101\"}} 0.0015 1764163200.123000000\n\
             gtrace_lat_seconds_bucket{{le=\"+Inf\"}} 6\n\
             gtrace_lat_seconds_count 6\n\
             gtrace_lat_seconds_sum 0.0125\n\
             # EOF\n"
        );
        assert_eq!(text, want);
    }

    #[test]
    fn prometheus_default_accept_header_asks_for_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,\
                          application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert!(accepted(prometheus));
        assert!(!accepted("text/plain;version=0.0.4"));
        assert!(!accepted("application/openmetrics-text;q=0"));
    }
}
