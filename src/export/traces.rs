//! `--otlp URL` for spans: what `span()` makes goes to URL/v1/traces as OTLP/HTTP
//! protobuf (the official `opentelemetry-proto` messages), in batches of at most
//! `BATCH` spans, sent when a batch is full or `FLUSH` after its first span, from a
//! thread of its own. The trace loop only queues spans (never waits): a full queue drops
//! them, counted; what the last push at exit cannot send is counted too. Both are said
//! in the line of losses (`output::stats::UnsentSpans`), and the spans sent in one line
//! at exit.

use crate::output::span::SpanEvent;
pub use crate::output::stats::UnsentSpans;
use crate::output::value::Value;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{self as pt, span::SpanKind, status::StatusCode, SpanFlags};
use prost::Message;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Spans waiting to be sent; more are dropped and counted.
pub const MAX_PENDING_SPANS: usize = 8192;
/// The most spans one request carries.
const BATCH: usize = 512;
/// How long a span waits for its batch to fill.
const FLUSH: Duration = Duration::from_secs(1);
/// How long one POST may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The running sender: `span` queues one; `finish` sends what is left and ends.
pub struct SpanSender {
    tx: Mutex<Option<SyncSender<SpanEvent>>>,
    thread: Mutex<Option<JoinHandle<Sent>>>,
    dropped: Arc<AtomicU64>,
    /// Spans of traces the program's context marks not sampled: not sent.
    unsampled: AtomicU64,
    url: String,
}

/// What the thread sent, and what it could not.
#[derive(Default)]
struct Sent {
    spans: u64,
    unsent: u64,
    error: Option<String>,
}

impl SpanSender {
    pub fn spawn(url: &str, resource: &[(String, String)]) -> std::io::Result<SpanSender> {
        let (tx, rx) = mpsc::sync_channel::<SpanEvent>(MAX_PENDING_SPANS);
        let endpoint = format!("{}/v1/traces", url.trim_end_matches('/'));
        let resource = super::otlp::resource(resource);
        let thread =
            std::thread::Builder::new().name("gtrace-spans".into()).spawn(move || run(&endpoint, resource, rx))?;
        Ok(SpanSender {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            dropped: Arc::default(),
            unsampled: AtomicU64::new(0),
            url: url.to_string(),
        })
    }

    /// Queues a span; never blocks (a full queue drops it, counted). A span of a trace
    /// that is not sampled (the program's trace context says so) is counted, not sent.
    pub fn span(&self, span: SpanEvent) {
        if !span.sampled {
            self.unsampled.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(tx) = self.tx.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if let Err(TrySendError::Full(_)) = tx.try_send(span) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sends what is left, ends the thread; says how many spans were sent, and returns
    /// what never reached the collector (`None` when everything did).
    pub fn finish(&self) -> Option<UnsentSpans> {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let sent = thread
            .join()
            .unwrap_or_else(|_| Sent { error: Some("the span sender panicked".into()), ..Sent::default() });
        let dropped = self.dropped.load(Ordering::Relaxed);
        let unsampled = self.unsampled.load(Ordering::Relaxed);
        if sent.spans > 0 || unsampled > 0 {
            let mut line = format!("gtrace: {} spans sent to the OpenTelemetry collector at {}", sent.spans, self.url);
            if unsampled > 0 {
                line.push_str(&format!(
                    "; {unsampled} not sent: their trace is the program's, which it does not sample (W3C trace-flags)"
                ));
            }
            eprintln!("{line}");
        }
        (dropped + sent.unsent > 0 || sent.error.is_some()).then(|| UnsentSpans {
            url: self.url.clone(),
            dropped,
            queue: MAX_PENDING_SPANS as u64,
            unsent: sent.unsent,
            error: sent.error,
        })
    }
}

impl Drop for SpanSender {
    fn drop(&mut self) {
        if let Some(lost) = self.finish() {
            eprintln!("{}", lost.describe());
        }
    }
}

/// Sends batches until the channel closes; a batch that fails is kept (up to the
/// queue's size) for the next try.
fn run(endpoint: &str, resource: Resource, rx: Receiver<SpanEvent>) -> Sent {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(TIMEOUT)).http_status_as_error(true).build().into();
    let mut pending: Vec<SpanEvent> = Vec::new();
    let mut sent = Sent::default();
    let mut failing = false;
    loop {
        let deadline = Instant::now() + FLUSH;
        let last = loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(s) if pending.len() < MAX_PENDING_SPANS => {
                    pending.push(s);
                    if pending.len() >= BATCH {
                        break false;
                    }
                }
                Ok(_) => sent.unsent += 1,
                Err(RecvTimeoutError::Timeout) => break false,
                Err(RecvTimeoutError::Disconnected) => break true,
            }
        };
        while !pending.is_empty() {
            let n = pending.len().min(BATCH);
            let body = request(&pending[..n], &resource).encode_to_vec();
            let result = agent.post(endpoint).header("Content-Type", "application/x-protobuf").send(body);
            match result {
                Ok(_) => {
                    sent.spans += n as u64;
                    pending.drain(..n);
                    if failing {
                        failing = false;
                        eprintln!("gtrace: sending spans to {endpoint} works again");
                    }
                }
                Err(e) => {
                    if !failing {
                        failing = true;
                        eprintln!("gtrace: cannot send spans to {endpoint}: {e}; tracing goes on, retrying");
                    }
                    if last {
                        sent.unsent += pending.len() as u64;
                        sent.error = Some(e.to_string());
                    }
                    break;
                }
            }
        }
        if last {
            return sent;
        }
    }
}

/// Spans as one OTLP traces request.
pub fn request(spans: &[SpanEvent], resource: &Resource) -> ExportTraceServiceRequest {
    let scope =
        InstrumentationScope { name: "gtrace".into(), version: env!("CARGO_PKG_VERSION").into(), ..Default::default() };
    ExportTraceServiceRequest {
        resource_spans: vec![pt::ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans: vec![pt::ScopeSpans {
                scope: Some(scope),
                spans: spans.iter().map(span).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn span(s: &SpanEvent) -> pt::Span {
    let mut attributes = vec![kv("code.function.name", any_value::Value::StringValue(s.function.clone()))];
    attributes.extend(s.attributes.iter().map(|(k, v)| kv(k, attribute(v))));
    let status = match s.message() {
        Some(message) => pt::Status { code: StatusCode::Error as i32, message },
        None => pt::Status::default(),
    };
    let mut flags = SpanFlags::ContextHasIsRemoteMask as u32 | u32::from(s.sampled);
    if s.remote_parent {
        flags |= SpanFlags::ContextIsRemoteMask as u32;
    }
    pt::Span {
        trace_id: s.trace_id.to_vec(),
        span_id: s.span_id.to_vec(),
        parent_span_id: if s.parent_span_id == [0; 8] { Vec::new() } else { s.parent_span_id.to_vec() },
        flags,
        name: s.name.clone(),
        kind: kind(s.kind) as i32,
        start_time_unix_nano: s.start_ns,
        end_time_unix_nano: s.end_ns,
        attributes,
        status: Some(status),
        ..Default::default()
    }
}

fn kind(k: crate::plan::SpanKind) -> SpanKind {
    use crate::plan::SpanKind as K;
    match k {
        K::Internal => SpanKind::Internal,
        K::Server => SpanKind::Server,
        K::Client => SpanKind::Client,
        K::Producer => SpanKind::Producer,
        K::Consumer => SpanKind::Consumer,
    }
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

/// An attribute's value: numbers, bools and strings as themselves (durations in
/// nanoseconds), anything else as text output prints it.
fn attribute(v: &Value) -> any_value::Value {
    use any_value::Value as A;
    match v {
        Value::Int(i) | Value::Duration(i) => A::IntValue(*i),
        Value::Uint(u) => i64::try_from(*u).map_or_else(|_| A::StringValue(u.to_string()), A::IntValue),
        Value::Bool(b) => A::BoolValue(*b),
        Value::Float { bits, size: 4 } => A::DoubleValue(f64::from(f32::from_bits(*bits as u32))),
        Value::Float { bits, .. } => A::DoubleValue(f64::from_bits(*bits)),
        Value::Str(s) => A::StringValue(String::from_utf8_lossy(s).into_owned()),
        other => A::StringValue(crate::output::text::value(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_round_trips_through_the_official_messages() {
        let s = SpanEvent {
            name: "checkout".into(),
            function: "main.checkout".into(),
            start_ns: 10,
            end_ns: 25,
            trace_id: [7; 16],
            span_id: [1; 8],
            parent_span_id: [0; 8],
            sampled: true,
            remote_parent: false,
            error: Some(Value::Str(b"boom".to_vec())),
            panicked: false,
            attributes: vec![("user".into(), Value::Int(42)), ("note".into(), Value::Str(b"x".to_vec()))],
            kind: crate::plan::SpanKind::Server,
        };
        let req = request(&[s], &Resource::default());
        let back = ExportTraceServiceRequest::decode(req.encode_to_vec().as_slice()).unwrap();
        let got = &back.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!((got.name.as_str(), got.start_time_unix_nano, got.end_time_unix_nano), ("checkout", 10, 25));
        assert_eq!((got.trace_id.clone(), got.span_id.clone()), (vec![7; 16], vec![1; 8]));
        assert!(got.parent_span_id.is_empty());
        assert_eq!(got.kind, SpanKind::Server as i32);
        assert_eq!(got.flags, 0x101);
        let status = got.status.clone().unwrap();
        assert_eq!((status.code, status.message.as_str()), (StatusCode::Error as i32, "boom"));
        assert_eq!(got.attributes[1], kv("user", any_value::Value::IntValue(42)));
        assert_eq!(got.attributes[2], kv("note", any_value::Value::StringValue("x".into())));
    }
}
