//! `--prometheus`: a real Prometheus server scrapes gtrace while it traces
//! tests/go/export, and its query API answers with the program's own truth (a counter
//! with named labels, a histogram's count, sum and median bucket, a duration histogram
//! in seconds); `-b` keeps serving for processes started later; the endpoint answers only
//! GET/HEAD /metrics and survives malformed, oversized and idle connections; bad
//! addresses and names fail before anything attaches. Needs root (SKIP without, unless
//! CI=true) and Prometheus (apt-get install prometheus).

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::privileged;
use support::processes::{
    bucket_truth, export_program, free_port, private_export_program, requests, truth_of, Gtrace, Program, EXPORT_SCRIPT,
};
use support::prometheus::{self, Prometheus};

fn get(addr: &str, path: &str) -> (u16, String) {
    try_get(addr, path).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

fn try_get(addr: &str, path: &str) -> Result<(u16, String), ureq::Error> {
    let mut r = ureq::get(&format!("http://{addr}{path}")).config().http_status_as_error(false).build().call()?;
    Ok((r.status().as_u16(), r.body_mut().read_to_string().unwrap_or_default()))
}

#[test]
fn prometheus_scrapes_named_counters_and_histograms_equal_to_the_programs_truth() {
    let test = "prometheus_scrapes_named_counters_and_histograms_equal_to_the_programs_truth";
    if !privileged(test) {
        return;
    }
    let Some(prom_bin) = prometheus::binary(test) else { return };
    let bin = export_program();
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let mut g = Gtrace::start(&["-e", EXPORT_SCRIPT, "-p", &pid, "--prometheus", "127.0.0.1:0"]);
    let addr = g.serving();
    let prom = Prometheus::start(&prom_bin, &addr, "scrape");
    let truth = program.go();
    let total = truth_of(&truth, "requests") as f64;

    // Prometheus has scraped the final counts once their sum is the program's.
    prom.value_when("sum(gtrace_requests_total)", |v| v == total);
    let got: BTreeMap<(String, String), u64> = prom
        .query("gtrace_requests_total")
        .into_iter()
        .map(|(labels, v)| {
            assert_eq!(labels["pid"], pid, "{labels:?}");
            assert_eq!(labels["binary"], bin.display().to_string(), "{labels:?}");
            ((labels["method"].clone(), labels["route"].clone()), v as u64)
        })
        .collect();
    // Named after the parameter (`method`) and by name (`route`); the path with a quote
    // and a backslash comes back as the program wrote it.
    assert_eq!(got, requests(&truth));

    // Each value waited for (at most 30s) until a scrape has it: the scrape that had every
    // request may have been taken while the program's last calls of main.work ran, or
    // before gtrace printed the last lines (the sum of requests came first).
    prom.value_when("gtrace_size_count", |v| v == total);
    prom.value_when("gtrace_size_sum", |v| v == truth_of(&truth, "size_sum") as f64);
    // The median falls in its power-of-two bucket: (2^(k-1) - 1, 2^k - 1].
    let median = truth_of(&truth, "size_median");
    let k = 64 - median.leading_zeros();
    let (low, high) = (((1u64 << (k - 1)) - 1) as f64, ((1u64 << k) - 1) as f64);
    let q = prom.value_when("histogram_quantile(0.5, gtrace_size_bucket)", |_| true);
    assert!(low <= q && q <= high, "median {median}: quantile {q} not in [{low}, {high}]");
    // Each bucket's cumulative count is the program's.
    let buckets = bucket_truth(&truth);
    for (k, _) in &buckets {
        let le = (1u64 << k) - 1;
        let want: u64 = buckets.iter().filter(|(j, _)| j <= k).map(|(_, n)| n).sum();
        let q = format!("gtrace_size_bucket{{le=\"{le}\"}}");
        prom.value_when(&q, |v| v == want as f64);
    }

    // Durations: seconds, `_seconds` in the name; every call counted, at least the time
    // the program slept.
    prom.value_when("gtrace_work_seconds_count", |v| v == truth_of(&truth, "work") as f64);
    let slept = truth_of(&truth, "slept_ms") as f64 / 1000.0;
    prom.value_when("gtrace_work_seconds_sum", |v| v >= slept);
    // gtrace's own metrics.
    prom.value_when("gtrace_events_printed_total", |v| v == truth_of(&truth, "big") as f64);
    assert!(prom.value_when("gtrace_probes_attached", |_| true) >= 2.0);
    // The kernel's counters, published by the trace loop every second: with -p a budget
    // is on, so every hit is counted.
    prom.value_when(r#"gtrace_probe_hits_total{probe="on entry main.handle"}"#, |v| v == total);
    assert_eq!(prom.value_when(r#"sum(gtrace_events_lost_total)"#, |_| true), 0.0);

    // With -p, gtrace ends with its target, and prints the maps as ever.
    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    assert!(g.out.text().contains("@requests[GET, /a]: 50"), "{}", g.out.text());
}

#[test]
fn a_scraper_that_asks_for_protobuf_gets_native_histograms() {
    let test = "a_scraper_that_asks_for_protobuf_gets_native_histograms";
    if !privileged(test) {
        return;
    }
    let Some(prom_bin) = prometheus::binary(test) else { return };
    let bin = export_program();
    let mut program = Program::start(&bin);
    let pid = program.pid.to_string();
    let mut g = Gtrace::start(&["-e", EXPORT_SCRIPT, "-p", &pid, "--prometheus", "127.0.0.1:0"]);
    let addr = g.serving();
    let prom = Prometheus::start_native(&prom_bin, &addr, "native");
    let truth = program.go();
    let total = truth_of(&truth, "requests") as f64;

    // The histogram is native: one series, no _bucket, _count or _sum.
    prom.value_when("histogram_count(gtrace_size)", |v| v == total);
    prom.value_when("histogram_sum(gtrace_size)", |v| v == truth_of(&truth, "size_sum") as f64);
    assert!(prom.query("gtrace_size_bucket").is_empty(), "{:?}", prom.query("gtrace_size_bucket"));
    // Its median is within the 4.4% width of a schema-4 bucket of the program's.
    let median = truth_of(&truth, "size_median") as f64;
    let q = prom.value_when("histogram_quantile(0.5, gtrace_size)", |_| true);
    assert!((q - median).abs() <= 0.05 * median, "median {median}: native quantile {q}");
    // Durations in seconds: every call counted, at least the time the program slept.
    // Waited for: the scrape that had every request may have been taken while the
    // program's last calls of main.work ran.
    prom.value_when("histogram_count(gtrace_work_seconds)", |v| v == truth_of(&truth, "work") as f64);
    let slept = truth_of(&truth, "slept_ms") as f64 / 1000.0;
    prom.value_when("histogram_sum(gtrace_work_seconds)", |v| v >= slept);
    // Counters come through the protobuf format as through text.
    prom.value_when("sum(gtrace_requests_total)", |v| v == total);

    program.finish();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
}

/// The value of the series `name{labels...}` in Prometheus text, summed over series
/// whose labels contain every one of `with`.
fn scraped(text: &str, name: &str, with: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && with.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[test]
fn binary_mode_keeps_serving_and_counts_processes_started_after_it() {
    let test = "binary_mode_keeps_serving_and_counts_processes_started_after_it";
    if !privileged(test) {
        return;
    }
    let bin = private_export_program("binary-mode");
    let script = "on entry main.handle { @requests[method: method] = count() }";
    let mut g = Gtrace::start(&["-e", script, "-b", bin.to_str().unwrap(), "--prometheus", ":0"]);
    let addr = g.serving();
    assert!(addr.starts_with("127.0.0.1:"), ":PORT serves on loopback: {addr}");
    let mut total = 0;
    for round in 1..=2 {
        // A process started after gtrace: traced, its counts added.
        let mut p = Program::start(&bin);
        total += truth_of(&p.go(), "requests");
        p.finish();
        let (status, text) = get(&addr, "/metrics");
        assert_eq!(status, 200);
        assert_eq!(scraped(&text, "gtrace_requests_total", &[]), total as f64, "round {round}:\n{text}");
        // No pid label: the map holds every process's calls.
        assert!(!text.contains("pid=\""), "{text}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(g.running(), "-b runs on after its processes end:\n{}", g.err.text());
    assert_eq!(g.stop("TERM"), 0, "{}", g.err.text());
    assert!(g.out.text().contains("@requests[GET]:"), "{}", g.out.text());
}

/// Sends raw bytes and returns what came back (empty if the server just closed).
fn raw(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn the_endpoint_answers_only_get_metrics_and_survives_bad_clients() {
    let test = "the_endpoint_answers_only_get_metrics_and_survives_bad_clients";
    if !privileged(test) {
        return;
    }
    let bin = export_program();
    let mut g = Gtrace::start(&["-e", EXPORT_SCRIPT, "-b", bin.to_str().unwrap(), "--prometheus", "127.0.0.1:0"]);
    let addr = g.serving();
    let (status, text) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    // Only what the script put in maps, and gtrace's own metrics: nothing else.
    assert!(text.lines().filter(|l| !l.starts_with('#')).all(|l| l.starts_with("gtrace_")), "{text}");
    let head = ureq::head(&format!("http://{addr}/metrics")).call().expect("HEAD");
    assert_eq!(head.status(), 200);
    for path in ["/", "/metrics/x", "/debug/pprof", "/../etc/passwd"] {
        assert_eq!(get(&addr, path).0, 404, "{path}");
    }
    let post = raw(&addr, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    assert!(post.starts_with("HTTP/1.1 405") && post.to_lowercase().contains("allow: get, head"), "{post}");
    for method in ["PUT", "DELETE", "OPTIONS"] {
        let r = raw(&addr, format!("{method} /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        assert!(r.starts_with("HTTP/1.1 405"), "{method}: {r}");
    }

    // Malformed and oversized requests get an error or a closed connection.
    let long_line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(100_000));
    let big_header = format!("GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n", "b".repeat(1 << 20));
    let many_headers: String = (0..500).map(|i| format!("X-{i}: y\r\n")).collect();
    let many_headers = format!("GET /metrics HTTP/1.1\r\n{many_headers}\r\n");
    let junk: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    for bad in
        [b"GARBAGE\r\n\r\n".to_vec(), long_line.into_bytes(), big_header.into_bytes(), many_headers.into_bytes(), junk]
    {
        let r = raw(&addr, &bad);
        assert!(r.is_empty() || r.starts_with("HTTP/1.1 4"), "{}", &r[..r.len().min(200)]);
    }
    // Idle connections beyond the limit, and one that sends its head slowly: the
    // endpoint still answers once they are gone, and beside the slow one.
    let idle: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(&addr).expect("connect")).collect();
    drop(idle);
    let mut slow = TcpStream::connect(&addr).expect("connect");
    slow.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
    // (A connection over the limit is closed unanswered: poll until one is served.)
    let served = support::processes::poll(Duration::from_secs(10), || {
        try_get(&addr, "/metrics").ok().filter(|(status, _)| *status == 200)
    });
    assert!(served.is_some(), "the endpoint stopped answering");
    assert!(g.running());
    assert_eq!(g.stop("INT"), 0, "{}", g.err.text());
}

#[test]
fn a_taken_or_wrong_address_fails_before_anything_attaches() {
    let bin = export_program();
    let b = bin.to_str().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    for (addr, says) in [
        (taken.as_str(), "cannot serve metrics on"),
        ("nonsense", "is not an address to serve metrics on"),
        (":99999", "is not an address to serve metrics on"),
    ] {
        let r = support::gtrace(&["-e", EXPORT_SCRIPT, "-b", b, "--prometheus", addr]);
        assert_ne!(r.code, 0, "{addr}");
        assert!(r.stderr.contains(says) && r.stderr.contains("hint:"), "{addr}: {}", r.stderr);
        assert!(!r.stderr.contains("Attached") && !r.stderr.contains("panicked"), "{}", r.stderr);
    }
    let free = format!("127.0.0.1:{}", free_port());
    let clash = "on entry main.handle { @a = count(); @a_total = max(size) }";
    let r = support::gtrace(&["-e", clash, "-b", b, "--prometheus", &free]);
    assert!(r.stderr.contains("@a and @a_total would both export `gtrace_a_total`"), "{}", r.stderr);
    assert!(!r.stderr.contains("Attached"));
}
