//! Values read back from maps and events: decoded from their bytes by `plan::ValueType`,
//! and aggregations combined across CPUs.

use crate::plan::{Agg, Field, Plan, ValueType};

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Uint(u64),
    Bool(bool),
    /// A float32 (`size` 4) or float64 by its bits.
    Float {
        bits: u64,
        size: u8,
    },
    /// Nanoseconds.
    Duration(i64),
    Pointer(u64),
    /// A Go string's bytes as read (a Go string need not be UTF-8).
    Str(Vec<u8>),
    /// A probed function's name.
    Func(String),
    /// An interface: its dynamic type's descriptor address (0 when nil) and name when
    /// known, its data word, and what the data points at (a word, a string).
    Interface {
        tab: u64,
        data: u64,
        word: u64,
        text: Vec<u8>,
        type_name: Option<String>,
    },
    /// A whole Go value, as a probe copied it.
    Go(Box<super::gofmt::GoValue>),
    /// A call stack: program counters, innermost first, with their symbols when known.
    Stack {
        pcs: Vec<u64>,
        frames: Vec<String>,
    },
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    let mut b = [0u8; 8];
    let end = (offset + 8).min(bytes.len());
    if offset < end {
        b[..end - offset].copy_from_slice(&bytes[offset..end]);
    }
    u64::from_le_bytes(b)
}

pub fn decode(bytes: &[u8], field: &Field, plan: &Plan) -> Value {
    let at = field.offset as usize;
    let raw = u64_at(bytes, at);
    match &field.ty {
        ValueType::Int { signed: true, .. } => Value::Int(raw as i64),
        ValueType::Int { signed: false, .. } => Value::Uint(raw),
        ValueType::Bool => Value::Bool(raw & 0xff != 0),
        ValueType::Float { size } => {
            Value::Float { bits: if *size == 4 { raw & 0xffff_ffff } else { raw }, size: *size }
        }
        ValueType::Duration => Value::Duration(raw as i64),
        ValueType::Pointer => Value::Pointer(raw),
        ValueType::Func => Value::Func(plan.function_name(raw)),
        ValueType::Interface => Value::Interface {
            tab: raw,
            data: u64_at(bytes, at + 8),
            word: u64_at(bytes, at + 16),
            text: match decode(bytes, &Field { offset: field.offset + 24, ty: ValueType::Str { max: 64 } }, plan) {
                Value::Str(s) => s,
                _ => Vec::new(),
            },
            type_name: None,
        },
        ValueType::Stack => Value::Stack {
            pcs: (0..crate::plan::USTACK_DEPTH as usize)
                .map(|i| u64_at(bytes, at + 8 * i))
                .take_while(|pc| *pc != 0)
                .collect(),
            frames: Vec::new(),
        },
        ValueType::Go { capture } => {
            let end = (at + capture.size as usize).min(bytes.len());
            Value::Go(Box::new(super::gofmt::GoValue {
                capture: capture.clone(),
                bytes: bytes.get(at..end).unwrap_or_default().to_vec(),
                types: plan.go_types.clone(),
                dynamic: Default::default(),
            }))
        }
        ValueType::Str { max } => {
            let len = (u64_at(bytes, at) as usize).min(*max as usize);
            let start = (at + 8).min(bytes.len());
            let end = (start + len).min(bytes.len());
            Value::Str(bytes[start..end].to_vec())
        }
    }
}

/// An aggregation's value, summed (or min'd, max'd) over every CPU.
#[derive(Clone, Debug, PartialEq)]
pub enum AggValue {
    Count(u64),
    Sum(i64),
    Avg {
        count: u64,
        sum: i64,
    },
    Min(Option<i64>),
    Max(Option<i64>),
    Stats {
        count: u64,
        sum: i64,
        min: i64,
        max: i64,
    },
    /// Bucket counts, in `plan::Agg` order (a `hist()`'s power-of-two rows), and the sum
    /// of the values; a `hist()`'s sub-buckets and extremes in `fine`.
    Buckets {
        counts: Vec<u64>,
        sum: i64,
        fine: Option<Box<crate::hist::Fine>>,
    },
}

impl AggValue {
    /// The number used to sort map entries, as bpftrace does (ascending).
    pub fn sort_key(&self) -> i128 {
        match self {
            AggValue::Count(c) => *c as i128,
            AggValue::Sum(s) => *s as i128,
            AggValue::Avg { count, sum } => {
                if *count == 0 {
                    0
                } else {
                    (*sum / *count as i64) as i128
                }
            }
            AggValue::Min(v) | AggValue::Max(v) => v.unwrap_or(0) as i128,
            AggValue::Stats { count, .. } => *count as i128,
            AggValue::Buckets { counts, .. } => counts.iter().sum::<u64>() as i128,
        }
    }
}

pub fn combine(agg: Agg, per_cpu: &[Vec<u8>]) -> AggValue {
    let word = |v: &Vec<u8>, i: usize| u64_at(v, 8 * i);
    let sum_of = |i: usize| per_cpu.iter().map(|v| word(v, i)).fold(0u64, |a, b| a.wrapping_add(b));
    match agg {
        Agg::Count => AggValue::Count(sum_of(0)),
        Agg::Sum => AggValue::Sum(sum_of(0) as i64),
        Agg::Avg => AggValue::Avg { count: sum_of(0), sum: sum_of(1) as i64 },
        Agg::Min | Agg::Max => {
            let seen = per_cpu.iter().filter(|v| word(v, 0) != 0).map(|v| word(v, 1) as i64);
            if agg == Agg::Min {
                AggValue::Min(seen.min())
            } else {
                AggValue::Max(seen.max())
            }
        }
        Agg::Stats => {
            let live: Vec<&Vec<u8>> = per_cpu.iter().filter(|v| word(v, 0) != 0).collect();
            AggValue::Stats {
                count: sum_of(0),
                sum: sum_of(1) as i64,
                min: live.iter().map(|v| word(v, 2) as i64).min().unwrap_or(0),
                max: live.iter().map(|v| word(v, 3) as i64).max().unwrap_or(0),
            }
        }
        Agg::Hist => {
            let n = agg.buckets() as usize;
            let greatest = |i: usize| per_cpu.iter().map(|v| word(v, i)).max().unwrap_or(0);
            let counts: Vec<u64> = (0..n).map(sum_of).collect();
            let seen = counts.iter().any(|c| *c != 0);
            let fine = crate::hist::Fine {
                counts,
                min: seen.then(|| (greatest(n + 1) ^ i64::MAX as u64) as i64),
                max: seen.then(|| (greatest(n + 2) ^ (1 << 63)) as i64),
            };
            AggValue::Buckets { counts: fine.rows(), sum: sum_of(n) as i64, fine: Some(Box::new(fine)) }
        }
        Agg::Lhist { .. } => {
            let n = agg.buckets() as usize;
            AggValue::Buckets { counts: (0..n).map(sum_of).collect(), sum: sum_of(n) as i64, fine: None }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn counts_add_across_cpus() {
        assert_eq!(combine(Agg::Count, &[words(&[3]), words(&[4])]), AggValue::Count(7));
    }

    #[test]
    fn min_ignores_cpus_that_saw_nothing() {
        assert_eq!(combine(Agg::Min, &[words(&[0, 0]), words(&[1, 5]), words(&[1, 9])]), AggValue::Min(Some(5)));
        assert_eq!(combine(Agg::Max, &[words(&[0, 0])]), AggValue::Max(None));
    }

    #[test]
    fn stats_combine() {
        let v = combine(
            Agg::Stats,
            &[words(&[2, 10, 3, 7]), words(&[0, 0, 0, 0]), words(&[1, -4i64 as u64, -4i64 as u64, -4i64 as u64])],
        );
        assert_eq!(v, AggValue::Stats { count: 3, sum: 6, min: -4, max: 7 });
    }

    /// One CPU's `hist()` value as the eBPF update leaves it after `values`.
    fn hist_words(values: &[i64]) -> Vec<u8> {
        let n = crate::hist::BUCKETS;
        let mut w = vec![0u64; n + 3];
        for v in values {
            w[crate::hist::index(*v)] += 1;
            w[n] = w[n].wrapping_add(*v as u64);
            w[n + 1] = w[n + 1].max(*v as u64 ^ i64::MAX as u64);
            w[n + 2] = w[n + 2].max(*v as u64 ^ (1 << 63));
        }
        words(&w)
    }

    #[test]
    fn hist_extremes_combine_across_cpus() {
        let v = combine(Agg::Hist, &[hist_words(&[5, -3, 9]), hist_words(&[]), hist_words(&[1 << 40, 2])]);
        let AggValue::Buckets { counts, sum, fine: Some(fine) } = v else { panic!("{v:?}") };
        assert_eq!((fine.min, fine.max, sum), (Some(-3), Some(1 << 40), 13 + (1 << 40)));
        assert_eq!((counts[0], counts[2], counts[3], counts[4], counts[41]), (1, 1, 1, 1, 1));
        assert_eq!(counts.len(), crate::hist::ROWS);
        let none = combine(Agg::Hist, &[hist_words(&[])]);
        let AggValue::Buckets { fine: Some(fine), .. } = none else { panic!() };
        assert_eq!((fine.min, fine.max), (None, None));
    }
}
