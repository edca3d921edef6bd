//! `--prometheus` under idle connections: clients that connect and send nothing (or
//! half a request head) cannot keep a scraper out. Each wave of 64 idle connections is
//! followed at once by a real scrape, read with a 5 s timeout: it must answer 200 with
//! gtrace's metrics (the endpoint served 32 connections and closed the others unanswered
//! until an idle one timed out, 10 s later). Needs root (SKIP without, unless CI=true).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::privileged;
use support::processes::{export_program, Gtrace, EXPORT_SCRIPT};

/// One scrape on a fresh connection, bounded by a 5 s read timeout: the whole answer.
fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    if let Err(e) = s.read_to_end(&mut out) {
        panic!("the scrape got no answer within 5 s ({e}); it read {:?}", String::from_utf8_lossy(&out));
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn idle_connections_do_not_starve_a_scraper() {
    if !privileged("idle_connections_do_not_starve_a_scraper") {
        return;
    }
    let bin = export_program();
    let mut g = Gtrace::start(&["-e", EXPORT_SCRIPT, "-b", bin.to_str().unwrap(), "--prometheus", "127.0.0.1:0"]);
    let addr = g.serving();
    let mut idle: Vec<TcpStream> = Vec::new();
    for wave in 0..3 {
        for i in 0..64 {
            let mut c = TcpStream::connect(&addr).expect("connect");
            // Half of them start a request head and stop there.
            if i % 2 == 1 {
                c.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
            }
            idle.push(c);
        }
        let answer = scrape(&addr);
        assert!(answer.starts_with("HTTP/1.1 200"), "wave {wave}: {}", &answer[..answer.len().min(300)]);
        assert!(answer.contains("\ngtrace_"), "wave {wave}: no metrics in {answer}");
    }
    drop(idle);
    assert!(g.running());
    assert_eq!(g.stop("INT"), 0, "{}", g.err.text());
}
