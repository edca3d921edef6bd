//! How gtrace writes numbers for people: thousands separated, percentages with the
//! digits that matter, a time since the start, a long name cut in its middle.

/// `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A percentage with the digits that matter: `73`, `4.2`, `0.31`, `0.004`.
pub fn percent(p: f64) -> String {
    let s = if p >= 10.0 {
        format!("{p:.0}")
    } else if p >= 1.0 {
        format!("{p:.1}")
    } else if p >= 0.01 || p == 0.0 {
        format!("{p:.2}")
    } else {
        format!("{p:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

pub fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A time since the start as `0.2s` or `1m3s`: what a reader of a map needs.
pub fn duration_rounded(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{}s", (s / 60.0) as u64, (s % 60.0) as u64)
    }
}

/// `text` cut to `max` characters by replacing its middle with `...`.
pub fn elide(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let keep = max - 3;
    let head: String = text.chars().take(keep / 2).collect();
    let tail: String = text.chars().skip(n - (keep - keep / 2)).collect();
    format!("{head}...{tail}")
}
