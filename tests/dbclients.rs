//! The database client libraries end to end, against real servers from Debian's
//! packages (tests/support/servers.rs) and real clients from the Go module proxy, each
//! built with the oldest and the newest version its library's header names (the go.mod
//! and go.sum of each under tests/go/PROG/mods/VERSION): `gtrace pgx` on
//! tests/go/pgxprog (github.com/jackc/pgx/v5, PostgreSQL) and `gtrace redis` on
//! tests/go/redisprog (github.com/redis/go-redis/v9, redis-server). Each program counts
//! its own statements or commands and their errors; the maps gtrace prints must equal
//! them exactly, unstripped and stripped. Needs root (SKIP said loudly without it, a
//! failure with CI=true) and the servers (SKIP, or a failure with CI=true, without them).

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use support::jsonout::{entries, json};
use support::{gtrace, privileged, Run};

const PGX_VERSIONS: &[&str] = support::PGX_VERSIONS;

/// `gtrace LIBRARY ARGS -f json -c 'PROGRAM PROGRAM_ARGS'`; must succeed.
fn trace(library: &str, args: &[&str], program: &Path, program_args: &str) -> Run {
    support::trace_attached(&[&[library], args, &["-f", "json"]].concat(), program, program_args)
}

/// The program's own `key=value` lines whose key starts with `prefix|`, without it.
fn truth_of(out: &str, prefix: &str) -> BTreeMap<String, u64> {
    let p = format!("{prefix}|");
    out.lines()
        .filter(|l| !l.starts_with('{'))
        .filter_map(|l| l.rsplit_once('='))
        .filter_map(|(k, v)| Some((k.strip_prefix(&p)?.to_string(), v.parse().expect("a number"))))
        .collect()
}

fn counts(objects: &[Value], name: &str) -> BTreeMap<String, u64> {
    entries(objects, name).into_iter().map(|(k, v)| (k, v.as_u64().expect("a count"))).collect()
}

fn hist_total(objects: &[Value], name: &str) -> u64 {
    entries(objects, name)
        .values()
        .map(|v| v.as_array().expect("buckets").iter().map(|b| b["count"].as_u64().expect("count")).sum::<u64>())
        .sum()
}

/// Every value of `m` under one key `key` (what a stripped build counts).
fn all_under(m: &BTreeMap<String, u64>, key: &str) -> BTreeMap<String, u64> {
    let n: u64 = m.values().sum();
    if n == 0 {
        return BTreeMap::new();
    }
    [(key.to_string(), n)].into_iter().collect()
}

/// The trap class --stats gives the probe whose label contains `probe` (push, step, branch).
fn trap<'a>(stderr: &'a str, probe: &str) -> &'a str {
    let line = stderr.lines().find(|l| l.contains(probe)).unwrap_or_else(|| panic!("no {probe} in {stderr}"));
    line.split_whitespace()
        .find(|w| ["push", "step", "branch"].contains(w))
        .unwrap_or_else(|| panic!("no trap: {line}"))
}

/// The hits --stats counted for the probe whose label contains `probe`.
fn hits(stderr: &str, probe: &str) -> u64 {
    let line = stderr.lines().find(|l| l.contains(probe)).unwrap_or_else(|| panic!("no {probe} in {stderr}"));
    line.split_whitespace().find_map(|w| w.parse().ok()).expect("hits")
}

// ---- pgx ---------------------------------------------------------------------------------

fn postgres(test: &str) -> Option<support::servers::Postgres> {
    let pg = support::servers::Postgres::start();
    if pg.is_none() {
        support::skip(test, "no PostgreSQL here (apt-get install postgresql)");
    }
    pg
}

fn pgx_equal_to_the_programs(r: &Run, label: &str) {
    let objects = json(&r.stdout);
    let calls = truth_of(&r.stdout, "calls");
    let execs = truth_of(&r.stdout, "calls|exec");
    let queries = truth_of(&r.stdout, "calls|query");
    let errors = truth_of(&r.stdout, "errors");
    // 3 tables made, then 2 x 2 rounds of 12 statements, 4 of which fail.
    assert_eq!((calls.values().sum::<u64>(), errors.values().sum::<u64>()), (3 + 4 * 12, 4 * 4 - 1), "{label}");
    assert_eq!(counts(&objects, "@pgx_execs"), execs, "{label}:\n{}", r.stdout);
    assert_eq!(counts(&objects, "@pgx_queries"), queries, "{label}:\n{}", r.stdout);
    assert_eq!(counts(&objects, "@pgx_errors"), errors, "{label}:\n{}", r.stdout);
    assert_eq!(hist_total(&objects, "@pgx_latency"), calls.values().sum::<u64>(), "{label}: latency");
    assert!(!r.stderr.contains("refused"), "{label}: {}", r.stderr);
}

#[test]
fn pgx_counts_statements_and_server_errors_on_the_oldest_and_newest_pgx() {
    let test = "pgx_counts_statements_and_server_errors_on_the_oldest_and_newest_pgx";
    if !privileged(test) {
        return;
    }
    let Some(pg) = postgres(test) else { return };
    let args = format!("'{}' 2", pg.dsn);
    for version in PGX_VERSIONS {
        let program = support::versioned("pgxprog", version, &[], &[]);
        let r = trace("pgx", &["--map-size", "@pgx_latency=256"], &program, &args);
        pgx_equal_to_the_programs(&r, version);
        assert!(!r.stdout.contains("no DWARF"), "{}", r.stdout);
    }
}

/// Stripped: every statement under query `?`, every error under `?`, said once.
#[test]
fn pgx_on_a_stripped_build_counts_statements_and_errors_and_says_what_it_cannot_read() {
    let test = "pgx_on_a_stripped_build_counts_statements_and_errors_and_says_what_it_cannot_read";
    if !privileged(test) {
        return;
    }
    let Some(pg) = postgres(test) else { return };
    let program = support::versioned("pgxprog", PGX_VERSIONS[1], &["-ldflags=-s -w"], &[]);
    // No statement is slow enough to be printed, however loaded the host (a real
    // PostgreSQL's CREATE TABLE may take 100ms, pgx_slow's default): the one line printed
    // is the DWARF's.
    let r = trace("pgx", &["--set", "pgx_slow=60s"], &program, &format!("'{}' 2", pg.dsn));
    let objects = json(&r.stdout);
    let said: Vec<&Value> = objects.iter().filter(|o| o["type"] == "printf").collect();
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert!(said[0]["text"].as_str().is_some_and(|s| s.contains("no DWARF")), "{said:?}");
    assert_eq!(counts(&objects, "@pgx_execs"), all_under(&truth_of(&r.stdout, "calls|exec"), "?"));
    assert_eq!(counts(&objects, "@pgx_queries"), all_under(&truth_of(&r.stdout, "calls|query"), "?"));
    assert_eq!(counts(&objects, "@pgx_errors"), all_under(&truth_of(&r.stdout, "errors"), "?|?"));
}

/// What a statement costs, as the header says: two entry hits, and for a server error
/// one more entry and one RET (the error's Decode); a notice two entries and a RET.
#[test]
fn pgx_costs_what_its_header_says() {
    let test = "pgx_costs_what_its_header_says";
    if !privileged(test) {
        return;
    }
    let Some(pg) = postgres(test) else { return };
    let program = support::versioned("pgxprog", PGX_VERSIONS[1], &[], &[]);
    let cmd = format!("{} '{}' 2", program.display(), pg.dsn);
    let r = gtrace(&["pgx", "--stats", "--map-size", "@pgx_latency=256", "-c", &cmd]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let n = |prefix: &str| truth_of(&r.stdout, prefix).values().sum::<u64>();
    let (execs, queries, errors) = (n("calls|exec"), n("calls|query"), n("errors"));
    assert_eq!(hits(&r.stderr, "(*Conn).Exec "), execs);
    assert_eq!(hits(&r.stderr, "(*Conn).Query "), queries);
    assert_eq!(hits(&r.stderr, "(*CommandComplete).Decode "), execs + queries - errors);
    // Notices are decoded by the same function, through (*NoticeResponse).Decode.
    let notices = support::truth(&r.stdout, "notices") as u64;
    assert!(notices > 0, "DROP TABLE IF EXISTS of tables not there sends notices");
    assert_eq!(hits(&r.stderr, "(*NoticeResponse).Decode "), notices);
    assert_eq!(hits(&r.stderr, "on return github.com/jackc/pgx/v5/pgproto3.(*ErrorResponse).Decode"), errors + notices);
    // The entries trap on an emulated PUSH; the error's return is single-stepped.
    for probe in ["(*Conn).Exec ", "(*Conn).Query ", "(*CommandComplete).Decode ", "(*NoticeResponse).Decode "] {
        assert_eq!(trap(&r.stderr, probe), "push", "{probe}");
    }
    assert_eq!(trap(&r.stderr, "on return github.com/jackc/pgx/v5/pgproto3.(*ErrorResponse).Decode"), "step");
}

// ---- redis -------------------------------------------------------------------------------

const REDIS_VERSIONS: &[&str] = support::REDIS_VERSIONS;

fn redis(test: &str) -> Option<support::servers::Redis> {
    let r = support::servers::Redis::start();
    if r.is_none() {
        support::skip(test, "no redis-server here (apt-get install redis-server)");
    }
    r
}

/// The program's errors by command and error line, the line cut where gtrace cuts
/// strings (64 bytes, the default --string-limit).
fn redis_errors(out: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (k, v) in truth_of(out, "errors") {
        let (name, line) = k.split_once('|').expect("NAME|LINE");
        *m.entry(format!("{name}|{}", &line[..line.len().min(64)])).or_insert(0) += v;
    }
    m
}

#[test]
fn redis_counts_commands_and_error_replies_on_the_oldest_and_newest_go_redis() {
    let test = "redis_counts_commands_and_error_replies_on_the_oldest_and_newest_go_redis";
    if !privileged(test) {
        return;
    }
    let Some(server) = redis(test) else { return };
    let args = format!("{} 3", server.socket.display());
    for version in REDIS_VERSIONS {
        let program = support::versioned("redisprog", version, &[], &[]);
        let r = trace("redis", &["--map-size", "@redis_latency=256"], &program, &args);
        let objects = json(&r.stdout);
        let calls = truth_of(&r.stdout, "calls");
        // 2 goroutines, 3 rounds of 12 commands, 3 of them refused by the server.
        assert_eq!(calls.values().sum::<u64>(), 2 * 3 * 12, "{version}");
        assert_eq!(counts(&objects, "@redis_commands"), calls, "{version}:\n{}", r.stdout);
        let errors = redis_errors(&r.stdout);
        assert_eq!(errors.values().sum::<u64>(), 2 * 3 * 3, "{version}");
        assert_eq!(counts(&objects, "@redis_errors"), errors, "{version}:\n{}", r.stdout);
        assert_eq!(hist_total(&objects, "@redis_latency"), calls.values().sum::<u64>(), "{version}: latency");
        assert!(!r.stdout.contains("no DWARF") && !r.stderr.contains("refused"), "{version}: {}", r.stderr);
    }
}

/// Stripped: every command under `?`, every error under `?|?`, said once.
#[test]
fn redis_on_a_stripped_build_counts_commands_and_errors_and_says_what_it_cannot_read() {
    let test = "redis_on_a_stripped_build_counts_commands_and_errors_and_says_what_it_cannot_read";
    if !privileged(test) {
        return;
    }
    let Some(server) = redis(test) else { return };
    let program = support::versioned("redisprog", REDIS_VERSIONS[1], &["-ldflags=-s -w"], &[]);
    let r = trace("redis", &[], &program, &format!("{} 2", server.socket.display()));
    let objects = json(&r.stdout);
    let said: Vec<&Value> = objects
        .iter()
        .filter(|o| o["type"] == "printf" && o["text"].as_str().is_some_and(|t| t.contains("no DWARF")))
        .collect();
    assert_eq!(said.len(), 1, "said once: {}", r.stdout);
    assert_eq!(counts(&objects, "@redis_commands"), all_under(&truth_of(&r.stdout, "calls"), "?"));
    assert_eq!(counts(&objects, "@redis_errors"), all_under(&truth_of(&r.stdout, "errors"), "?|?"));
}

/// What a command costs, as the header says: all entries; its start, its writing and
/// its connection's return once each, one hit for each string argument written.
#[test]
fn redis_costs_what_its_header_says() {
    let test = "redis_costs_what_its_header_says";
    if !privileged(test) {
        return;
    }
    let Some(server) = redis(test) else { return };
    let program = support::versioned("redisprog", REDIS_VERSIONS[1], &[], &[]);
    let cmd = format!("{} {} 2", program.display(), server.socket.display());
    let r = gtrace(&["redis", "--stats", "--map-size", "@redis_latency=256", "-c", &cmd]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("on return"), "no RET is probed: {}", r.stderr);
    let n = |prefix: &str| truth_of(&r.stdout, prefix).values().sum::<u64>();
    let (commands, errors, strings) = (n("calls"), n("errors"), support::truth(&r.stdout, "string_args") as u64);
    // A new connection's HELLO is an attempt of its own (not counted: it ends in no
    // pool's Put), before the command that needed the connection.
    let attempts = hits(&r.stderr, "(*baseClient)._process ");
    assert!(attempts >= commands && attempts <= commands + 16, "{attempts} attempts of {commands} commands");
    assert_eq!(hits(&r.stderr, "  github.com/redis/go-redis/v9/internal/pool.(*ConnPool).Put "), commands);
    // A new connection's own commands (HELLO, CLIENT SETINFO) are written too, and
    // CLIENT SETINFO is refused by redis before 7.2: a few more hits than the commands'.
    let (writes, bytes, error_replies) = (
        hits(&r.stderr, "(*Writer).WriteArgs "),
        hits(&r.stderr, "(*Writer).bytes "),
        hits(&r.stderr, "ParseErrorReply "),
    );
    assert!(writes >= commands && writes <= commands + 3 * 16, "{writes} writes of {commands} commands");
    assert!(bytes >= strings && bytes <= strings + 10 * 16, "{bytes} strings written, {strings} in the commands");
    assert!(error_replies >= errors && error_replies <= errors + 16, "{error_replies} error replies for {errors}");
    for probe in ["(*baseClient)._process ", "(*Writer).WriteArgs ", "(*Writer).bytes ", "(*ConnPool).Remove "] {
        assert_eq!(trap(&r.stderr, probe), "push", "{probe}");
    }
    // ParseErrorReply is inlined into the reader: its site is an instruction the kernel
    // single-steps (an error reply's one dear hit).
    assert_eq!(trap(&r.stderr, "ParseErrorReply "), "step");
}
