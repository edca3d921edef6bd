//! Where the OpenTelemetry Go SDK keeps the current span in a `context.Context`, for
//! `span()` (lower/sdkcontext.rs): the runtime type descriptors of the context types a
//! chain is made of, and the layouts of `context.valueCtx` and of the SDK's spans, all
//! from the binary's DWARF. `None` when the program does not link the SDK's trace API.

use crate::gobin::Target;
use crate::gotypes::TypeKind;

/// The trace API's package (`trace.SpanContextFromContext`).
const TRACE: &str = "go.opentelemetry.io/otel/trace";
/// The context types whose parent `Context` is their first field: a chain walks on
/// through them.
const WRAPPERS: &[&str] =
    &["context.cancelCtx", "context.timerCtx", "context.withoutCancelCtx", "context.afterFuncCtx", "context.stopCtx"];

/// What a probe needs to find the SDK's span context through a context chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtelContext {
    /// `*context.valueCtx`'s descriptor, and where its parent, key and value are.
    pub value_ctx: u64,
    pub value_parent: u64,
    pub value_key: u64,
    pub value_val: u64,
    /// The descriptors of the pointer types whose parent is at offset 0.
    pub wrappers: Vec<u64>,
    /// `trace.traceContextKeyType`'s descriptor: the key the span is stored under.
    pub key: u64,
    /// The span types a value may hold: descriptor, and the offset of its
    /// `trace.SpanContext` from the value's data pointer.
    pub spans: Vec<(u64, u64)>,
    /// In `trace.SpanContext`: the trace id (16 bytes), span id (8), flags (1), and
    /// whether it came from another process (`remote`, a bool: `IsRemote()`).
    pub trace_id: u64,
    pub span_id: u64,
    pub flags: u64,
    pub remote: Option<u64>,
}

impl Target {
    /// The SDK's layout in this binary, if it links the trace API (and is no PIE: the
    /// descriptors are compared at their link-time addresses).
    pub fn otel_context(&self) -> Option<OtelContext> {
        if self.is_pie() {
            return None;
        }
        let key = self.runtime_type_address(&format!("{TRACE}.traceContextKeyType"))?;
        let (value_parent, value_key, value_val) = {
            let id = self.type_by_name("context.valueCtx")?;
            let f = |n: &str| self.field_offset(id, n);
            (f("Context")?, f("key")?, f("val")?)
        };
        let sc = self.type_by_name(&format!("{TRACE}.SpanContext"))?;
        let (trace_id, span_id, flags) =
            (self.field_offset(sc, "traceID")?, self.field_offset(sc, "spanID")?, self.field_offset(sc, "traceFlags")?);
        let remote = self.field_offset(sc, "remote");
        let mut spans = Vec::new();
        // The SDK's span, a pointer; the SDK's span of a trace its sampler dropped (a
        // value); the API's span of a context without a recording span.
        for (ty, pointer, field) in [
            ("go.opentelemetry.io/otel/sdk/trace.recordingSpan", true, "spanContext"),
            ("go.opentelemetry.io/otel/sdk/trace.nonRecordingSpan", false, "sc"),
            (&format!("{TRACE}.nonRecordingSpan"), false, "sc"),
        ] {
            let Some(id) = self.type_by_name(ty) else { continue };
            let name = if pointer { format!("*{ty}") } else { ty.to_string() };
            if let (Some(addr), Some(off)) = (self.runtime_type_address(&name), self.field_offset(id, field)) {
                spans.push((addr, off));
            }
        }
        let wrappers = WRAPPERS
            .iter()
            .filter(|w| self.type_by_name(w).is_some_and(|id| self.first_field_is_context(id)))
            .filter_map(|w| self.runtime_type_address(&format!("*{w}")))
            .collect();
        Some(OtelContext {
            value_ctx: self.runtime_type_address("*context.valueCtx")?,
            value_parent,
            value_key,
            value_val,
            wrappers,
            key,
            spans,
            trace_id,
            span_id,
            flags,
            remote,
        })
    }

    fn field_offset(&self, id: crate::gotypes::TypeId, name: &str) -> Option<u64> {
        match &self.types().get(id).kind {
            TypeKind::Struct { fields } => fields.iter().find(|f| f.name == name).map(|f| f.offset),
            _ => None,
        }
    }

    /// Whether the struct's first field, at offset 0 (through embedded structs), is a
    /// `context.Context`.
    fn first_field_is_context(&self, id: crate::gotypes::TypeId) -> bool {
        let types = self.types();
        let mut id = id;
        for _ in 0..4 {
            let TypeKind::Struct { fields } = &types.get(id).kind else { return false };
            let Some(first) = fields.first().filter(|f| f.offset == 0) else { return false };
            let t = types.get(first.ty);
            if t.name == "context.Context" {
                return true;
            }
            id = first.ty;
        }
        false
    }
}
