//! Go's quoting of strings (`strconv.Quote`, what `%q` prints): printable characters as
//! they are; `\a \b \f \n \r \t \v`, `\\` and `\"`; other control characters and each
//! byte that is not UTF-8 as `\xNN`; other non-printable characters as `\uNNNN` or
//! `\UNNNNNNNN`. Printable is Go's `unicode.IsPrint`: a letter, mark, number,
//! punctuation or symbol, or the ASCII space.
//!
//! The same escapes, without the quotes and without escaping `"`, are how text output
//! prints every string a traced program gives (`@paths[/a\nb]`), so that no byte it sends
//! can break a line of output or reach the terminal as a control sequence.

use unicode_general_category::{get_general_category, GeneralCategory as C};

/// How text output writes a string the traced program gave: escaped where it reaches a
/// terminal (text output), exact where a format of its own encodes it (JSON, metric
/// labels), bytes that are not UTF-8 as U+FFFD there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strings {
    Escaped,
    Exact,
}

impl Strings {
    pub fn write(self, bytes: &[u8]) -> String {
        match self {
            Strings::Escaped => escape(bytes),
            Strings::Exact => String::from_utf8_lossy(bytes).into_owned(),
        }
    }
}

/// `bytes` as Go's `strconv.Quote` writes it, quotes included.
pub fn quote(bytes: &[u8]) -> String {
    format!("\"{}\"", escaped(bytes, true))
}

/// `bytes` with Go's escapes but no quotes, `"` as itself: for keys and values printed
/// inside a line.
pub fn escape(bytes: &[u8]) -> String {
    escaped(bytes, false)
}

fn escaped(mut bytes: &[u8], quoted: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    while !bytes.is_empty() {
        let (valid, rest) = match std::str::from_utf8(bytes) {
            Ok(s) => (s, &[][..]),
            Err(e) => {
                let (v, r) = bytes.split_at(e.valid_up_to());
                // SAFETY-free: `v` is exactly the valid prefix.
                (std::str::from_utf8(v).unwrap_or_default(), r)
            }
        };
        for c in valid.chars() {
            push_char(&mut out, c, quoted);
        }
        match rest.split_first() {
            Some((bad, after)) => {
                out.push_str(&format!("\\x{bad:02x}"));
                bytes = after;
            }
            None => bytes = rest,
        }
    }
    out
}

fn push_char(out: &mut String, c: char, quoted: bool) {
    match c {
        '"' if quoted => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if is_print(c) => out.push(c),
        c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push_str(&format!("\\U{:08x}", c as u32)),
    }
}

/// Go's `unicode.IsPrint`.
pub fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !matches!(
        get_general_category(c),
        C::Control
            | C::Format
            | C::Surrogate
            | C::PrivateUse
            | C::Unassigned
            | C::SpaceSeparator
            | C::LineSeparator
            | C::ParagraphSeparator
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_go_strconv_quote() {
        // Each pair is Go's own output: fmt.Printf("%q", s).
        let cases: &[(&[u8], &str)] = &[
            (b"hello", r#""hello""#),
            (b"a\"b\\c", r#""a\"b\\c""#),
            (b"\x07\x08\x0c\n\r\t\x0b", r#""\a\b\f\n\r\t\v""#),
            (b"\x00\x1b[31m\x7f", r#""\x00\x1b[31m\x7f""#),
            (b"\xff\xfeok", r#""\xff\xfeok""#),
            ("héllo, 世界 🙂".as_bytes(), "\"héllo, 世界 🙂\""),
            ("\u{a0}\u{200b}\u{2028}\u{feff}".as_bytes(), r#""\u00a0\u200b\u2028\ufeff""#),
            ("\u{e000}\u{10ffff}".as_bytes(), r#""\ue000\U0010ffff""#),
            ("\u{fffd}".as_bytes(), "\"\u{fffd}\""),
            (b"\xe4\xb8", r#""\xe4\xb8""#), // a cut multi-byte character
        ];
        for (bytes, want) in cases {
            assert_eq!(quote(bytes), *want, "{bytes:x?}");
        }
    }

    #[test]
    fn escape_keeps_a_key_on_one_line_without_quotes() {
        assert_eq!(escape(b"/a\nb"), r"/a\nb");
        assert_eq!(escape(b"say \"hi\""), r#"say "hi""#);
        assert_eq!(escape(b"\x1b]0;pwned\x07"), r"\x1b]0;pwned\a");
        assert_eq!(escape(b"nul\x00"), r"nul\x00");
        assert_eq!(escape(b"C:\\dir"), r"C:\\dir");
    }
}
