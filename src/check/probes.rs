//! Resolve each probe's symbols to functions of the target, and find where its uprobes
//! go (the entry after the stack check, every RET, and for entry probes every place the
//! function was inlined: those sites are `FuncSite`s of the same name whose entry
//! `Target::inlined_at` knows; parameters are not in ABI registers there).

use super::{FuncSite, InstanceKind};
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::MAX_INTERVAL_PROBES;
use crate::syntax::ast::{Item, ProbeKind, Script, SymbolPattern};
use crate::target::Target;

/// A probe whose symbols are resolved.
#[derive(Debug)]
pub struct ResolvedProbe {
    pub item: usize,
    pub kind: InstanceKind,
    pub functions: Vec<FuncSite>,
    pub describe: String,
}

pub fn resolve(script: &Script, target: &Target, diags: &mut Diagnostics) -> Vec<ResolvedProbe> {
    let mut out = Vec::new();
    let mut intervals = 0;
    for (item, it) in script.items.iter().enumerate() {
        let Item::Probe(probe) = it else { continue };
        let (kind, patterns, word) = match &probe.kind {
            ProbeKind::Entry(p) => (InstanceKind::Entry, p.as_slice(), "entry"),
            ProbeKind::Return(p) => (InstanceKind::Return, p.as_slice(), "return"),
            ProbeKind::Begin => (InstanceKind::Begin, &[][..], "begin"),
            ProbeKind::End => (InstanceKind::End, &[][..], "end"),
            ProbeKind::Interval { nanos, span } => {
                if *nanos < 1_000_000 {
                    diags.push(
                        Diagnostic::error(*span, "an interval must be at least 1ms")
                            .label("too short")
                            .hint("intervals are timed by gtrace's event loop: use 1ms or more"),
                    );
                }
                intervals += 1;
                if intervals == MAX_INTERVAL_PROBES + 1 {
                    diags.push(
                        Diagnostic::error(probe.span, format!("more than {MAX_INTERVAL_PROBES} `on interval` probes"))
                            .label("one too many")
                            .hint("put the work of probes with the same interval into one"),
                    );
                }
                (InstanceKind::Interval { nanos: *nanos }, &[][..], "interval")
            }
        };
        let mut functions: Vec<FuncSite> = Vec::new();
        for pattern in patterns {
            for site in resolve_pattern(pattern, kind, target, diags) {
                if !functions.iter().any(|f| f.name == site.name && f.entry == site.entry) {
                    functions.push(site);
                }
            }
        }
        let names: Vec<&str> = patterns.iter().map(|p| p.text.as_str()).collect();
        let describe = if names.is_empty() { format!("on {word}") } else { format!("on {word} {}", names.join(", ")) };
        out.push(ResolvedProbe { item, kind, functions, describe });
    }
    out
}

fn resolve_pattern(
    pattern: &SymbolPattern,
    kind: InstanceKind,
    target: &Target,
    diags: &mut Diagnostics,
) -> Vec<FuncSite> {
    let found = target.find(&pattern.text);
    let inlined = target.find_inlined(&pattern.text);
    if kind == InstanceKind::Return && found.is_empty() && !inlined.is_empty() {
        let mut callers: Vec<&str> = inlined.iter().map(|s| s.caller.as_str()).collect();
        callers.dedup();
        let more = if callers.len() > 3 { format!(" and {} more", callers.len() - 3) } else { String::new() };
        let list = callers.iter().take(3).map(|c| format!("`{}`", quote_if_needed(c))).collect::<Vec<_>>().join(", ");
        diags.push(
            Diagnostic::error(
                pattern.span,
                format!("`{}` exists only inlined (into {list}{more}): it never returns as a call of its own", pattern.text),
            )
            .label("no return to probe")
            .hint("`on entry` fires where it was inlined; to time it, probe the returns of the functions it was inlined into"),
        );
        return Vec::new();
    }
    if found.is_empty() && inlined.is_empty() {
        let mut d = Diagnostic::error(
            pattern.span,
            format!("no function matches `{}` in {}", pattern.text, target.path().display()),
        )
        .label("no such function");
        let close = target.closest(&pattern.text, 3);
        if !close.is_empty() {
            let list: Vec<String> = close.iter().map(|c| format!("`{}`", quote_if_needed(c))).collect();
            d = d.hint(format!("did you mean {}?", list.join(", ")));
        }
        d = d.hint("`gtrace -l PATTERN` lists the functions of the target");
        diags.push(d);
        return Vec::new();
    }
    let mut sites = Vec::new();
    for f in found {
        match target.probe_sites(f) {
            Ok(s) => {
                if kind == InstanceKind::Return && s.returns.is_empty() {
                    let msg = format!(
                        "`{}` has no RET instruction (it ends in a tail call, a panic or an endless loop): a return probe never fires",
                        f.name
                    );
                    if pattern.is_wildcard() {
                        diags.push(Diagnostic::warning(pattern.span, msg).label("skipped for this function"));
                        continue;
                    }
                    diags.push(Diagnostic::error(pattern.span, msg).label("cannot probe its returns"));
                    continue;
                }
                sites.push(FuncSite { name: f.name.clone(), entry: s.entry, returns: s.returns });
            }
            Err(e) => diags.push(Diagnostic::error(pattern.span, e.to_string()).label("cannot place a probe here")),
        }
    }
    // Where the function was inlined: an entry with no call, so no return.
    if kind == InstanceKind::Entry {
        for site in &inlined {
            sites.push(FuncSite { name: site.callee.clone(), entry: site.addr, returns: Vec::new() });
        }
    }
    sites
}

/// A Go name as the user must write it: bare when it is `pkg.Name`, quoted otherwise.
pub fn quote_if_needed(name: &str) -> String {
    let bare = name.split('.').count() >= 2
        && name.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'));
    if bare {
        name.to_string()
    } else {
        format!("\"{name}\"")
    }
}
