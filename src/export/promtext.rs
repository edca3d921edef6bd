//! Metric families in the Prometheus text exposition format (0.0.4), encoded by the
//! `prometheus` crate (its escaping of label values and help text, its histogram lines).

use super::model::{Family, Kind, Point};
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};

/// The `Content-Type` of what `encode` writes.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// The families as Prometheus text; families without samples are left out (the format
/// has no empty family).
pub fn encode(families: &[Family]) -> Result<Vec<u8>, prometheus::Error> {
    let protos: Vec<MetricFamily> = families.iter().filter(|f| !f.samples.is_empty()).map(family).collect();
    let mut out = Vec::new();
    TextEncoder::new().encode(&protos, &mut out)?;
    Ok(out)
}

fn family(f: &Family) -> MetricFamily {
    let mut mf = MetricFamily::default();
    mf.set_name(f.prometheus_name());
    mf.set_help(f.help.clone());
    mf.set_field_type(match f.kind {
        Kind::Counter => MetricType::COUNTER,
        Kind::Gauge => MetricType::GAUGE,
        Kind::Histogram => MetricType::HISTOGRAM,
    });
    let metrics = f
        .samples
        .iter()
        .map(|s| {
            let mut m = proto::Metric::default();
            m.set_label(
                s.labels
                    .iter()
                    .map(|(name, value)| {
                        let mut l = proto::LabelPair::default();
                        l.set_name(name.clone());
                        l.set_value(value.clone());
                        l
                    })
                    .collect(),
            );
            match (&s.point, f.kind) {
                (Point::Number(v), Kind::Counter) => {
                    let mut c = proto::Counter::default();
                    c.set_value(*v);
                    m.set_counter(c);
                }
                (Point::Number(v), _) => {
                    let mut g = proto::Gauge::default();
                    g.set_value(*v);
                    m.set_gauge(g);
                }
                (Point::Histogram { buckets, count, sum, .. }, _) => {
                    let mut h = proto::Histogram::default();
                    h.set_sample_count(*count);
                    h.set_sample_sum(*sum);
                    h.set_bucket(
                        buckets
                            .iter()
                            .map(|(le, cumulative)| {
                                let mut b = proto::Bucket::default();
                                b.set_upper_bound(*le);
                                b.set_cumulative_count(*cumulative);
                                b
                            })
                            .collect(),
                    );
                    m.set_histogram(h);
                }
            }
            m
        })
        .collect();
    mf.set_metric(metrics);
    mf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::model::test_families;

    #[test]
    fn counters_histograms_and_escaped_labels() {
        let families = test_families("@req of gtrace's script", None);
        let text = String::from_utf8(encode(&families).unwrap()).unwrap();
        let want = "# HELP gtrace_req_total @req of gtrace's script\n\
                    # TYPE gtrace_req_total counter\n\
                    gtrace_req_total{path=\"/a\\\"b\\\\c\\nd\"} 3\n\
                    # HELP gtrace_lat_seconds @lat\n\
                    # TYPE gtrace_lat_seconds histogram\n\
                    gtrace_lat_seconds_bucket{le=\"0.001\"} 2\n\
                    gtrace_lat_seconds_bucket{le=\"0.002\"} 5\n\
                    gtrace_lat_seconds_bucket{le=\"+Inf\"} 6\n\
                    gtrace_lat_seconds_sum 0.0125\n\
                    gtrace_lat_seconds_count 6\n";
        assert_eq!(text, want);
    }
}
