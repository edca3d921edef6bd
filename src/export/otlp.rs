//! `--otlp URL`: every `--otlp-interval`, and once more at exit, the metrics (cumulative
//! temporality; histograms with explicit bounds) and the lines printed since the last
//! push (as log records) go to an OpenTelemetry collector over OTLP/HTTP: protobuf
//! (the official messages of `opentelemetry-proto`) POSTed to URL/v1/metrics and
//! URL/v1/logs. The pusher has its own thread and timeouts: the trace loop only queues
//! lines, never waits. A collector that cannot be reached is said once, and once more
//! when it answers again. Lines that never reach it (dropped from a full queue, or
//! still waiting when the last push at exit fails) are counted and said in the line of
//! losses (`output::stats::UnsentLogs`).

use super::model::{bucket_counts, Family, Kind, Point, Sample};
use super::source::Source;
pub use crate::output::stats::UnsentLogs;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::metrics::v1::{
    self as pm, exponential_histogram_data_point, metric, number_data_point, AggregationTemporality,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Printed lines waiting to be pushed; more are dropped and counted.
const MAX_PENDING_LINES: usize = 10_000;
/// How long one POST may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// One printed line, when it was printed.
pub struct Line {
    pub time_unix_nano: u64,
    pub text: String,
}

/// Who pushes: the process's resource attributes and the endpoints.
pub struct Pushing {
    pub url: String,
    pub interval: Duration,
    /// `service.name`, `host.name`, `process.pid`, `process.executable.path`.
    pub resource: Vec<(String, String)>,
}

/// The running pusher: `line` queues a printed line; `finish` pushes once more and ends.
pub struct Pusher {
    lines: Mutex<Option<SyncSender<Line>>>,
    thread: Mutex<Option<JoinHandle<Option<Unsent>>>>,
    source: Arc<Source>,
    url: String,
}

/// The lines the last push could not send, and why.
struct Unsent {
    lines: u64,
    error: String,
}

pub fn now_unix_nano() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Pusher {
    pub fn spawn(pushing: Pushing, source: Arc<Source>) -> std::io::Result<Pusher> {
        let (tx, rx) = mpsc::sync_channel::<Line>(MAX_PENDING_LINES);
        let src = source.clone();
        let url = pushing.url.clone();
        let thread = std::thread::Builder::new().name("gtrace-otlp".into()).spawn(move || run(pushing, src, rx))?;
        Ok(Pusher { lines: Mutex::new(Some(tx)), thread: Mutex::new(Some(thread)), source, url })
    }

    /// Queues a printed line; never blocks (a full queue drops it, counted).
    pub fn line(&self, line: Line) {
        if let Some(tx) = self.lines.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if let Err(TrySendError::Full(_)) = tx.try_send(line) {
                self.source.counters.log_records_dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Pushes what is left and ends the thread; says what never reached the collector
    /// (`None` when everything did, or when it was said by an earlier call).
    pub fn finish(&self) -> Option<UnsentLogs> {
        // The thread sees the channel close: its last push.
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let last = match thread.join() {
            Ok(last) => last,
            Err(_) => Some(Unsent { lines: 0, error: "the pusher's thread panicked".into() }),
        };
        let dropped = self.source.counters.log_records_dropped.load(std::sync::atomic::Ordering::Relaxed);
        let (unsent, error) = last.map_or((0, None), |u| (u.lines, Some(u.error)));
        (dropped + unsent > 0 || error.is_some()).then(|| UnsentLogs {
            url: self.url.clone(),
            dropped,
            queue: MAX_PENDING_LINES as u64,
            unsent,
            error,
        })
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        if let Some(lost) = self.finish() {
            eprintln!("{}", lost.describe());
        }
    }
}

/// `interval` from now; an interval past what a clock holds (`--otlp-interval` takes up to
/// 2^64 seconds) is a push at exit only, in effect (136 years).
fn later(interval: Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(interval).unwrap_or(now + Duration::from_secs(1 << 32))
}

/// Pushes every interval until the channel closes; returns what the last push could not
/// send.
fn run(pushing: Pushing, source: Arc<Source>, lines: Receiver<Line>) -> Option<Unsent> {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(TIMEOUT)).http_status_as_error(true).build().into();
    let start = now_unix_nano();
    let base = pushing.url.trim_end_matches('/').to_string();
    let resource = resource(&pushing.resource);
    let mut pending: Vec<Line> = Vec::new();
    let mut health = Health { url: base.clone(), failing: false };
    let mut next = later(pushing.interval);
    loop {
        // Wait for the next push, gathering lines; a closed channel is the end.
        let last = loop {
            let wait = next.saturating_duration_since(std::time::Instant::now());
            match lines.recv_timeout(wait) {
                Ok(line) => keep(&mut pending, line, &source),
                Err(RecvTimeoutError::Timeout) => break false,
                Err(RecvTimeoutError::Disconnected) => break true,
            }
        };
        next = later(pushing.interval);
        let metrics = source.collect().map(|f| metrics_request(&f, &resource, start, now_unix_nano()));
        let sent = match metrics {
            Ok(req) => post(&agent, &format!("{base}/v1/metrics"), req.encode_to_vec()),
            Err(e) => Err(e.to_string()),
        };
        let sent = sent.and_then(|()| {
            if pending.is_empty() {
                return Ok(());
            }
            post(&agent, &format!("{base}/v1/logs"), logs_request(&pending, &resource).encode_to_vec())
        });
        if last {
            return sent.err().map(|error| Unsent { lines: pending.len() as u64, error });
        }
        if sent.is_ok() {
            pending.clear();
        }
        health.report(sent, pushing.interval);
    }
}

fn keep(pending: &mut Vec<Line>, line: Line, source: &Source) {
    if pending.len() < MAX_PENDING_LINES {
        pending.push(line);
    } else {
        source.counters.log_records_dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn post(agent: &ureq::Agent, url: &str, body: Vec<u8>) -> Result<(), String> {
    agent.post(url).header("Content-Type", "application/x-protobuf").send(body).map(|_| ()).map_err(|e| e.to_string())
}

/// Says once that pushing fails, and once when it works again.
struct Health {
    url: String,
    failing: bool,
}

impl Health {
    fn report(&mut self, sent: Result<(), String>, interval: Duration) {
        match sent {
            Err(e) if !self.failing => {
                self.failing = true;
                eprintln!(
                    "gtrace: cannot push to the OpenTelemetry collector at {}: {e}; tracing goes on, retrying every {:?}",
                    self.url, interval
                );
            }
            Ok(()) if self.failing => {
                self.failing = false;
                eprintln!("gtrace: pushing to the OpenTelemetry collector at {} works again", self.url);
            }
            _ => {}
        }
    }
}

fn string_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.to_string())) }),
        ..Default::default()
    }
}

pub fn resource(attrs: &[(String, String)]) -> Resource {
    Resource { attributes: attrs.iter().map(|(k, v)| string_kv(k, v)).collect(), ..Default::default() }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope { name: "gtrace".into(), version: env!("CARGO_PKG_VERSION").into(), ..Default::default() }
}

/// The families as one OTLP metrics request. Data points carry the map's keys as
/// attributes; `binary` and `pid` are resource attributes instead.
pub fn metrics_request(families: &[Family], resource: &Resource, start: u64, now: u64) -> ExportMetricsServiceRequest {
    let metrics = families.iter().filter(|f| !f.samples.is_empty()).map(|f| metric(f, start, now)).collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![pm::ResourceMetrics {
            resource: Some(resource.clone()),
            scope_metrics: vec![pm::ScopeMetrics { scope: Some(scope()), metrics, ..Default::default() }],
            ..Default::default()
        }],
    }
}

fn metric(f: &Family, start: u64, now: u64) -> pm::Metric {
    let cumulative = AggregationTemporality::Cumulative as i32;
    let attributes = |labels: &[(String, String)]| {
        labels.iter().filter(|(k, _)| k != "binary" && k != "pid").map(|(k, v)| string_kv(k, v)).collect::<Vec<_>>()
    };
    let numbers = || {
        f.samples
            .iter()
            .filter_map(|s| match s.point {
                Point::Number(v) => Some(pm::NumberDataPoint {
                    attributes: attributes(&s.labels),
                    start_time_unix_nano: start,
                    time_unix_nano: now,
                    value: Some(number_data_point::Value::AsDouble(v)),
                    ..Default::default()
                }),
                Point::Histogram { .. } => None,
            })
            .collect()
    };
    let data = match f.kind {
        Kind::Counter => metric::Data::Sum(pm::Sum {
            data_points: numbers(),
            aggregation_temporality: cumulative,
            is_monotonic: true,
        }),
        Kind::Gauge => metric::Data::Gauge(pm::Gauge { data_points: numbers() }),
        Kind::Histogram if is_exponential(f) => metric::Data::ExponentialHistogram(pm::ExponentialHistogram {
            data_points: f
                .samples
                .iter()
                .filter_map(|s| exponential_point(s, attributes(&s.labels), start, now))
                .collect(),
            aggregation_temporality: cumulative,
        }),
        Kind::Histogram => metric::Data::Histogram(pm::Histogram {
            data_points: f
                .samples
                .iter()
                .filter_map(|s| match &s.point {
                    Point::Histogram { buckets, count, sum, .. } => Some(pm::HistogramDataPoint {
                        attributes: attributes(&s.labels),
                        start_time_unix_nano: start,
                        time_unix_nano: now,
                        count: *count,
                        sum: Some(*sum),
                        bucket_counts: bucket_counts(buckets, *count),
                        explicit_bounds: buckets.iter().map(|(le, _)| *le).collect(),
                        ..Default::default()
                    }),
                    Point::Number(_) => None,
                })
                .collect(),
            aggregation_temporality: cumulative,
        }),
    };
    pm::Metric {
        name: f.base.clone(),
        description: f.help.clone(),
        unit: f.unit().to_string(),
        data: Some(data),
        ..Default::default()
    }
}

/// Whether a histogram family is a `hist()`'s, exported as an exponential histogram.
fn is_exponential(f: &Family) -> bool {
    f.samples.iter().any(|s| matches!(s.point, Point::Histogram { exponential: Some(_), .. }))
}

fn exponential_point(
    s: &Sample,
    attributes: Vec<KeyValue>,
    start: u64,
    now: u64,
) -> Option<pm::ExponentialHistogramDataPoint> {
    let Point::Histogram { count, sum, exponential: Some(e), .. } = &s.point else { return None };
    Some(pm::ExponentialHistogramDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: now,
        count: *count,
        sum: Some(*sum),
        scale: e.scale,
        zero_count: e.zero_count,
        positive: Some(exponential_histogram_data_point::Buckets { offset: e.offset, bucket_counts: e.counts.clone() }),
        min: Some(e.min),
        max: Some(e.max),
        exemplars: e.exemplar.iter().map(exemplar).collect(),
        ..Default::default()
    })
}

/// A histogram's exemplar: its value with the span of the call that added it.
fn exemplar(e: &super::model::Exemplar) -> pm::Exemplar {
    pm::Exemplar {
        time_unix_nano: e.time_unix_nano,
        value: Some(pm::exemplar::Value::AsDouble(e.value)),
        span_id: e.span_id.to_vec(),
        trace_id: e.trace_id.to_vec(),
        ..Default::default()
    }
}

/// Printed lines as one OTLP logs request: each an INFO record whose body is the line.
pub fn logs_request(lines: &[Line], resource: &Resource) -> ExportLogsServiceRequest {
    let records = lines
        .iter()
        .map(|l| LogRecord {
            time_unix_nano: l.time_unix_nano,
            observed_time_unix_nano: l.time_unix_nano,
            severity_number: SeverityNumber::Info as i32,
            severity_text: "INFO".into(),
            body: Some(AnyValue { value: Some(any_value::Value::StringValue(l.text.clone())) }),
            ..Default::default()
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource.clone()),
            scope_logs: vec![ScopeLogs { scope: Some(scope()), log_records: records, ..Default::default() }],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::model::test_histogram;

    #[test]
    fn a_histogram_round_trips_through_the_official_messages() {
        let f = Family {
            base: "gtrace_lat".into(),
            help: "@lat".into(),
            kind: Kind::Histogram,
            seconds: true,
            samples: vec![Sample {
                labels: vec![("route".into(), "/a".into()), ("binary".into(), "/x".into())],
                point: Point::Histogram {
                    buckets: vec![(0.001, 2), (0.003, 5)],
                    count: 7,
                    sum: 0.01,
                    exponential: None,
                },
            }],
        };
        let req = metrics_request(&[f], &resource(&[("service.name".into(), "x".into())]), 1, 2);
        let back = ExportMetricsServiceRequest::decode(req.encode_to_vec().as_slice()).unwrap();
        let m = &back.resource_metrics[0].scope_metrics[0].metrics[0];
        assert_eq!((m.name.as_str(), m.unit.as_str()), ("gtrace_lat", "s"));
        let Some(metric::Data::Histogram(h)) = &m.data else { panic!("{m:?}") };
        assert_eq!(h.aggregation_temporality, AggregationTemporality::Cumulative as i32);
        let p = &h.data_points[0];
        assert_eq!(p.explicit_bounds, vec![0.001, 0.003]);
        assert_eq!(p.bucket_counts, vec![2, 3, 2]);
        assert_eq!((p.count, p.sum, p.start_time_unix_nano), (7, Some(0.01), 1));
        assert_eq!(p.attributes, vec![string_kv("route", "/a")]);
    }

    #[test]
    fn a_hist_is_an_exponential_histogram_of_scale_4() {
        let e = crate::export::model::Exponential {
            exemplar: None,
            scale: 4,
            zero_count: 1,
            offset: 160,
            counts: vec![2, 0, 3],
            min: 0.0,
            max: 1100.0,
        };
        let point = Point::Histogram { buckets: vec![(1023.0, 1)], count: 6, sum: 5000.0, exponential: Some(e) };
        let f = test_histogram(&[], point);
        let req = metrics_request(&[f], &resource(&[]), 1, 2);
        let back = ExportMetricsServiceRequest::decode(req.encode_to_vec().as_slice()).unwrap();
        let m = &back.resource_metrics[0].scope_metrics[0].metrics[0];
        let Some(metric::Data::ExponentialHistogram(h)) = &m.data else { panic!("{m:?}") };
        assert_eq!(h.aggregation_temporality, AggregationTemporality::Cumulative as i32);
        let p = &h.data_points[0];
        assert_eq!(
            (p.scale, p.zero_count, p.count, p.sum, p.min, p.max),
            (4, 1, 6, Some(5000.0), Some(0.0), Some(1100.0))
        );
        let positive = p.positive.as_ref().unwrap();
        assert_eq!((positive.offset, positive.bucket_counts.clone()), (160, vec![2, 0, 3]));
    }
}
