//! Literals: integers (`1_000`, `0x1f`), durations (`250ns` … `2s`) and string escapes.

use super::{Cx, Rule};
use crate::diag::Diagnostic;
use crate::syntax::ast::*;
use pest::iterators::Pair;

impl Cx<'_> {
    /// Reads an integer or a duration; reports what is wrong with anything else.
    pub(super) fn number(&mut self, text: &str, span: Span) -> Option<Number> {
        match read_number(text) {
            Ok(n) => Some(n),
            Err(e) => {
                let d = match e {
                    NumberError::Overflow => Diagnostic::error(span, "integer too large")
                        .label("does not fit in 64 bits")
                        .hint("the largest integer is 18446744073709551615 (0xffff_ffff_ffff_ffff)"),
                    NumberError::DurationOverflow => Diagnostic::error(span, "duration too long")
                        .label("more than 2^64 nanoseconds (about 584 years)"),
                    NumberError::Fraction => Diagnostic::error(span, "a duration cannot have a fraction")
                        .label("not a whole number of units")
                        .hint("use a smaller unit: `1500ms` rather than `1.5s`"),
                    NumberError::Underscore => Diagnostic::error(span, "misplaced `_` in a number")
                        .label("`_` may only stand between digits")
                        .hint("write `1_000`"),
                    NumberError::Octal => Diagnostic::error(span, "a number cannot start with `0`")
                        .label("Go would read this as octal")
                        .hint("write it in decimal, or in hex as `0x...`"),
                    NumberError::BadDigit => Diagnostic::error(span, format!("invalid number `{text}`"))
                        .label("not a number")
                        .hint("integers are `123`, `1_000` or `0x1f`"),
                    NumberError::Unit(unit) => Diagnostic::error(span, format!("unknown duration unit `{unit}`"))
                        .label("not a unit")
                        .hint("units are ns, us, ms, s, m and h"),
                };
                self.diags.push(d);
                None
            }
        }
    }

    /// Decodes a string literal's escapes; `p` is the `string` pair.
    pub(super) fn string(&mut self, p: Pair<Rule>) -> String {
        let Some(body) = p.into_inner().next() else { return String::new() };
        let base = body.as_span().start();
        let raw = body.as_str();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((_, e)) = chars.next() else { break };
            let simple = match e {
                'n' => Some('\n'),
                't' => Some('\t'),
                'r' => Some('\r'),
                '\\' => Some('\\'),
                '"' => Some('"'),
                '\'' => Some('\''),
                'a' => Some('\x07'),
                'b' => Some('\x08'),
                'f' => Some('\x0c'),
                'v' => Some('\x0b'),
                '0' => Some('\0'),
                _ => None,
            };
            if let Some(s) = simple {
                out.push(s);
                continue;
            }
            let digits = match e {
                'x' => 2,
                'u' => 4,
                'U' => 8,
                _ => 0,
            };
            let mut value: u32 = 0;
            let mut ok = digits > 0;
            let mut end = i + 1 + e.len_utf8();
            for _ in 0..digits {
                match chars.peek().and_then(|(_, d)| d.to_digit(16)) {
                    Some(d) => {
                        value = value * 16 + d;
                        end += 1;
                        chars.next();
                    }
                    None => ok = false,
                }
            }
            let span = Span::new(self.file, base + i, base + end);
            let decoded = if ok { char::from_u32(value) } else { None };
            match decoded {
                Some(ch) if e != 'x' || value < 0x80 => out.push(ch),
                Some(_) => self.diags.push(
                    Diagnostic::error(span, "byte escapes above `\\x7f` are not supported")
                        .label("not a character on its own")
                        .hint("write the character itself, or `\\u` and its code point"),
                ),
                None => self.diags.push(
                    Diagnostic::error(span, format!("invalid escape `{}`", &raw[i..end.min(raw.len())]))
                        .label("unknown escape")
                        .hint("escapes are \\n \\t \\r \\\\ \\\" \\xHH \\uHHHH"),
                ),
            }
        }
        out
    }
}

#[derive(Debug, PartialEq)]
pub(super) enum Number {
    Int(u64),
    Duration(u64),
    /// A float literal's text without `_`.
    Float(String),
}

#[derive(Debug, PartialEq)]
enum NumberError {
    Overflow,
    DurationOverflow,
    Fraction,
    Underscore,
    Octal,
    BadDigit,
    Unit(String),
}

/// `123`, `1_000`, `0x1f`, or a duration `250ns`, `1_500us`, `3ms`, `2s`, `1m`, `1h`.
fn read_number(text: &str) -> Result<Number, NumberError> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return digits(hex, 16).map(Number::Int);
    }
    if let Some(float) = read_float(text)? {
        return Ok(Number::Float(float));
    }
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '_')).unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let value = digits(num, 10)?;
    if num.len() > 1 && num.starts_with('0') {
        return Err(NumberError::Octal);
    }
    let scale: u64 = match unit {
        "" => return Ok(Number::Int(value)),
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other if other.starts_with('_') => return Err(NumberError::Underscore),
        other if other.chars().all(|c| c.is_ascii_alphanumeric()) && other.chars().any(|c| c.is_ascii_digit()) => {
            return Err(NumberError::BadDigit)
        }
        other => return Err(NumberError::Unit(other.to_string())),
    };
    value.checked_mul(scale).map(Number::Duration).ok_or(NumberError::DurationOverflow)
}

/// A decimal float literal as Go writes one: `1.5`, `1_000.25`, `2e-3`, `1E+9` (digits,
/// an optional fraction, an optional exponent). `None` when `text` has neither a fraction
/// nor an exponent (an integer or a duration); an error when a unit follows (`1.5s`).
fn read_float(text: &str) -> Result<Option<String>, NumberError> {
    let b = text.as_bytes();
    let run = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit() || **c == b'_').count();
    let int_end = run(0);
    let mut end = int_end;
    let mut groups = vec![&text[..int_end]];
    let mut float = false;
    if b.get(end) == Some(&b'.') {
        let frac_end = run(end + 1);
        groups.push(&text[end + 1..frac_end]);
        end = frac_end;
        float = true;
    }
    if matches!(b.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(end + 1), Some(b'+' | b'-')));
        if b.get(end + 1 + sign).is_some_and(|c| c.is_ascii_digit()) {
            let exp_end = run(end + 1 + sign);
            groups.push(&text[end + 1 + sign..exp_end]);
            end = exp_end;
            float = true;
        }
    }
    if !float {
        return Ok(None);
    }
    if end < text.len() {
        let rest = &text[end..];
        return Err(if rest.chars().all(|c| c.is_alphabetic()) {
            NumberError::Fraction
        } else {
            NumberError::BadDigit
        });
    }
    for g in groups {
        if g.is_empty() {
            return Err(NumberError::BadDigit);
        }
        if g.starts_with('_') || g.ends_with('_') || g.contains("__") {
            return Err(NumberError::Underscore);
        }
    }
    Ok(Some(text.replace('_', "")))
}

/// Digits in `radix` with `_` allowed only between digits.
fn digits(text: &str, radix: u32) -> Result<u64, NumberError> {
    if text.is_empty() {
        return Err(NumberError::BadDigit);
    }
    if text.starts_with('_') || text.ends_with('_') || text.contains("__") {
        return Err(NumberError::Underscore);
    }
    let mut value: u64 = 0;
    for c in text.chars().filter(|c| *c != '_') {
        let d = c.to_digit(radix).ok_or(NumberError::BadDigit)?;
        value = value.checked_mul(radix as u64).and_then(|v| v.checked_add(d as u64)).ok_or(NumberError::Overflow)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(read_number("1_000"), Ok(Number::Int(1000)));
        assert_eq!(read_number("0x1f"), Ok(Number::Int(31)));
        assert_eq!(read_number("1_500us"), Ok(Number::Duration(1_500_000)));
        assert_eq!(read_number("1m"), Ok(Number::Duration(60_000_000_000)));
        assert_eq!(read_number("18446744073709551616"), Err(NumberError::Overflow));
        assert_eq!(read_number("1__0"), Err(NumberError::Underscore));
        assert_eq!(read_number("1.5s"), Err(NumberError::Fraction));
        assert_eq!(read_number("3sec"), Err(NumberError::Unit("sec".into())));
        assert_eq!(read_number("0755"), Err(NumberError::Octal));
        assert_eq!(read_number("0"), Ok(Number::Int(0)));
        assert_eq!(read_number("1.5"), Ok(Number::Float("1.5".into())));
        assert_eq!(read_number("1_000.2_5"), Ok(Number::Float("1000.25".into())));
        assert_eq!(read_number("2e-3"), Ok(Number::Float("2e-3".into())));
        assert_eq!(read_number("1E+9"), Ok(Number::Float("1E+9".into())));
        assert_eq!(read_number("0.5"), Ok(Number::Float("0.5".into())));
        assert_eq!(read_number("1e3ms"), Err(NumberError::Fraction));
        assert_eq!(read_number("1._5"), Err(NumberError::Underscore));
        assert_eq!(read_number("1.5x2"), Err(NumberError::BadDigit));
    }
}
