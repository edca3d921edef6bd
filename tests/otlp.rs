//! `--otlp`: gtrace pushes the maps and the printed lines of a trace of tests/go/export
//! to a real OpenTelemetry Collector (OTLP receiver, file exporter), and what the
//! collector wrote equals the program's truth: a counter with named attributes, a
//! histogram's count, sum and buckets, seconds for durations, resource attributes, log
//! records. A collector that cannot be reached is said once, and once more when it
//! answers. Needs root (SKIP without, unless CI=true) and a collector built from the Go
//! module proxy (cached under target/; SKIP when it cannot be built, unless CI=true).

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use support::collector::{self, attributes, metric, number, resource_attribute, Collector};
use support::privileged;
use support::processes::{
    bucket_truth, export_program, free_port, poll, private_export_program, requests, truth_of, Gtrace, Program,
    EXPORT_SCRIPT,
};

/// The last metrics request in which `done` holds.
fn last_metrics(c: &Collector, done: impl Fn(&Value) -> bool) -> Option<Value> {
    c.received().into_iter().filter(|r| r.get("resourceMetrics").is_some()).filter(|r| done(r)).last()
}

/// The bodies of every log record received, in order.
fn log_bodies(c: &Collector) -> Vec<String> {
    let mut out = Vec::new();
    for r in c.received() {
        for rl in r["resourceLogs"].as_array().into_iter().flatten() {
            for sl in rl["scopeLogs"].as_array().into_iter().flatten() {
                for rec in sl["logRecords"].as_array().into_iter().flatten() {
                    assert_eq!(rec["severityText"], "INFO");
                    out.push(rec["body"]["stringValue"].as_str().unwrap_or_default().to_string());
                }
            }
        }
    }
    out
}

fn requests_total(r: &Value) -> f64 {
    metric(r, "gtrace_requests")
        .and_then(|m| m["sum"]["dataPoints"].as_array())
        .map(|points| points.iter().map(|p| number(&p["asDouble"])).sum())
        .unwrap_or(0.0)
}

#[test]
fn a_real_collector_receives_the_programs_truth_as_metrics_and_logs() {
    let test = "a_real_collector_receives_the_programs_truth_as_metrics_and_logs";
    if !privileged(test) {
        return;
    }
    let Some(otelcol) = collector::binary(test) else { return };
    let port = free_port();
    let c = Collector::start(&otelcol, port, "otlp-truth");
    let bin = export_program();
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let url = format!("http://127.0.0.1:{port}");
    let mut g = Gtrace::start(&["-e", EXPORT_SCRIPT, "-p", &pid, "--otlp", &url, "--otlp-interval", "500ms"]);
    g.attached();
    let truth = program.go();
    program.finish();
    // gtrace ends with its target, pushing once more.
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    assert!(!g.err.text().contains("cannot push"), "{}", g.err.text());
    let total = truth_of(&truth, "requests") as f64;
    let got = poll(Duration::from_secs(10), || last_metrics(&c, |r| requests_total(r) == total));
    let r = got.unwrap_or_else(|| panic!("no push with {total} requests: {:?}", c.received()));

    assert_eq!(resource_attribute(&r, "service.name").as_deref(), Some("example.com/export"));
    assert_eq!(resource_attribute(&r, "process.pid"), Some(pid.clone()));
    assert!(resource_attribute(&r, "host.name").is_some_and(|h| !h.is_empty()));

    // A cumulative, monotonic sum per (method, route).
    let m = metric(&r, "gtrace_requests").expect("gtrace_requests");
    assert_eq!((m["sum"]["isMonotonic"].as_bool(), number(&m["sum"]["aggregationTemporality"])), (Some(true), 2.0));
    let got: BTreeMap<(String, String), u64> = m["sum"]["dataPoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let a: BTreeMap<String, String> = attributes(p).into_iter().collect();
            ((a["method"].clone(), a["route"].clone()), number(&p["asDouble"]) as u64)
        })
        .collect();
    assert_eq!(got, requests(&truth));

    // The histogram: count, sum, and each power-of-two bucket as the program counted.
    let h = &metric(&r, "gtrace_size").expect("gtrace_size")["histogram"];
    assert_eq!(number(&h["aggregationTemporality"]), 2.0);
    let p = &h["dataPoints"][0];
    assert_eq!(number(&p["count"]), total);
    assert_eq!(number(&p["sum"]), truth_of(&truth, "size_sum") as f64);
    let bounds: Vec<f64> = p["explicitBounds"].as_array().unwrap().iter().map(number).collect();
    let counts: Vec<f64> = p["bucketCounts"].as_array().unwrap().iter().map(number).collect();
    assert_eq!(counts.len(), bounds.len() + 1);
    for (k, n) in bucket_truth(&truth) {
        let le = ((1u64 << k) - 1) as f64;
        let i = bounds.iter().position(|b| *b == le).unwrap_or_else(|| panic!("no bound {le} in {bounds:?}"));
        assert_eq!(counts[i], n as f64, "bucket le={le}");
    }
    // Durations in seconds.
    let w = metric(&r, "gtrace_work").expect("gtrace_work");
    assert_eq!(w["unit"], "s");
    assert_eq!(number(&w["histogram"]["dataPoints"][0]["count"]), truth_of(&truth, "work") as f64);
    assert!(number(&w["histogram"]["dataPoints"][0]["sum"]) >= truth_of(&truth, "slept_ms") as f64 / 1000.0);

    // Every printed line, as a log record, in order.
    let want: Vec<String> = truth.lines().filter_map(|l| l.strip_prefix("truth-line: ")).map(String::from).collect();
    assert_eq!(want.len() as u64, truth_of(&truth, "big"));
    let logs = poll(Duration::from_secs(10), || Some(log_bodies(&c)).filter(|b| b.len() >= want.len()));
    assert_eq!(logs.unwrap_or_else(|| log_bodies(&c)), want);
}

#[test]
fn an_unreachable_collector_is_said_once_and_again_when_it_answers() {
    let test = "an_unreachable_collector_is_said_once_and_again_when_it_answers";
    if !privileged(test) {
        return;
    }
    let Some(otelcol) = collector::binary(test) else { return };
    let port = free_port();
    let bin = private_export_program("otlp-recovers");
    let url = format!("http://127.0.0.1:{port}");
    let script = "on entry main.handle { @n = count() }";
    let mut g = Gtrace::start(&["-e", script, "-b", bin.to_str().unwrap(), "--otlp", &url, "--otlp-interval", "200ms"]);
    g.attached();
    let err = g.err.all.clone();
    let said = move |what: &str| err.lock().unwrap().iter().filter(|l| l.contains(what)).count();
    let failing = poll(Duration::from_secs(10), || (said("cannot push") > 0).then_some(()));
    assert!(failing.is_some(), "{}", g.err.text());
    // Several failed pushes later, still said once; tracing goes on.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(said("cannot push"), 1, "{}", g.err.text());
    let mut p = Program::start(&bin);
    let truth = p.go();
    p.finish();

    let c = Collector::start(&otelcol, port, "otlp-recovers");
    let recovered = poll(Duration::from_secs(10), || (said("works again") > 0).then_some(()));
    assert!(recovered.is_some(), "{}", g.err.text());
    assert_eq!(g.stop("TERM"), 0, "{}", g.err.text());
    assert_eq!(said("works again"), 1, "{}", g.err.text());
    // What was counted while the collector was away arrives with the next push.
    let total = truth_of(&truth, "requests") as f64;
    let n = |r: &Value| metric(r, "gtrace_n").map(|m| number(&m["sum"]["dataPoints"][0]["asDouble"]));
    let got = poll(Duration::from_secs(10), || last_metrics(&c, |r| n(r) == Some(total)));
    assert!(got.is_some(), "{:?}", c.received());
    assert!(g.out.text().contains(&format!("@n: {total}")), "{}", g.out.text());
}
