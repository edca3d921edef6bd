//! Output: maps, histograms and events as text or JSON lines, behind one interface
//! (`Sink`). Everything the runtime reads back is decoded here (`value`) and rendered by
//! `text` or `json` (`folded` keeps standard output for the folded stacks that
//! crate::profile writes at exit); nothing else prints results.

pub mod cuts;
pub mod float;
pub mod folded;
pub mod gofmt;
pub mod gonames;
pub mod json;
pub mod live;
pub mod losses;
pub mod measured;
pub mod numbers;
pub mod quote;
pub mod span;
pub mod stats;
pub mod text;
pub mod value;

use crate::plan::{Agg, EventKind, EventSpec, MapRole, MapSpec, MapValue, Plan, ValueType};
use value::{AggValue, Value};

/// One map as read at a moment: decoded and combined across CPUs.
#[derive(Clone, Debug)]
pub struct MapDump {
    /// `@name`, or `@` for the implicit map.
    pub name: String,
    pub agg: Option<Agg>,
    /// The aggregated or stored values are durations.
    pub durations: bool,
    /// The name of each key (`method`, `path`, `key0`): labels and JSON fields.
    pub key_names: Vec<String>,
    pub entries: Vec<MapEntry>,
    /// Why the map holds partial data, when a probe that writes it was detached
    /// (`on entry main.F detached by --budget after 0.2s`).
    pub partial: Option<String>,
}

#[derive(Clone, Debug)]
pub struct MapEntry {
    pub keys: Vec<Value>,
    /// For aggregations.
    pub value: AggValue,
    /// For plain maps: the stored value.
    pub plain: Option<Value>,
}

impl MapEntry {
    pub fn keys_text(&self) -> String {
        self.keys.iter().map(text::shown).collect::<Vec<_>>().join(", ")
    }
}

/// An event decoded from the ring buffer.
#[derive(Clone, Debug)]
pub enum Event {
    Printf { format: String, values: Vec<Value> },
    Print { labels: Vec<Option<String>>, values: Vec<Value> },
    PrintMap { map: String },
    ClearMap { map: String },
    Exit,
    Span(Box<span::SpanEvent>),
}

/// Where results go: text for people, JSON lines for programs. Every write is flushed
/// at once (output is read while the trace runs) and can fail.
pub trait Sink {
    /// A printf or print event.
    fn event(&mut self, event: &Event) -> Result<(), OutputError>;
    /// A map, at exit or by `print(@m)`.
    fn map(&mut self, dump: &MapDump) -> Result<(), OutputError>;
    /// gtrace's own numbers (`--stats`): a table on stderr, or a JSON object.
    fn stats(&mut self, stats: &stats::Stats) -> Result<(), OutputError>;
    fn flush(&mut self) -> Result<(), OutputError>;
}

/// Writing the output failed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The reader went away: a closed pipe (`gtrace ... | head -1`). Not an error for the
    /// user: gtrace stops quietly.
    #[error("the output's reader is gone (a closed pipe)")]
    Closed,
    /// The device refused the write: a full disk, /dev/full, an I/O error.
    #[error("cannot write the output to standard output")]
    Write {
        #[source]
        source: std::io::Error,
    },
}

impl From<std::io::Error> for OutputError {
    fn from(source: std::io::Error) -> OutputError {
        if source.kind() == std::io::ErrorKind::BrokenPipe {
            OutputError::Closed
        } else {
            OutputError::Write { source }
        }
    }
}

/// Writes `bytes` and flushes them.
pub fn write_out(out: &mut impl std::io::Write, bytes: &[u8]) -> Result<(), OutputError> {
    out.write_all(bytes)?;
    out.flush()?;
    Ok(())
}

pub fn sink(format: Format) -> Box<dyn Sink> {
    match format {
        Format::Text => Box::new(TextSink { out: std::io::stdout() }),
        Format::Json => Box::new(json::JsonSink { out: std::io::stdout() }),
        Format::Folded => Box::<folded::FoldedSink>::default(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// Folded stacks of the maps keyed by ustack (`a;b;c COUNT`), what flame graph tools
    /// read; everything else as text on standard error.
    Folded,
}

struct TextSink {
    out: std::io::Stdout,
}

impl Sink for TextSink {
    fn event(&mut self, event: &Event) -> Result<(), OutputError> {
        let s = match event {
            Event::Printf { format, values } => text::printf(format, values),
            Event::Print { labels, values } => format!("{}\n", text::labelled(labels, values)),
            Event::Span(s) => s.line(),
            _ => return Ok(()),
        };
        write_out(&mut self.out, s.as_bytes())
    }
    fn map(&mut self, dump: &MapDump) -> Result<(), OutputError> {
        write_out(&mut self.out, text::map(dump).as_bytes())
    }
    fn stats(&mut self, stats: &stats::Stats) -> Result<(), OutputError> {
        write_out(&mut std::io::stderr(), stats.table().as_bytes())
    }
    fn flush(&mut self) -> Result<(), OutputError> {
        write_out(&mut self.out, b"")
    }
}

/// What only the target knows, to finish decoded values: runtime type names by
/// descriptor address, and symbols of code addresses.
pub trait Symbols {
    fn type_name(&self, addr: u64) -> Option<String>;
    /// The function holding a code address, and where it starts.
    fn function(&self, pc: u64) -> Option<(String, u64)>;
    /// The source frames at a code address: the functions inlined there (innermost
    /// first), then the one whose code holds it, each with its file and line; empty
    /// when not known. For profiles (`crate::profile`).
    fn source_frames(&self, _pc: u64) -> Vec<crate::gobin::SourceFrame> {
        Vec::new()
    }
    /// The layout of the Go type named `name` (an interface's dynamic type), with the
    /// arena its ids index.
    fn go_type(&self, _name: &str) -> Option<(std::sync::Arc<crate::gotypes::Types>, crate::gotypes::TypeId)> {
        None
    }
    /// The layout of the Go type whose runtime descriptor is at `addr` (for a pointer
    /// type, of what it points at): exact where the name is not.
    fn go_type_at(&self, _addr: u64) -> Option<(std::sync::Arc<crate::gotypes::Types>, crate::gotypes::TypeId)> {
        None
    }
    /// A value of the dynamic type `name` will print as an address or `{...}`: no
    /// layout for it anywhere (counted, said at exit).
    fn unprintable(&self, _name: &str) {}
}

/// Names interface types and symbolizes stacks in `values`.
pub fn name_values(values: &mut [Value], symbols: &dyn Symbols) {
    for v in values {
        match v {
            Value::Interface { tab, type_name, .. } if *tab != 0 => *type_name = symbols.type_name(*tab),
            Value::Go(v) => {
                for t in v.dynamic_types() {
                    if let Some(name) = symbols.type_name(t) {
                        // A layout for what the value is, or for what a pointer points at.
                        let basic = !crate::gobin::needs_layout(&name);
                        let layout = if basic {
                            None
                        } else {
                            symbols.go_type_at(t).or_else(|| symbols.go_type(name.trim_start_matches('*')))
                        };
                        if layout.is_none() && crate::gobin::needs_layout(&name) {
                            symbols.unprintable(&name);
                        }
                        v.dynamic.insert(t, gofmt::Dynamic { name, layout });
                    }
                }
            }
            Value::Stack { pcs, frames } => {
                // Every frame but the first is a return address: the call is just before it.
                *frames = pcs
                    .iter()
                    .enumerate()
                    .map(|(i, pc)| {
                        let at = if i == 0 { *pc } else { pc.saturating_sub(1) };
                        match symbols.function(at) {
                            Some((name, start)) => format!("{name}+{:#x}", pc - start),
                            None => format!("{pc:#x}"),
                        }
                    })
                    .collect();
            }
            _ => {}
        }
    }
}

/// Names and symbolizes the values of a printed event.
pub fn name_event(event: &mut Event, symbols: &dyn Symbols) {
    match event {
        Event::Printf { values, .. } | Event::Print { values, .. } => name_values(values, symbols),
        Event::Span(s) => {
            let mut values: Vec<Value> = s.values_mut().map(|v| std::mem::replace(v, Value::Bool(false))).collect();
            name_values(&mut values, symbols);
            for (slot, v) in s.values_mut().zip(values) {
                *slot = v;
            }
        }
        _ => {}
    }
}

/// Names and symbolizes the keys of a map about to be printed.
pub fn name_map(dump: &mut MapDump, symbols: &dyn Symbols) {
    for e in &mut dump.entries {
        name_values(&mut e.keys, symbols);
        if let Some(p) = &mut e.plain {
            name_values(std::slice::from_mut(p), symbols);
        }
    }
}

/// Decodes one ring-buffer record.
pub fn decode_event(bytes: &[u8], plan: &Plan) -> Option<Event> {
    let id = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
    let spec: &EventSpec = plan.events.get(id)?;
    let values = || spec.fields.iter().map(|f| value::decode(bytes, f, plan)).collect();
    Some(match &spec.kind {
        EventKind::Printf { format } => Event::Printf { format: format.clone(), values: values() },
        EventKind::Print { labels } => Event::Print { labels: labels.clone(), values: values() },
        EventKind::PrintMap { map } => Event::PrintMap { map: map.clone() },
        EventKind::ClearMap { map } => Event::ClearMap { map: map.clone() },
        EventKind::Exit => Event::Exit,
        EventKind::Span { keys, status, panic, kind, .. } => {
            let mut s = span::decode(bytes, spec, plan, keys, *status, *panic);
            s.kind = *kind;
            Event::Span(Box::new(s))
        }
    })
}

/// Decodes a user map's raw entries (key bytes, per-CPU value bytes).
pub fn decode_map(spec: &MapSpec, raw: &[(Vec<u8>, Vec<Vec<u8>>)], plan: &Plan) -> Option<MapDump> {
    let MapRole::User { name, keys, key_names, value, .. } = &spec.role else { return None };
    let (agg, durations) = match value {
        MapValue::Agg { agg, of } => (Some(*agg), *of == ValueType::Duration),
        MapValue::Plain(t) => (None, *t == ValueType::Duration),
    };
    let entries = raw
        .iter()
        .map(|(k, vals)| {
            let keys = keys.iter().map(|f| value::decode(k, f, plan)).collect();
            match value {
                MapValue::Agg { agg, .. } => MapEntry { keys, value: value::combine(*agg, vals), plain: None },
                MapValue::Plain(t) => {
                    let v = value::decode(
                        vals.first().map(|v| v.as_slice()).unwrap_or(&[]),
                        &crate::plan::Field { offset: 0, ty: t.clone() },
                        plan,
                    );
                    let sort = AggValue::Sum(match &v {
                        Value::Int(i) | Value::Duration(i) => *i,
                        Value::Uint(u) | Value::Pointer(u) => *u as i64,
                        _ => 0,
                    });
                    MapEntry { keys, value: sort, plain: Some(v) }
                }
            }
        })
        .collect();
    Some(MapDump { name: format!("@{name}"), agg, durations, key_names: key_names.clone(), entries, partial: None })
}
