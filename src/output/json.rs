//! JSON lines: one object per printed line and per map, raw numbers (durations in
//! nanoseconds), for programs that read gtrace's output. Strings are the traced bytes
//! (not UTF-8: U+FFFD) with JSON's escapes, and DEL and the C1 controls (U+0080-U+009F,
//! which JSON lets through but some terminals obey) escaped too: a line read on a
//! terminal cannot drive it.

use super::text::bucket_bounds;
use super::value::{AggValue, Value};
use super::{write_out, Event, MapDump, OutputError, Sink};
use serde_json::{json, Value as J};

pub struct JsonSink {
    pub out: std::io::Stdout,
}

pub fn value(v: &Value) -> J {
    match v {
        Value::Int(i) | Value::Duration(i) => json!(i),
        Value::Uint(u) | Value::Pointer(u) => json!(u),
        Value::Bool(b) => json!(b),
        // A JSON number as Go prints it (`1e+06` is one); NaN and the infinities, which
        // JSON has no numbers for, as strings.
        Value::Float { bits, size } => {
            let text = super::text::value(v);
            let finite =
                if *size == 4 { f32::from_bits(*bits as u32).is_finite() } else { f64::from_bits(*bits).is_finite() };
            match serde_json::from_str::<serde_json::Number>(&text) {
                Ok(n) if finite => J::Number(n),
                _ => json!(text),
            }
        }
        Value::Str(s) => json!(String::from_utf8_lossy(s)),
        Value::Func(s) => json!(s),
        Value::Go(g) => json!(g.render(super::gofmt::Form::V, super::quote::Strings::Exact)),
        Value::Interface { tab: 0, .. } => J::Null,
        Value::Stack { pcs, frames } => json!(if frames.is_empty() {
            pcs.iter().map(|p| format!("{p:#x}")).collect::<Vec<_>>()
        } else {
            frames.clone()
        }),
        Value::Interface { type_name, data, .. } => {
            json!({"type": type_name, "data": data, "text": super::text::value(v)})
        }
    }
}

fn agg(v: &AggValue, dump: &MapDump) -> J {
    match v {
        AggValue::Count(c) => json!(c),
        AggValue::Sum(s) => json!(s),
        AggValue::Avg { count, sum } => json!(if *count == 0 { 0 } else { sum / *count as i64 }),
        AggValue::Min(m) | AggValue::Max(m) => json!(m),
        AggValue::Stats { count, sum, min, max } => json!({"count": count, "sum": sum, "min": min, "max": max}),
        AggValue::Buckets { counts: b, .. } => {
            let a = dump.agg.unwrap_or(crate::plan::Agg::Hist);
            J::Array(
                b.iter()
                    .enumerate()
                    .filter(|(_, c)| **c != 0)
                    .map(|(i, c)| {
                        let (lo, hi) = bucket_bounds(a, i);
                        json!({"min": lo, "max": hi, "count": c})
                    })
                    .collect(),
            )
        }
    }
}

/// A `hist()`'s count, exact extremes and percentiles (hist.rs), as fields of its entry.
fn percentiles(fine: &crate::hist::Fine) -> Vec<(String, J)> {
    let mut fields = vec![("count".to_string(), json!(fine.count())), ("min".into(), json!(fine.min))];
    fields.extend(crate::hist::PERCENTILES.iter().map(|(q, name)| (name.to_string(), json!(fine.percentile(*q)))));
    fields.push(("max".into(), json!(fine.max)));
    fields
}

pub fn map(dump: &MapDump) -> J {
    let entries: Vec<J> = dump
        .entries
        .iter()
        .map(|e| {
            let v = match &e.plain {
                Some(p) => value(p),
                None => agg(&e.value, dump),
            };
            let keys: serde_json::Map<String, J> =
                dump.key_names.iter().cloned().zip(e.keys.iter().map(value)).collect();
            let mut entry = json!({"keys": keys, "value": v});
            if let (AggValue::Buckets { fine: Some(fine), .. }, J::Object(fields)) = (&e.value, &mut entry) {
                fields.extend(percentiles(fine));
            }
            entry
        })
        .collect();
    let agg = dump.agg.map(|a| a.name());
    let mut object =
        json!({"type": "map", "name": dump.name, "agg": agg, "key_names": dump.key_names, "entries": entries});
    if let (Some(why), J::Object(fields)) = (&dump.partial, &mut object) {
        fields.insert("partial".into(), json!(why));
    }
    object
}

/// serde_json's compact output, with `\u007f` and `\u0080`-`\u009f` escaped too.
struct Escaping;

impl serde_json::ser::Formatter for Escaping {
    fn write_string_fragment<W: ?Sized + std::io::Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c) {
                w.write_all(fragment[start..i].as_bytes())?;
                write!(w, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(fragment[start..].as_bytes())
    }
}

/// One JSON line.
pub fn line(value: &J) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Escaping);
    // Writing a `Value` into a Vec cannot fail.
    let _ = serde::Serialize::serialize(value, &mut ser);
    out.push(b'\n');
    out
}

/// A span as one object: ids in hex, times in nanoseconds (Unix time).
fn span(s: &super::span::SpanEvent) -> J {
    let hex = super::span::hex;
    let attributes: serde_json::Map<String, J> = s.attributes.iter().map(|(k, v)| (k.clone(), value(v))).collect();
    json!({
        "type": "span",
        "name": s.name,
        "function": s.function,
        "trace_id": hex(&s.trace_id),
        "span_id": hex(&s.span_id),
        "parent_span_id": (s.parent_span_id != [0; 8]).then(|| hex(&s.parent_span_id)),
        "remote_parent": s.remote_parent,
        "sampled": s.sampled,
        "kind": s.kind.name(),
        "start_unix_nano": s.start_ns,
        "end_unix_nano": s.end_ns,
        "duration": s.duration_ns(),
        "error": s.message(),
        "attributes": attributes,
    })
}

impl Sink for JsonSink {
    fn event(&mut self, event: &Event) -> Result<(), OutputError> {
        let line = match event {
            Event::Printf { format, values } => {
                json!({"type": "printf", "text": super::text::printf_exact(format, values)})
            }
            Event::Print { labels, values } => {
                if labels.iter().any(|l| l.is_some()) {
                    let named: serde_json::Map<String, J> = labels
                        .iter()
                        .zip(values)
                        .enumerate()
                        .map(|(i, (l, v))| (l.clone().unwrap_or_else(|| i.to_string()), value(v)))
                        .collect();
                    json!({"type": "print", "values": named})
                } else {
                    json!({"type": "print", "values": values.iter().map(value).collect::<Vec<_>>()})
                }
            }
            Event::Span(s) => span(s),
            _ => return Ok(()),
        };
        write_out(&mut self.out, &self::line(&line))
    }
    fn map(&mut self, dump: &MapDump) -> Result<(), OutputError> {
        write_out(&mut self.out, &line(&map(dump)))
    }
    fn stats(&mut self, stats: &super::stats::Stats) -> Result<(), OutputError> {
        let mut object = serde_json::to_value(stats).unwrap_or(J::Null);
        if let J::Object(fields) = &mut object {
            fields.insert("type".into(), json!("stats"));
            fields.insert("lost".into(), json!(stats.lost_line()));
        }
        write_out(&mut self.out, &line(&object))
    }
    fn flush(&mut self) -> Result<(), OutputError> {
        write_out(&mut self.out, b"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_escape_what_json_lets_through() {
        let text = "a\u{1b}[2J\n\u{7f}\u{9b}1m\u{a0}é\"";
        let l = String::from_utf8(line(&json!({"text": text}))).unwrap();
        assert_eq!(l, "{\"text\":\"a\\u001b[2J\\n\\u007f\\u009b1m\u{a0}é\\\"\"}\n");
        let back: J = serde_json::from_str(&l).unwrap();
        assert_eq!(back["text"], text);
    }
}
