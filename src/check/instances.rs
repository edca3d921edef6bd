//! Probe instances: one probe of the script specialised to the groups of functions that
//! share one compiled program (all of them when the body reads no Go value, else one
//! each; inlined calls whose parameters sit in the same places share one), each typed by
//! `typeck`. Errors of a body compiled for several functions are reported once.

use super::govalues::{go_values, inlined_values, reads_go_values, GoValue};
use super::probes::ResolvedProbe;
use super::typeck;
use super::{Builtin, Checked, Instance, Name};
use crate::diag::{Diagnostic, Diagnostics};
use crate::syntax::ast::*;
use crate::target::Target;

pub fn check_probe(
    script: &Script,
    probe: ResolvedProbe,
    target: &mut Target,
    checked: &mut Checked,
    diags: &mut Diagnostics,
    limit: u32,
) {
    let Item::Probe(ast) = &script.items[probe.item] else { return };
    // One instance for all functions when the body reads no Go value; else one each.
    let groups: Vec<Vec<super::FuncSite>> = if probe.functions.len() > 1 && reads_go_values(&ast.body) {
        probe.functions.iter().map(|f| vec![f.clone()]).collect()
    } else {
        vec![probe.functions.clone()]
    };
    // Where the function was inlined, parameters are read where DWARF locates them. A
    // probe whose body cannot be compiled at an inlined call (a parameter DWARF does not
    // place in registers there) skips that call, and says so, when real calls remain.
    let inlined: Vec<bool> = groups.iter().map(|g| g.len() == 1 && target.inlined_at(g[0].entry).is_some()).collect();
    let mut skipped = 0;
    let mut failed: Vec<crate::diag::Diagnostic> = Vec::new();
    let instances_before = checked.instances.len();
    let mut seen: Vec<(Span, String)> = Vec::new();
    // Inlined calls whose parameters sit in the same registers share one program.
    let mut work: Vec<(Vec<super::FuncSite>, bool, Result<Vec<GoValue>, String>)> = Vec::new();
    let mut same_places: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (functions, at_inlined_call) in groups.into_iter().zip(inlined) {
        let values = match functions.as_slice() {
            [one] if at_inlined_call => Ok(inlined_values(target, &one.name, one.entry, limit)),
            [one] => go_values(target, &one.name, probe.kind, limit),
            _ => Ok(Vec::new()),
        };
        if let (true, Ok(v)) = (at_inlined_call, &values) {
            let key = format!("{}{v:?}", functions[0].name);
            if let Some(&i) = same_places.get(&key) {
                work[i].0.extend(functions);
                continue;
            }
            same_places.insert(key, work.len());
        }
        work.push((functions, at_inlined_call, values));
    }
    for (functions, at_inlined_call, values) in work {
        let values = match values {
            Ok(v) => v,
            Err(message) => {
                diags.push(Diagnostic::error(ast.span, message));
                continue;
            }
        };
        let mut local = Diagnostics::default();
        let env = typeck::Env {
            kind: probe.kind,
            string_limit: limit,
            types: target.types(),
            values,
            has_function: !functions.is_empty(),
        };
        let typeck::Typed { facts, uses_elapsed } =
            typeck::check_body(&ast.body, env, &mut checked.maps, &mut checked.self_vars, &mut local);
        // The goroutine is found through R14, which holds g only in ABIInternal functions.
        let needs_g =
            uses_elapsed || facts.uses_self || facts.names.values().any(|n| *n == Name::Builtin(Builtin::Goid));
        if needs_g {
            for f in &functions {
                if target.find(&f.name).first().is_some_and(|t| t.abi == crate::target::Abi::Abi0) {
                    local.push(
                        Diagnostic::error(
                            ast.span,
                            format!(
                                "`{}` is an assembly (ABI0) function: R14 does not hold the goroutine there",
                                f.name
                            ),
                        )
                        .label("goid, self and elapsed are unavailable here")
                        .hint("probe the Go function that calls it instead"),
                    );
                }
            }
        }
        if at_inlined_call && local.has_errors() {
            skipped += functions.len();
            failed.extend(local.items);
            continue;
        }
        // The same mistake in a body compiled for several functions is reported once.
        for d in local.items {
            if !seen.iter().any(|(s, m)| *s == d.span && *m == d.message) {
                seen.push((d.span, d.message.clone()));
                diags.push(d);
            }
        }
        checked.instances.push(Instance {
            item: probe.item,
            kind: probe.kind,
            functions,
            facts,
            uses_elapsed,
            describe: probe.describe.clone(),
        });
    }
    if skipped > 0 && checked.instances.len() == instances_before {
        // No call of the function could be compiled: the errors of the inlined ones.
        for d in failed {
            if !seen.iter().any(|(s, m)| *s == d.span && *m == d.message) {
                seen.push((d.span, d.message.clone()));
                diags.push(d);
            }
        }
    } else if skipped > 0 {
        diags.push(
            Diagnostic::warning(
                ast.span,
                format!("this probe reads parameters that DWARF does not place in registers at {skipped} of the places where the function was inlined"),
            )
            .label("those inlined calls are not traced")
            .hint("a probe that reads no parameters fires at every inlined call"),
        );
    }
}
