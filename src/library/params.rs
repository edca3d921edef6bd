//! The values of `param` settings. A param's default is a literal (an integer, a float, a
//! duration, a string or a bool); `--set NAME=VALUE` replaces it with a literal of the
//! same kind, read by the script parser (so `50ms`, `0x10` and `"text"` work as in a
//! script). `--set` of a name no file declares is an error.

use crate::diag::{closest, Diagnostic, Sources};
use crate::syntax::ast::{Expr, ExprKind, Param, Span};
use crate::syntax::parser;
use std::collections::HashMap;

/// Each param's value, by name.
pub(super) type Values = HashMap<String, Expr>;

pub(super) fn values(
    params: &[Param],
    sets: &[String],
    sources: &mut Sources,
    next_id: &mut u32,
) -> Result<Values, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut values = Values::new();
    for p in params {
        if kind(&p.value).is_none() {
            diags.push(
                Diagnostic::error(p.value.span, format!("the default of `{}` is not a literal", p.name.name))
                    .label("a param's value is an integer, a float, a duration, a string or `true`/`false`")
                    .hint("compute derived values where they are used, e.g. `elapsed > threshold * 2`"),
            );
        }
        values.insert(p.name.name.clone(), p.value.clone());
    }
    for set in sets {
        match override_value(set, params, sources, next_id) {
            Ok((name, value)) => {
                values.insert(name, value);
            }
            Err(d) => diags.extend(d),
        }
    }
    if diags.is_empty() {
        Ok(values)
    } else {
        Err(diags)
    }
}

/// The params gtrace defines, where no file declares one of their names: `otlp`, true
/// when `--otlp` is given (a library makes its spans then: `if otlp { span(...) }`).
pub(super) fn predefine(values: &mut Values, otlp: bool, sources: &mut Sources, next_id: &mut u32) {
    if !values.contains_key("otlp") {
        let text = format!("{otlp}");
        let file = sources.add("<predefined param otlp>", text.clone());
        let id = crate::syntax::ast::ExprId(*next_id);
        *next_id += 1;
        let span = Span::new(file, 0, text.len());
        values.insert("otlp".into(), Expr { id, kind: ExprKind::Bool(otlp), span });
    }
}

/// The kind of a literal: what a `--set` must match.
fn kind(e: &Expr) -> Option<&'static str> {
    match e.kind {
        ExprKind::Int(_) => Some("an integer"),
        ExprKind::Float(_) => Some("a float"),
        ExprKind::Duration(_) => Some("a duration"),
        ExprKind::Str(_) => Some("a string"),
        ExprKind::Bool(_) => Some("a bool"),
        _ => None,
    }
}

/// One `--set NAME=VALUE`, read as if it were `param NAME = VALUE` in a file named `--set`.
fn override_value(
    set: &str,
    params: &[Param],
    sources: &mut Sources,
    next_id: &mut u32,
) -> Result<(String, Expr), Vec<Diagnostic>> {
    let Some((name, value)) = set.split_once('=') else {
        let file = sources.add("--set", set.to_string());
        return Err(vec![Diagnostic::error(Span::new(file, 0, set.len()), "`--set` needs NAME=VALUE")
            .label("no `=` here")
            .hint("e.g. `--set threshold=50ms`")]);
    };
    let name = name.trim();
    let text = format!("param {name} = {}", value.trim());
    let file = sources.add("--set", text.clone());
    let name_span = Span::new(file, 6, 6 + name.len());
    let Some(declared) = params.iter().find(|p| p.name.name == name) else {
        let mut d = Diagnostic::error(name_span, format!("no param `{name}`"))
            .label("not declared by the script or its libraries");
        let names: Vec<&str> = params.iter().map(|p| p.name.name.as_str()).collect();
        if let Some(near) = closest(name, names.iter().copied(), 1).first() {
            d = d.hint(format!("did you mean `{near}`?"));
        } else if names.is_empty() {
            d = d.hint("the script and its libraries declare no `param`");
        } else {
            d = d.hint(format!("the params are: {}", names.join(", ")));
        }
        return Err(vec![d]);
    };
    let script = parser::parse(&text, file, next_id)?;
    let Some(given) = script.params.into_iter().next() else {
        return Err(vec![Diagnostic::error(name_span, "`--set` needs NAME=VALUE")]);
    };
    let (want, got) = (kind(&declared.value), kind(&given.value));
    if got.is_none() || want != got {
        let mut d = Diagnostic::error(given.value.span, format!("`{name}` is {}", want.unwrap_or("a literal")))
            .label(format!("this is {}", got.unwrap_or("not a literal")))
            .related(declared.value.span, "its default");
        if want == Some("a duration") && got == Some("an integer") {
            d = d.hint(format!("give a unit, e.g. `--set {name}={}ms`", value.trim()));
        }
        if want == Some("a string") {
            d = d.hint(format!("quote it: `--set '{name}=\"{}\"'`", value.trim()));
        }
        return Err(vec![d]);
    }
    Ok((name.to_string(), given.value))
}
