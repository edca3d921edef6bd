//! printf format strings: parsed once by the checker (to type the arguments) and again by
//! the output (to render them). Verbs as in Go's fmt: %d %x %X %o %s %q %v %t %c %p %u, %%;
//! flags `-`, `0`, `+`, ` ` and a width.

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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    pub at: usize,
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
            precision = Some(digits(&mut chars).parse().unwrap_or(0));
        }
        let verb = match chars.next() {
            Some((_, v)) if VERBS.contains(v) => v,
            Some((_, v)) => {
                return Err(FormatError {
                    at,
                    message: format!("unknown verb `%{v}`; use one of %d %x %s %q %v %t %c %p %u %e %f %g"),
                })
            }
            None => return Err(FormatError { at, message: "format ends in the middle of a verb".into() }),
        };
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        let width = if width.is_empty() { None } else { width.parse().ok() };
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
    fn padding() {
        let v = Verb { flags: "0".into(), width: Some(5), precision: None, verb: 'd', at: 0 };
        assert_eq!(pad(&v, "-42".into()), "-0042");
    }
}
