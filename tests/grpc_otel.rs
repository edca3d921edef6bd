//! `gtrace grpc --otlp` on a gRPC client instrumented with the OpenTelemetry Go SDK
//! (tests/go/grpcotel, built with the oldest and the newest grpc-go the library names,
//! and the SDK, from the Go module proxy): each client call's span is in the trace of
//! the SDK span the call was made under, that span its parent (read through the
//! stream's context chain when the call ends), as the program prints, a remote parent
//! where the SDK's span context is another process's; calls under no
//! SDK span start traces of their own; a call under a span the SDK does not sample is
//! not sent. The server's spans have no parent (the client sends no traceparent). A
//! real OpenTelemetry Collector receives them (tests/otlp.rs builds it). Needs root
//! (SKIP without, unless CI=true).

mod support;

use std::collections::BTreeSet;

use serde_json::Value;
use support::collector::{self, span_attribute};

/// One call as the program made it: its number, method, and the SDK span it was made
/// under (trace id, span id, sampled), if any, and whether that span context is another
/// process's (the SDK's IsRemote).
struct Call {
    n: u64,
    method: String,
    sdk: Option<(String, String, bool)>,
    remote: bool,
}

fn calls(out: &str) -> Vec<Call> {
    out.lines()
        .filter_map(|l| l.strip_prefix("truth-call: "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sdk = (f[2] != "-").then(|| (f[2].to_string(), f[3].to_string(), f[4] == "true"));
            Call { n: f[0].parse().expect("a number"), method: f[1].to_string(), sdk, remote: f[5] == "true" }
        })
        .collect()
}

fn side(s: &Value) -> &'static str {
    match &s["kind"] {
        k if k == 2 || k == "SPAN_KIND_SERVER" => "server",
        k if k == 3 || k == "SPAN_KIND_CLIENT" => "client",
        k => panic!("a span of kind {k}: {s}"),
    }
}

#[test]
fn grpc_client_spans_are_children_of_the_sdk_span_the_call_was_made_under() {
    let test = "grpc_client_spans_are_children_of_the_sdk_span_the_call_was_made_under";
    for version in support::GRPC_VERSIONS {
        let Some(c) = collector::for_test(test, &format!("grpc-otel-{version}")) else { return };
        let program = support::versioned("grpcotel", version, &[], &[]);
        let r = support::gtrace(&["grpc", "--otlp", &c.url, "-c", &program.display().to_string()]);
        assert_eq!(r.code, 0, "{version}:\n{}\n{}", r.stdout, r.stderr);
        let calls = calls(&r.stdout);
        assert_eq!(calls.len() as i64, support::truth(&r.stdout, "calls"), "{}", r.stdout);
        let unsampled = calls.iter().filter(|c| matches!(c.sdk, Some((_, _, false)))).count();
        // A span a call on each side, but the unsampled calls' client spans.
        let sent = 2 * calls.len() - unsampled;
        let said = format!("gtrace: {sent} spans sent to the OpenTelemetry collector at {}", c.url);
        assert!(r.stderr.contains(&said), "{version}: {said}\n{}", r.stderr);
        let spans = c.wait_spans(sent);
        assert_eq!(spans.len(), sent, "{version}");
        let (client, server): (Vec<&Value>, Vec<&Value>) = spans.iter().partition(|s| side(s) == "client");
        let sdk_traces: BTreeSet<&str> = calls.iter().filter_map(|c| c.sdk.as_ref().map(|s| s.0.as_str())).collect();
        // The server: no traceparent arrived, every span a root of a trace of its own.
        assert_eq!(server.len(), calls.len(), "{version}");
        for s in &server {
            assert_eq!(s["parentSpanId"].as_str().unwrap_or_default(), "", "{version}: {s}");
            assert!(!sdk_traces.contains(s["traceId"].as_str().unwrap_or_default()), "{version}: {s}");
        }
        // The client: each call under an SDK span has its span in the SDK's trace, the
        // SDK's span its parent (a local parent: the same process); each under none, a
        // trace of its own. Spans and calls are matched by the SDK's span ids (each
        // call has its own) and by method for the rest.
        let mut left: Vec<&Value> = client.clone();
        for call in calls.iter() {
            let what = format!("{version}: call {} {}", call.n, call.method);
            let found = match &call.sdk {
                Some((_, _, false)) => continue,
                Some((trace, span, true)) => left.iter().position(|s| {
                    s["traceId"].as_str() == Some(trace.as_str()) && s["parentSpanId"].as_str() == Some(span.as_str())
                }),
                None => left.iter().position(|s| {
                    s["parentSpanId"].as_str().unwrap_or_default().is_empty()
                        && !sdk_traces.contains(s["traceId"].as_str().unwrap_or_default())
                        && s["name"].as_str() == Some(call.method.as_str())
                }),
            };
            let s = left.remove(found.unwrap_or_else(|| panic!("{what}: no span for it in {client:?}")));
            assert_eq!(s["name"].as_str(), Some(call.method.as_str()), "{what}: {s}");
            assert_eq!(span_attribute(s, "rpc.grpc.status_code").as_deref(), Some("0"), "{what}: {s}");
            // Sampled; OTLP's "parent is remote" bit known, and set only where the
            // SDK's span context is another process's (IsRemote), clear where the
            // span is this process's own.
            let flags = if call.remote { 0x300 | 1 } else { 0x100 | 1 };
            assert_eq!(s["flags"].as_u64(), Some(flags), "{what}: {s}");
        }
        assert!(calls.iter().any(|c| c.remote), "a call under a remote span context");
        assert!(left.is_empty(), "{version}: spans of no call: {left:?}");
        // The whole number ("; 3 not sent:", never the tail of "13 not sent").
        let not_sent = format!("; {unsampled} not sent:");
        assert!(unsampled > 0 && r.stderr.contains(&not_sent), "{version}: {not_sent}\n{}", r.stderr);
    }
}
