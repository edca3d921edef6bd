//! The stdlib libraries for networked Go programs, end to end: `gtrace http` on a
//! net/http server driven by a real client (tests/go/httpserver), `gtrace httpclient` on
//! clients of local servers (tests/go/httpclient), and `gtrace sql` on database/sql over
//! an in-memory SQLite (tests/go/sqlprog). Each program prints its own truth as
//! `key=value` lines; the counts gtrace prints (read through `-f json`) must equal them.
//! Only loopback addresses are used. The tracing tests need root (CAP_BPF + CAP_PERFMON):
//! without it they say SKIP loudly, except on CI (CI=true), where they fail. The
//! `--check` test, of every stdlib library against programs that use its packages,
//! needs nothing.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::jsonout::{entries, json, key_text, printed};
use support::{privileged, Run};

/// `gtrace ARGS -f json -c 'PROGRAM MODE'`; must succeed.
fn trace(args: &[&str], program: &Path, mode: &str) -> Run {
    support::trace_attached(&[args, &["-f", "json"]].concat(), program, mode)
}

/// The program's own `key=value` lines.
fn truths(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter(|l| !l.starts_with('{'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn truth_n(t: &BTreeMap<String, String>, key: &str) -> u64 {
    t.get(key).unwrap_or_else(|| panic!("no {key}= in {t:?}")).parse().expect("a number")
}

/// The names of map `name`'s keys, in order.
fn key_names(objects: &[Value], name: &str) -> Vec<String> {
    let map = objects.iter().find(|o| o["type"] == "map" && o["name"] == name).expect("map printed");
    let names = map["key_names"].as_array().expect("key_names");
    names.iter().map(key_text).collect()
}

/// The entries of map `name` at exit, which must have been printed.
fn map_entries(objects: &[Value], name: &str) -> BTreeMap<String, Value> {
    assert!(objects.iter().any(|o| o["type"] == "map" && o["name"] == name), "map {name} not printed in {objects:?}");
    entries(objects, name)
}

/// Map `name`'s counts: keys joined by `|` -> count (the map must have been printed).
fn counts(objects: &[Value], name: &str) -> BTreeMap<String, u64> {
    map_entries(objects, name);
    support::jsonout::counts(objects, name)
}

// ---- http --------------------------------------------------------------------------------

fn httpserver() -> PathBuf {
    support::go_build("httpserver", &[])
}

#[test]
fn http_counts_server_requests_by_method_path_and_status() {
    if !privileged("http_counts_server_requests_by_method_path_and_status") {
        return;
    }
    // /slow sleeps SLOW_MS, twice http_slow: no other request comes near it however
    // loaded the host (with 150ms against 120ms, a /hello held back 120ms under load
    // would have been printed too).
    let r =
        trace(&["http", "--set", &format!("http_slow={}ms", SLOW_MS / 2)], &httpserver(), &format!("4 slow={SLOW_MS}"));
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let want = http_want(&t, None);
    assert_eq!(want.values().sum::<u64>(), truth_n(&t, "requests"));
    // 4 rounds of 3+1+2+1+1+1 requests, and /slow once.
    assert_eq!(truth_n(&t, "requests"), 4 * 9 + 1);
    let got = counts(&objects, "@http_requests");
    assert_eq!(got, want, "stdout:\n{}", r.stdout);
    assert_eq!(key_names(&objects, "@http_requests"), ["method", "path", "status"]);

    // Latency: one histogram per method and path, with every request in it.
    let lat = map_entries(&objects, "@http_latency");
    let hello: u64 =
        lat["GET|/hello"].as_array().expect("buckets").iter().map(|b| b["count"].as_u64().expect("count")).sum();
    assert_eq!(hello, 12);
    // The slowest request of each key is the histogram's exact max.
    let max = |key: &str| -> u64 {
        let map = objects.iter().filter(|o| o["type"] == "map" && o["name"] == "@http_latency").last().unwrap();
        let entries = map["entries"].as_array().expect("entries");
        let entry = entries
            .iter()
            .find(|e| format!("{}|{}", key_text(&e["keys"]["method"]), key_text(&e["keys"]["path"])) == key);
        entry.and_then(|e| e["max"].as_u64()).unwrap_or_else(|| panic!("no max of {key} in {map}"))
    };
    let slow_ns = max("GET|/slow");
    assert!(slow_ns >= SLOW_MS * 1_000_000, "/slow sleeps {SLOW_MS}ms, its max is {slow_ns}ns");
    // Each request's time goes to its own key: the slow one is not in /hello's.
    assert!(max("GET|/hello") < slow_ns);

    // Only /slow is slower than http_slow, and it is printed once.
    let slow = printed(&objects);
    assert_eq!(slow.len(), 1, "{slow:?}");
    // /slow sleeps SLOW_MS: its printed time is that or more (how much more is the machine's).
    let took = slow[0].strip_prefix("http: GET /slow 200 took ").and_then(|t| t.trim().strip_suffix("ms"));
    assert!(took.and_then(|t| t.parse::<f64>().ok()).is_some_and(|ms| ms >= SLOW_MS as f64), "{slow:?}");
}

/// How long the httpserver program's /slow sleeps in the http test (`slow=MS`).
const SLOW_MS: u64 = 600;

/// Requests whose start times share a slot (lower/slotted.rs): with `--map-size
/// @_http_t0=1` the table of start times is one slot and a spill of one key, and the
/// program's requests are made while /slow holds the slot (`overlap`: /slow first, the
/// rounds while its handler sleeps), so every one of them collides with /slow's and is
/// kept in the spill, one at a time. Each is counted once with its status, none refused
/// (a hash of one key alone would have refused every overlapped request).
///
/// Every operation holds the slot's lock, and one that finds it held through every try
/// (a holder's vCPU paused by the host, say) skips its hit, counted and said: that
/// request is not counted. So the accounting, against the server's own count: what was
/// counted plus what was lost is what it served, each key counted at most as often as
/// it was served, and every lost request said skipped. A request has two hits on the
/// table (its start's set, its end's take) and a skip of either loses it, so `lost <=
/// skipped <= 2 * lost` (both of one request skipped, or a skipped start whose address
/// still held a start time a skipped end left, is two skips for one request); nothing
/// skipped, the counts are exactly the server's.
#[test]
fn http_counts_requests_whose_start_times_collide_in_one_slot() {
    if !privileged("http_counts_requests_whose_start_times_collide_in_one_slot") {
        return;
    }
    let args = ["http", "--stats", "--map-size", "@_http_t0=1"];
    let r = trace(&args, &httpserver(), &format!("3 slow={SLOW_MS} overlap"));
    let t = truths(&r.stdout);
    let want = http_want(&t, None);
    let served = truth_n(&t, "requests");
    assert_eq!(served, 3 * 9 + 1);
    assert_eq!(want.values().sum::<u64>(), served);
    let objects = json(&r.stdout);
    let got = counts(&objects, "@http_requests");
    let context = format!("stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    for (key, n) in &got {
        assert!(
            want.get(key).is_some_and(|w| n <= w),
            "{key} counted {n} times, served {:?}: {context}",
            want.get(key)
        );
    }
    let counted: u64 = got.values().sum();
    let skipped = support::jsonout::skipped(&objects, "held by another probe");
    let lost = served - counted;
    assert!(lost <= skipped && skipped <= 2 * lost, "{served} served, {counted} counted, {skipped} skipped: {context}");
    assert_eq!(skipped > 0, r.stderr.contains("held by another probe"), "{context}");
    assert!(!r.stderr.contains("refused"), "{}", r.stderr);
}

/// On a stripped build (-s -w) `gtrace http` reads HTTP/1 requests by position, typed
/// from the runtime's type data: the same counts as with DWARF; HTTP/2 requests are
/// counted with their latency under `?` (their writers' types cannot be told apart by
/// position), said once: h2c and TLS, golang.org/x/net/http2 and net/http's own.
#[test]
fn http_counts_requests_on_a_stripped_build() {
    if !privileged("http_counts_requests_on_a_stripped_build") {
        return;
    }
    let stripped = support::toolchain::Kind { stripped: true, ..support::toolchain::PLAIN };
    for (dir, mode, http1) in [("h2server", "3", Some("http1")), ("httpserver", "2", None)] {
        let Ok(program) = support::toolchain::build(dir, "local", stripped) else { panic!("{dir}: no stripped build") };
        let r = trace(&["http"], &program, mode);
        let t = truths(&r.stdout);
        let mut got = counts(&json(&r.stdout), "@http_requests");
        // HTTP/2 under `?`: the rest of the requests.
        let unread = got.remove("?|?|0").unwrap_or(0);
        let want = http_want(&t, http1);
        assert_eq!(got, want, "{dir}:\n{}", r.stdout);
        assert_eq!(unread, truth_n(&t, "requests") - want.values().sum::<u64>(), "{dir}:\n{}", r.stdout);
        let said = printed(&json(&r.stdout));
        let http2 = said.iter().filter(|l| l.starts_with("http: no DWARF in this binary: HTTP/2 requests")).count();
        assert_eq!(http2, usize::from(unread > 0), "{dir}: {said:?}");
        assert_eq!(said.iter().filter(|l| l.starts_with("http: no DWARF")).count(), http2, "{dir}: {said:?}");
    }
}

/// The program's truth METHOD_path_STATUS=N (or, with `proto`, PROTO:METHOD_path_STATUS=N)
/// as gtrace's keys METHOD|/path|STATUS.
fn http_want(t: &BTreeMap<String, String>, proto: Option<&str>) -> BTreeMap<String, u64> {
    let mut want = BTreeMap::new();
    for (k, v) in t {
        let k = match (proto, k.split_once(':')) {
            (None, None) => k.as_str(),
            (Some(p), Some((kp, rest))) if kp == p => rest,
            _ => continue,
        };
        if k == "requests" {
            continue;
        }
        let mut parts = k.splitn(3, '_');
        let (method, path, status) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        want.insert(format!("{method}|/{path}|{status}"), v.parse::<u64>().unwrap());
    }
    want
}

/// net/http's HTTP/1 and its bundled HTTP/2 (over TLS; net/http/internal/http2 from Go
/// 1.27) on the oldest supported Go, the local one and the newest.
#[test]
fn http_counts_http1_and_bundled_http2_on_every_toolchain() {
    if !privileged("http_counts_http1_and_bundled_http2_on_every_toolchain") {
        return;
    }
    for toolchain in support::toolchain::toolchains() {
        let Some(program) = support::toolchain::build_plain("httpserver", &toolchain) else { continue };
        for mode in ["2", "2 h2"] {
            let r = trace(&["http"], &program, mode);
            let t = truths(&r.stdout);
            let want = http_want(&t, None);
            assert_eq!(want.values().sum::<u64>(), truth_n(&t, "requests"), "{toolchain} {mode}");
            assert_eq!(counts(&json(&r.stdout), "@http_requests"), want, "{toolchain} {mode}:\n{}", r.stdout);
        }
    }
}

/// A third-party server (echo, from the Go module proxy) answering over HTTP/1.1, h2c
/// and HTTP/2 over TLS, served by golang.org/x/net/http2 (h2c and TLS) and by net/http's
/// bundled copy (TLS): every request counted once, with the status its handler gave,
/// for two uprobe hits a request.
#[test]
fn http_counts_a_third_party_server_over_http1_h2c_and_tls() {
    if !privileged("http_counts_a_third_party_server_over_http1_h2c_and_tls") {
        return;
    }
    let program = support::go_build("h2server", &[]);
    let r = trace(&["http"], &program, "3");
    let t = truths(&r.stdout);
    let want = http_want(&t, None);
    // 4 protocols, 3 rounds of 6 requests each.
    assert_eq!(truth_n(&t, "requests"), 4 * 3 * 6);
    assert_eq!(want.values().sum::<u64>(), truth_n(&t, "requests"));
    assert_eq!(counts(&json(&r.stdout), "@http_requests"), want, "stdout:\n{}", r.stdout);

    // The library's probe points, counted: each HTTP/2 request starts in a runHandler and
    // ends in a handlerDone; each HTTP/1 request ends in a finishRequest after a
    // readRequest (which also returns once when a connection closes).
    let points = r#"
        on return "net/http.(*conn).readRequest" { @read = count() }
        on entry "*http2*serverConn).runHandler" { @run = count() }
        on entry "net/http.(*response).finishRequest" { @finish = count() }
        on entry "*http2*esponseWriter).handlerDone" { @done = count() }
    "#;
    let r = trace(&["-e", points], &program, "3");
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let n = |name: &str| counts(&objects, name).values().sum::<u64>();
    let per = |proto: &str| http_want(&t, Some(proto)).values().sum::<u64>();
    let (http1, http2) = (per("http1"), per("h2c") + per("h2-xnet") + per("h2-bundled"));
    assert_eq!((http1, http2), (18, 54));
    assert_eq!((n("@run"), n("@done"), n("@finish")), (http2, http2, http1), "{}", r.stdout);
    let read = n("@read");
    assert!(read >= http1 && read <= http1 + 3, "{read} reads for {http1} HTTP/1 requests");
}

// ---- httpclient --------------------------------------------------------------------------

#[test]
fn httpclient_counts_requests_by_host_and_status_and_errors() {
    if !privileged("httpclient_counts_requests_by_host_and_status_and_errors") {
        return;
    }
    let program = support::go_build("httpclient", &[]);
    let r = trace(&["httpclient"], &program, "3");
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let (a, b, c) = httpclient_hosts(&t);
    let (want, want_errors) = httpclient_want(&t);
    // 3 rounds: a 3x200 and 1x404, b 2x201 and 1 followed redirect, each round.
    let by_truth: Vec<u64> = ["a_200", "a_404", "b_201", "b_200"].iter().map(|k| truth_n(&t, k)).collect();
    assert_eq!(by_truth, vec![9, 3, 6, 3]);
    assert_eq!(counts(&objects, "@httpc_requests"), want, "stdout:\n{}", r.stdout);
    assert_eq!(key_names(&objects, "@httpc_requests"), ["method", "host", "status"]);

    let errors = counts(&objects, "@httpc_errors");
    assert_eq!(errors, want_errors, "{}", r.stdout);
    assert_eq!(truth_n(&t, "c_errors"), 1);

    // Every request, answered or not, is in its host's latency histogram.
    let lat = map_entries(&objects, "@httpc_latency");
    let total = |h: &str| -> u64 {
        lat[h].as_array().expect("buckets").iter().map(|b| b["count"].as_u64().expect("count")).sum()
    };
    assert_eq!(total(&a), 12);
    assert_eq!(total(&b), 9);
    assert_eq!(total(&c), 1);
}

// ---- sql ---------------------------------------------------------------------------------

fn sqlprog() -> PathBuf {
    support::go_build("sqlprog", &[])
}

#[test]
fn sql_counts_queries_and_execs_by_text_and_their_errors() {
    if !privileged("sql_counts_queries_and_execs_by_text_and_their_errors") {
        return;
    }
    // sql_slow at 5s: an in-memory statement held back 100ms (the default) by a loaded
    // host is not a fault of the program, one of 5s is.
    let r = trace(&["sql", "--set", "sql_slow=5s"], &sqlprog(), "25");
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let n = truth_n(&t, "inserts");
    assert_eq!(n, 25);
    assert_eq!(truth_n(&t, "point_queries"), 25);

    let execs = counts(&objects, "@sql_execs");
    let want_execs: BTreeMap<String, u64> = [
        ("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)".to_string(), truth_n(&t, "creates")),
        ("INSERT INTO items (name) VALUES (?)".to_string(), n),
        ("DELETE FROM no_such_table".to_string(), truth_n(&t, "exec_errors")),
    ]
    .into_iter()
    .collect();
    assert_eq!(execs, want_execs, "stdout:\n{}", r.stdout);

    let queries = counts(&objects, "@sql_queries");
    let want_queries: BTreeMap<String, u64> = [
        ("SELECT name FROM items WHERE id = ?".to_string(), truth_n(&t, "point_queries")),
        ("SELECT count(*) FROM items".to_string(), truth_n(&t, "count_queries")),
        ("SELECT * FROM no_such_table".to_string(), truth_n(&t, "query_errors")),
    ]
    .into_iter()
    .collect();
    assert_eq!(queries, want_queries, "stdout:\n{}", r.stdout);

    let errors = counts(&objects, "@sql_errors");
    let want_errors: BTreeMap<String, u64> = [
        ("SELECT * FROM no_such_table".to_string(), truth_n(&t, "query_errors")),
        ("DELETE FROM no_such_table".to_string(), truth_n(&t, "exec_errors")),
    ]
    .into_iter()
    .collect();
    assert_eq!(errors, want_errors, "stdout:\n{}", r.stdout);

    let lat = map_entries(&objects, "@sql_latency");
    let inserts: u64 = lat["INSERT INTO items (name) VALUES (?)"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| b["count"].as_u64().expect("count"))
        .sum();
    assert_eq!(inserts, n);
    assert!(printed(&objects).is_empty(), "nothing in memory takes 5s: {:?}", printed(&objects));
}

// ---- --check of every stdlib library against a program that uses it ---------------------

#[test]
fn every_stdlib_library_checks_against_a_program_using_its_packages() {
    let names = support::stdlib_names();
    for want in ["http", "httpclient", "sql"] {
        assert!(names.iter().any(|n| n == want), "{want} not listed in {names:?}");
    }
    // httpserver has a net/http server and client; sqlprog has database/sql. Both have
    // the runtime and sync.Mutex that gc, sched and lock need.
    let web = httpserver();
    let db = sqlprog();
    for name in &names {
        let bin = &support::program_using(name, None);
        let r = support::check_against(&[name], bin);
        assert_eq!(r.code, 0, "gtrace {name} --check -b {}:\n{}", bin.display(), r.stderr);
        assert!(r.stderr.contains("ok,"), "{}", r.stderr);
    }
    // All those a program can use at once: no name is defined twice.
    let uses = |libs: &[&str]| libs.iter().map(|n| format!("use \"{n}\"\n")).collect::<String>();
    let web_all = uses(&["gc", "sched", "lock", "http", "httpclient"]);
    let r = support::check_against(&["-e", &web_all], &web);
    assert_eq!(r.code, 0, "{web_all}--check:\n{}", r.stderr);
    let db_all = uses(&["gc", "sched", "lock", "sql"]);
    let r = support::check_against(&["-e", &db_all], &db);
    assert_eq!(r.code, 0, "{db_all}--check:\n{}", r.stderr);
    // A program without database/sql: sql says which function is missing.
    let r = support::check_against(&["sql"], &web);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("database/sql"), "{}", r.stderr);
}

/// The three servers' hosts the httpclient program printed.
fn httpclient_hosts(t: &BTreeMap<String, String>) -> (String, String, String) {
    let host = |x: &str| t.get(&format!("host_{x}")).unwrap_or_else(|| panic!("no host_{x} in {t:?}")).clone();
    let (a, b, c) = (host("a"), host("b"), host("c"));
    assert!(a.starts_with("127.0.0.1:") && b.starts_with("127.0.0.1:") && a != b);
    (a, b, c)
}

/// What `httpclient` must count on the httpclient program: requests by method, host
/// and status, and errors by method and host, from the program's own truth. The
/// redirect from b's /moved to /ok is followed inside one Client.Do: one 200.
fn httpclient_want(t: &BTreeMap<String, String>) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let (a, b, c) = httpclient_hosts(t);
    let requests = [
        (format!("GET|{a}|200"), truth_n(t, "a_200")),
        (format!("GET|{a}|404"), truth_n(t, "a_404")),
        (format!("POST|{b}|201"), truth_n(t, "b_201")),
        (format!("GET|{b}|200"), truth_n(t, "b_200")),
    ];
    let errors = [(format!("GET|{c}"), truth_n(t, "c_errors"))];
    (requests.into_iter().collect(), errors.into_iter().collect())
}

/// On stripped builds `httpclient` reads its parameters by position, their layouts
/// from the runtime's type data: the same counts as with DWARF. `sql` counts by
/// position (its query string spans two words, which no assertion reads) and says once
/// what it cannot read: every query and exec, with its errors.
#[test]
fn httpclient_and_sql_count_on_a_stripped_build() {
    if !privileged("httpclient_and_sql_count_on_a_stripped_build") {
        return;
    }
    let stripped = support::toolchain::Kind { stripped: true, ..support::toolchain::PLAIN };
    let Ok(client) = support::toolchain::build("httpclient", "local", stripped) else {
        panic!("no stripped httpclient")
    };
    let r = trace(&["httpclient"], &client, "3");
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let (want, want_errors) = httpclient_want(&t);
    assert_eq!(counts(&objects, "@httpc_requests"), want, "{}", r.stdout);
    assert_eq!(counts(&objects, "@httpc_errors"), want_errors, "{}", r.stdout);
    assert!(!printed(&objects).iter().any(|l| l.starts_with("httpc: no DWARF")), "{}", r.stdout);

    let Ok(sql) = support::toolchain::build("sqlprog", "local", stripped) else { panic!("no stripped sqlprog") };
    let r = trace(&["sql"], &sql, "25");
    let t = truths(&r.stdout);
    let objects = json(&r.stdout);
    let n = |k: &str| truth_n(&t, k);
    let one = |v: u64| -> BTreeMap<String, u64> { [("?".to_string(), v)].into_iter().collect() };
    assert_eq!(counts(&objects, "@sql_execs"), one(n("creates") + n("inserts") + n("exec_errors")), "{}", r.stdout);
    assert_eq!(counts(&objects, "@sql_queries"), one(n("point_queries") + n("count_queries") + n("query_errors")));
    assert_eq!(counts(&objects, "@sql_errors"), one(n("query_errors") + n("exec_errors")));
    assert_eq!(printed(&objects).iter().filter(|l| l.starts_with("sql: no DWARF")).count(), 1, "{}", r.stdout);
}
