//! printf format strings: parsed once by the checker (to type the arguments) and again by
//! the output (to render them). Verbs as in Go's fmt: %d %x %X %o %s %q %v %t %c %p %u, %%;
//! flags `-`, `0`, `+`, ` `, a width and a precision, each at most `MAX_WIDTH`.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Verb(Verb),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verb {
    pub flags: String,
    pub width: Option<usize>,
    /// `%.2f`: digits after the point (significant digits for %g).
    pub precision: Option<usize>,
    pub verb: char,
    /// Byte offset of the `%` in the format string, for diagnostics.
    pub at: usize,
}

pub const VERBS: &str = "dixXosqvtcpueEfFgG";

/// The largest width or precision a verb may ask for: a line of output stays a line
/// (`%999999999d` would write a gigabyte per event).
pub const MAX_WIDTH: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// Byte offsets in the format string of what is wrong: from the verb's `%` to the end
    /// of what was read of it.
    pub at: usize,
    pub end: usize,
    pub message: String,
}

pub fn parse(format: &str) -> Result<Vec<Piece>, FormatError> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = format.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if let Some((_, '%')) = chars.peek() {
            chars.next();
            text.push('%');
            continue;
        }
        let mut flags = String::new();
        while let Some(&(_, f)) = chars.peek() {
            if "-0+ #".contains(f) {
                flags.push(f);
                chars.next();
            } else {
                break;
            }
        }
        let width = digits(&mut chars);
        let mut precision = None;
        if let Some((_, '.')) = chars.peek() {
            chars.next();
            // `%.f` is precision 0, as in Go.
            precision = Some(digits(&mut chars));
        }
        let (end, verb) = match chars.next() {
            Some((i, v)) if VERBS.contains(v) => (i + v.len_utf8(), v),
            Some((i, v)) => {
                return Err(FormatError {
                    at,
                    end: i + v.len_utf8(),
                    message: format!("unknown verb `%{v}`; use one of %d %x %s %q %v %t %c %p %u %e %f %g"),
                })
            }
            None => {
                return Err(FormatError {
                    at,
                    end: format.len(),
                    message: "format ends in the middle of a verb".into(),
                })
            }
        };
        let bounded = |what: &str, digits: &str| match digits.parse::<usize>() {
            Ok(n) if n <= MAX_WIDTH => Ok(n),
            _ => Err(FormatError {
                at,
                end,
                message: format!(
                    "the {what} {digits} of `{}` is more than gtrace prints: at most {MAX_WIDTH}",
                    &format[at..end]
                ),
            }),
        };
        let width = if width.is_empty() { None } else { Some(bounded("width", &width)?) };
        let precision = match precision {
            Some(p) if p.is_empty() => Some(0),
            Some(p) => Some(bounded("precision", &p)?),
            None => None,
        };
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Verb(Verb { flags, width, precision, verb, at }));
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// The decimal digits that come next.
fn digits(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> String {
    let mut out = String::new();
    while let Some(&(_, d)) = chars.peek() {
        if !d.is_ascii_digit() {
            break;
        }
        out.push(d);
        chars.next();
    }
    out
}

/// Pads `s` to the verb's width (right-aligned unless the `-` flag, zeros with `0`).
pub fn pad(v: &Verb, s: String) -> String {
    let Some(w) = v.width else { return s };
    let n = s.chars().count();
    if n >= w {
        return s;
    }
    let fill = w - n;
    if v.flags.contains('-') {
        format!("{s}{}", " ".repeat(fill))
    } else if v.flags.contains('0')
        && !matches!(v.verb, 's' | 'q' | 'v' | 't')
        && !s.ends_with("Inf")
        && !s.ends_with("NaN")
    {
        // The sign goes before the zeros; NaN and the infinities are padded with spaces.
        match s.strip_prefix(['-', '+', ' ']) {
            Some(rest) => format!("{}{}{rest}", &s[..1], "0".repeat(fill)),
            None => format!("{}{s}", "0".repeat(fill)),
        }
    } else {
        format!("{}{s}", " ".repeat(fill))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_and_text() {
        let p = parse("n=%d %-5s 100%%\n").unwrap();
        assert_eq!(p.len(), 5);
        assert_eq!(p[0], Piece::Text("n=".into()));
        assert!(matches!(&p[3], Piece::Verb(v) if v.verb == 's' && v.width == Some(5) && v.flags == "-"));
        assert_eq!(p[4], Piece::Text(" 100%\n".into()));
    }

    #[test]
    fn bad_verb_is_an_error() {
        assert_eq!(parse("x %y").unwrap_err().at, 2);
        assert!(parse("%").is_err());
    }

    #[test]
    fn widths_and_precisions_are_bounded() {
        let p = parse("%1024d %.1024f").unwrap();
        assert!(matches!(&p[0], Piece::Verb(v) if v.width == Some(MAX_WIDTH)));
        assert!(matches!(&p[2], Piece::Verb(v) if v.precision == Some(MAX_WIDTH)));
        // Past the bound, past usize, past u64: an error at the verb, never a wrap or a 0.
        for (f, what) in [
            ("x %1025d", "width 1025 of `%1025d`"),
            ("x %18446744073709551615d", "width 18446744073709551615 of `%18446744073709551615d`"),
            ("x %-099999999999999999999999s", "width 99999999999999999999999 of"),
            ("x %.9999999999999f", "precision 9999999999999 of `%.9999999999999f`"),
        ] {
            let e = parse(f).unwrap_err();
            assert_eq!((e.at, e.end), (2, f.len()), "{f}");
            assert!(e.message.contains(what), "{f}: {}", e.message);
            assert!(e.message.contains("at most 1024"), "{f}: {}", e.message);
        }
    }

    #[test]
    fn padding() {
        let v = Verb { flags: "0".into(), width: Some(5), precision: None, verb: 'd', at: 0 };
        assert_eq!(pad(&v, "-42".into()), "-0042");
    }
}
