//! Resolve each probe to the places its uprobes go. Each kind of probe is a provider,
//! one row of a small table (`provider`): the kind its body is typed as, its word, and
//! what names its places: functions (the entry after the stack check, every RET, and for
//! entry probes every place the function was inlined: `FuncSite`s of the same name that
//! carry their `InlinedSite`), a source line (every place it starts, `lineprobe`), or
//! nothing in the target (begin, end, interval: gtrace's own triggers).
//!
//! What cannot hold a probe is passed over with its reason (see `skips`): a wildcard or
//! a list goes on with the rest; a probe left with nothing to probe is an error that
//! says why.

use super::skips::{SkipReason, Skipped};
use super::{lineprobe, FuncSite, InstanceKind};
use crate::diag::{Diagnostic, Diagnostics};
use crate::gobin::GoBinary;
use crate::plan::MAX_INTERVAL_PROBES;
use crate::syntax::ast::{Item, LineSpec, Probe, ProbeKind, Script, Span, SymbolPattern};

/// A probe whose symbols are resolved.
#[derive(Debug)]
pub struct ResolvedProbe {
    pub item: usize,
    pub kind: InstanceKind,
    pub functions: Vec<FuncSite>,
    pub describe: String,
}

/// What one kind of probe needs: the kind its body is typed as (which names and builtins
/// it has), its word in `on WORD`, and what names its places.
struct Provider<'p> {
    kind: InstanceKind,
    word: &'static str,
    places: Places<'p>,
}

/// What names the places a probe's uprobes go to.
enum Places<'p> {
    /// Functions, by name or pattern: their entries (and inlined calls) or returns.
    Functions(&'p [SymbolPattern]),
    /// A source line: every place it starts.
    Line(&'p LineSpec),
    /// Nothing in the target: gtrace's own triggers.
    Gtrace,
}

/// The table of probe kinds.
fn provider(kind: &ProbeKind) -> Provider<'_> {
    let (kind, word, places) = match kind {
        ProbeKind::Entry(p) => (InstanceKind::Entry, "entry", Places::Functions(p)),
        ProbeKind::Return(p) => (InstanceKind::Return, "return", Places::Functions(p)),
        ProbeKind::Panic(p) => (InstanceKind::Panic, "panic", Places::Functions(p)),
        ProbeKind::Line(spec) => (InstanceKind::Line, "line", Places::Line(spec)),
        ProbeKind::Begin => (InstanceKind::Begin, "begin", Places::Gtrace),
        ProbeKind::End => (InstanceKind::End, "end", Places::Gtrace),
        ProbeKind::Interval { nanos, .. } => (InstanceKind::Interval { nanos: *nanos }, "interval", Places::Gtrace),
    };
    Provider { kind, word, places }
}

/// Resolves every probe; what was passed over goes into `skipped`.
pub fn resolve(
    script: &Script,
    target: &dyn GoBinary,
    diags: &mut Diagnostics,
    skipped: &mut Vec<Skipped>,
) -> Vec<ResolvedProbe> {
    let mut out = Vec::new();
    let mut intervals = 0;
    for (item, it) in script.items.iter().enumerate() {
        let Item::Probe(probe) = it else { continue };
        if let ProbeKind::Interval { nanos, span } = &probe.kind {
            intervals += 1;
            check_interval(probe, *nanos, *span, intervals, diags);
        }
        let Provider { kind, word, places } = provider(&probe.kind);
        let mut functions: Vec<FuncSite> = Vec::new();
        let mut passed_over = Vec::new();
        let (describe, span) = match places {
            Places::Functions(patterns) => {
                for pattern in patterns {
                    for site in resolve_pattern(pattern, kind, target, diags, &mut passed_over) {
                        super::generics::add_site(&mut functions, site);
                    }
                }
                let names: Vec<&str> = patterns.iter().map(|p| p.text.as_str()).collect();
                let span = patterns.first().map(|p| p.span.to(patterns[patterns.len() - 1].span));
                (format!("on {word} {}", names.join(", ")), span)
            }
            Places::Line(spec) => {
                functions = lineprobe::sites(spec, target, diags, &mut passed_over);
                (format!("on {word} \"{}:{}\"", spec.file, spec.line), Some(spec.span))
            }
            Places::Gtrace => (format!("on {word}"), None),
        };
        if let (true, false, Some(span)) = (functions.is_empty(), passed_over.is_empty(), span) {
            diags.push(nothing_to_probe(span, &passed_over));
        }
        skipped.extend(passed_over.into_iter().map(|(function, addr, reason)| Skipped {
            probe: describe.clone(),
            function,
            addr,
            reason,
        }));
        out.push(ResolvedProbe { item, kind, functions, describe });
    }
    out
}

/// An interval must be at least 1ms, and a script has at most so many.
fn check_interval(probe: &Probe, nanos: u64, span: Span, count: usize, diags: &mut Diagnostics) {
    if nanos < 1_000_000 {
        diags.push(
            Diagnostic::error(span, "an interval must be at least 1ms")
                .label("too short")
                .hint("intervals are timed by gtrace's event loop: use 1ms or more"),
        );
    }
    if count == MAX_INTERVAL_PROBES + 1 {
        diags.push(
            Diagnostic::error(probe.span, format!("more than {MAX_INTERVAL_PROBES} `on interval` probes"))
                .label("one too many")
                .hint("put the work of probes with the same interval into one"),
        );
    }
}

/// A function or site passed over: the function, the site's address, why.
pub(super) type PassedOver = (String, Option<u64>, SkipReason);

/// The error for a probe whose every function or site was passed over; `span` is what
/// names them.
fn nothing_to_probe(span: Span, passed_over: &[PassedOver]) -> Diagnostic {
    let functions: std::collections::BTreeSet<&str> = passed_over.iter().map(|(f, _, _)| f.as_str()).collect();
    let reasons: std::collections::BTreeSet<String> = passed_over.iter().map(|(_, _, r)| r.describe()).collect();
    let subject = match functions.iter().next() {
        Some(f) if functions.len() == 1 => format!("`{f}` cannot be probed"),
        _ => format!("none of the {} functions matched can be probed", functions.len()),
    };
    let places = passed_over.len();
    if reasons.len() == 1 {
        let reason = reasons.into_iter().next().unwrap_or_default();
        let every = if places > 1 { format!(" (at each of its {places} places)") } else { String::new() };
        let every = if functions.len() > 1 { String::new() } else { every };
        return Diagnostic::error(span, format!("{subject}: {reason}{every}")).label("cannot hold a probe");
    }
    let mut d = Diagnostic::error(span, format!("{subject}: {places} places passed over")).label("cannot hold a probe");
    for (function, addr, reason) in passed_over.iter().take(3) {
        let at = addr.map(|a| format!(" at {a:#x}")).unwrap_or_default();
        d = d.hint(format!("{function}{at}: {}", reason.describe()));
    }
    if places > 3 {
        d = d.hint(format!("and {} more", places - 3));
    }
    d
}

fn resolve_pattern(
    pattern: &SymbolPattern,
    kind: InstanceKind,
    target: &dyn GoBinary,
    diags: &mut Diagnostics,
    passed_over: &mut Vec<PassedOver>,
) -> Vec<FuncSite> {
    if crate::gobin::symbols_is_pattern(&pattern.text) {
        // `"main.(*Stack[*int]).Push"`: an instantiation, when a dictionary makes it.
        if let Some(Ok((sites, warning))) = super::generics::instantiation_sites(target, pattern, kind, passed_over) {
            warning.into_iter().for_each(|w| diags.push(w));
            return sites;
        }
    }
    let found = target.find(&pattern.text);
    let inlined = target.find_inlined(&pattern.text);
    if matches!(kind, InstanceKind::Return | InstanceKind::Panic) && found.is_empty() && !inlined.is_empty() {
        diags.push(only_inlined(pattern, &inlined));
        return Vec::new();
    }
    if found.is_empty() && inlined.is_empty() {
        match super::generics::instantiation_sites(target, pattern, kind, passed_over) {
            Some(Ok((sites, warning))) => {
                warning.into_iter().for_each(|w| diags.push(w));
                return sites;
            }
            Some(Err(d)) => {
                diags.push(d);
                return Vec::new();
            }
            None => {}
        }
        diags.push(no_such_function(pattern, target));
        return Vec::new();
    }
    let mut sites = Vec::new();
    for f in found {
        if let Some(site) = function_site(f, kind, target, passed_over) {
            sites.push(site);
        }
    }
    // Where the function was inlined: an entry with no call, so no return.
    if kind == InstanceKind::Entry {
        sites.extend(inlined_entries(pattern, inlined, target, diags, passed_over));
    }
    sites
}

/// A return or panic probe of a function that exists only inlined: it never returns.
fn only_inlined(pattern: &SymbolPattern, inlined: &[crate::gobin::InlinedSite]) -> Diagnostic {
    let mut callers: Vec<&str> = inlined.iter().map(|s| s.caller.as_str()).collect();
    callers.dedup();
    let more = if callers.len() > 3 { format!(" and {} more", callers.len() - 3) } else { String::new() };
    let list = callers.iter().take(3).map(|c| format!("`{}`", quote_if_needed(c))).collect::<Vec<_>>().join(", ");
    Diagnostic::error(
        pattern.span,
        format!("`{}` exists only inlined (into {list}{more}): it never returns as a call of its own", pattern.text),
    )
    .label("no return to probe")
    .hint("`on entry` fires where it was inlined; to time it, probe the returns of the functions it was inlined into")
}

/// No function has this name: the closest that do.
fn no_such_function(pattern: &SymbolPattern, target: &dyn GoBinary) -> Diagnostic {
    let mut d = Diagnostic::error(
        pattern.span,
        format!("no function matches `{}` in {}", crate::diag::echoed(&pattern.text), target.path().display()),
    )
    .label("no such function");
    let close = target.closest(&pattern.text, 3);
    if !close.is_empty() {
        let list: Vec<String> = close.iter().map(|c| format!("`{}`", quote_if_needed(c))).collect();
        d = d.hint(format!("did you mean {}?", list.join(", ")));
    }
    d.hint("`gtrace -l PATTERN` lists the functions of the target")
}

/// The entry sites of the places a function was inlined, but those a uprobe refuses
/// (passed over); a warning for those placed at their lowest address.
fn inlined_entries(
    pattern: &SymbolPattern,
    inlined: Vec<crate::gobin::InlinedSite>,
    target: &dyn GoBinary,
    diags: &mut Diagnostics,
    passed_over: &mut Vec<PassedOver>,
) -> Vec<FuncSite> {
    let mut sites = Vec::new();
    let unsure = inlined.iter().filter(|s| s.how == crate::gobin::Placement::Lowest).count();
    if unsure > 0 {
        diags.push(
                Diagnostic::warning(
                    pattern.span,
                    format!(
                        "at {unsure} of the {} places where `{}` was inlined, no one instruction is passed once by every call (the inlined code is only register moves, or spread over several paths)",
                        inlined.len(),
                        pattern.text
                    ),
                )
                .label("those calls are probed at the lowest address of their code, and may be missed or counted twice"),
            );
    }
    for site in inlined {
        match target.uprobe_refusal(site.addr) {
            Some(r) => passed_over.push((site.callee.clone(), Some(site.addr), SkipReason::Refused(r))),
            None => sites.push(FuncSite {
                name: site.callee.clone(),
                entry: site.addr,
                returns: Vec::new(),
                inlined: Some(site),
                line: None,
                dictionary: None,
            }),
        }
    }
    sites
}

/// Where the probes of `f` go, or None (with the reason in `passed_over`) when it cannot
/// hold one; refused return sites are passed over one by one.
pub(super) fn function_site(
    f: &crate::gobin::Function,
    kind: InstanceKind,
    target: &dyn GoBinary,
    passed_over: &mut Vec<PassedOver>,
) -> Option<FuncSite> {
    let mut pass = |addr: Option<u64>, reason: SkipReason| passed_over.push((f.name.to_string(), addr, reason));
    if f.size == 0 {
        pass(None, SkipReason::ZeroSize);
        return None;
    }
    let s = match target.probe_sites(f) {
        Ok(s) => s,
        Err(crate::gobin::TargetError::Disassembly { source, .. }) => {
            pass(None, SkipReason::BadCode { at: source.addr });
            return None;
        }
        Err(_) => {
            pass(None, SkipReason::NoCode);
            return None;
        }
    };
    match kind {
        InstanceKind::Return => {
            if s.returns.is_empty() {
                pass(None, SkipReason::NoReturn);
                return None;
            }
            let mut returns = Vec::new();
            for r in s.returns {
                match target.uprobe_refusal(r) {
                    Some(refusal) => pass(Some(r), SkipReason::Refused(refusal)),
                    None => returns.push(r),
                }
            }
            (!returns.is_empty()).then(|| FuncSite::called(&f.name, s.entry, returns))
        }
        // A panic's frames are kept from the entry to a RET: every site must hold a probe
        // (a function may have no RET at all: one that always panics).
        InstanceKind::Panic => {
            for at in std::iter::once(s.entry).chain(s.returns.iter().copied()) {
                if let Some(refusal) = target.uprobe_refusal(at) {
                    pass(Some(at), SkipReason::Refused(refusal));
                    return None;
                }
            }
            Some(FuncSite::called(&f.name, s.entry, s.returns))
        }
        _ => match target.uprobe_refusal(s.entry) {
            Some(refusal) => {
                pass(Some(s.entry), SkipReason::Refused(refusal));
                None
            }
            None => Some(FuncSite::called(&f.name, s.entry, s.returns)),
        },
    }
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
