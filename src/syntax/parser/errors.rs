//! Syntax errors in words: pest's error turned into a diagnostic with the offending token
//! underlined and the expected tokens grouped as a user thinks of them.

use super::prescan::Scan;
use super::Rule;
use crate::diag::Diagnostic;
use crate::syntax::ast::Span;
use pest::error::{ErrorVariant, InputLocation};

/// Turns pest's error into a diagnostic: the offending token underlined, and pest's
/// expected-token list said in words.
pub(super) fn syntax_error(e: &pest::error::Error<Rule>, text: &str, file: u32, scan: &Scan) -> Diagnostic {
    let pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    }
    .min(text.len());
    let (found, end) = found_token(text, pos);
    let span = Span::new(file, pos, end);
    let positives: Vec<Rule> = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => positives.clone(),
        ErrorVariant::CustomError { message } => {
            // pest's own guards: "stack limit reached", "call limit reached".
            return Diagnostic::error(span, "the script is nested too deeply to parse")
                .label(message.clone())
                .hint("split deep expressions with `:=` variables");
        }
    };
    let tokens: Vec<String> = e
        .parse_attempts()
        .map(|a| {
            a.expected_tokens()
                .into_iter()
                .map(|t| t.to_string())
                // Only literal tokens: not `BUILTIN_RULE` nor a range such as `0..9`.
                .filter(|t| t != "BUILTIN_RULE" && !(t.chars().count() == 4 && t.get(1..3) == Some("..")))
                .collect()
        })
        .unwrap_or_default();
    let expected = expected_words(&positives, &tokens);
    let mut d = Diagnostic::error(span, format!("unexpected {found}"));
    if !expected.is_empty() {
        d = d.label(format!("expected {}", join_or(&expected)));
    }
    let at_end = text[pos..].trim().is_empty() || found == "end of input";
    if at_end {
        if let Some((c, at)) = scan.unclosed.last() {
            let close = match c {
                '(' => ')',
                '[' => ']',
                _ => '}',
            };
            d = d.related(Span::new(file, *at, at + 1), format!("this `{c}` is never closed"));
            d = d.hint(format!("add the missing `{close}`"));
        }
    }
    if found == "`=`" && tokens.iter().any(|t| t == "==") {
        d = d.hint("declare a variable with `:=`; only `self.NAME` and `@MAP[...]` are assigned with `=`");
    }
    if positives.contains(&Rule::head_bare) {
        d = d.hint("a probe is `on entry main.F { ... }`, `on return main.F { ... }`, `on panic main.F { ... }`, `on line \"main.go:42\" { ... }`, `on begin { ... }`, `on end { ... }` or `on interval 1s { ... }`");
    }
    if found == "`>`" && tokens.iter().any(|t| t == "on") {
        d = d.hint("this `>` closes nothing: the one-line block `< ... >` ended at an earlier `>`");
    }
    d
}

/// The token at `pos` as the user sees it, and where it ends.
fn found_token(text: &str, pos: usize) -> (String, usize) {
    let rest = &text[pos..];
    let Some(c) = rest.chars().next() else {
        return ("end of input".to_string(), pos);
    };
    if c == '\n' || c == '\r' {
        return ("new line".to_string(), pos);
    }
    if c.is_alphanumeric() || c == '_' {
        let n = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let word = &rest[..n];
        let what = if c.is_ascii_digit() { "number" } else { "" };
        let shown = if what.is_empty() { format!("`{word}`") } else { format!("{what} `{word}`") };
        return (shown, pos + n);
    }
    if c == '"' {
        let n = rest[1..].find('"').map(|n| n + 2).unwrap_or(rest.len());
        return ("string".to_string(), pos + n);
    }
    for op in [":=", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>"] {
        if rest.starts_with(op) {
            return (format!("`{op}`"), pos + 2);
        }
    }
    (format!("`{c}`"), pos + c.len_utf8())
}

const OPERATORS: &[&str] =
    &["!=", "%", "&", "&&", "*", "+", "-", "/", "<", "<<", "<=", "==", ">", ">=", ">>", "^", "|", "||"];
const EXPR_START: &[&str] = &["!", "\"", "(", "*", "-", "@", "_", "false", "self", "true", "if"];
const LAYOUT: &[&str] = &["\t", " ", "#", "//", "\u{feff}"];
const NEWLINES: &[&str] = &["\n", "\r\n", "\r"];

/// pest's expected rules and tokens, grouped into the words a user thinks in.
fn expected_words(positives: &[Rule], tokens: &[String]) -> Vec<String> {
    let x = Expected::of(positives, tokens);
    let mut words: Vec<String> = Vec::new();
    let mut push = |w: String| {
        if !words.contains(&w) {
            words.push(w)
        }
    };
    x.structure(&mut push);
    x.rule_words(&mut push);
    for t in tokens {
        if !x.said_otherwise(t) {
            push(format!("`{t}`"));
        }
    }
    x.ending(&mut push);
    words
}

/// What pest expected at an error, and what kind of place that makes it.
struct Expected<'a> {
    positives: &'a [Rule],
    tokens: &'a [String],
    top_level: bool,
    statement: bool,
    expression: bool,
    operator: bool,
    probe_head: bool,
}

impl<'a> Expected<'a> {
    fn of(positives: &'a [Rule], tokens: &'a [String]) -> Self {
        let has = |t: &str| tokens.iter().any(|x| x == t);
        let is_infix = |r: &Rule| {
            use Rule::*;
            matches!(
                r,
                or | and | eq | ne | shl | shr | le | ge | lt | gt | add | sub | bor | bxor | mul | div | rem | band
            )
        };
        let statement = has("@") && has("if");
        Expected {
            positives,
            tokens,
            top_level: has("on") && has("fn") && has("use"),
            statement,
            expression: has("@") && !statement,
            operator: positives.iter().any(is_infix),
            probe_head: positives.contains(&Rule::head_bare),
        }
    }

    fn has(&self, t: &str) -> bool {
        self.tokens.iter().any(|x| x == t)
    }

    /// Closers and structural tokens first (they are usually what is missing), then the
    /// kind of place: a top-level item, a probe's head, a statement, an expression.
    fn structure(&self, push: &mut impl FnMut(String)) {
        for t in ["}", ")", "]"] {
            if self.has(t) {
                push(format!("`{t}`"));
            }
        }
        if self.positives.contains(&Rule::angle_close) {
            push("`>`".to_string());
        }
        if self.top_level {
            for kw in ["`on`", "`fn`", "`use`", "`param`"] {
                push(kw.to_string());
            }
        }
        if self.probe_head {
            push("`entry`, `return`, `line`, `panic`, `begin`, `end`, `interval` or a function name".to_string());
        }
        if self.statement {
            push("a statement".to_string());
        }
        if self.expression {
            push("an expression".to_string());
        }
    }

    /// The rules that name a thing: a duration, a name, a string, a block.
    fn rule_words(&self, push: &mut impl FnMut(String)) {
        for r in self.positives {
            let w = match r {
                Rule::number => "a duration such as `1s`",
                Rule::decl_name if !self.statement => "a name",
                Rule::field_name => "a field name or a type assertion `(*T)`",
                Rule::string | Rule::sym_quoted => "a string",
                Rule::sym_bare => "a function name",
                Rule::brace_block if !self.has("<") => "a block `{ ... }`",
                _ => continue,
            };
            push(w.to_string());
        }
    }

    /// Whether the token `t` goes without saying: layout, or covered by a word already
    /// pushed (a statement, an operator, the first character of a string or a name).
    fn said_otherwise(&self, t: &str) -> bool {
        let positives = self.positives;
        LAYOUT.contains(&t)
            || NEWLINES.contains(&t)
            || (self.top_level && (t == ";" || t == "on" || t == "fn" || t == "use" || t == "param"))
            || (self.probe_head
                && matches!(t, "\"" | "*" | "entry" | "return" | "line" | "panic" | "begin" | "end" | "interval"))
            || ((self.statement || self.expression) && (EXPR_START.contains(&t) || t == ";"))
            || (self.operator && (OPERATORS.contains(&t) || t == "." || t == "["))
            || matches!(t, "}" | ")" | "]")
            // The first character of something already named in words.
            || (t == "\"" && positives.iter().any(|r| matches!(r, Rule::string | Rule::sym_quoted)))
            || (t == "(" && positives.contains(&Rule::field_name))
            || (matches!(t, "_" | "*")
                && positives.iter().any(|r| matches!(r, Rule::field_name | Rule::decl_name | Rule::sym_bare)))
            || (t == "{" && positives.contains(&Rule::brace_block) && !self.has("<"))
    }

    /// A new line is worth mentioning where it ends something, not where one may be
    /// skipped; an operator last.
    fn ending(&self, push: &mut impl FnMut(String)) {
        let newline = self.tokens.iter().any(|t| NEWLINES.contains(&t.as_str())) && self.has(";");
        if newline && !self.top_level && !self.statement && !self.expression {
            push("a new line".to_string());
        }
        if self.operator {
            push("an operator".to_string());
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
fn join_or(words: &[String]) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_words() {
        let w = |v: &[&str]| join_or(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["a"]), "a");
        assert_eq!(w(&["a", "b", "c"]), "a, b or c");
    }
}
