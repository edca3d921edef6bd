//! `span()`: gtrace's spans of tests/go/spans reach a real OpenTelemetry Collector (OTLP
//! receiver, file exporter) and equal what the program says of its own calls: one span
//! per call, each named and with its attributes, its time inside the call as the caller
//! measured it, errors as status, and each child's parent the span of the call it was
//! made in, on four goroutines at once. Without --otlp, spans are printed (-f json).
//! Needs root (SKIP without, unless CI=true) and the collector built from the Go module
//! proxy (as tests/otlp.rs).

mod support;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use support::collector::{self, span_attribute as attribute};
use support::privileged;
use support::processes::{truth_of, Gtrace, Program};

const SCRIPT: &str = r#"
on return main.checkout { span(user: user) }
on return main.price { span(name: "price", user: user) }
on return main.charge { span(user: user, amount: amount); @charge = hist(elapsed) }
on return main.audit { span(user: user, note: note) }
"#;

/// What the program says of one call.
#[derive(Debug)]
struct Call {
    function: String,
    user: i64,
    start: u64,
    end: u64,
    parent: Option<String>,
    failed: bool,
    slept: u64,
    attrs: BTreeMap<String, String>,
}

fn calls(truth: &str) -> Vec<Call> {
    truth
        .lines()
        .filter_map(|l| l.strip_prefix("truth-call: "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap_or_else(|_| panic!("{l}"));
            let attrs = f[7].split(',').filter_map(|a| a.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect();
            Call {
                function: f[0].into(),
                user: n(1) as i64,
                start: n(2),
                end: n(3),
                parent: (f[4] != "-").then(|| f[4].to_string()),
                failed: f[5] == "1",
                slept: n(6),
                attrs,
            }
        })
        .collect()
}

fn nanos(v: &Value) -> u64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not nanoseconds: {v}"))
}

/// The span name the script gives each function.
fn span_name(function: &str) -> &str {
    if function == "main.price" {
        "price"
    } else {
        function
    }
}

#[test]
fn a_real_collector_receives_a_span_per_call_nested_as_the_program_nested_them() {
    let test = "a_real_collector_receives_a_span_per_call_nested_as_the_program_nested_them";
    let Some(c) = collector::for_test(test, "spans-truth") else { return };
    let bin = support::go_build("spans", &[]);
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let url = c.url.clone();
    let mut g = Gtrace::start(&["-e", SCRIPT, "-p", &pid, "--otlp", &url, "--otlp-interval", "500ms"]);
    g.attached();
    let truth = program.go();
    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let calls = calls(&truth);
    assert_eq!(calls.len() as u64, truth_of(&truth, "calls"));
    let said = format!("gtrace: {} spans sent to the OpenTelemetry collector at {url}", calls.len());
    assert!(g.err.text().contains(&said), "{}", g.err.text());
    assert!(!g.err.text().contains("never sent"), "{}", g.err.text());
    let got = c.wait_spans(calls.len());
    assert_eq!(got.len(), calls.len(), "spans received");

    // One span per (function, user): each call's.
    let by_call = spans_by_call(&got);
    assert_eq!(by_call.len(), calls.len(), "a span per call");
    let error = truth.lines().find_map(|l| l.strip_prefix("truth-error: ")).expect("the error's text");
    let mut traces = BTreeSet::new();
    for call in &calls {
        if let Some(trace) = span_of_call(call, &by_call, error) {
            traces.insert(trace);
        }
    }
    let roots = calls.iter().filter(|c| c.parent.is_none()).count();
    assert_eq!(traces.len(), roots, "a trace per checkout");
    let charges = calls.iter().filter(|c| c.function == "main.charge").count();
    charge_exemplar(&c, &got, charges);
}

/// The spans received, by (function, user).
fn spans_by_call(got: &[Value]) -> BTreeMap<(String, i64), &Value> {
    got.iter()
        .map(|s| {
            let function = attribute(s, "code.function.name").expect("code.function.name");
            let user = attribute(s, "user").and_then(|u| u.parse().ok()).expect("user");
            ((function, user), s)
        })
        .collect()
}

/// Checks the span of `call` against what the program said of it (`error`: the failed
/// calls' err.Error()); the trace it begins, if it has no parent.
fn span_of_call(call: &Call, by_call: &BTreeMap<(String, i64), &Value>, error: &str) -> Option<String> {
    let s = by_call[&(call.function.clone(), call.user)];
    let what = format!("{} of user {}: {s}", call.function, call.user);
    assert_eq!(s["name"], span_name(&call.function), "{what}");
    for (k, v) in &call.attrs {
        assert_eq!(attribute(s, k).as_deref(), Some(v.as_str()), "{what}");
    }
    // Inside the call as its caller timed it (the same wall clock; gtrace's kernel
    // times moved to it once per batch of events: 1ms of leeway), and at least what
    // the call slept.
    let (start, end) = (nanos(&s["startTimeUnixNano"]), nanos(&s["endTimeUnixNano"]));
    assert!(start + 1_000_000 >= call.start && end <= call.end + 1_000_000, "{what}: not in {call:?}");
    assert!(end - start <= call.end - call.start, "{what}: longer than the call took: {call:?}");
    assert!(end - start >= call.slept, "{what}: shorter than the call slept: {call:?}");
    // Errors as status, with err.Error()'s text.
    let code = s["status"]["code"].as_u64().unwrap_or(0);
    if call.failed {
        assert_eq!((code, s["status"]["message"].as_str()), (2, Some(error)), "{what}");
    } else {
        assert_eq!(code, 0, "{what}");
    }
    // Nested as the program nested them: the parent is the span of the call this
    // one was made in, in its trace; a checkout begins a trace of its own.
    match &call.parent {
        Some(parent) => {
            let p = by_call[&(parent.clone(), call.user)];
            assert_eq!(s["parentSpanId"], p["spanId"], "{what}");
            assert_eq!(s["traceId"], p["traceId"], "{what}");
            None
        }
        None => {
            assert_eq!(s["parentSpanId"].as_str().unwrap_or_default(), "", "{what}");
            Some(s["traceId"].as_str().unwrap_or_default().to_string())
        }
    }
}

/// The histogram of charge's latency carries an exemplar: one charge's span, with
/// that span's duration (in seconds) as its value.
fn charge_exemplar(c: &collector::Collector, got: &[Value], charges: usize) {
    // The last push holds every charge; it may reach the collector's file a little after
    // the spans of the last calls, sent apart: waited for, at most 10 s.
    let count = |r: &Value| {
        collector::metric(r, "gtrace_charge")
            .map(|m| collector::number(&m["exponentialHistogram"]["dataPoints"][0]["count"]))
    };
    let pushed = || c.received().into_iter().filter(|r| count(r).is_some()).last();
    let last =
        support::processes::poll(Duration::from_secs(10), || pushed().filter(|r| count(r) == Some(charges as f64)));
    let last = last.or_else(pushed).expect("gtrace_charge pushed");
    let m = collector::metric(&last, "gtrace_charge").expect("gtrace_charge");
    let p = &m["exponentialHistogram"]["dataPoints"][0];
    assert_eq!(collector::number(&p["count"]), charges as f64, "{p}");
    let ex = &p["exemplars"][0];
    let s = got.iter().find(|s| s["spanId"] == ex["spanId"]).unwrap_or_else(|| panic!("no span of {ex}"));
    assert_eq!((s["traceId"].clone(), s["name"].clone()), (ex["traceId"].clone(), "main.charge".into()), "{ex}");
    let took = (nanos(&s["endTimeUnixNano"]) - nanos(&s["startTimeUnixNano"])) as f64 / 1e9;
    assert!((ex["asDouble"].as_f64().unwrap_or(-1.0) - took).abs() < 1e-12, "{ex} vs {took}");
}

#[test]
fn without_otlp_each_span_is_printed() {
    let test = "without_otlp_each_span_is_printed";
    if !privileged(test) {
        return;
    }
    let bin = support::go_build("spans", &[]);
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let mut g = Gtrace::start(&["-e", SCRIPT, "-p", &pid, "-f", "json"]);
    g.attached();
    let truth = program.go();
    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let calls = calls(&truth);
    let printed: Vec<Value> = g
        .out
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "span")
        .collect();
    assert_eq!(printed.len(), calls.len(), "{}", g.out.text());
    let ids: BTreeMap<(String, i64), (&Value, &Value)> = printed
        .iter()
        .map(|s| {
            let key = (s["function"].as_str().unwrap().to_string(), s["attributes"]["user"].as_i64().unwrap());
            (key, (&s["span_id"], &s["parent_span_id"]))
        })
        .collect();
    for call in &calls {
        let (_, parent) = ids[&(call.function.clone(), call.user)];
        match &call.parent {
            Some(p) => assert_eq!(parent, ids[&(p.clone(), call.user)].0, "{call:?}"),
            None => assert!(parent.is_null(), "{call:?}"),
        }
    }
}

/// `--check`'s stderr for a script against tests/go/spans, which must fail.
fn refused(script: &str) -> String {
    let bin = support::go_build("spans", &[]);
    let r = support::gtrace(&["-e", script, "--check", "-b", bin.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{script} should fail:\n{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    r.stderr
}

#[test]
fn a_span_is_made_where_a_call_ends_with_a_name_and_keys_once() {
    let e = refused("on entry main.audit { span() }");
    assert!(e.contains("span() is only known in `on return` and `on panic` probes"), "{e}");
    let e = refused("on return main.audit { span(name: user) }");
    assert!(e.contains("a span's name is a string, not an int"), "{e}");
    let e = refused("on return main.audit { span(user, user: user) }");
    assert!(e.contains("the attribute `user` is given twice"), "{e}");
    let e = refused(r#"on return main.audit { printf("%d\n", n: user) }"#);
    assert!(e.contains("printf() takes its arguments in order, without names"), "{e}");
    let e = refused("on return main.audit { x := span() }");
    assert!(e.contains("span() is a statement, not a value"), "{e}");
    // Ended spans: a start in nanoseconds, a kind by its name, an error as a bool or text.
    let e = refused(r#"on entry main.audit { span(start: "now") }"#);
    assert!(e.contains("a span's start is a time in nanoseconds, not a string"), "{e}");
    let e = refused(r#"on entry main.audit { span(start: nsecs, kind: "backend") }"#);
    assert!(e.contains("a span's kind is one of its names") && e.contains("\"server\""), "{e}");
    let e = refused("on entry main.audit { span(start: nsecs, error: user) }");
    assert!(e.contains("a span's error is a bool or a message, not an int"), "{e}");
    let e = refused("on entry main.audit { span(start: nsecs, parent: user) }");
    assert!(e.contains("a span's parent is a W3C traceparent or a context.Context, not an int"), "{e}");
    // Keys with dots name span attributes, not map keys.
    let e = refused("on return main.audit { @m[user.id: user] = count() }");
    assert!(e.contains("ASCII letters, digits and `_`"), "{e}");
    let bin = support::go_build("spans", &[]);
    let ok = support::gtrace(&[
        "-e",
        "on return main.audit { span(user.id: user, note, kind: \"client\") }\non entry main.price { span(start: nsecs - 5, error: user > 3, kind: \"server\") }",
        "--check",
        "-b",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

/// tests/go/traceparent's requests: id → (trace id, parent id, kind) as it sent them.
fn sent_headers(truth: &str) -> BTreeMap<i64, (String, String, String)> {
    truth
        .lines()
        .filter_map(|l| l.strip_prefix("truth-request: "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].parse().expect("an id"), (f[1].into(), f[2].into(), f[3].into()))
        })
        .collect()
}

/// Over HTTP/1, with a span of each write of a response too: net/http flushes it in
/// finishRequest, after serverHandler.ServeHTTP returned, on the same goroutine. That
/// write is under no request's header (ServeHTTP's frame is popped at its RET): a trace
/// of its own each, one write a response (the program counts its connections' writes).
#[test]
fn spans_under_a_served_request_join_the_trace_of_its_traceparent_header() {
    let test = "spans_under_a_served_request_join_the_trace_of_its_traceparent_header";
    served_requests_join_their_traceparent(test, &[], 1);
}

/// The same over HTTP/2 without TLS (net/http's own h2c, Go 1.24 and later: its handler
/// goroutines call serverHandler.ServeHTTP too). Each request has a goroutine of its own,
/// and the runtime gives a new goroutine a dead one's g: a request without a valid
/// header once took the trace of an earlier one whose goroutine had the same g, because
/// ServeHTTP's frame was never popped at its RET without an `on panic` probe in the
/// script (lower/runtime_programs.rs), and was found below the next request's calls.
#[test]
fn spans_under_an_h2c_request_join_the_trace_of_its_traceparent_header() {
    let test = "spans_under_an_h2c_request_join_the_trace_of_its_traceparent_header";
    served_requests_join_their_traceparent(test, &["h2c"], 2);
}

/// The HTTP/1 server's writes to its connection (a span each, with `write: 1`).
const WRITES: &str = "on return \"net/http.checkConnErrorWriter.Write\" { span(write: 1) }";

/// tests/go/traceparent ARGS traced with spans of handle and lookup (and on HTTP/1 of the
/// connection's writes); `proto`: the HTTP major version the program says its requests
/// came in.
fn served_requests_join_their_traceparent(test: &str, args: &[&str], proto: u64) {
    let Some(c) = collector::for_test(test, &format!("spans-traceparent{}", args.join("-"))) else { return };
    let bin = support::go_build("traceparent", &[]);
    let mut program = Program::start_args(&bin, args);
    let pid = program.pid.to_string();
    let url = c.url.clone();
    let mut script = "on return main.handle { span(id: id) }\non return main.lookup { span(id: id) }".to_string();
    if proto == 1 {
        script = format!("{script}\n{WRITES}");
    }
    let mut g = Gtrace::start(&["-e", &script, "-p", &pid, "--otlp", &url]);
    g.attached();
    let truth = program.go();
    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let sent = sent_headers(&truth);
    assert_eq!(sent.len() as u64, truth_of(&truth, "requests"));
    assert_eq!(truth_of(&truth, "proto"), proto, "{truth}");
    // Unsampled traces (flags 00) are the program's decision: no span is sent for them.
    let unsampled = sent.values().filter(|(_, _, kind)| kind == "sampled=00").count();
    let writes = if proto == 1 { truth_of(&truth, "writes") as usize } else { 0 };
    let exported = 2 * (sent.len() - unsampled) + writes;
    let said =
        format!("gtrace: {exported} spans sent to the OpenTelemetry collector at {url}; {} not sent", 2 * unsampled);
    assert!(g.err.text().contains(&said), "{said}\n{}", g.err.text());
    let got = c.wait_spans(exported);
    assert_eq!(got.len(), exported, "{got:?}");
    let (written, got): (Vec<&Value>, Vec<&Value>) = got.iter().partition(|s| attribute(s, "write").is_some());
    // Each write after its handler returned: a trace of its own, no request's.
    assert_eq!(written.len(), writes, "{written:?}");
    let traces: BTreeSet<&str> = got.iter().filter_map(|s| s["traceId"].as_str()).collect();
    for w in &written {
        assert_eq!(w["parentSpanId"].as_str().unwrap_or_default(), "", "{w}");
        let trace = w["traceId"].as_str().unwrap_or_default();
        assert!(!traces.contains(trace) && sent.values().all(|(t, _, _)| t != trace), "{w}");
    }
    let by_call: BTreeMap<(String, i64), &Value> = got
        .iter()
        .map(|s| {
            let function = attribute(s, "code.function.name").expect("code.function.name");
            ((function, attribute(s, "id").and_then(|i| i.parse().ok()).expect("id")), *s)
        })
        .collect();
    let remote = 0x100 | 0x200 | 1;
    for (id, (trace, parent, kind)) in &sent {
        let handle = by_call.get(&("main.handle".into(), *id));
        let lookup = by_call.get(&("main.lookup".into(), *id));
        if kind == "sampled=00" {
            assert!(handle.is_none() && lookup.is_none(), "request {id} is not sampled");
            continue;
        }
        let (handle, lookup) = (handle.expect("a span of handle"), lookup.expect("a span of lookup"));
        let what = format!("request {id} ({kind}): {handle}");
        if kind == "sampled=01" {
            // The header's trace, its span the parent (remote).
            assert_eq!(handle["traceId"].as_str(), Some(trace.as_str()), "{what}");
            assert_eq!(handle["parentSpanId"].as_str(), Some(parent.as_str()), "{what}");
            assert_eq!(handle["flags"].as_u64(), Some(remote), "{what}");
        } else {
            // No header, or one W3C says to ignore: a trace of gtrace's own.
            assert_eq!(handle["parentSpanId"].as_str().unwrap_or_default(), "", "{what}");
            assert!(sent.values().all(|(t, _, _)| handle["traceId"] != t.as_str()), "{what}");
            assert_eq!(handle["flags"].as_u64(), Some(0x100 | 1), "{what}");
        }
        // lookup is handle's child, in its trace, a local parent.
        assert_eq!(lookup["traceId"], handle["traceId"], "{what}");
        assert_eq!(lookup["parentSpanId"], handle["spanId"], "{what}");
        assert_eq!(lookup["flags"].as_u64(), Some(0x100 | 1), "{what}");
    }
}

#[test]
fn spans_take_the_opentelemetry_sdks_span_in_a_context_parameter_as_their_parent() {
    let test = "spans_take_the_opentelemetry_sdks_span_in_a_context_parameter_as_their_parent";
    let Some(c) = collector::for_test(test, "spans-otelsdk") else { return };
    let bin = support::go_build("otelsdk", &[]);
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let url = c.url.clone();
    let script = "on return main.work { span(id: id) }\non return main.step { span(id: id) }";
    let mut g = Gtrace::start(&["-e", script, "-p", &pid, "--otlp", &url]);
    g.attached();
    let truth = program.go();
    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    // (function, id) → the trace id and span id of the SDK span in the call's context,
    // and whether the SDK marks it remote (another process's).
    let sdk: BTreeMap<(String, i64), (String, String, bool)> = truth
        .lines()
        .filter_map(|l| l.strip_prefix("truth-call: "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            ((f[0].to_string(), f[1].parse().expect("an id")), (f[2].to_string(), f[3].to_string(), f[4] == "true"))
        })
        .collect();
    let remotes = truth_of(&truth, "remote");
    assert_eq!(sdk.values().filter(|c| c.2).count() as u64, 2 * remotes, "{truth}");
    assert_eq!(sdk.len() as u64, 2 * (truth_of(&truth, "requests") + remotes + 1));
    let got = c.wait_spans(sdk.len());
    assert_eq!(got.len(), sdk.len(), "{}", g.err.text());
    let by_call: BTreeMap<(String, i64), &Value> = got
        .iter()
        .map(|s| {
            let function = attribute(s, "code.function.name").expect("code.function.name");
            ((function, attribute(s, "id").and_then(|i| i.parse().ok()).expect("id")), s)
        })
        .collect();
    let none = "0".repeat(16);
    for ((function, id), (trace, span, remote)) in &sdk {
        let s = by_call[&(function.clone(), *id)];
        let what = format!("{function} of request {id}: {s}");
        let parent = s["parentSpanId"].as_str().unwrap_or_default();
        if *span == none {
            // No SDK span in the context, none of gtrace's below: a trace of its own.
            assert_eq!(parent, "", "{what}");
            assert!(sdk.values().all(|(t, _, _)| s["traceId"] != t.as_str()), "{what}");
            continue;
        }
        assert_eq!(s["traceId"].as_str(), Some(trace.as_str()), "{what}");
        let work = by_call[&("main.work".to_string(), *id)];
        if function == "main.step" && sdk[&("main.work".to_string(), *id)].1 == *span {
            // step's context holds the span work's did: gtrace's span of work is nearer,
            // a local parent (sampled; OTLP's "is remote" known and clear).
            assert_eq!(s["parentSpanId"], work["spanId"], "{what}");
            assert_eq!(s["flags"].as_u64(), Some(0x100 | 1), "{what}");
        } else {
            // The SDK's span is the nearest: the request's for work, the one work
            // started for step; a remote parent where the SDK's span context is
            // another process's (IsRemote), else a local one.
            assert_eq!(parent, span, "{what}");
            let flags = if *remote { 0x300 | 1 } else { 0x100 | 1 };
            assert_eq!(s["flags"].as_u64(), Some(flags), "{what}");
        }
    }
}

#[test]
fn on_a_stripped_build_spans_start_their_own_traces_and_say_why() {
    let test = "on_a_stripped_build_spans_start_their_own_traces_and_say_why";
    if !privileged(test) {
        return;
    }
    let bin = support::go_build("traceparent", &["-ldflags=-s -w"]);
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let mut g = Gtrace::start(&["-e", "on return main.handle { span() }", "-p", &pid, "-f", "json"]);
    g.attached();
    let truth = program.go();
    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    assert!(g.err.text().contains("the program's own trace context cannot be read in this binary"), "{}", g.err.text());
    let printed: Vec<Value> = g
        .out
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "span")
        .collect();
    assert_eq!(printed.len() as u64, truth_of(&truth, "requests"), "{}", g.out.text());
    assert!(printed.iter().all(|s| s["parent_span_id"].is_null() && s["name"] == "main.handle"), "{printed:?}");
}

#[test]
fn a_call_a_panic_ends_is_a_span_with_the_panic_as_its_error() {
    let test = "a_call_a_panic_ends_is_a_span_with_the_panic_as_its_error";
    if !privileged(test) {
        return;
    }
    let bin = support::go_build("panics", &[]);
    let watched = ["main.inner", "main.middle", "main.outer", "main.deferer", "main.twice", "main.boom"];
    let script = format!("on panic {} {{ span() }}\non return main.catchNested {{ span() }}", watched.join(", "));
    let cmd = format!("{} mix 1", bin.display());
    let mut g = Gtrace::start(&["-e", &script, "-f", "json", "-c", &cmd]);
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let out = g.out.text();
    let spans: Vec<Value> =
        out.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["type"] == "span").collect();
    let by_name = |f: &str| spans.iter().filter(|s| s["name"] == f).collect::<Vec<_>>();
    // The program's own account: `want FUNC recovered=... panic=TYPE("VALUE") count=N`.
    let mut wanted = 0;
    for line in out.lines().filter_map(|l| l.strip_prefix("want ")) {
        let function = line.split(' ').next().unwrap_or_default();
        if !watched.contains(&function) {
            continue;
        }
        let value = line.split("panic=").nth(1).and_then(|v| v.split('"').nth(1)).expect("a panic value");
        let count: usize = line.rsplit("count=").next().and_then(|c| c.parse().ok()).expect("a count");
        let got = by_name(function);
        assert_eq!(got.len(), count, "{function}: {out}");
        for s in got {
            assert_eq!(s["error"].as_str(), Some(format!("panic: {value}").as_str()), "{s}");
        }
        wanted += count;
    }
    assert_eq!(spans.len(), wanted + 1, "{out}");
    // catchNested calls outer, which calls middle, which calls inner (tests/go/panics).
    let id = |f: &str| by_name(f)[0]["span_id"].clone();
    let parent = |f: &str| by_name(f)[0]["parent_span_id"].clone();
    assert_eq!(parent("main.inner"), id("main.middle"));
    assert_eq!(parent("main.middle"), id("main.outer"));
    assert_eq!(parent("main.outer"), id("main.catchNested"));
    assert!(parent("main.catchNested").is_null());
    assert!(by_name("main.catchNested")[0]["error"].is_null());
}

/// The exemplar of a histogram whose calls make spans reaches a real Prometheus (Debian's,
/// exemplar storage on: it scrapes OpenMetrics text) and /api/v1/query_exemplars gives
/// it with the trace id and span id of one of those calls' spans (printed by gtrace, -f
/// json) and that span's duration as its value.
#[test]
fn prometheus_stores_the_exemplar_of_a_spans_histogram_with_the_spans_trace_id() {
    let test = "prometheus_stores_the_exemplar_of_a_spans_histogram_with_the_spans_trace_id";
    if !privileged(test) {
        return;
    }
    let Some(prom_bin) = support::prometheus::binary(test) else { return };
    let bin = support::go_build("spans", &[]);
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let mut g = Gtrace::start(&["-e", SCRIPT, "-p", &pid, "-f", "json", "--prometheus", "127.0.0.1:0"]);
    let addr = g.serving();
    let prom = support::prometheus::Prometheus::start_exemplars(&prom_bin, &addr, "spans-exemplars");
    let truth = program.go();
    let charges = calls(&truth).iter().filter(|c| c.function == "main.charge").count();
    prom.value_when("gtrace_charge_seconds_count", |v| v == charges as f64);
    let found = support::processes::poll(std::time::Duration::from_secs(30), || {
        Some(prom.exemplars("gtrace_charge_seconds_bucket")).filter(|e| !e.is_empty())
    });
    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let exemplars = found.unwrap_or_else(|| panic!("no exemplar in Prometheus:\n{}", g.err.text()));
    let printed: Vec<serde_json::Value> = g
        .out
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "span" && v["name"] == "main.charge")
        .collect();
    assert_eq!(printed.len(), charges, "{}", g.out.text());
    for (labels, value) in &exemplars {
        let s = printed.iter().find(|s| s["span_id"].as_str() == labels.get("span_id").map(String::as_str));
        let s = s.unwrap_or_else(|| panic!("the exemplar {labels:?} is no charge's span: {printed:?}"));
        assert_eq!(s["trace_id"].as_str(), labels.get("trace_id").map(String::as_str), "{labels:?}");
        let took = s["duration"].as_f64().expect("duration") / 1e9;
        assert!((value - took).abs() < 1e-9, "{labels:?}: {value} vs the span's {took}");
    }
}
