//! The samples of stack profiles: every map keyed by `ustack` turned into samples of
//! symbolized stacks, its other keys into labels and its aggregation into typed values.
//! Maps with the same keys share one profile (a sample type each); what `pprof`, `folded`
//! and `flamegraph` write.
//!
//! What an aggregation becomes: `count()` the sample type `calls/count`; `sum(x)` its sum,
//! `wall/nanoseconds` for a duration (`sum(elapsed)`), else `NAME/count` after the map;
//! `avg`, `stats`, `hist` and `lhist` two types, `calls/count` and the sum as for
//! `sum(x)` (a stack's mean is the second over the first). `min` and `max` are left out
//! (a minimum does not add up along a stack as every profile's values must), and so is
//! a map that stores a value instead of aggregating.

use crate::output::value::{AggValue, Value};
use crate::output::{text, MapDump, Symbols};
use crate::plan::Agg;
use std::collections::{BTreeMap, HashMap};

/// One function at one place of a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub function: String,
    /// The source file; None when only the function is known.
    pub file: Option<String>,
    pub line: u32,
    /// The line of the function's `func` keyword (0: unknown).
    pub start_line: u32,
}

/// An address of some stack and what is there: the functions inlined at it, innermost
/// first, then the function whose code holds it. No frames: the address is unknown
/// (outside the binary, or a PIE whose load address was not learned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The probe's address for a stack's leaf; for a caller, its return address less
    /// one (inside the call instruction), as Go's own profiles give it.
    pub address: u64,
    pub frames: Vec<Frame>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LabelValue {
    Str(String),
    /// An integer, with its unit: "nanoseconds" for durations, "count" for the rest
    /// (pprof's unit-less numbers; a label without a unit would lose its zeros).
    Num {
        value: i64,
        unit: &'static str,
    },
}

/// A key of the map other than the stack: a pprof label, by the key's name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Label {
    pub key: String,
    pub value: LabelValue,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleType {
    pub name: String,
    pub unit: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Indexes into `Profile::locations`, the leaf first.
    pub stack: Vec<usize>,
    pub labels: Vec<Label>,
    /// One per sample type of the profile (0 where a map has no such key).
    pub values: Vec<i64>,
}

/// One map's part of a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// `@calls`, or `@` for the implicit map.
    pub map: String,
    /// Its sample types: `types.start..types.end` of the profile's.
    pub types: std::ops::Range<usize>,
    /// The one a flame graph weighs its stacks by: calls where there is a count, else
    /// the sum.
    pub weight: usize,
    /// Why the map holds partial data (a probe that writes it was detached by the budget).
    pub partial: Option<String>,
}

/// The maps that share one set of keys, as one profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub parts: Vec<Part>,
    pub sample_types: Vec<SampleType>,
    pub samples: Vec<Sample>,
    pub locations: Vec<Location>,
}

/// A map keyed by `ustack` that no profile holds, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Left {
    pub map: String,
    pub why: &'static str,
}

/// A map keyed by a stack: its dump (decoded; names are asked of the `Symbols` given to
/// `build`), and which of its keys is the stack.
pub struct StackMap {
    pub dump: MapDump,
    pub stack: usize,
}

/// The profiles of `maps`, in the order of their first map, and the maps left out.
pub fn build(maps: &[StackMap], symbols: &dyn Symbols) -> (Vec<Profile>, Vec<Left>) {
    type Group<'a> = (&'a [String], Vec<(&'a StackMap, Vec<SampleType>)>);
    let mut groups: Vec<Group> = Vec::new();
    let mut left = Vec::new();
    for map in maps {
        match sample_types(&map.dump) {
            Ok(types) => match groups.iter_mut().find(|(keys, _)| *keys == map.dump.key_names.as_slice()) {
                Some((_, maps)) => maps.push((map, types)),
                None => groups.push((&map.dump.key_names, vec![(map, types)])),
            },
            Err(why) => left.push(Left { map: map.dump.name.clone(), why }),
        }
    }
    let profiles = groups.into_iter().map(|(_, maps)| profile(&maps, symbols)).collect();
    (profiles, left)
}

/// A name for a map's sums: its own, or `value` for the implicit map.
fn map_word(map: &str) -> String {
    match map.trim_start_matches('@') {
        "" => "value".to_string(),
        name => name.to_string(),
    }
}

/// The sample types a map gives, or why it gives none.
fn sample_types(dump: &MapDump) -> Result<Vec<SampleType>, &'static str> {
    let calls = SampleType { name: "calls".into(), unit: "count" };
    let sum = if dump.durations {
        SampleType { name: "wall".into(), unit: "nanoseconds" }
    } else {
        SampleType { name: map_word(&dump.name), unit: "count" }
    };
    match dump.agg {
        Some(Agg::Count) => Ok(vec![calls]),
        Some(Agg::Sum) => Ok(vec![sum]),
        Some(Agg::Avg | Agg::Stats | Agg::Hist | Agg::Lhist { .. }) => Ok(vec![calls, sum]),
        Some(Agg::Min | Agg::Max) => Err("a minimum or maximum does not add up along a stack"),
        None => Err("it stores a value; a profile needs an aggregation (count, sum, avg, stats, hist)"),
    }
}

/// An entry's values, one per sample type of `sample_types`.
fn entry_values(v: &AggValue) -> Vec<i64> {
    match v {
        AggValue::Count(c) => vec![*c as i64],
        AggValue::Sum(s) => vec![*s],
        AggValue::Avg { count, sum } | AggValue::Stats { count, sum, .. } => vec![*count as i64, *sum],
        AggValue::Buckets { counts, sum, .. } => vec![counts.iter().sum::<u64>() as i64, *sum],
        AggValue::Min(_) | AggValue::Max(_) => Vec::new(),
    }
}

/// A key as a label: integers as numbers (durations in nanoseconds), the rest as text.
fn label(key: &str, v: &Value) -> Label {
    let value = match v {
        Value::Int(i) => LabelValue::Num { value: *i, unit: "count" },
        Value::Uint(u) => LabelValue::Num { value: *u as i64, unit: "count" },
        Value::Duration(d) => LabelValue::Num { value: *d, unit: "nanoseconds" },
        v => LabelValue::Str(text::shown(v)),
    };
    Label { key: key.to_string(), value }
}

/// One profile of maps that share their keys.
fn profile(maps: &[(&StackMap, Vec<SampleType>)], symbols: &dyn Symbols) -> Profile {
    let mut parts = Vec::new();
    let mut sample_types: Vec<SampleType> = Vec::new();
    for (StackMap { dump, .. }, types) in maps {
        let start = sample_types.len();
        sample_types.extend(types.iter().cloned());
        let types = start..sample_types.len();
        parts.push(Part { map: dump.name.clone(), types, weight: start, partial: dump.partial.clone() });
    }
    distinct_names(&mut sample_types, &parts);
    let width = sample_types.len();
    // By stack and labels, in a stable order.
    let mut merged: BTreeMap<(Vec<u64>, Vec<Label>), Vec<i64>> = BTreeMap::new();
    for ((StackMap { dump, stack }, _), part) in maps.iter().zip(&parts) {
        for e in &dump.entries {
            let Some(Value::Stack { pcs, .. }) = e.keys.get(*stack) else { continue };
            let labels = (e.keys.iter().enumerate())
                .filter(|(i, _)| i != stack)
                .map(|(i, k)| label(dump.key_names.get(i).map(String::as_str).unwrap_or("key"), k))
                .collect();
            let values = merged.entry((pcs.clone(), labels)).or_insert_with(|| vec![0; width]);
            for (slot, v) in values[part.types.clone()].iter_mut().zip(entry_values(&e.value)) {
                *slot = slot.saturating_add(v);
            }
        }
    }
    let mut locations = Locations::default();
    let samples = merged
        .into_iter()
        .map(|((pcs, labels), values)| Sample { stack: locations.stack(&pcs, symbols), labels, values })
        .collect();
    Profile { parts, sample_types, samples, locations: locations.list }
}

/// Sample types of one profile must have distinct names: where several share one (two
/// counts: `calls` twice), each of a named map's takes the map's name before it
/// (`a_calls`, `b_calls`).
fn distinct_names(types: &mut [SampleType], parts: &[Part]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in types.iter() {
        *seen.entry(t.name.clone()).or_default() += 1;
    }
    for part in parts {
        let name = part.map.trim_start_matches('@');
        for t in &mut types[part.types.clone()] {
            if seen[&t.name] > 1 && !name.is_empty() && t.name != name {
                t.name = format!("{name}_{}", t.name);
            }
        }
    }
}

/// The locations of a profile, one per address, symbolized once each.
#[derive(Default)]
struct Locations {
    list: Vec<Location>,
    by_address: HashMap<u64, usize>,
}

impl Locations {
    /// The locations of a stack (program counters, innermost first).
    fn stack(&mut self, pcs: &[u64], symbols: &dyn Symbols) -> Vec<usize> {
        (pcs.iter().enumerate())
            .map(|(i, pc)| {
                let address = if i == 0 { *pc } else { pc.saturating_sub(1) };
                *self.by_address.entry(address).or_insert_with(|| {
                    self.list.push(Location { address, frames: frames(address, symbols) });
                    self.list.len() - 1
                })
            })
            .collect()
    }
}

/// What is at `address`: its source frames, or only its function where lines are not
/// known, or nothing.
fn frames(address: u64, symbols: &dyn Symbols) -> Vec<Frame> {
    let lines = symbols.source_frames(address);
    if !lines.is_empty() {
        return lines
            .into_iter()
            .map(|f| Frame {
                function: f.function,
                file: (f.file != "?").then_some(f.file),
                line: f.line,
                start_line: f.start_line,
            })
            .collect();
    }
    match symbols.function(address) {
        Some((function, _)) => vec![Frame { function, file: None, line: 0, start_line: 0 }],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gobin::SourceFrame;
    use crate::output::MapEntry;

    /// main.leaf at 0x1000..0x1100 with helper inlined at 0x1010..0x1020; main.main at
    /// 0x2000..0x2100.
    struct Fake;

    impl Symbols for Fake {
        fn type_name(&self, _: u64) -> Option<String> {
            None
        }
        fn function(&self, pc: u64) -> Option<(String, u64)> {
            match pc {
                0x1000..0x1100 => Some(("main.leaf".into(), 0x1000)),
                0x2000..0x2100 => Some(("main.main".into(), 0x2000)),
                _ => None,
            }
        }
        fn source_frames(&self, pc: u64) -> Vec<SourceFrame> {
            let frame = |function: &str, line| SourceFrame {
                function: function.into(),
                file: "/src/main.go".into(),
                line,
                start_line: 1,
            };
            match pc {
                0x1010..0x1020 => vec![frame("main.helper", 7), frame("main.leaf", 12)],
                0x1000..0x1100 => vec![frame("main.leaf", 10)],
                0x2000..0x2100 => vec![frame("main.main", 20 + (pc - 0x2000) as u32)],
                _ => Vec::new(),
            }
        }
    }

    fn stack(pcs: &[u64]) -> Value {
        Value::Stack { pcs: pcs.to_vec(), frames: Vec::new() }
    }

    fn dump(name: &str, agg: Agg, durations: bool, keys: &[&str], entries: Vec<(Vec<Value>, AggValue)>) -> StackMap {
        let stack = keys.iter().position(|k| *k == "ustack").unwrap();
        let dump = MapDump {
            name: name.into(),
            agg: Some(agg),
            durations,
            key_names: keys.iter().map(|k| k.to_string()).collect(),
            entries: entries.into_iter().map(|(keys, value)| MapEntry { keys, value, plain: None }).collect(),
            partial: None,
        };
        StackMap { dump, stack }
    }

    #[test]
    fn counts_become_calls_and_callers_are_looked_up_inside_their_call() {
        let d = dump(
            "@",
            Agg::Count,
            false,
            &["ustack"],
            vec![
                (vec![stack(&[0x1000, 0x2005])], AggValue::Count(3)),
                (vec![stack(&[0x1010, 0x2009])], AggValue::Count(4)),
            ],
        );
        let (profiles, left) = build(&[d], &Fake);
        assert!(left.is_empty());
        let [p] = profiles.as_slice() else { panic!("{profiles:?}") };
        assert_eq!(p.sample_types, vec![SampleType { name: "calls".into(), unit: "count" }]);
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.samples.iter().map(|s| s.values[0]).sum::<i64>(), 7);
        let caller = &p.locations[p.samples[0].stack[1]];
        assert_eq!((caller.address, caller.frames[0].line), (0x2004, 24));
        let inlined = &p.locations[p.samples[1].stack[0]];
        let names: Vec<&str> = inlined.frames.iter().map(|f| f.function.as_str()).collect();
        assert_eq!(names, ["main.helper", "main.leaf"]);
    }

    #[test]
    fn maps_with_the_same_keys_share_a_profile_and_other_keys_are_labels() {
        let calls = dump(
            "@calls",
            Agg::Count,
            false,
            &["method", "ustack"],
            vec![(vec![Value::Str(b"GET".to_vec()), stack(&[0x1000])], AggValue::Count(2))],
        );
        let time = dump(
            "@time",
            Agg::Hist,
            true,
            &["method", "ustack"],
            vec![(
                vec![Value::Str(b"GET".to_vec()), stack(&[0x1000])],
                AggValue::Buckets { counts: vec![1, 1], sum: 900, fine: None },
            )],
        );
        let peak = dump("@peak", Agg::Max, true, &["ustack"], vec![(vec![stack(&[0x1000])], AggValue::Max(Some(5)))]);
        let (profiles, left) = build(&[calls, time, peak], &Fake);
        assert_eq!(left, vec![Left { map: "@peak".into(), why: "a minimum or maximum does not add up along a stack" }]);
        let [p] = profiles.as_slice() else { panic!("{profiles:?}") };
        let names: Vec<&str> = p.sample_types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["calls", "time_calls", "wall"]);
        assert_eq!(p.samples.len(), 1);
        assert_eq!(p.samples[0].values, vec![2, 2, 900]);
        assert_eq!(p.samples[0].labels, vec![Label { key: "method".into(), value: LabelValue::Str("GET".into()) }]);
        assert_eq!(p.parts[1].types, 1..3);
    }

    #[test]
    fn an_empty_map_is_a_profile_without_samples() {
        let (profiles, _) = build(&[dump("@slow", Agg::Sum, false, &["ustack"], Vec::new())], &Fake);
        assert_eq!(profiles[0].sample_types, vec![SampleType { name: "slow".into(), unit: "count" }]);
        assert!(profiles[0].samples.is_empty());
    }

    #[test]
    fn unknown_addresses_have_no_frames() {
        let d = dump("@", Agg::Sum, true, &["ustack"], vec![(vec![stack(&[0x9000, 0x1001])], AggValue::Sum(5))]);
        let (profiles, _) = build(&[d], &Fake);
        let p = &profiles[0];
        assert!(p.locations[p.samples[0].stack[0]].frames.is_empty());
        assert_eq!(p.sample_types[0], SampleType { name: "wall".into(), unit: "nanoseconds" });
    }
}
