//! Probe instances: one probe of the script specialised to the groups of functions that
//! share one compiled program (all of them when the body reads no Go value, else one
//! each; inlined calls whose parameters sit in the same places share one), each typed by
//! `typeck`. Errors of a body compiled for several functions are reported once.

use super::govalues::{go_values, inlined_values, reads_go_values, GoValue};
use super::locals::line_values;
use super::probes::ResolvedProbe;
use super::typeck;
use super::{Builtin, Carried, Checked, Facts, FuncSite, Instance, InstanceKind, Name};
use crate::diag::{Diagnostic, Diagnostics};
use crate::gobin::{GoBinary, TargetError};
use crate::syntax::ast::*;

/// Functions that share one compiled program, and what the program may read there.
struct Group {
    functions: Vec<FuncSite>,
    /// The sites are inlined calls or places where a line starts (values where DWARF
    /// places them there): skipped with a warning when the body cannot be compiled
    /// there but can at another.
    at_inlined_call: bool,
    values: Result<Vec<GoValue>, TargetError>,
}

/// Types the probe's body once per group of its functions and adds an `Instance` for
/// each that types. Inlined calls whose body cannot be compiled there are skipped with a
/// warning while another call of the function compiles.
pub fn check_probe(
    script: &Script,
    probe: ResolvedProbe,
    target: &dyn GoBinary,
    checked: &mut Checked,
    diags: &mut Diagnostics,
    limit: u32,
) {
    let Item::Probe(ast) = &script.items[probe.item] else { return };
    let instances_before = checked.instances.len();
    let mut reported = Reported::default();
    let mut skipped = 0;
    let mut failed: Vec<Diagnostic> = Vec::new();
    for group in groups(&probe, &ast.body, target, limit) {
        let values = match group.values {
            Ok(v) => v,
            Err(e) => {
                diags.push(Diagnostic::error(ast.span, e.to_string()).hint_if(e.hint()));
                continue;
            }
        };
        let mut local = Diagnostics::default();
        let dictionary = dictionary(&group.functions, probe.kind, target, &ast.body);
        if let ([f], None) = (group.functions.as_slice(), &dictionary) {
            if f.dictionary.is_some() {
                local.push(super::generics::no_dictionary_here(ast.span, &f.name));
            }
        }
        let globals = super::globals::resolve(&ast.body, target, &values);
        let asserted = super::asserted::resolve(&ast.body, target);
        let env = typeck::Env {
            kind: probe.kind,
            string_limit: limit,
            types: &target.types(),
            values,
            has_function: !group.functions.is_empty(),
            globals,
            asserted,
        };
        let typeck::Typed { facts, uses_elapsed } =
            typeck::check_body(&ast.body, env, &mut checked.maps, &mut checked.self_vars, &mut local);
        let mut functions = group.functions;
        if facts.context {
            keep_own_calls(&mut functions, ast.span, &mut local);
        }
        let mut carried = carried(&facts, &target.types());
        if let (Some(location), InstanceKind::Return) = (&dictionary, probe.kind) {
            let name = super::generics::CARRIED_DICTIONARY.to_string();
            carried.push(Carried { name, location: location.clone(), size: 8 });
        }
        let needs_g = uses_elapsed || !carried.is_empty() || needs_goroutine(probe.kind, &facts);
        if needs_g || facts.context {
            require_abi_internal(&functions, target, ast.span, &mut local);
        }
        if group.at_inlined_call && local.has_errors() {
            skipped += functions.len();
            failed.extend(local.items);
            continue;
        }
        reported.push_all(local.items, diags);
        checked.maps.func_dictionaries |= dictionary.is_some();
        checked.instances.push(Instance {
            item: probe.item,
            kind: probe.kind,
            functions,
            facts,
            uses_elapsed,
            carried,
            dictionary,
            describe: probe.describe.clone(),
            span: ast.span,
        });
    }
    let said = diags.items.iter().any(|d| d.message == super::generics::STRIPPED);
    if let (Some(shape), false) = (stripped_shape(&probe, target, &ast.body), said) {
        diags.push(super::generics::stripped_warning(ast.span, &shape));
    }
    let compiled_none = checked.instances.len() == instances_before;
    report_skipped(skipped, compiled_none, failed, probe.kind, ast.span, &mut reported, diags);
}

/// A trace context lives in the call's frame: only calls of the function itself have
/// one (an inlined copy has no RET to end it). Keeps those, and says so when none is left.
fn keep_own_calls(functions: &mut Vec<FuncSite>, span: Span, local: &mut Diagnostics) {
    functions.retain(|f| f.inlined.is_none() && f.line.is_none());
    if functions.is_empty() {
        local.push(
            Diagnostic::error(span, "trace_context() needs calls of the function itself; here it is only inlined")
                .hint("probe the function that calls it"),
        );
    }
}

/// Whether the body, for a probe of `kind`, needs the goroutine (its g) at every hit
/// beside timing and carried values: a panic probe, `self` variables, `goid`.
fn needs_goroutine(kind: InstanceKind, facts: &Facts) -> bool {
    kind == InstanceKind::Panic || facts.uses_self || facts.names.values().any(|n| *n == Name::Builtin(Builtin::Goid))
}

/// Says what became of the `skipped` inlined calls or line starts whose body could not
/// be compiled: their errors when no site compiled (`failed`), else one warning.
fn report_skipped(
    skipped: usize,
    compiled_none: bool,
    failed: Vec<Diagnostic>,
    kind: InstanceKind,
    span: Span,
    reported: &mut Reported,
    diags: &mut Diagnostics,
) {
    if skipped == 0 {
        return;
    }
    if compiled_none {
        reported.push_all(failed, diags);
    } else if kind == InstanceKind::Line {
        diags.push(
            Diagnostic::warning(
                span,
                format!("this probe reads locals that cannot be read at {skipped} of the places where the line starts"),
            )
            .label("those places are not traced")
            .hint("`--check` says why at each; a probe that reads no locals fires at every place"),
        );
    } else {
        diags.push(
            Diagnostic::warning(
                span,
                format!("this probe reads parameters that DWARF does not place in registers at {skipped} of the places where the function was inlined"),
            )
            .label("those inlined calls are not traced")
            .hint("a probe that reads no parameters fires at every inlined call"),
        );
    }
}

/// The groups of the probe's functions: all of them in one when the body reads no Go
/// value, else one each; inlined calls of one function, and places where a line starts,
/// whose values sit in the same places share one.
fn groups(probe: &ResolvedProbe, body: &Block, target: &dyn GoBinary, limit: u32) -> Vec<Group> {
    let uses_func = super::generics::uses_func(body);
    let own = |f: &FuncSite| {
        super::generics::takes_dictionary(target, f, probe.kind) && (uses_func || f.dictionary.is_some())
    };
    if probe.functions.len() > 1 && !reads_go_values(body) && probe.functions.iter().any(own) {
        // Shape functions whose dictionary the program reads (for `func`, or to fire for
        // one instantiation): one program each.
        let (alone, rest): (Vec<FuncSite>, Vec<FuncSite>) = probe.functions.iter().cloned().partition(own);
        let mut out: Vec<Group> = (alone.into_iter())
            .map(|f| Group { values: Ok(Vec::new()), at_inlined_call: false, functions: vec![f] })
            .collect();
        if !rest.is_empty() {
            out.push(Group { functions: rest, at_inlined_call: false, values: Ok(Vec::new()) });
        }
        return out;
    }
    if probe.functions.len() <= 1 || !reads_go_values(body) || probe.kind == InstanceKind::Panic {
        let functions = probe.functions.clone();
        let (at_inlined_call, values) = match functions.as_slice() {
            // The call's frame is gone when a panic's probe runs: no parameters.
            _ if probe.kind == InstanceKind::Panic => (false, Ok(Vec::new())),
            // A body that names no Go value asks no DWARF (issue 26).
            [one] if !reads_go_values(body) => (one.inlined.is_some() || one.line.is_some(), Ok(Vec::new())),
            [one] => site_values(target, one, probe.kind, limit),
            _ => (false, Ok(Vec::new())),
        };
        return vec![Group { functions, at_inlined_call, values }];
    }
    let mut out: Vec<Group> = Vec::new();
    for f in &probe.functions {
        let (shared, values) = site_values(target, f, probe.kind, limit);
        let same = out.iter_mut().find(|g| {
            shared
                && g.at_inlined_call
                && g.functions[0].name == f.name
                && g.values.as_ref().ok() == values.as_ref().ok()
        });
        match same {
            Some(g) => g.functions.push(f.clone()),
            None => out.push(Group { functions: vec![f.clone()], at_inlined_call: shared, values }),
        }
    }
    out
}

/// In a stripped binary, a shape function whose `func` the probe uses: it names the
/// shape there.
fn stripped_shape(probe: &ResolvedProbe, target: &dyn GoBinary, body: &Block) -> Option<String> {
    let shape = (probe.functions.iter()).find(|f| {
        // Go 1.18's function table writes a shape's type arguments `[...]`.
        let shape = crate::gobin::dictionary_position(&f.name).is_some() || f.name.contains("[...]");
        f.inlined.is_none() && shape
    })?;
    let kind = matches!(probe.kind, InstanceKind::Entry | InstanceKind::Return);
    (kind && target.is_stripped() && super::generics::uses_func(body)).then(|| shape.name.clone())
}

/// Where the dictionary of the one shape function a program is for is, when its body
/// uses `func` or it fires for one instantiation (see `generics`).
fn dictionary(
    functions: &[FuncSite],
    kind: InstanceKind,
    target: &dyn GoBinary,
    body: &Block,
) -> Option<crate::arch::abi::Location> {
    match functions {
        [f] if super::generics::takes_dictionary(target, f, kind)
            && (f.dictionary.is_some() || super::generics::uses_func(body)) =>
        {
            super::generics::dictionary_location(target, &f.name)
        }
        _ => None,
    }
}

/// What a probe may read at one of its sites, and whether the site is one of several
/// places of one function (an inlined call, a line's start) that may share a program
/// and be skipped with a warning when the body cannot read its values there.
fn site_values(
    target: &dyn GoBinary,
    f: &FuncSite,
    kind: InstanceKind,
    limit: u32,
) -> (bool, Result<Vec<GoValue>, TargetError>) {
    match (&f.inlined, &f.line) {
        (_, Some(site)) => (true, line_values(target, site, limit)),
        (Some(site), None) => (true, Ok(inlined_values(target, site, limit))),
        (None, None) => (false, go_values(target, &f.name, kind, limit)),
    }
}

/// The parameters a return probe reads (by name, or all of them through `args`), which
/// the entry of each call must carry to its return.
fn carried(facts: &Facts, types: &crate::gotypes::Types) -> Vec<Carried> {
    let mut out: Vec<Carried> = Vec::new();
    let named = facts.names.iter().filter_map(|(id, n)| match n {
        Name::GoValue { name, location, at_entry: true, .. } => {
            Some((name.clone(), location.clone(), facts.go_types.get(id).copied()))
        }
        _ => None,
    });
    let args =
        (facts.args.iter().filter(|a| a.at_entry)).map(|a| (a.name.clone(), a.location.clone(), Some(a.type_id)));
    for (name, location, ty) in named.chain(args) {
        if out.iter().all(|c| c.name != name) {
            let size = ty.map_or(8, |t| types.get(t).size);
            out.push(Carried { name, location, size });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// goid, self, elapsed and parameters at a return find the goroutine through the g
/// register, which holds it only in ABIInternal functions (amd64; arm64 keeps g in R28
/// in assembly too).
fn require_abi_internal(functions: &[FuncSite], target: &dyn GoBinary, span: Span, diags: &mut Diagnostics) {
    if target.arch().g_in_abi0() {
        return;
    }
    for f in functions {
        if target.find(&f.name).first().is_some_and(|t| t.abi == crate::gobin::Abi::Abi0) {
            diags.push(
                Diagnostic::error(
                    span,
                    format!(
                        "`{}` is an assembly (ABI0) function: {} does not hold the goroutine there",
                        f.name,
                        target.arch().g_reg().name()
                    ),
                )
                .label("goid, self, elapsed and parameters at a return are unavailable here")
                .hint("probe the Go function that calls it instead"),
            );
        }
    }
}

/// Diagnostics already given: the same mistake in a body compiled for several functions
/// is reported once.
#[derive(Default)]
struct Reported(Vec<(Span, String)>);

impl Reported {
    fn push_all(&mut self, items: Vec<Diagnostic>, diags: &mut Diagnostics) {
        for d in items {
            if !self.0.iter().any(|(s, m)| *s == d.span && *m == d.message) {
                self.0.push((d.span, d.message.clone()));
                diags.push(d);
            }
        }
    }
}
