//! The standard library: the `.gt` files of stdlib/, embedded in the binary so that an
//! installed gtrace finds them anywhere. Each file starts with `#` comment lines that
//! document it; the first is its one-line summary.

/// Every stdlib library: its name (what `use "NAME"` and `gtrace NAME` take) and text.
pub const LIBRARIES: &[(&str, &str)] = &[
    ("gc", include_str!("../../stdlib/gc.gt")),
    ("http", include_str!("../../stdlib/http.gt")),
    ("httpclient", include_str!("../../stdlib/httpclient.gt")),
    ("lock", include_str!("../../stdlib/lock.gt")),
    ("offcpu", include_str!("../../stdlib/offcpu.gt")),
    ("sched", include_str!("../../stdlib/sched.gt")),
    ("sql", include_str!("../../stdlib/sql.gt")),
];

/// The text of the stdlib library `name`.
pub fn get(name: &str) -> Option<&'static str> {
    LIBRARIES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// The names of every stdlib library, for "did you mean" hints.
pub fn names() -> impl Iterator<Item = &'static str> {
    LIBRARIES.iter().map(|(n, _)| *n)
}

/// A library's first comment line, without the `#`: what it is for.
pub fn summary(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix('#').or_else(|| l.strip_prefix("//")))
        .map(str::trim)
        .unwrap_or("")
}

/// `--list-libraries`: a line per stdlib library, with its summary.
pub fn listing() -> String {
    let width = names().map(str::len).max().unwrap_or(0);
    LIBRARIES.iter().map(|(name, text)| format!("{name:width$}  {}\n", summary(text))).collect()
}
