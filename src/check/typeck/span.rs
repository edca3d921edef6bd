//! `span(name: ..., key: value, ...)`: one OpenTelemetry span for the call, in `on return`
//! and `on panic` probes. Its arguments are the span's name (`name:`, a string) and its
//! attributes by key (written, or derived from the expression as map keys are); the
//! function's `error` result, when it has one, decides the status. With `start:` (a
//! kernel time kept earlier) it is an ended span, in any probe: from that time to now,
//! its status `error:`, its parent `parent:` (a W3C traceparent, or a `context.Context`
//! holding the OpenTelemetry SDK's span). `kind:` is OTLP's span kind.

use super::super::keynames;
use super::super::ty::Ty;
use super::super::{ArgInfo, InstanceKind, SpanArgs};
use super::Cx;
use crate::diag::Diagnostic;
use crate::syntax::ast::*;

/// The Go type whose values may hold the OpenTelemetry SDK's span.
const CONTEXT: &str = "context.Context";

/// The most attributes one span carries (each a field of the event record).
pub const MAX_ATTRIBUTES: usize = 16;

impl Cx<'_> {
    pub(super) fn span(&mut self, e: &Expr, args: &[Expr], names: &[Option<Ident>]) {
        let named = |i: usize, what: &str| names.get(i).and_then(|n| n.as_ref()).is_some_and(|n| n.name == what);
        let start = (0..args.len()).find(|&i| named(i, "start"));
        if start.is_none() && !matches!(self.kind, InstanceKind::Return | InstanceKind::Panic) {
            self.err(
                Diagnostic::error(e.span, "span() is only known in `on return` and `on panic` probes, or with `start:`")
                    .label("no call to end here")
                    .hint("a span runs from the call's entry to its return: `on return FUNC { span() }`; from a time kept earlier to now: `span(start: t0)`"),
            );
            return;
        }
        let mut out = SpanArgs { start, ..SpanArgs::default() };
        let mut seen: Vec<String> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let t = self.expr(a);
            if named(i, "name") {
                if !matches!(t, Ty::Str { .. } | Ty::Void) {
                    self.err(
                        Diagnostic::error(a.span, format!("a span's name is a string, not {}", t.a()))
                            .label("not a string")
                            .hint("span(name: \"checkout\") or a Go string: span(name: req.URL.Path)"),
                    );
                }
                if out.keys.iter().any(Option::is_none) {
                    self.err(Diagnostic::error(a.span, "the span is named twice").label("a second name"));
                }
                out.keys.push(None);
                out.fields.push(i);
                continue;
            }
            if self.span_role(&mut out, i, a, &t, names) {
                continue;
            }
            let key = match names.get(i).and_then(|n| n.as_ref()) {
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
            out.keys.push(Some(key));
            out.fields.push(i);
        }
        if seen.len() > MAX_ATTRIBUTES {
            self.err(
                Diagnostic::error(e.span, format!("a span carries at most {MAX_ATTRIBUTES} attributes here"))
                    .label(format!("{} attributes", seen.len())),
            );
        }
        let of_call = out.of_call();
        self.facts.spans.insert(e.id, out);
        if !of_call {
            return;
        }
        self.uses_elapsed = true;
        if self.kind == InstanceKind::Return {
            self.facts.span_error = self.error_result();
        }
        self.facts.span_ctx = self.context_param();
    }

    /// `start:`, `kind:`, `error:` and `parent:` (the last two only with `start:`): checked and kept
    /// in `out`; false for an attribute.
    fn span_role(&mut self, out: &mut SpanArgs, i: usize, a: &Expr, t: &Ty, names: &[Option<Ident>]) -> bool {
        let Some(name) = names.get(i).and_then(|n| n.as_ref()) else { return false };
        match name.name.as_str() {
            "start" => {
                if !t.is_integer() && *t != Ty::Void {
                    self.err(
                        Diagnostic::error(a.span, format!("a span's start is a time in nanoseconds, not {}", t.a()))
                            .label("not an integer")
                            .hint("keep `nsecs` where the span starts: `@t0[id] = nsecs`, then `span(start: @t0[id])`"),
                    );
                }
                if out.start != Some(i) {
                    self.err(Diagnostic::error(a.span, "the span's start is given twice").label("a second start"));
                }
            }
            "kind" => match &a.kind {
                ExprKind::Str(s) if crate::plan::SpanKind::from_name(s).is_some() => {
                    out.kind = crate::plan::SpanKind::from_name(s).unwrap_or_default();
                }
                _ => self.err(
                    Diagnostic::error(a.span, "a span's kind is one of its names, written as a string")
                        .label("not a span kind")
                        .hint(format!(
                            "one of: {}",
                            crate::plan::SpanKind::NAMES.map(|k| format!("\"{k}\"")).join(", ")
                        )),
                ),
            },
            "error" if out.start.is_some() => {
                if !matches!(t, Ty::Bool | Ty::Str { .. } | Ty::Void) {
                    self.err(
                        Diagnostic::error(a.span, format!("a span's error is a bool or a message, not {}", t.a()))
                            .label("neither")
                            .hint("span(start: t0, error: code != 0)"),
                    );
                }
                if out.error.replace(i).is_some() {
                    self.err(Diagnostic::error(a.span, "the span's error is given twice").label("a second error"));
                }
            }
            "parent" if out.start.is_some() => {
                let context = self.facts.go_types.get(&a.id).is_some_and(|id| self.types.get(*id).name == CONTEXT);
                if context {
                    out.parent_ctx = true;
                    out.parent_ctx_at = Some(a.span);
                } else if !matches!(t, Ty::Str { .. } | Ty::Void) {
                    self.err(
                        Diagnostic::error(a.span, format!("a span's parent is a W3C traceparent or a context.Context, not {}", t.a()))
                            .label("neither a string nor a context.Context")
                            .hint("span(start: t0, parent: @_tp[id]), with the header kept where it arrived; or a context.Context that holds the OpenTelemetry SDK's span: span(start: t0, parent: ctx)"),
                    );
                }
                if out.parent.replace(i).is_some() {
                    self.err(Diagnostic::error(a.span, "the span's parent is given twice").label("a second parent"));
                }
            }
            _ => return false,
        }
        true
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
            .filter(|v| !v.is_result && self.types.get(v.type_id).name == CONTEXT)
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
