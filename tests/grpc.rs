//! `gtrace grpc` end to end, on a real gRPC server and client (tests/go/grpcprog: the
//! interop TestService of google.golang.org/grpc, from the Go module proxy) built with
//! the oldest and the newest grpc-go the library names (the go.mod and go.sum of each
//! under tests/go/grpcprog/mods/VERSION). The program counts its own calls by side,
//! method and code, and the messages each side sent and received; the maps gtrace
//! prints must equal them exactly. Also on a stripped build (-s -w), where the library
//! says what it cannot read and counts the rest. Needs root, like every end-to-end
//! test (SKIP said loudly without it, a failure with CI=true).

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use support::collector::{self, span_attribute};
use support::jsonout::{entries, json};
use support::{gtrace, privileged, Run};

/// The grpc-go versions tested: the oldest and the newest the library's header names.
const VERSIONS: &[&str] = support::GRPC_VERSIONS;

fn grpcprog(version: &str, flags: &[&str]) -> PathBuf {
    support::grpcprog(version, flags)
}

/// `gtrace grpc ARGS -f json -c 'PROGRAM ROUNDS'`; must succeed.
fn trace(args: &[&str], program: &std::path::Path, rounds: u32) -> Run {
    support::trace_attached(&[&["grpc"], args, &["-f", "json"]].concat(), program, &rounds.to_string())
}

/// The program's own `key=value` lines.
fn truths(out: &str) -> BTreeMap<String, u64> {
    out.lines()
        .filter(|l| !l.starts_with('{'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or_else(|_| panic!("not a number: {l}", l = v))))
        .collect()
}

/// The truths whose key starts with `prefix|`, without it.
fn truth_of(t: &BTreeMap<String, u64>, prefix: &str) -> BTreeMap<String, u64> {
    let p = format!("{prefix}|");
    t.iter().filter_map(|(k, v)| k.strip_prefix(&p).map(|k| (k.to_string(), *v))).collect()
}

/// A stats() map's message counts and byte totals, by key.
fn stats(objects: &[Value], name: &str) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let e = entries(objects, name);
    let field = |f: &str| e.iter().map(|(k, v)| (k.clone(), v[f].as_u64().expect("a number"))).collect();
    (field("count"), field("sum"))
}

fn counts(objects: &[Value], name: &str) -> BTreeMap<String, u64> {
    entries(objects, name).into_iter().map(|(k, v)| (k, v.as_u64().expect("a count"))).collect()
}

/// Every call in a latency histogram: its buckets' counts, by key.
fn hist_totals(objects: &[Value], name: &str) -> BTreeMap<String, u64> {
    entries(objects, name)
        .into_iter()
        .map(|(k, v)| (k, v.as_array().expect("buckets").iter().map(|b| b["count"].as_u64().expect("count")).sum()))
        .collect()
}

/// Each histogram's exact greatest value (its entry's `max`), by key.
fn hist_max(objects: &[Value], name: &str) -> BTreeMap<String, u64> {
    let map = objects.iter().filter(|o| o["type"] == "map" && o["name"] == name).last().expect("map printed");
    let names: Vec<&str> = map["key_names"].as_array().expect("key_names").iter().filter_map(|n| n.as_str()).collect();
    map["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let key = names.iter().map(|n| e["keys"][*n].as_str().unwrap_or_default()).collect::<Vec<_>>().join("|");
            (key, e["max"].as_u64().expect("max"))
        })
        .collect()
}

/// Sums the values of `m` by the first `parts` parts of their keys.
fn by_prefix(m: &BTreeMap<String, u64>, parts: usize) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let key = k.split('|').take(parts).collect::<Vec<_>>().join("|");
        *out.entry(key).or_insert(0) += v;
    }
    out
}

/// Calls by side, method and code; messages sent and received by side and method (their
/// number and bytes); latency: every call in its side and method's histogram.
fn assert_equal_to_the_programs(r: &Run, label: &str) {
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let calls = truth_of(&t, "calls");
    // 3 rounds of 15, 14 and 15 calls a side: unary, streaming, errors, unknown methods.
    assert_eq!(calls.values().sum::<u64>(), 2 * 44, "{label}: {calls:?}");
    assert!(calls.keys().any(|k| k.ends_with("|DeadlineExceeded")), "{label}: {calls:?}");
    assert_eq!(counts(&objects, "@grpc_calls"), calls, "{label}:\n{}", r.stdout);

    let (sent_n, sent_bytes) = stats(&objects, "@grpc_sent");
    assert_eq!(sent_n, truth_of(&t, "sent_msgs"), "{label}: messages sent");
    assert_eq!(sent_bytes, truth_of(&t, "sent"), "{label}: bytes sent");
    let (recv_n, recv_bytes) = stats(&objects, "@grpc_recv");
    assert_eq!(recv_n, truth_of(&t, "recv_msgs"), "{label}: messages received");
    assert_eq!(recv_bytes, truth_of(&t, "recv"), "{label}: bytes received");

    assert_eq!(hist_totals(&objects, "@grpc_latency"), by_prefix(&calls, 2), "{label}: latency");
    // The calls the client's deadline (30ms) ended: on both sides at least the time from
    // their handler's start to that deadline, the most the program measured (a fixed 25ms
    // failed when a loaded host took more than 5ms to get the calls to their handler).
    let left = t.get("slow|left_ns").copied().unwrap_or(0);
    assert!(left > 0, "{label}: no call reached its handler before the client's deadline: {t:?}");
    let max = hist_max(&objects, "@grpc_latency");
    for side in ["client", "server"] {
        let ns = max[&format!("{side}|/grpc.testing.TestService/UnaryCall")];
        assert!(ns >= left, "{label}: {side}'s slowest UnaryCall took {ns}ns, under the {left}ns its handler had left");
    }
    assert!(!r.stdout.contains("no DWARF"), "{label}: {}", r.stdout);
    assert!(!r.stderr.contains("refused"), "{label}: {}", r.stderr);
}

#[test]
fn grpc_counts_calls_by_method_and_code_on_the_oldest_and_newest_grpc_go() {
    if !privileged("grpc_counts_calls_by_method_and_code_on_the_oldest_and_newest_grpc_go") {
        return;
    }
    for version in VERSIONS {
        let program = grpcprog(version, &[]);
        // The latency histograms are preallocated: 14 new keys in the first
        // milliseconds outrun the kernel's per-CPU allocator (said at exit otherwise).
        let r = trace(&["--map-size", "@grpc_latency=256"], &program, 3);
        assert_equal_to_the_programs(&r, version);
    }
}

/// Stripped (-s -w): one line says what cannot be read; calls are counted by side with
/// their latency, received messages by side with their sizes.
#[test]
fn grpc_on_a_stripped_build_counts_calls_by_side_and_says_what_it_cannot_read() {
    if !privileged("grpc_on_a_stripped_build_counts_calls_by_side_and_says_what_it_cannot_read") {
        return;
    }
    let version = VERSIONS[VERSIONS.len() - 1];
    let program = grpcprog(version, &["-ldflags=-s -w"]);
    // No call is slow enough to be printed, even on a loaded machine (a 106ms call was,
    // at the default 100ms, under four CPU hogs on 2 cores): the one line is the DWARF's.
    let r = trace(&["--set", "grpc_slow=60s"], &program, 3);
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let said: Vec<&Value> = objects.iter().filter(|o| o["type"] == "printf").collect();
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert!(said[0]["text"].as_str().is_some_and(|s| s.contains("no DWARF")), "{said:?}");

    let per_side = |m: &BTreeMap<String, u64>| by_prefix(m, 1);
    let calls: BTreeMap<String, u64> =
        per_side(&truth_of(&t, "calls")).into_iter().map(|(k, v)| (format!("{k}|?|?"), v)).collect();
    assert_eq!(counts(&objects, "@grpc_calls"), calls, "{}", r.stdout);
    let latency = hist_totals(&objects, "@grpc_latency");
    assert_eq!(latency.values().sum::<u64>(), calls.values().sum::<u64>(), "{}", r.stdout);

    let (recv_n, recv_bytes) = stats(&objects, "@grpc_recv");
    let with_q = |m: BTreeMap<String, u64>| m.into_iter().map(|(k, v)| (format!("{k}|?"), v)).collect();
    assert_eq!(recv_n, with_q(per_side(&truth_of(&t, "recv_msgs"))));
    assert_eq!(recv_bytes, with_q(per_side(&truth_of(&t, "recv"))));
    assert!(entries(&objects, "@grpc_sent").is_empty(), "sizes sent cannot be read stripped");
}

/// What one call costs, as the library's header says: entry probes only (no RET), and
/// per unary call 4 hits on the server's side and 6 on the client's (the client's stream
/// is closed twice), with --stats.
#[test]
fn grpc_costs_what_its_header_says() {
    if !privileged("grpc_costs_what_its_header_says") {
        return;
    }
    let program = grpcprog(VERSIONS[VERSIONS.len() - 1], &[]);
    let cmd = format!("{} 3", program.display());
    let r = gtrace(&["grpc", "--stats", "--map-size", "@grpc_latency=256", "-c", &cmd]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = truths(&r.stdout);
    let calls = truth_of(&t, "calls");
    let side = |s: &str| calls.iter().filter(|(k, _)| k.starts_with(&format!("{s}|"))).map(|(_, v)| v).sum::<u64>();
    let hits = |probe: &str| -> u64 {
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains(&format!("{probe} ")))
            .unwrap_or_else(|| panic!("{probe}: {}", r.stderr));
        line.split_whitespace().find_map(|w| w.parse().ok()).expect("hits")
    };
    assert!(!r.stderr.contains("on return"), "no RET is probed: {}", r.stderr);
    // Every probe, the goroutines' exit included, traps on an emulated PUSH (after the
    // stack check), none single-stepped.
    let probes: Vec<&str> =
        r.stderr.lines().filter(|l| l.starts_with("on entry") || l.starts_with("goroutine exit")).collect();
    assert_eq!(probes.len(), 10, "{}", r.stderr);
    for line in probes {
        assert!(line.split_whitespace().any(|w| w == "push"), "not a PUSH: {line}");
    }
    assert_eq!(hits("(*Server).handleStream"), side("server"));
    assert_eq!(hits("writeStatus"), side("server"));
    assert_eq!(hits("newClientStream"), side("client"));
    assert_eq!(hits("(*http2Client).newStream"), side("client"));
    // A stream is closed by the transport when its status arrives, and again by the
    // client when it finishes (counted once). Some are closed a third time, more often
    // the faster the host: a stream the server ends before the client's end of it
    // (the bidirectional call the server aborts, a stream to a method the server
    // lacks) is reset by the server after its status, and a cancelled call's stream is
    // closed by the cancel too. How many varies with timing; the header says at most 3.
    let closes = hits("closeStream");
    let n = side("client");
    let reset: u64 =
        calls.iter().filter(|(k, _)| k.starts_with("client|") && k.contains("/NoSuchStream|")).map(|(_, v)| v).sum();
    assert!(reset > 0, "{calls:?}");
    assert!(closes >= 2 * n - 2 && closes <= 3 * n, "{closes} closes for {n} calls");
    // A read per message received; a write per message sent, and on the client one
    // more for each end of a stream sent alone (CloseSend after the last message).
    let msgs = |k: &str, s: &str| truth_of(&t, k).iter().filter(|(k, _)| k.starts_with(s)).map(|(_, v)| v).sum::<u64>();
    assert_eq!(hits("(*ServerStream).Read"), msgs("recv_msgs", "server|"));
    assert_eq!(hits("(*ClientStream).Read"), msgs("recv_msgs", "client|"));
    assert_eq!(hits("(*http2Server).write"), msgs("sent_msgs", "server|"));
    assert!(hits("(*http2Client).write") >= msgs("sent_msgs", "client|"));
}

/// `--check` of the library on every build the tests trace (no privileges needed), and
/// `gtrace http` on the gRPC server: one error that says there is no net/http server in
/// it and names the library that fits, not an error for each of http's probes.
#[test]
fn grpc_checks_on_every_build_and_http_on_a_grpc_server_names_grpc() {
    for version in VERSIONS {
        for flags in [&[][..], &["-ldflags=-s -w"][..]] {
            let program = grpcprog(version, flags);
            let r = support::check_against(&["grpc"], &program);
            assert_eq!(r.code, 0, "{version} {flags:?}: {}", r.stderr);
            assert!(r.stderr.contains("grpc: ok,"), "{}", r.stderr);

            let r = support::check_against(&["http"], &program);
            assert_eq!(r.code, 1, "{}", r.stderr);
            assert_eq!(r.stderr.matches("error:").count(), 1, "one error: {}", r.stderr);
            assert!(r.stderr.contains("has no net/http server"), "{}", r.stderr);
            assert!(r.stderr.contains("`gtrace grpc`"), "{}", r.stderr);
            assert!(!r.stderr.contains("stdlib/http.gt:"), "not an error per probe: {}", r.stderr);
        }
    }
    // With the runtime's libraries at once: no name is defined twice.
    let all = "use \"gc\"\nuse \"sched\"\nuse \"lock\"\nuse \"grpc\"\n";
    let r = support::check_against(&["-e", all], &grpcprog(VERSIONS[1], &[]));
    assert_eq!(r.code, 0, "{all}: {}", r.stderr);
    // A program without grpc-go: the same, for grpc.
    let web = support::go_build("httpserver", &[]);
    let r = support::check_against(&["grpc"], &web);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("has no gRPC server or client"), "{}", r.stderr);
    assert!(r.stderr.contains("`gtrace http`"), "{}", r.stderr);
}

/// The number in gtrace's `gtrace: N spans sent to ...` line (0 without one).
fn spans_said(stderr: &str) -> u64 {
    let line = stderr.lines().find(|l| l.contains(" spans sent to "));
    line.and_then(|l| l.strip_prefix("gtrace: ")?.split(' ').next()?.parse().ok()).unwrap_or(0)
}

/// A table of the keys (side, method, code) where the program's calls, gtrace's
/// `@grpc_calls` and the spans received differ, with the totals: whether a call was
/// not seen by the probes (both short) or its span alone is missing.
fn differences(
    program: &BTreeMap<String, u64>,
    counted: &BTreeMap<String, u64>,
    spans: &BTreeMap<String, u64>,
) -> String {
    let mut out = String::from("key: program's calls, @grpc_calls, spans\n");
    let keys: std::collections::BTreeSet<&String> = program.keys().chain(counted.keys()).chain(spans.keys()).collect();
    let n = |m: &BTreeMap<String, u64>, k: &String| m.get(k).copied().unwrap_or(0);
    for k in keys {
        let row = (n(program, k), n(counted, k), n(spans, k));
        if row.0 != row.1 || row.0 != row.2 {
            out.push_str(&format!("  {k}: {}, {}, {}\n", row.0, row.1, row.2));
        }
    }
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    out.push_str(&format!("  total: {}, {}, {}\n", total(program), total(counted), total(spans)));
    out
}

/// With `--otlp`, a span per call to a real OpenTelemetry Collector (file exporter):
/// on each side as many as the program counted, by method and code, each of its side's
/// kind (server, client), named by its method, with the method and the code's number
/// (the program's own `code|NAME=NUMBER`) as attributes, and an error status where
/// OpenTelemetry's conventions for gRPC say (a client: any code but OK; a server:
/// Unknown, DeadlineExceeded, Unimplemented, Internal, Unavailable, DataLoss). A call the
/// client sent with a traceparent in its metadata (`tp|TRACE|SPAN|METHOD`): its server
/// span is in that trace, that span its remote parent; every other span starts a trace.
/// Stripped: as many spans a side, named by it, method `?` and code -1, none an error,
/// no parent (the headers cannot be read).
#[test]
fn grpc_with_otlp_sends_a_span_per_call_as_the_program_counted_them() {
    let test = "grpc_with_otlp_sends_a_span_per_call_as_the_program_counted_them";
    let version = VERSIONS[VERSIONS.len() - 1];
    for (label, flags) in [("unstripped", &[][..]), ("stripped", &["-ldflags=-s -w"][..])] {
        let Some(c) = collector::for_test(test, &format!("grpc-spans-{label}")) else { return };
        let program = grpcprog(version, flags);
        let r = trace(&["--otlp", &c.url, "--map-size", "@grpc_latency=256"], &program, 3);
        let t = truths(&r.stdout);
        let calls = truth_of(&t, "calls");
        let n: u64 = calls.values().sum();
        // Waits for as many spans as the program counted calls, or as gtrace said it
        // sent if that is more: a difference is shown by side, method and code below.
        let spans = c.wait_spans(n.max(spans_said(&r.stderr)) as usize);
        let names: BTreeMap<u64, String> = truth_of(&t, "code").into_iter().map(|(name, n)| (n, name)).collect();
        let mut got: BTreeMap<String, u64> = BTreeMap::new();
        let sent = truth_of(&t, "tp");
        assert!(!sent.is_empty(), "calls with a traceparent: {t:?}");
        let mut joined = BTreeMap::new();
        for s in &spans {
            let side = match &s["kind"] {
                k if k == 2 || k == "SPAN_KIND_SERVER" => "server",
                k if k == 3 || k == "SPAN_KIND_CLIENT" => "client",
                k => panic!("{label}: a span of kind {k}: {s}"),
            };
            let method = span_attribute(s, "rpc.method").expect("rpc.method");
            let code = span_attribute(s, "rpc.grpc.status_code").expect("rpc.grpc.status_code");
            assert_eq!(span_attribute(s, "rpc.system").as_deref(), Some("grpc"), "{s}");
            let error = s["status"]["code"].as_u64().unwrap_or(0) == 2;
            let key = if label == "stripped" {
                assert_eq!(
                    (s["name"].as_str(), method.as_str(), code.as_str()),
                    (Some(&*format!("grpc {side} call")), "?", "-1"),
                    "{s}"
                );
                assert!(!error, "{s}");
                side.to_string()
            } else {
                let code = &names[&code.parse::<u64>().expect("a code")];
                assert_eq!(s["name"].as_str(), Some(method.as_str()), "{s}");
                let server_errors =
                    ["Unknown", "DeadlineExceeded", "Unimplemented", "Internal", "Unavailable", "DataLoss"];
                let failed = if side == "client" { code != "OK" } else { server_errors.contains(&code.as_str()) };
                assert_eq!(error, failed, "{side} {method} {code}: {s}");
                format!("{side}|{method}|{code}")
            };
            *got.entry(key).or_insert(0) += 1;
            let (trace, parent) =
                (s["traceId"].as_str().unwrap_or_default(), s["parentSpanId"].as_str().unwrap_or_default());
            if parent.is_empty() {
                assert!(sent.keys().all(|k| !k.starts_with(trace)), "{s}");
            } else {
                assert_eq!(side, "server", "{s}");
                assert_eq!(s["flags"].as_u64(), Some(0x300 | 1), "a remote parent, sampled: {s}");
                *joined.entry(format!("{trace}|{parent}|{}", s["name"].as_str().unwrap_or_default())).or_insert(0) += 1;
            }
        }
        let want = if label == "stripped" { by_prefix(&calls, 1) } else { calls.clone() };
        let counted = counts(&json(&r.stdout), "@grpc_calls");
        let counted = if label == "stripped" { by_prefix(&counted, 1) } else { counted };
        let table = differences(&want, &counted, &got);
        assert_eq!(
            got, want,
            "{label}: spans by side, method and code differ from the program's calls:\n{table}{}",
            r.stderr
        );
        let said = format!("gtrace: {n} spans sent to the OpenTelemetry collector at {}", c.url);
        assert!(r.stderr.contains(&said), "{label}: {said}\n{table}{}", r.stderr);
        assert_eq!(spans.len() as u64, n, "{label}:\n{table}");
        let want_joined = if label == "stripped" { BTreeMap::new() } else { sent.clone() };
        assert_eq!(joined, want_joined, "{label}: server spans under the caller's traceparent");
        assert!(calls.keys().any(|k| k.contains("Stream")), "streaming calls too: {calls:?}");
        assert!(!r.stderr.contains("not sent"), "{label}: {}", r.stderr);
    }
}
