//! A Go program as a distribution ships it: Debian's `prometheus` (stripped by the
//! packaging, no symbols, no DWARF, built by Debian's Go with the external linker),
//! traced with the stdlib libraries, whose parameters are then read by position and
//! typed from the runtime's own type data. Counts are compared with what Prometheus did:
//! the scrapes a target served (httpclient) and the queries it answered, by its own
//! request counter (http). Needs root and Debian's prometheus (SKIP without them; with
//! CI=true, a failure).

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::jsonout::{counts, entries, json};
use support::processes::{free_port, poll, scratch_dir, Gtrace};

/// What a scrape target served: how many requests, and when it answered the last
/// (together: one is never seen without the other).
#[derive(Default)]
struct Served(Mutex<(u64, Option<Instant>)>);

impl Served {
    fn count(&self) -> u64 {
        self.0.lock().unwrap().0
    }
}

/// A scrape target: answers every request with one metric, counting the requests.
fn scrape_target() -> (u16, Arc<Served>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let served = Arc::new(Served::default());
    let counter = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counter = counter.clone();
            std::thread::spawn(move || serve(stream, &counter));
        }
    });
    (port, served)
}

/// One keep-alive connection: each request (a GET, no body) gets one answer.
fn serve(stream: std::net::TcpStream, served: &Served) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    let body = "distro_test_up 1\n";
    loop {
        let mut line = String::new();
        // The request line and headers, up to the blank line.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let answer =
            format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
        let mut state = served.0.lock().unwrap();
        *state = (state.0 + 1, Some(Instant::now()));
    }
}

/// How many scrapes prometheus has finished and stored (its `up` samples, stored once a
/// scrape's response was read: its client call has returned).
fn stored_scrapes(base: &str) -> Option<u64> {
    let query = ureq::get(&format!("{base}/api/v1/query")).query("query", "count_over_time(up[1h])");
    let text = query.call().ok()?.body_mut().read_to_string().ok()?;
    let answer: Value = serde_json::from_str(&text).ok()?;
    answer["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// Waits for a moment with no scrape in flight, one that ends gtrace's trace cleanly:
/// every scrape the target served is finished and stored by prometheus, and the last
/// was served less than 400ms ago (the next is a second after it started). A SIGTERM
/// during a scrape ends it half done: served, but its client call cut short.
fn between_scrapes(base: &str, served: &Served) -> bool {
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        let (n, last) = *served.0.lock().unwrap();
        let fresh = last.is_some_and(|t| t.elapsed() < Duration::from_millis(400));
        if fresh && stored_scrapes(base) == Some(n) && served.count() == n {
            // Not a moment later than the check: the last scrape is still that recent.
            if last.is_some_and(|t| t.elapsed() < Duration::from_millis(400)) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Debian's prometheus, or None (SKIP; a failure on CI).
fn prometheus(test: &str) -> Option<PathBuf> {
    if !support::privileged(test) {
        return None;
    }
    let binary = support::prometheus::binary(test)?;
    let file = std::fs::read(&binary).expect("read prometheus");
    // It must be what this test is about: a Go binary without symbols or DWARF.
    let elf = object::File::parse(&*file).expect("an ELF");
    use object::Object;
    assert!(elf.section_by_name(".gopclntab").is_some(), "{}: not a Go binary", binary.display());
    assert!(elf.section_by_name(".debug_info").is_none() && elf.section_by_name(".symtab").is_none());
    Some(binary)
}

/// The prometheus command line: its own scrape of `target` only, every second.
fn command(binary: &Path, name: &str, target: &str, port: u16) -> String {
    let dir = scratch_dir(name);
    let config = dir.join("prometheus.yml");
    let yaml = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: t\n    static_configs:\n      - targets: ['{target}']\n"
    );
    std::fs::write(&config, yaml).expect("write the config");
    format!(
        "{} --config.file={} --storage.tsdb.path={} --web.listen-address=127.0.0.1:{port} --log.level=warn",
        binary.display(),
        config.display(),
        dir.join("data").display()
    )
}

/// Ends the prometheus gtrace started (SIGTERM, which it handles by shutting down) and
/// returns gtrace's JSON output once it has printed.
fn end(mut g: Gtrace, config_dir: &str) -> Vec<Value> {
    let status = std::process::Command::new("pkill").args(["-TERM", "-f", config_dir]).status().expect("pkill");
    assert!(status.success(), "no prometheus to end");
    let code = g.wait();
    assert_eq!(code, 0, "gtrace:\n{}", g.err.text());
    json(&g.out.text())
}

#[test]
fn httpclient_counts_a_stripped_distribution_binarys_scrapes() {
    let test = "httpclient_counts_a_stripped_distribution_binarys_scrapes";
    let Some(binary) = prometheus(test) else { return };
    let (target_port, served) = scrape_target();
    let target = format!("127.0.0.1:{target_port}");
    let port = free_port();
    let cmd = command(&binary, test, &target, port);
    let g = Gtrace::start(&["-f", "json", "httpclient", "-c", &cmd]);
    g.attached();
    // Five scrapes, then stop between two (stopped right after the target answered,
    // prometheus may not have read the answer yet: a scrape cut short).
    let five = poll(Duration::from_secs(30), || (served.count() >= 5).then_some(()));
    assert!(five.is_some(), "prometheus did not scrape: {}", g.err.text());
    assert!(between_scrapes(&format!("http://127.0.0.1:{port}"), &served), "no moment between two scrapes");
    let objects = end(g, test);
    let scrapes = served.count();
    let requests: Vec<(String, u64)> = counts(&objects, "@httpc_requests").into_iter().collect();
    assert_eq!(requests, vec![(format!("GET|{target}|200"), scrapes)], "{objects:?}");
    assert!(entries(&objects, "@httpc_errors").is_empty(), "{objects:?}");
}

/// Prometheus's own count of the requests it answered on `handler` with `code`.
fn served_by_prometheus(base: &str, handler: &str, code: &str) -> u64 {
    let mut response = ureq::get(&format!("{base}/metrics")).call().expect("scrape prometheus");
    let text = response.body_mut().read_to_string().expect("metrics");
    let series = format!("prometheus_http_requests_total{{code=\"{code}\",handler=\"{handler}\"}} ");
    let line = text.lines().find_map(|l| l.strip_prefix(&series));
    line.map_or(0, |v| v.trim().parse().expect("a count"))
}

#[test]
fn http_counts_a_stripped_distribution_binarys_requests_by_method_path_and_status() {
    let test = "http_counts_a_stripped_distribution_binarys_requests_by_method_path_and_status";
    let Some(binary) = prometheus(test) else { return };
    let (target_port, _) = scrape_target();
    let port = free_port();
    let cmd = command(&binary, test, &format!("127.0.0.1:{target_port}"), port);
    let g = Gtrace::start(&["-f", "json", "http", "-c", &cmd]);
    g.attached();
    let base = format!("http://127.0.0.1:{port}");
    let ready = poll(Duration::from_secs(30), || ureq::get(&format!("{base}/-/ready")).call().ok());
    assert!(ready.is_some(), "prometheus did not start: {}", g.err.text());
    let (queries, labels) = (40, 15);
    for _ in 0..queries {
        ureq::get(&format!("{base}/api/v1/query")).query("query", "up").call().expect("query");
    }
    for _ in 0..labels {
        ureq::post(&format!("{base}/api/v1/labels")).send_empty().expect("labels");
    }
    let own = [
        ("GET", "/api/v1/query", served_by_prometheus(&base, "/api/v1/query", "200")),
        ("POST", "/api/v1/labels", served_by_prometheus(&base, "/api/v1/labels", "200")),
    ];
    let objects = end(g, test);
    let got = counts(&objects, "@http_requests");
    for (method, path, served) in own {
        assert_eq!(got.get(&format!("{method}|{path}|200")).copied(), Some(served), "{got:?}");
    }
    assert_eq!(own.map(|(_, _, n)| n), [queries, labels], "prometheus counted what was sent");
    assert!(!got.keys().any(|k| k.starts_with('?')), "{got:?}");
}
