//! `--otlp`: gtrace pushes the maps and the printed lines of a trace of tests/go/export
//! to a real OpenTelemetry Collector (OTLP receiver, file exporter), and what the
//! collector wrote equals the program's truth: a counter with named attributes, a
//! hist() as an exponential histogram (count, sum, extremes, buckets), seconds for
//! durations, resource attributes, log records. A collector that cannot be reached is
//! said once, and once more when it answers; the printed lines it never got are counted
//! exactly. Needs root (SKIP without, unless CI=true) and a collector built from the Go
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
    assert!(!g.err.text().contains("never sent"), "{}", g.err.text());
    let total = truth_of(&truth, "requests") as f64;
    // The push with the program's last calls too (main.work's, after every main.handle):
    // a push made while they ran has every request but not every work, and the last
    // push may reach the collector's file a little after gtrace ended.
    let works = truth_of(&truth, "work") as f64;
    let work_count =
        |r: &Value| metric(r, "gtrace_work").map(|w| number(&w["exponentialHistogram"]["dataPoints"][0]["count"]));
    let last = |r: &Value| requests_total(r) == total && work_count(r) == Some(works);
    let got = poll(Duration::from_secs(10), || last_metrics(&c, last));
    let r = got.unwrap_or_else(|| panic!("no push with {total} requests and {works} works: {:?}", c.received()));

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

    assert_size_histogram(&r, &truth, total);
    // Durations in seconds.
    let w = metric(&r, "gtrace_work").expect("gtrace_work");
    assert_eq!(w["unit"], "s");
    let p = &w["exponentialHistogram"]["dataPoints"][0];
    assert_eq!(number(&p["count"]), truth_of(&truth, "work") as f64);
    assert!(number(&p["sum"]) >= truth_of(&truth, "slept_ms") as f64 / 1000.0);
    // The program sleeps 1 to 4 ms a call.
    assert!(number(&p["min"]) >= 0.001 && number(&p["max"]) >= 0.004, "{p}");

    // Every printed line, as a log record, in order.
    let want: Vec<String> = truth.lines().filter_map(|l| l.strip_prefix("truth-line: ")).map(String::from).collect();
    assert_eq!(want.len() as u64, truth_of(&truth, "big"));
    let logs = poll(Duration::from_secs(10), || Some(log_bodies(&c)).filter(|b| b.len() >= want.len()));
    assert_eq!(logs.unwrap_or_else(|| log_bodies(&c)), want);
}

/// `gtrace_size`, exponential at scale 4 (16 buckets a power of two, OTLP's bucket i
/// holding (2^(i/16), 2^((i+1)/16)]): its count, sum and exact extremes, and the
/// buckets of each power of two adding up to what the program counted there.
fn assert_size_histogram(r: &Value, truth: &str, total: f64) {
    let h = &metric(r, "gtrace_size").expect("gtrace_size")["exponentialHistogram"];
    assert_eq!(number(&h["aggregationTemporality"]), 2.0, "{h}");
    let p = &h["dataPoints"][0];
    assert_eq!((number(&p["scale"]), number(&p["count"])), (4.0, total), "{p}");
    assert_eq!(number(&p["sum"]), truth_of(truth, "size_sum") as f64);
    assert_eq!(number(&p["min"]), truth_of(truth, "size_min") as f64);
    assert_eq!(number(&p["max"]), truth_of(truth, "size_max") as f64);
    // proto3's JSON leaves out an offset of 0.
    let offset = if p["positive"]["offset"].is_null() { 0 } else { number(&p["positive"]["offset"]) as i64 };
    let counts: Vec<f64> = p["positive"]["bucketCounts"].as_array().unwrap().iter().map(number).collect();
    assert_eq!(counts.iter().sum::<f64>(), total);
    for (k, n) in bucket_truth(truth) {
        let power = i64::from(k) - 1;
        let within: f64 = counts
            .iter()
            .enumerate()
            .filter(|(i, _)| (offset + *i as i64).div_euclid(16) == power)
            .map(|(_, c)| c)
            .sum();
        assert_eq!(within, n as f64, "[2^{power}, 2^{k})");
    }
    // The median's bucket (rank ceil(n/2)) is the program's median's.
    let (mut seen, rank) = (0.0, (total / 2.0).ceil());
    let at = counts.iter().position(|c| {
        seen += c;
        seen >= rank
    });
    let i = (offset + at.expect("a median bucket") as i64) as f64;
    let median = truth_of(truth, "size_median") as f64;
    assert!(
        2f64.powf(i / 16.0) <= median * 1.000001 && median < 2f64.powf((i + 1.0) / 16.0),
        "median {median} not in bucket {i}"
    );
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

/// The number of printed lines the line of losses says never reached the collector.
fn never_sent(stderr: &str) -> Option<u64> {
    let part = stderr.lines().flat_map(|l| l.split("; ")).find(|p| p.contains("never sent to the OpenTelemetry"))?;
    Some(part.split_whitespace().next()?.replace(',', "").parse().unwrap_or_else(|_| panic!("{part}")))
}

#[test]
fn printed_lines_a_collector_that_is_down_never_got_are_counted_exactly() {
    let test = "printed_lines_a_collector_that_is_down_never_got_are_counted_exactly";
    if !privileged(test) {
        return;
    }
    let prod = support::go_build("prod", &[]);
    let url = format!("http://127.0.0.1:{}", free_port());
    let script = r#"on entry main.emit { printf("%d %s\n", i, s) }"#;
    // Fewer lines than the queue holds: all of them wait for the last push, which fails.
    // More: the queue drops what it cannot hold, and the last push fails with the rest.
    for n in [500, 30_000] {
        let cmd = format!("{} print {n} 3", prod.display());
        let run = support::gtrace(&["-e", script, "--otlp", &url, "--otlp-interval", "100ms", "-c", &cmd]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let printed = run.stdout.lines().filter(|l| l.ends_with(" xxx")).count() as u64;
        assert_eq!(printed, support::truth(&run.stdout, "calls") as u64, "{}", run.stdout);
        assert_eq!(never_sent(&run.stderr), Some(printed), "{}", run.stderr);
        assert!(run.stderr.contains("in the last push at exit, which failed: "), "{}", run.stderr);
        assert_eq!(run.stderr.contains("dropped while 10,000 waited to be pushed"), n > 10_000, "{}", run.stderr);
    }
}
