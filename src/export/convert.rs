//! Maps as read (`output::MapDump`) into metric families: keys into labels (by their
//! names), aggregations into counters, gauges and histograms, durations into seconds,
//! and power-of-two and linear buckets into cumulative buckets with inclusive upper
//! bounds (`le`), as Prometheus and OTLP want them.

use super::model::{Exponential, Family, Kind, Point, Sample};
use super::names::{MapExport, Shape};
use crate::output::text::{self, bucket_bounds};
use crate::output::value::{AggValue, Value};
use crate::output::MapDump;
use crate::plan::Agg;
use std::collections::HashMap;

/// The range of buckets a histogram map has exported so far: from one below the lowest
/// bucket that ever held a value to the highest. It only grows, so a bucket's series,
/// once exported, stays (Prometheus's `rate` needs series that do not come and go), and
/// a map of millisecond latencies does not export sixty empty buckets.
pub type BucketRanges = HashMap<String, (usize, usize)>;

/// The families of one map. `extra` labels (`binary`, `pid`) follow the keys, except
/// where a key already has that name.
pub fn families(
    export: &MapExport,
    dump: &MapDump,
    extra: &[(String, String)],
    ranges: &mut BucketRanges,
) -> Vec<Family> {
    let help = format!("{} of gtrace's script", dump.name);
    let family = |base: &str, kind, seconds, samples| Family {
        base: base.to_string(),
        help: help.clone(),
        kind,
        seconds,
        samples,
    };
    let labels = |keys: &[Value]| labels(&dump.key_names, keys, extra);
    let scale = |n: f64| if export.seconds { n / 1e9 } else { n };
    match export.shape {
        Shape::NotExported => Vec::new(),
        Shape::Counter | Shape::Gauge => {
            let kind = if export.shape == Shape::Counter { Kind::Counter } else { Kind::Gauge };
            let samples = dump
                .entries
                .iter()
                .filter_map(|e| {
                    let n = match &e.plain {
                        Some(v) => plain_number(v)?,
                        None => agg_number(&e.value)?,
                    };
                    Some(Sample { labels: labels(&e.keys), point: Point::Number(scale(n)) })
                })
                .collect();
            vec![family(&export.base, kind, export.seconds, samples)]
        }
        Shape::Stats => super::names::STATS_PARTS
            .iter()
            .enumerate()
            .map(|(i, part)| {
                let samples = dump
                    .entries
                    .iter()
                    .filter_map(|e| {
                        let AggValue::Stats { count, sum, min, max } = e.value else { return None };
                        let avg = if count == 0 { 0.0 } else { sum as f64 / count as f64 };
                        let n = [count as f64, scale(sum as f64), scale(min as f64), scale(max as f64), scale(avg)][i];
                        Some(Sample { labels: labels(&e.keys), point: Point::Number(n) })
                    })
                    .collect();
                family(&format!("{}_{part}", export.base), Kind::Gauge, export.seconds && i != 0, samples)
            })
            .collect(),
        Shape::Histogram => {
            let Some(agg) = dump.agg else { return Vec::new() };
            let range = widen(ranges.entry(export.object_name.clone()).or_insert((usize::MAX, 0)), dump);
            let samples = dump
                .entries
                .iter()
                .filter_map(|e| {
                    let AggValue::Buckets { counts, sum, fine } = &e.value else { return None };
                    let mut point = histogram(agg, counts, *sum, range, export.seconds);
                    if let (Point::Histogram { exponential, .. }, Some(fine)) = (&mut point, fine) {
                        *exponential = self::exponential(fine, export.seconds);
                    }
                    Some(Sample { labels: labels(&e.keys), point })
                })
                .collect();
            vec![family(&export.base, Kind::Histogram, export.seconds, samples)]
        }
    }
}

/// Widens `range` to the buckets of `dump` that hold values, and returns the buckets to
/// export: from one below the lowest to the highest.
fn widen(range: &mut (usize, usize), dump: &MapDump) -> (usize, usize) {
    for e in &dump.entries {
        if let AggValue::Buckets { counts, .. } = &e.value {
            if let (Some(lo), Some(hi)) = (counts.iter().position(|c| *c != 0), counts.iter().rposition(|c| *c != 0)) {
                range.0 = range.0.min(lo);
                range.1 = range.1.max(hi);
            }
        }
    }
    (range.0.saturating_sub(1), range.1)
}

/// One histogram: the cumulative count at each bucket's inclusive upper bound (its
/// exclusive bound minus one: values are integers, nanoseconds for durations) for the
/// buckets in `range` that have a finite bound; the last bucket is +Inf.
fn histogram(agg: Agg, counts: &[u64], sum: i64, range: (usize, usize), seconds: bool) -> Point {
    let scale = |n: f64| if seconds { n / 1e9 } else { n };
    let mut buckets = Vec::new();
    let mut cumulative = 0u64;
    for (i, c) in counts.iter().enumerate() {
        cumulative += c;
        if i < range.0 || i > range.1 {
            continue;
        }
        match bucket_bounds(agg, i) {
            (_, Some(hi)) => buckets.push((scale((hi - 1) as f64), cumulative)),
            (_, None) => break,
        }
    }
    Point::Histogram { buckets, count: cumulative, sum: scale(sum as f64), exponential: None }
}

/// A `hist()`'s sub-buckets at OTLP scale 4: exactly its own for numbers; for durations
/// in seconds each moved to the bucket of seconds holding most of it (`hist::seconds_shift`).
fn exponential(fine: &crate::hist::Fine, seconds: bool) -> Option<Exponential> {
    let scale = |n: i64| if seconds { n as f64 / 1e9 } else { n as f64 };
    let (offset, counts) =
        crate::hist::exponential(&fine.counts, if seconds { crate::hist::seconds_shift() } else { 0 });
    Some(Exponential {
        exemplar: None,
        scale: crate::hist::SCALE as i32,
        zero_count: fine.counts.first().copied().unwrap_or(0),
        offset,
        counts,
        min: scale(fine.min?),
        max: scale(fine.max?),
    })
}

fn agg_number(v: &AggValue) -> Option<f64> {
    Some(match v {
        AggValue::Count(c) => *c as f64,
        AggValue::Sum(s) => *s as f64,
        AggValue::Avg { count, sum } => {
            if *count == 0 {
                return None;
            }
            *sum as f64 / *count as f64
        }
        AggValue::Min(m) | AggValue::Max(m) => (*m)? as f64,
        AggValue::Stats { .. } | AggValue::Buckets { .. } => return None,
    })
}

fn plain_number(v: &Value) -> Option<f64> {
    Some(match v {
        Value::Int(i) | Value::Duration(i) => *i as f64,
        Value::Uint(u) => *u as f64,
        Value::Bool(b) => *b as u8 as f64,
        Value::Float { bits, size: 4 } => f64::from(f32::from_bits(*bits as u32)),
        Value::Float { bits, .. } => f64::from_bits(*bits),
        _ => return None,
    })
}

/// The keys as labels, then `extra` labels whose names no key has.
pub fn labels(names: &[String], keys: &[Value], extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = names.iter().cloned().zip(keys.iter().map(label_value)).collect();
    for (name, value) in extra {
        if !names.contains(name) {
            out.push((name.clone(), value.clone()));
        }
    }
    out
}

/// A key's value as a label: as text output prints it, except durations (exact
/// nanoseconds) and stacks (frames one a line, innermost first).
pub fn label_value(v: &Value) -> String {
    match v {
        Value::Duration(ns) => ns.to_string(),
        Value::Stack { pcs, frames } => pcs
            .iter()
            .enumerate()
            .map(|(i, pc)| frames.get(i).cloned().unwrap_or_else(|| format!("{pc:#x}")))
            .collect::<Vec<_>>()
            .join("\n"),
        other => text::value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::MapEntry;

    fn hist_dump(entries: Vec<(&str, Vec<u64>, i64)>, agg: Agg) -> MapDump {
        MapDump {
            name: "@lat".into(),
            agg: Some(agg),
            durations: false,
            key_names: vec!["route".into()],
            entries: entries
                .into_iter()
                .map(|(k, counts, sum)| MapEntry {
                    keys: vec![Value::Str(k.into())],
                    value: AggValue::Buckets { counts, sum, fine: None },
                    plain: None,
                })
                .collect(),
            partial: None,
        }
    }

    fn export(shape: Shape, seconds: bool) -> MapExport {
        MapExport { object_name: "m0".into(), display: "@lat".into(), base: "gtrace_lat".into(), shape, seconds }
    }

    #[test]
    fn power_of_two_buckets_become_cumulative_inclusive_bounds() {
        // Values 1 (bucket 1), 5 and 6 (bucket 3: [4, 8)), 9 (bucket 4: [8, 16)).
        let mut counts = vec![0u64; 65];
        counts[1] = 1;
        counts[3] = 2;
        counts[4] = 1;
        let dump = hist_dump(vec![("/", counts, 21)], Agg::Hist);
        let extra = [("binary".to_string(), "/bin/x".to_string())];
        let mut ranges = BucketRanges::new();
        let f = families(&export(Shape::Histogram, false), &dump, &extra, &mut ranges);
        assert_eq!(f[0].samples[0].labels, vec![("route".into(), "/".into()), ("binary".into(), "/bin/x".into())]);
        // From one below the lowest bucket used (0: le 0) to the highest (4: le 15).
        let want = Point::Histogram {
            buckets: vec![(0.0, 0), (1.0, 1), (3.0, 1), (7.0, 3), (15.0, 4)],
            count: 4,
            sum: 21.0,
            exponential: None,
        };
        assert_eq!(f[0].samples[0].point, want);
    }

    #[test]
    fn the_bucket_range_only_grows() {
        let mut ranges = BucketRanges::new();
        let mut counts = vec![0u64; 65];
        counts[20] = 3;
        let e = export(Shape::Histogram, true);
        let f = families(&e, &hist_dump(vec![("/", counts.clone(), 3 << 19)], Agg::Hist), &[], &mut ranges);
        let Point::Histogram { buckets, sum, .. } = &f[0].samples[0].point else { panic!() };
        // Bucket 20 is [2^19, 2^20) ns: le (2^20 - 1) ns in seconds.
        assert_eq!(buckets.last(), Some(&(((1u64 << 20) - 1) as f64 / 1e9, 3)));
        assert_eq!(buckets.len(), 2);
        assert!((sum - (3u64 << 19) as f64 / 1e9).abs() < 1e-12);
        // A later read whose values are all in bucket 22 keeps the lower buckets.
        let mut later = vec![0u64; 65];
        later[22] = 1;
        let f = families(&e, &hist_dump(vec![("/", later, 1 << 21)], Agg::Hist), &[], &mut ranges);
        let Point::Histogram { buckets, .. } = &f[0].samples[0].point else { panic!() };
        assert_eq!(buckets.len(), 4);
    }

    #[test]
    fn linear_buckets_end_at_hi_and_the_last_is_inf() {
        // lhist(x, 0, 10, 4): below 0, [0,4), [4,8), [8,10), >= 10.
        let agg = Agg::Lhist { lo: 0, hi: 10, step: 4 };
        let dump = hist_dump(vec![("/", vec![1, 0, 2, 1, 5, 0], 100)], agg);
        let f = families(&export(Shape::Histogram, false), &dump, &[], &mut BucketRanges::new());
        let want = Point::Histogram {
            buckets: vec![(-1.0, 1), (3.0, 1), (7.0, 3), (9.0, 4)],
            count: 9,
            sum: 100.0,
            exponential: None,
        };
        assert_eq!(f[0].samples[0].point, want);
    }

    #[test]
    fn a_key_named_like_an_extra_label_wins() {
        let got =
            labels(&["pid".into()], &[Value::Int(7)], &[("pid".into(), "9".into()), ("binary".into(), "b".into())]);
        assert_eq!(got, vec![("pid".into(), "7".into()), ("binary".into(), "b".into())]);
    }

    #[test]
    fn stats_are_five_gauges_and_count_has_no_unit() {
        let dump = MapDump {
            name: "@s".into(),
            agg: Some(Agg::Stats),
            durations: true,
            key_names: vec![],
            entries: vec![MapEntry {
                keys: vec![],
                value: AggValue::Stats { count: 4, sum: 4_000_000_000, min: 500_000_000, max: 2_000_000_000 },
                plain: None,
            }],
            partial: None,
        };
        let e = MapExport { base: "gtrace_s".into(), ..export(Shape::Stats, true) };
        let f = families(&e, &dump, &[], &mut BucketRanges::new());
        let got: Vec<(String, bool, Point)> =
            f.iter().map(|f| (f.base.clone(), f.seconds, f.samples[0].point.clone())).collect();
        assert_eq!(
            got,
            vec![
                ("gtrace_s_count".into(), false, Point::Number(4.0)),
                ("gtrace_s_sum".into(), true, Point::Number(4.0)),
                ("gtrace_s_min".into(), true, Point::Number(0.5)),
                ("gtrace_s_max".into(), true, Point::Number(2.0)),
                ("gtrace_s_avg".into(), true, Point::Number(1.0)),
            ]
        );
    }

    fn fine_dump(values: &[i64], durations: bool) -> MapDump {
        let mut counts = vec![0u64; crate::hist::BUCKETS];
        for v in values {
            counts[crate::hist::index(*v)] += 1;
        }
        let fine = crate::hist::Fine { counts, min: values.iter().min().copied(), max: values.iter().max().copied() };
        let value = AggValue::Buckets { counts: fine.rows(), sum: values.iter().sum(), fine: Some(Box::new(fine)) };
        MapDump {
            name: "@lat".into(),
            agg: Some(Agg::Hist),
            durations,
            key_names: vec![],
            entries: vec![MapEntry { keys: vec![], value, plain: None }],
            partial: None,
        }
    }

    #[test]
    fn a_hist_carries_its_sub_buckets_at_scale_4() {
        let f = families(
            &export(Shape::Histogram, false),
            &fine_dump(&[0, 5, 1000, 1000, 1024], false),
            &[],
            &mut BucketRanges::new(),
        );
        let Point::Histogram { buckets, count, exponential: Some(e), .. } = &f[0].samples[0].point else { panic!() };
        // The classic buckets stay powers of two: ..., le 1023 holds 5 and 0 and the 1000s.
        assert_eq!((buckets.last(), *count), (Some(&(2047.0, 5)), 5));
        assert_eq!((e.scale, e.zero_count, e.min, e.max), (4, 1, 0.0, 1024.0));
        // 5 is bucket 38 (OTLP 37), 1000 is 1 + 16 * 9 + 15 = 160, 1024 is 1 + 16 * 10 + 0.
        assert_eq!(e.offset, 37);
        assert_eq!(e.counts.len(), 160 - 37 + 1);
        assert_eq!((e.counts[0], e.counts[159 - 37], e.counts[160 - 37]), (1, 2, 1));
    }

    #[test]
    fn a_hist_of_durations_is_exported_in_seconds() {
        let ns = [1_500_000i64, 4_190_000];
        let f = families(&export(Shape::Histogram, true), &fine_dump(&ns, true), &[], &mut BucketRanges::new());
        let Point::Histogram { exponential: Some(e), .. } = &f[0].samples[0].point else { panic!() };
        assert_eq!((e.min, e.max), (0.0015, 0.00419));
        assert_eq!(e.offset, crate::hist::index(ns[0]) as i32 - 1 + crate::hist::seconds_shift());
        // 1.5ms is in OTLP's bucket `offset` or the one below it (the shift rounds).
        let lo = 2f64.powf(e.offset as f64 / 16.0);
        assert!(lo / 2f64.powf(1.0 / 16.0) < 0.0015 && 0.0015 <= lo * 2f64.powf(1.0 / 16.0));
    }
}

/// Puts each exemplar (the decoded keys of its series, and it) on the sample of the
/// same labels in `families` (a `hist()`'s, exported as an exponential histogram).
pub fn attach_exemplars(
    families: &mut [Family],
    key_names: &[String],
    exemplars: Vec<(Vec<Value>, super::model::Exemplar)>,
    extra: &[(String, String)],
) {
    for (keys, ex) in exemplars {
        let want = labels(key_names, &keys, extra);
        for f in families.iter_mut() {
            for s in f.samples.iter_mut().filter(|s| s.labels == want) {
                if let Point::Histogram { exponential: Some(e), .. } = &mut s.point {
                    e.exemplar = Some(ex.clone());
                }
            }
        }
    }
}
