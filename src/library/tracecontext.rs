//! stdlib/tracecontext.gt: the probes that read the program's own trace context, added
//! to a script that calls `span()` (each probe whose function the target has), so that
//! its spans join the traces the program already takes part in (docs/language.md,
//! "Spans"). They are parsed as a file of their own (diagnostics point into it), with
//! ExprIds after the script's.

use crate::diag::{Diagnostic, Sources};
use crate::syntax::ast::{ExprKind, Item, ProbeKind, Script, Span};
use crate::syntax::parser;

/// The file's name in diagnostics, and its text.
pub const NAME: &str = "<stdlib>/tracecontext.gt";
pub const TEXT: &str = include_str!("../../stdlib/tracecontext.gt");

/// The first `span()` call of `script` that makes a span of its call (not one `start:`
/// ends, whose parent is not looked for), if it makes such spans.
pub fn first_span(script: &Script) -> Option<Span> {
    let mut found = None;
    for item in &script.items {
        if let Item::Probe(p) = item {
            p.body.walk_exprs(&mut |e| {
                if matches!(&e.kind, ExprKind::Call { func, names, .. }
                    if func.name == "span" && !crate::check::spans_from_start(names))
                {
                    found = found.or(Some(e.span));
                }
            });
        }
    }
    found
}

/// What `compile` says when the added probes cannot be compiled for this binary (they
/// are then left out): at the script's first `span()`.
pub fn left_out(at: Span, why: &str) -> Diagnostic {
    Diagnostic::warning(at, format!("the program's own trace context cannot be read in this binary ({why})"))
        .label("spans start traces of their own")
        .hint("docs/language.md, \"Spans\": trace_context() reads one where gtrace cannot by itself")
}

/// Adds to `script` the probes of tracecontext.gt whose functions `has` says exist;
/// returns the file they are in.
pub fn add(script: &mut Script, sources: &mut Sources, has: &dyn Fn(&str) -> bool) -> Result<u32, Vec<Diagnostic>> {
    let mut next_id = 0u32;
    for item in &script.items {
        if let Item::Probe(p) = item {
            p.body.walk_exprs(&mut |e| next_id = next_id.max(e.id.0.saturating_add(1)));
        }
    }
    let file = sources.add(NAME, TEXT);
    let extra = parser::parse(TEXT, file, &mut next_id)?;
    for item in extra.items {
        let Item::Probe(p) = &item else { continue };
        let ProbeKind::Entry(symbols) = &p.kind else { continue };
        if symbols.iter().all(|s| has(&s.text)) {
            script.items.push(item);
        }
    }
    Ok(file)
}
