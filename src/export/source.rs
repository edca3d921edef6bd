//! Where exported metrics come from: at each read (a scrape, a push) every user map is
//! read from the kernel through its own handles (`runtime::MapReader`), decoded by the
//! plan, named (interface types and stack frames, by the trace's own symbolizer:
//! `trace::symbols`) and turned into families, with gtrace's own metrics. Safe from any
//! thread; reads are serialised.

use super::convert::{self, BucketRanges};
use super::model::Family;
use super::names::{MapExport, Shape};
use super::selfmetrics::{SelfCounter, SelfMetrics};
use crate::output::{self, value::Value, MapDump};
use crate::plan::{MapRole, Plan};
use crate::runtime::{MapReader, RuntimeError};
use crate::trace::symbols::TargetSymbols;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counts the trace loop keeps for the exporters.
#[derive(Debug, Default)]
pub struct Counters {
    pub attached: AtomicU64,
    pub printed: AtomicU64,
    pub log_records_dropped: AtomicU64,
    /// The kernel's counters, as last published by the trace loop.
    pub kernel: Mutex<Vec<SelfCounter>>,
    /// When they were published.
    pub published: Mutex<Option<std::time::Instant>>,
}

pub struct Source {
    plan: Plan,
    exports: Vec<MapExport>,
    reader: MapReader,
    /// `binary`, and `pid` when one process is traced.
    pub labels: Vec<(String, String)>,
    pub counters: std::sync::Arc<Counters>,
    symbols: std::sync::Arc<TargetSymbols>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    ranges: BucketRanges,
}

impl Source {
    pub fn new(
        plan: Plan,
        exports: Vec<MapExport>,
        reader: MapReader,
        (name, pid): (&std::path::Path, Option<u32>),
        symbols: std::sync::Arc<TargetSymbols>,
        counters: std::sync::Arc<Counters>,
    ) -> Source {
        let mut labels = vec![("binary".to_string(), name.display().to_string())];
        if let Some(pid) = pid {
            labels.push(("pid".to_string(), pid.to_string()));
        }
        Source { plan, exports, reader, labels, counters, symbols, state: Mutex::new(State::default()) }
    }

    /// gtrace's own metrics now.
    pub fn self_metrics(&self) -> SelfMetrics {
        SelfMetrics {
            probes_attached: self.counters.attached.load(Ordering::Relaxed),
            events_printed: self.counters.printed.load(Ordering::Relaxed),
            log_records_dropped: self.counters.log_records_dropped.load(Ordering::Relaxed),
            counters: self.counters.kernel.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// Every family, read now from the kernel's maps.
    pub fn collect(&self) -> Result<Vec<Family>, RuntimeError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = self.self_metrics().families(&self.labels);
        for export in self.exports.iter().filter(|e| e.shape != Shape::NotExported) {
            let Some(spec) = self.plan.maps.iter().find(|m| m.object_name == export.object_name) else { continue };
            let raw = self.reader.entries(&export.object_name)?;
            let Some(mut dump) = output::decode_map(spec, &raw, &self.plan) else { continue };
            if needs_names(&dump) {
                // The trace loop learns it from the entry-point probe when the map has gone.
                self.symbols.learn_bias(|_| None);
                output::name_map(&mut dump, self.symbols.as_ref());
            }
            let mut families = convert::families(export, &dump, &self.labels, &mut state.ranges);
            if let Some(ex) = self
                .plan
                .maps
                .iter()
                .find(|m| matches!(&m.role, MapRole::Exemplars { of } if *of == export.object_name))
            {
                let raw = self.reader.entries(&ex.object_name)?;
                let unix = crate::runtime::clock::unix_minus_monotonic();
                let found = exemplars(spec, &raw, &self.plan, export.seconds, unix);
                convert::attach_exemplars(&mut families, &dump.key_names, found, &self.labels);
            }
            out.extend(families);
        }
        Ok(out)
    }
}

/// The exemplars of the `hist()` map `spec` (its exemplar map's raw entries), with
/// their keys decoded as the map's; values in seconds for durations, times moved to
/// Unix time by `unix` (Unix minus monotonic nanoseconds).
fn exemplars(
    spec: &crate::plan::MapSpec,
    raw: &[(Vec<u8>, Vec<Vec<u8>>)],
    plan: &crate::plan::Plan,
    seconds: bool,
    unix: i64,
) -> Vec<(Vec<Value>, super::model::Exemplar)> {
    let MapRole::User { keys, .. } = &spec.role else { return Vec::new() };
    let word = |b: &[u8], at: usize| b.get(at..at + 8).and_then(|w| w.try_into().ok()).map(u64::from_le_bytes);
    raw.iter()
        .filter_map(|(k, vals)| {
            let v = vals.first()?;
            let (value, time) = (word(v, 0)?, word(v, 8)?);
            let keys = if spec.kind == crate::plan::MapKind::PercpuArray && !keys.is_empty() {
                // A map indexed by function: its u32 key is the function's index.
                let i = u32::from_le_bytes(k.get(..4)?.try_into().ok()?);
                vec![Value::Func(plan.function_name(u64::from(i)))]
            } else {
                keys.iter().map(|f| crate::output::value::decode(k, f, plan)).collect()
            };
            let ex = super::model::Exemplar {
                value: if seconds { value as f64 / 1e9 } else { value as i64 as f64 },
                time_unix_nano: time.saturating_add_signed(unix),
                trace_id: v.get(16..32)?.try_into().ok()?,
                span_id: v.get(32..40)?.try_into().ok()?,
            };
            Some((keys, ex))
        })
        .collect()
}

/// Whether a key needs the target to be named: a stack, or an interface's type.
fn needs_names(dump: &MapDump) -> bool {
    dump.entries
        .iter()
        .flat_map(|e| &e.keys)
        .any(|k| matches!(k, Value::Stack { .. } | Value::Interface { tab: 1.., .. }))
}
