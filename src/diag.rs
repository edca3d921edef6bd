//! Errors are data: every phase reports `Diagnostic`s (user errors with a span and hints)
//! into `Diagnostics`; this module alone turns them into text with codespan-reporting.
//! System errors (`thiserror` enums of the other modules) are rendered here too, as a
//! one-line cause plus what to do.

use crate::syntax::ast::Span;
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor::Buffer};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One user-facing problem at one place in a script.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub span: Span,
    /// Text under the caret.
    pub label: String,
    /// Other places that explain the problem ("first defined here").
    pub related: Vec<(Span, String)>,
    /// Lines printed after the snippet: `hint: did you mean ...`.
    pub hints: Vec<String>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
            label: String::new(),
            related: Vec::new(),
            hints: Vec::new(),
        }
    }
    pub fn warning(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(span, message) }
    }
    pub fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hints.push(hint.into());
        self
    }
    /// `hint`, when there is one (an error type's own hint).
    pub fn hint_if(self, hint: Option<impl Into<String>>) -> Diagnostic {
        match hint {
            Some(h) => self.hint(h),
            None => self,
        }
    }
    pub fn related(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.related.push((span, label.into()));
        self
    }
}

/// The diagnostics of a run; a phase pushes into it, the driver stops between phases
/// when it holds an error.
#[derive(Default, Debug)]
pub struct Diagnostics {
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Adds `d`, unless the same problem (severity, place and message) is already there:
    /// a probe checked once per function of a wildcard says each thing once.
    pub fn push(&mut self, d: Diagnostic) {
        let same = |o: &Diagnostic| o.severity == d.severity && o.span == d.span && o.message == d.message;
        if !self.items.iter().any(same) {
            self.items.push(d);
        }
    }
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Diagnostics with the sources they point into: what a compile reports, ready to render.
#[derive(Default)]
pub struct Report {
    pub sources: Sources,
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity == Severity::Error)
    }
    pub fn render(&self, color: bool) -> String {
        render_with(&self.sources, &self.diagnostics, color)
    }
}

/// Why gtrace stopped early, ready to render: problems in the script, or a problem
/// outside it (a system error: a cause and what to do).
pub enum Failure {
    Script(Report),
    System { cause: String, hint: Option<String> },
}

impl Failure {
    /// A system error with its chain of causes (`cause: source: source`) and a hint.
    pub fn system(error: &dyn std::error::Error, hint: Option<&str>) -> Failure {
        let mut cause = error.to_string();
        let mut source = error.source();
        while let Some(s) = source {
            let text = s.to_string();
            if !cause.contains(&text) {
                cause.push_str(&format!(": {text}"));
            }
            source = s.source();
        }
        Failure::System { cause, hint: hint.map(str::to_string) }
    }

    /// A system error described in words.
    pub fn message(cause: impl Into<String>, hint: Option<&str>) -> Failure {
        Failure::System { cause: cause.into(), hint: hint.map(str::to_string) }
    }

    pub fn render(&self, color: bool) -> String {
        match self {
            Failure::Script(report) => report.render(color),
            Failure::System { cause, hint } => render_system(cause, hint.as_deref()),
        }
    }
}

impl From<Report> for Failure {
    fn from(report: Report) -> Failure {
        Failure::Script(report)
    }
}

/// The source files a run has read: the script and the libraries it uses.
/// `Span::file` indexes this table.
#[derive(Clone, Default)]
pub struct Sources {
    files: SimpleFiles<String, String>,
}

impl Sources {
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> u32 {
        self.files.add(name.into(), text.into()) as u32
    }
    /// Whether no file has been added.
    pub fn is_empty(&self) -> bool {
        self.files.get(0).is_err()
    }
    pub fn text(&self, file: u32) -> &str {
        self.files.get(file as usize).map(|f| f.source().as_str()).unwrap_or("")
    }
    pub fn name(&self, file: u32) -> &str {
        self.files.get(file as usize).map(|f| f.name().as_str()).unwrap_or("?")
    }
    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, file: u32, offset: u32) -> (usize, usize) {
        let text = self.text(file);
        let offset = (offset as usize).min(text.len());
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
        (line, col)
    }
    /// `FILE:LINE: the line's text`, for `--emit asm` comments and verifier errors.
    /// A line longer than `LINE_SHOWN` characters is cut there, with `…`.
    pub fn located_line(&self, span: Span) -> String {
        const LINE_SHOWN: usize = 100;
        let (line, _) = self.line_col(span.file, span.start);
        let text = self.line_text(span);
        let shown: String = text.chars().take(LINE_SHOWN).collect();
        let cut = if shown.len() < text.len() { "…" } else { "" };
        format!("{}:{}: {shown}{cut}", self.name(span.file), line)
    }

    /// The source line (trimmed) holding a span: used for `--emit asm` comments.
    pub fn line_text(&self, span: Span) -> &str {
        let text = self.text(span.file);
        let start = (span.start as usize).min(text.len());
        let line_start = text[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line_end = text[start..].find('\n').map(|i| start + i).unwrap_or(text.len());
        text[line_start..line_end].trim()
    }
}

/// Renders diagnostics as codespan-reporting does on a terminal, without colour.
pub fn render(sources: &Sources, diags: &[Diagnostic]) -> String {
    render_with(sources, diags, false)
}

pub fn render_with(sources: &Sources, diags: &[Diagnostic], color: bool) -> String {
    let config = term::Config::default();
    let mut buffer = if color { Buffer::ansi() } else { Buffer::no_color() };
    for d in diags {
        let cs = match d.severity {
            Severity::Error => CsDiagnostic::error(),
            Severity::Warning => CsDiagnostic::warning(),
        };
        let mut labels = vec![Label::primary(d.span.file as usize, d.span.start as usize..d.span.end as usize)
            .with_message(d.label.clone())];
        for (span, text) in &d.related {
            labels.push(
                Label::secondary(span.file as usize, span.start as usize..span.end as usize).with_message(text.clone()),
            );
        }
        let cs = cs
            .with_message(d.message.clone())
            .with_labels(labels)
            .with_notes(d.hints.iter().map(|h| format!("hint: {h}")).collect());
        // Rendering into memory cannot fail for spans inside the file; if one is out of
        // range we still print the message rather than lose it.
        if term::emit_to_write_style(&mut buffer, &config, &sources.files, &cs).is_err() {
            buffer_fallback(&mut buffer, d);
        }
    }
    String::from_utf8_lossy(buffer.as_slice()).into_owned()
}

fn buffer_fallback(buffer: &mut Buffer, d: &Diagnostic) {
    use std::io::Write;
    let _ = writeln!(buffer, "error: {}", d.message);
    for h in &d.hints {
        let _ = writeln!(buffer, "  = hint: {h}");
    }
}

/// A system error (a bad pid, missing privileges, a verifier rejection) as the user sees
/// it: `error: CAUSE` and, when there is one, `  hint: WHAT TO DO`.
pub fn render_system(cause: &str, hint: Option<&str>) -> String {
    let mut s = format!("error: {cause}\n");
    if let Some(h) = hint {
        s.push_str(&format!("  hint: {h}\n"));
    }
    s
}

/// Text the user wrote, echoed in a message or a hint: as it is up to 64 characters, its
/// first 40 and last 16 around `…` when longer. The source line under the message shows
/// it whole; a name of 300 characters is not printed three times.
pub fn echoed(text: &str) -> String {
    let n = text.chars().count();
    if n <= 64 {
        return text.to_string();
    }
    let head: String = text.chars().take(40).collect();
    let tail: String = text.chars().skip(n - 16).collect();
    format!("{head}…{tail}")
}

/// The closest names to `wanted` among `candidates`, best first, for "did you mean" hints.
/// A candidate is close when at most about half of it must change, or when one name holds
/// the other (a candidate held in `wanted` must be at least half of it: the empty name,
/// or `a`, is held in every name). Each distance is computed only up to that bound, so a
/// long name costs its length times the bound, not the product of every pair of lengths.
pub fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>, n: usize) -> Vec<&'a str> {
    let wanted_chars: Vec<char> = wanted.chars().collect();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter(|c| !c.is_empty())
        .filter_map(|c| {
            let bound = wanted.len().max(c.len()) / 2 + 1;
            let holds =
                (c.contains(wanted) && !wanted.is_empty()) || (wanted.contains(c) && 2 * c.len() >= wanted.len());
            match edit_distance_within(&wanted_chars, c, bound) {
                Some(d) => Some((d, c)),
                None if holds => Some((wanted.len().abs_diff(c.len()), c)),
                None => None,
            }
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

/// Levenshtein distance over chars.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    edit_distance_within(&a, b, usize::MAX).unwrap_or(usize::MAX)
}

/// The Levenshtein distance between `a` and `b` when it is at most `bound`, else None:
/// only the cells within `bound` of the diagonal are computed.
fn edit_distance_within(a: &[char], b: &str, bound: usize) -> Option<usize> {
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > bound {
        return None;
    }
    let far = bound.saturating_add(1);
    let mut prev: Vec<usize> = (0..=b.len()).map(|j| if j <= bound { j } else { far }).collect();
    let mut cur = vec![far; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        let row = i + 1;
        let lo = row.saturating_sub(bound).max(1);
        let hi = row.saturating_add(bound).min(b.len());
        // Cells outside the band are `far`: the one left of it, and the one right of it
        // that the next row reads.
        cur[0] = if row <= bound { row } else { far };
        cur[lo - 1] = if lo == 1 { cur[0] } else { far };
        let mut best = cur[0];
        for j in lo..=hi {
            let cost = usize::from(*ca != b[j - 1]);
            cur[j] = (prev[j - 1].saturating_add(cost))
                .min(prev[j].saturating_add(1))
                .min(cur[j - 1].saturating_add(1))
                .min(far);
            best = best.min(cur[j]);
        }
        if let Some(right) = cur.get_mut(hi + 1) {
            *right = far;
        }
        if best > bound {
            return None;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    Some(prev[b.len()]).filter(|d| *d <= bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_prefers_small_edits() {
        assert_eq!(closest("reqq", ["resp", "req", "ctx"], 1), vec!["req"]);
        assert!(!closest("reqq", ["resp", "req", "ctx"], 3).contains(&"ctx"));
    }

    #[test]
    fn closest_ignores_names_held_in_any_name() {
        let long = format!("main.{}", "A".repeat(300));
        assert_eq!(closest(&long, ["", "a", "A", "main"], 3), Vec::<&str>::new());
        assert_eq!(closest(&long[5..], ["", ".", "_rt0_amd64"], 3), Vec::<&str>::new());
        // A name that holds the wanted one, or one that is most of it, still comes.
        assert_eq!(closest("serve", ["net/http.(*conn).serve", "x"], 3), vec!["net/http.(*conn).serve"]);
        assert_eq!(closest("main.handleRequestNow", ["main.handleRequest"], 3), vec!["main.handleRequest"]);
    }

    #[test]
    fn long_echoes_are_cut_in_the_middle() {
        assert_eq!(echoed("main.doWork"), "main.doWork");
        let long = format!("main.{}x", "A".repeat(300));
        assert_eq!(echoed(&long), format!("main.{}…{}x", "A".repeat(35), "A".repeat(15)));
        assert_eq!(echoed(&"é".repeat(65)).chars().count(), 57);
    }

    #[test]
    fn bounded_distance_agrees_with_the_full_one() {
        let words = ["", "a", "ab", "ba", "abc", "kitten", "sitting", "main.doWork", "main.doWrk", "µs", "ms"];
        for a in words {
            for b in words {
                let full = edit_distance(a, b);
                let chars: Vec<char> = a.chars().collect();
                for bound in 0..12 {
                    let within = edit_distance_within(&chars, b, bound);
                    assert_eq!(within, (full <= bound).then_some(full), "{a:?} {b:?} within {bound}");
                }
            }
        }
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_huge_unknown_name_is_compared_quickly() {
        // 20,000 characters against 20,000 candidates of 1,000: the full distance would
        // take 4*10^11 steps; the bounded one refuses each by its length at once.
        let long = "x".repeat(20_000);
        let names: Vec<String> = (0..20_000).map(|i| format!("pkg{i}.{}", "y".repeat(1_000))).collect();
        assert!(closest(&long, names.iter().map(String::as_str), 3).is_empty());
        let near = format!("{}z", "x".repeat(1_999));
        assert_eq!(closest(&long[..2_000], [near.as_str(), "main.main"], 3), vec![near.as_str()]);
    }

    #[test]
    fn line_col_is_one_based() {
        let mut s = Sources::default();
        let f = s.add("x.gt", "ab\ncd");
        assert_eq!(s.line_col(f, 4), (2, 2));
    }
}
