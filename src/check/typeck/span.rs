//! `span(name: ..., key: value, ...)`: one OpenTelemetry span for the call, in `on return`
//! and `on panic` probes. Its arguments are the span's name (`name:`, a string) and its
//! attributes by key (written, or derived from the expression as map keys are); the
//! function's `error` result, when it has one, decides the status.

use super::super::keynames;
use super::super::ty::Ty;
use super::super::{ArgInfo, InstanceKind, SpanArgs};
use super::Cx;
use crate::diag::Diagnostic;
use crate::syntax::ast::*;

/// The most attributes one span carries (each a field of the event record).
pub const MAX_ATTRIBUTES: usize = 16;

impl Cx<'_> {
    pub(super) fn span(&mut self, e: &Expr, args: &[Expr], names: &[Option<Ident>]) {
        if !matches!(self.kind, InstanceKind::Return | InstanceKind::Panic) {
            self.err(
                Diagnostic::error(e.span, "span() is only known in `on return` and `on panic` probes")
                    .label("no call to end here")
                    .hint("a span runs from the call's entry to its return: `on return FUNC { span() }`"),
            );
            return;
        }
        self.uses_elapsed = true;
        let mut keys: Vec<Option<String>> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let named = names.get(i).and_then(|n| n.as_ref());
            let t = self.expr(a);
            if named.is_some_and(|n| n.name == "name") {
                if !matches!(t, Ty::Str { .. } | Ty::Void) {
                    self.err(
                        Diagnostic::error(a.span, format!("a span's name is a string, not {}", t.a()))
                            .label("not a string")
                            .hint("span(name: \"checkout\") or a Go string: span(name: req.URL.Path)"),
                    );
                }
                if keys.iter().any(Option::is_none) {
                    self.err(Diagnostic::error(a.span, "the span is named twice").label("a second name"));
                }
                keys.push(None);
                continue;
            }
            let key = match named {
                Some(n) => n.name.clone(),
                None => keynames::derived(a, i),
            };
            if seen.contains(&key) {
                self.err(
                    Diagnostic::error(a.span, format!("the attribute `{key}` is given twice"))
                        .label("a second value for it")
                        .hint("name one of them: span(key: value)"),
                );
            }
            seen.push(key.clone());
            self.storable(a, &t, "printed");
            keys.push(Some(key));
        }
        if seen.len() > MAX_ATTRIBUTES {
            self.err(
                Diagnostic::error(e.span, format!("a span carries at most {MAX_ATTRIBUTES} attributes here"))
                    .label(format!("{} attributes", seen.len())),
            );
        }
        self.facts.spans.insert(e.id, SpanArgs { keys });
        if self.kind == InstanceKind::Return {
            self.facts.span_error = self.error_result();
        }
        self.facts.span_ctx = self.context_param();
    }

    /// `trace_context(s)`: in `on entry` probes of functions, a string.
    pub(super) fn trace_context(&mut self, e: &Expr, args: &[Expr]) {
        if self.kind != InstanceKind::Entry || !self.has_function {
            self.err(
                Diagnostic::error(e.span, "trace_context() is only known in `on entry` probes of functions")
                    .label("no call starting here")
                    .hint("the context holds for the call: `on entry FUNC { trace_context(traceparent) }`"),
            );
            return;
        }
        let [arg] = args else {
            self.err(
                Diagnostic::error(e.span, "trace_context takes one string: a W3C traceparent").label("wrong arguments"),
            );
            return;
        };
        let t = self.expr(arg);
        if !matches!(t, Ty::Str { .. } | Ty::Void) {
            self.err(
                Diagnostic::error(arg.span, format!("a traceparent is a string, not {}", t.a())).label("not a string"),
            );
        }
        self.facts.context = true;
    }

    /// Where the function's first `context.Context` parameter is at its entry.
    fn context_param(&self) -> Option<crate::arch::abi::Location> {
        self.values
            .iter()
            .filter(|v| !v.is_result && self.types.get(v.type_id).name == "context.Context")
            .find(|v| v.at_entry || self.kind != InstanceKind::Return)
            .map(|v| v.location.clone())
            .filter(|l| !matches!(l, crate::arch::abi::Location::Unreadable { .. }))
    }

    /// The function's first result of type `error`, where it can be read at the return.
    fn error_result(&self) -> Option<ArgInfo> {
        self.values.iter().filter(|v| v.is_result && self.types.get(v.type_id).name == "error").find_map(|v| {
            match &v.ty {
                Ok(Ty::Interface) if !matches!(v.location, crate::arch::abi::Location::Unreadable { .. }) => {
                    Some(ArgInfo {
                        name: v.name.clone(),
                        location: v.location.clone(),
                        at_entry: false,
                        type_id: v.type_id,
                        ty: Ty::Interface,
                    })
                }
                _ => None,
            }
        })
    }
}
