//! A span record decoded (lower/spans.rs lays it out): its ids, times, name, status and
//! attributes; printed as one line (text), one object (JSON), or sent to `--otlp`.

use super::value::{self, Value};
use crate::lower::layout::{H_END, H_FLAGS, H_FUNC, H_PARENT, H_SPAN, H_START, H_TRACE};
use crate::plan::{EventSpec, Plan};

/// One span, as the probes made it. Times are the kernel's monotonic clock until
/// `to_unix` turns them into Unix time.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    pub name: String,
    /// The probed function (its instantiation, for a generic one).
    pub function: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// All zero for a root span.
    pub parent_span_id: [u8; 8],
    /// W3C trace-flags bit 0: sampled.
    pub sampled: bool,
    /// The parent is the program's own span (another process's, or its SDK's).
    pub remote_parent: bool,
    /// The function's non-nil `error` result or the panic's value: an error status.
    pub error: Option<Value>,
    /// The call ended by a panic.
    pub panicked: bool,
    pub attributes: Vec<(String, Value)>,
    /// OTLP's span kind (`span(kind: "server")`).
    pub kind: crate::plan::SpanKind,
}

impl SpanEvent {
    /// Its times moved from the kernel's monotonic clock to Unix time (`offset`: Unix
    /// time minus monotonic time, as measured once).
    pub fn to_unix(&mut self, offset: i64) {
        self.start_ns = self.start_ns.saturating_add_signed(offset);
        self.end_ns = self.end_ns.saturating_add_signed(offset);
    }

    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// The status's message: what `err.Error()` gives for the error types whose text a
    /// probe reads (`errors.New`, `fmt.Errorf`), else the error as text output prints it
    /// (`*os.PathError(0xc000010000)`); a panic's value after `panic: `.
    pub fn message(&self) -> Option<String> {
        self.error.as_ref().map(|v| {
            let text = match v {
                Value::Interface { type_name: Some(t), text, .. }
                    if super::gonames::ERROR_TYPES.contains(&t.as_str()) || t == "string" =>
                {
                    String::from_utf8_lossy(text).into_owned()
                }
                // `span(start: t0, error: true)`: an error without a message.
                Value::Bool(_) => String::new(),
                v => super::text::value(v),
            };
            if self.panicked {
                format!("panic: {text}")
            } else {
                text
            }
        })
    }

    /// One line for the terminal: name, duration, ids, attributes, error.
    pub fn line(&self) -> String {
        let mut out = format!(
            "span {} {} trace={} span={}",
            self.name,
            super::text::duration(self.duration_ns() as i64),
            hex(&self.trace_id),
            hex(&self.span_id)
        );
        if self.parent_span_id != [0; 8] {
            out.push_str(&format!(" parent={}", hex(&self.parent_span_id)));
        }
        if self.remote_parent {
            out.push_str(" (remote parent)");
        }
        if !self.sampled {
            out.push_str(" (not sampled)");
        }
        for (k, v) in &self.attributes {
            out.push_str(&format!(" {k}={}", super::text::shown(v)));
        }
        if let Some(v) = &self.error {
            let what = if self.panicked { "panic" } else { "error" };
            out.push_str(&format!(" {what}={}", super::text::shown(v)));
        }
        out.push('\n');
        out
    }

    /// The values a probe read whose names only the target knows.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Value> {
        self.error.iter_mut().chain(self.attributes.iter_mut().map(|(_, v)| v))
    }
}

/// Lowercase hex, as W3C trace context writes ids.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn word(bytes: &[u8], at: i16) -> u64 {
    let at = at as usize;
    bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0)
}

fn array<const N: usize>(bytes: &[u8], at: i16) -> [u8; N] {
    let at = at as usize;
    bytes.get(at..at + N).and_then(|b| b.try_into().ok()).unwrap_or([0; N])
}

/// Decodes a span record of format `spec`.
pub fn decode(
    bytes: &[u8],
    spec: &EventSpec,
    plan: &Plan,
    keys: &[Option<String>],
    status: bool,
    panic: bool,
) -> SpanEvent {
    let mut values: Vec<Value> = spec.fields.iter().map(|f| value::decode(bytes, f, plan)).collect();
    let error = if status && !values.is_empty() { Some(values.remove(0)) } else { None };
    // A nil error, or `error: false` (or an empty message) of an ended span: no error.
    let error = error.filter(|v| !matches!(v, Value::Interface { tab: 0, .. } | Value::Bool(false)));
    let error = error.filter(|v| !matches!(v, Value::Str(s) if s.is_empty()));
    let function = plan.function_name(word(bytes, H_FUNC));
    let mut name = function.clone();
    let mut attributes = Vec::new();
    for (k, v) in keys.iter().zip(values) {
        match (k, v) {
            (None, Value::Str(s)) => name = String::from_utf8_lossy(&s).into_owned(),
            (Some(k), v) => attributes.push((k.clone(), v)),
            (None, _) => {}
        }
    }
    let flags = word(bytes, H_FLAGS);
    SpanEvent {
        name,
        function,
        start_ns: word(bytes, H_START),
        end_ns: word(bytes, H_END),
        trace_id: array(bytes, H_TRACE),
        span_id: array(bytes, H_SPAN),
        parent_span_id: array(bytes, H_PARENT),
        sampled: flags & crate::lower::layout::FLAG_SAMPLED as u64 != 0,
        remote_parent: flags & crate::lower::layout::FLAG_REMOTE_PARENT as u64 != 0,
        panicked: panic,
        error,
        attributes,
        kind: crate::plan::SpanKind::Internal,
    }
}
