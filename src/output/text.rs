//! Human-readable rendering in bpftrace's familiar shapes: values, durations with units,
//! printf, maps and histograms. What the traced program gave (its strings, an error's
//! message, a `%c` character) is escaped as `quote::escape` does wherever text output
//! prints it, so that no byte of it can move the cursor, set the terminal's title or
//! start a line that looks like gtrace's own; the script's own text is printed as it is.

use super::gonames::ERROR_TYPES;
use super::quote::Strings;
use super::value::{AggValue, Value};
use super::MapDump;
use crate::plan::{lhist_buckets, Agg};
use crate::syntax::format::{self, Piece};

/// `20.1ms`, `512ns`, `3s`: three significant digits, the largest unit that keeps the
/// number at least 1.
pub fn duration(ns: i64) -> String {
    let neg = ns < 0;
    let n = ns.unsigned_abs() as f64;
    let (v, unit) = if n < 1e3 {
        (n, "ns")
    } else if n < 1e6 {
        (n / 1e3, "us")
    } else if n < 1e9 {
        (n / 1e6, "ms")
    } else {
        (n / 1e9, "s")
    };
    let mut s = if unit == "ns" || v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    format!("{}{s}{unit}", if neg { "-" } else { "" })
}

/// A value as text output shows it: its strings escaped.
pub fn shown(v: &Value) -> String {
    value_in(v, Strings::Escaped)
}

/// A value with its strings exact, for formats that encode them their own way (JSON's
/// numbers and texts, metric labels): never for the terminal.
pub fn value(v: &Value) -> String {
    value_in(v, Strings::Exact)
}

fn value_in(v: &Value, strings: Strings) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Float { bits, size } => super::float::format(*bits, *size, super::float::Spec::v()),
        Value::Duration(d) => duration(*d),
        Value::Pointer(p) => format!("{p:#x}"),
        Value::Str(s) => strings.write(s),
        Value::Func(f) => f.clone(),
        Value::Go(v) => v.render(super::gofmt::Form::V, strings),
        Value::Interface { tab: 0, .. } => "nil".into(),
        Value::Interface { tab, data, word, text, type_name } => {
            interface(*tab, *data, *word, text, type_name.as_deref())
        }
        Value::Stack { pcs, frames } => {
            let lines: Vec<String> = pcs
                .iter()
                .enumerate()
                .map(|(i, pc)| frames.get(i).cloned().unwrap_or_else(|| format!("{pc:#x}")))
                .collect();
            format!("\n    {}\n", lines.join("\n    "))
        }
    }
}

/// An interface as `TYPE(VALUE)`: the value for strings, integers, bools and the common
/// error types (their message); the data pointer otherwise. Without the type's name (a
/// stripped or PIE binary), the descriptor and data addresses.
fn interface(tab: u64, data: u64, word: u64, text: &[u8], type_name: Option<&str>) -> String {
    let Some(name) = type_name else { return format!("(type {tab:#x})({data:#x})") };
    let value = match name {
        "string" => super::quote::quote(text),
        t if ERROR_TYPES.contains(&t) => super::quote::quote(text),
        // Integers, bools and floats as Go's fmt prints them.
        t => super::gonames::basic(t, word, false).unwrap_or_else(|| format!("{data:#x}")),
    };
    format!("{name}({value})")
}

/// `print(...)` values separated by spaces, `name=value` where labelled (`print(args)`),
/// for the terminal: strings escaped.
pub fn labelled(labels: &[Option<String>], values: &[Value]) -> String {
    labelled_with(labels, values, Strings::Escaped)
}

/// The same with strings exact, for OTLP's log records.
pub fn labelled_exact(labels: &[Option<String>], values: &[Value]) -> String {
    labelled_with(labels, values, Strings::Exact)
}

fn labelled_with(labels: &[Option<String>], values: &[Value], strings: Strings) -> String {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match labels.get(i).and_then(|l| l.as_ref()) {
            Some(l) => format!("{l}={}", value_in(v, strings)),
            None => value_in(v, strings),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn as_i128(v: &Value) -> i128 {
    match v {
        Value::Int(i) | Value::Duration(i) => *i as i128,
        Value::Uint(u) | Value::Pointer(u) => *u as i128,
        Value::Bool(b) => *b as i128,
        _ => 0,
    }
}

/// Renders a printf format with its values (the checker has matched verbs to values),
/// for the terminal: the values' strings escaped.
pub fn printf(fmt: &str, values: &[Value]) -> String {
    printf_with(fmt, values, Strings::Escaped)
}

/// The same with the values' strings exact, for JSON's `text` and OTLP's log records.
pub fn printf_exact(fmt: &str, values: &[Value]) -> String {
    printf_with(fmt, values, Strings::Exact)
}

fn printf_with(fmt: &str, values: &[Value], strings: Strings) -> String {
    let Ok(pieces) = format::parse(fmt) else { return fmt.to_string() };
    let mut out = String::new();
    let mut values = values.iter();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(&t),
            Piece::Verb(v) => {
                let Some(val) = values.next() else { break };
                let s = match (v.verb, val) {
                    ('v', Value::Go(g)) => g.render(
                        if v.flags.contains('#') {
                            super::gofmt::Form::Sharp
                        } else if v.flags.contains('+') {
                            super::gofmt::Form::Plus
                        } else {
                            super::gofmt::Form::V
                        },
                        strings,
                    ),
                    // %#v of a string is Go syntax: quoted.
                    ('v', Value::Str(s)) if v.flags.contains('#') => super::quote::quote(s),
                    ('v' | 'g' | 'G' | 'e' | 'E' | 'f' | 'F', Value::Float { bits, size }) => {
                        let spec = super::float::Spec {
                            verb: v.verb,
                            precision: v.precision,
                            plus: v.flags.contains('+'),
                            space: v.flags.contains(' '),
                        };
                        super::float::format(*bits, *size, spec)
                    }
                    ('d' | 'i' | 'u', Value::Duration(d)) => d.to_string(),
                    ('d' | 'i' | 'u', _) => as_i128(val).to_string(),
                    ('x', Value::Str(s)) => s.iter().map(|b| format!("{b:02x}")).collect(),
                    ('X', Value::Str(s)) => s.iter().map(|b| format!("{b:02X}")).collect(),
                    ('x', _) => format!("{:x}", as_i128(val) as u64),
                    ('X', _) => format!("{:X}", as_i128(val) as u64),
                    ('o', _) => format!("{:o}", as_i128(val) as u64),
                    ('c', _) => char::from_u32(as_i128(val) as u32)
                        .map(|c| strings.write(c.to_string().as_bytes()))
                        .unwrap_or_default(),
                    ('q', Value::Str(s)) => super::quote::quote(s),
                    // An error with %s prints its message, as Go's fmt does.
                    ('s', Value::Interface { tab: 0, .. }) => "<nil>".to_string(),
                    ('s', Value::Interface { text, type_name: Some(t), .. })
                        if ERROR_TYPES.contains(&t.as_str()) || t == "string" =>
                    {
                        strings.write(text)
                    }
                    ('p', _) => format!("{:#x}", as_i128(val) as u64),
                    _ => value_in(val, strings),
                };
                out.push_str(&format::pad(&v, s));
            }
        }
    }
    out
}

pub(crate) fn agg_scalar(v: &AggValue, durations: bool) -> String {
    let num = |n: i64| if durations { duration(n) } else { n.to_string() };
    match v {
        AggValue::Count(c) => c.to_string(),
        AggValue::Sum(s) => num(*s),
        AggValue::Avg { count, sum } => num(if *count == 0 { 0 } else { sum / *count as i64 }),
        AggValue::Min(m) | AggValue::Max(m) => m.map(num).unwrap_or_else(|| "-".into()),
        AggValue::Stats { count, sum, min, max } => {
            let avg = if *count == 0 { 0 } else { sum / *count as i64 };
            format!("count {count}, average {}, min {}, max {}, total {}", num(avg), num(*min), num(*max), num(*sum))
        }
        AggValue::Buckets { .. } => String::new(),
    }
}

/// The label of each bucket of a histogram, and its bounds as numbers.
pub fn bucket_bounds(agg: Agg, i: usize) -> (Option<i64>, Option<i64>) {
    match agg {
        Agg::Hist => {
            if i == 0 {
                (None, Some(1))
            } else {
                let lo = 1i64 << (i - 1);
                (Some(lo), lo.checked_mul(2))
            }
        }
        Agg::Lhist { lo, hi, step } => {
            let n = lhist_buckets(lo, hi, step) as usize;
            if i == 0 {
                (None, Some(lo))
            } else if i == n - 1 {
                (Some(hi), None)
            } else {
                // In 128 bits: the bounds of a range that spans all of int64 do not fit one.
                let l = i128::from(lo) + i128::from(step) * (i as i128 - 1);
                let h = (l + i128::from(step)).min(i128::from(hi));
                let fit = |v: i128| i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
                (Some(fit(l)), Some(fit(h)))
            }
        }
        _ => (None, None),
    }
}

fn bucket_label(agg: Agg, i: usize, durations: bool) -> String {
    let num = |n: i64| if durations { duration(n) } else { n.to_string() };
    match bucket_bounds(agg, i) {
        (None, Some(hi)) => format!("(..., {})", num(hi)),
        (Some(lo), None) => format!("[{}, ...)", num(lo)),
        (Some(lo), Some(hi)) => format!("[{}, {})", num(lo), num(hi)),
        (None, None) => String::new(),
    }
}

fn histogram(agg: Agg, buckets: &[u64], durations: bool, out: &mut String) {
    let first = buckets.iter().position(|c| *c != 0);
    let last = buckets.iter().rposition(|c| *c != 0);
    let (Some(first), Some(last)) = (first, last) else { return };
    let max = *buckets.iter().max().unwrap_or(&1).max(&1);
    let labels: Vec<String> = (first..=last).map(|i| bucket_label(agg, i, durations)).collect();
    let width = labels.iter().map(|l| l.len()).max().unwrap_or(0);
    for (label, i) in labels.iter().zip(first..=last) {
        let c = buckets[i];
        let bar = ((c as f64 / max as f64) * 52.0).round() as usize;
        out.push_str(&format!("{label:<width$} {c:>8} |{:<52}|\n", "@".repeat(bar)));
    }
}

/// The line under a `hist()`'s bars: `p50 4.19ms  p90 8.02ms  ...  max 16.8ms`.
fn percentiles(fine: &crate::hist::Fine, durations: bool) -> Option<String> {
    let num = |n: i64| if durations { duration(n) } else { n.to_string() };
    let mut parts = Vec::new();
    for (q, name) in crate::hist::PERCENTILES {
        parts.push(format!("{name} {}", num(fine.percentile(q)?)));
    }
    parts.push(format!("max {}", num(fine.max?)));
    Some(format!("{}\n", parts.join("  ")))
}

pub fn map(dump: &MapDump) -> String {
    let mut out = String::new();
    let mut entries: Vec<_> = dump.entries.iter().collect();
    entries.sort_by(|a, b| a.value.sort_key().cmp(&b.value.sort_key()).then_with(|| a.keys_text().cmp(&b.keys_text())));
    for e in entries {
        let head = if e.keys.is_empty() { dump.name.clone() } else { format!("{}[{}]", dump.name, e.keys_text()) };
        let partial = dump.partial.as_ref().map(|why| format!(" (partial: {why})")).unwrap_or_default();
        match (&e.value, dump.agg) {
            (AggValue::Buckets { counts: b, fine, .. }, Some(agg)) => {
                out.push_str(&format!("{head}:{partial}\n"));
                histogram(agg, b, dump.durations, &mut out);
                if let Some(line) = fine.as_deref().and_then(|f| percentiles(f, dump.durations)) {
                    out.push_str(&line);
                }
                out.push('\n');
            }
            (v, _) => out.push_str(&format!(
                "{head}: {}{partial}\n",
                e.plain.as_ref().map(shown).unwrap_or_else(|| agg_scalar(v, dump.durations))
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_units() {
        assert_eq!(duration(512), "512ns");
        assert_eq!(duration(20_100_000), "20.1ms");
        assert_eq!(duration(1_024), "1.02us");
        assert_eq!(duration(2_000_000_000), "2s");
        assert_eq!(duration(-1500), "-1.5us");
    }

    #[test]
    fn hist_buckets_are_powers_of_two() {
        assert_eq!(bucket_bounds(Agg::Hist, 0), (None, Some(1)));
        assert_eq!(bucket_bounds(Agg::Hist, 1), (Some(1), Some(2)));
        assert_eq!(bucket_bounds(Agg::Hist, 4), (Some(8), Some(16)));
    }

    #[test]
    fn lhist_buckets() {
        let a = Agg::Lhist { lo: 0, hi: 100, step: 10 };
        assert_eq!(bucket_bounds(a, 0), (None, Some(0)));
        assert_eq!(bucket_bounds(a, 1), (Some(0), Some(10)));
        assert_eq!(bucket_bounds(a, 11), (Some(100), None));
        // Bounds at the ends of int64 do not overflow.
        let edge = Agg::Lhist { lo: i64::MAX - 10, hi: i64::MAX, step: 8 };
        assert_eq!(crate::plan::lhist_buckets(i64::MAX - 10, i64::MAX, 8), 4);
        assert_eq!(bucket_bounds(edge, 2), (Some(i64::MAX - 2), Some(i64::MAX)));
        assert_eq!(crate::plan::lhist_buckets(i64::MIN + 1, i64::MAX, i64::MAX), 4);
        let all = Agg::Lhist { lo: -i64::MAX, hi: i64::MAX, step: 1 << 62 };
        assert_eq!(bucket_bounds(all, 3), (Some(1), Some((1 << 62) + 1)));
        assert_eq!(bucket_bounds(all, 4), (Some((1 << 62) + 1), Some(i64::MAX)));
    }

    #[test]
    fn traced_strings_are_escaped_and_the_format_is_not() {
        let evil = b"\x1b]0;pwned\x07\x1b[2J\nAttached 9 probes\r\xff".to_vec();
        let want = r"\x1b]0;pwned\a\x1b[2J\nAttached 9 probes\r\xff";
        let text = printf("path=%s|%-3v|%c\n", &[Value::Str(evil.clone()), Value::Str(b"\t".to_vec()), Value::Int(27)]);
        assert_eq!(text, format!("path={want}|\\t |\\x1b\n"));
        assert_eq!(labelled(&[Some("p".into())], &[Value::Str(evil.clone())]), format!("p={want}"));
        let error = Value::Interface {
            tab: 1,
            data: 2,
            word: 0,
            text: b"bad\x1b[31m\xff".to_vec(),
            type_name: Some("*errors.errorString".into()),
        };
        assert_eq!(printf("%s", &[error]), r"bad\x1b[31m\xff");
        // JSON encodes the exact bytes its own way.
        assert_eq!(printf_exact("%s\n", &[Value::Str(b"a\nb".to_vec())]), "a\nb\n");
        assert_eq!(value(&Value::Str(b"a\x1b".to_vec())), "a\u{1b}");
    }

    #[test]
    fn printf_verbs() {
        assert_eq!(
            printf(
                "%d %5s|%-3d|%x %v\n",
                &[Value::Int(-3), Value::Str(b"ab".to_vec()), Value::Uint(7), Value::Uint(255), Value::Duration(1500)]
            ),
            "-3    ab|7  |ff 1.5us\n"
        );
    }
}
