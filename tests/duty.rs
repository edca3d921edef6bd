//! Duty-cycling under `--budget` (trace/budget/duty.rs): a start/end pair on a Go program
//! that makes requests at a steady rate (tests/go/duty), under a budget low enough that a
//! cut would take both probes. The trace stays on to its end, duty-cycled; every output
//! marks its maps (text, JSON, Prometheus); what it counted is more than nothing and less
//! than the program's own count; no latency is longer than the program's own slowest
//! (a start whose end fell in a detached interval would pair with a later request's end:
//! the tables of starts are emptied before each re-attach); the program's own output is
//! whole; and after the trace no probe is left in its code (its bytes are its file's).
//! Needs root (SKIP without it, a failure when CI=true). No timing is asserted.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::code::bytes_changed;
use support::processes::{poll, Gtrace, Lines, Owned};
use support::{map_value, privileged, truth};

/// The pair, timed from begin's entry to end's by the request's record (as stdlib/http.gt
/// keys its starts by the request's address).
const SCRIPT: &str = "on entry main.begin { @_t0[r] = nsecs }
on entry main.end {
    t0 := take(@_t0[r])
    if t0 != 0 {
        @n = count()
        @slowest = max(nsecs - t0)
    }
}";

/// 12,000 requests a second on 8 workers: two traps and their eBPF a request cost this
/// machine 2.5-6% of a CPU, so `--budget 1%` duty-cycles them at 13-32% of each second
/// (a fraction above the 10% floor).
const LOAD: [&str; 3] = ["4", "12000", "8"];

/// The program's requests and its slowest (ns), checked against gtrace's `n` and
/// `slowest`.
fn check_counts(program: &str, n: i64, slowest: i64, said: &str) {
    let requests = truth(program, "requests");
    assert!(requests > 10_000, "the program did not run its load:\n{program}");
    assert!(n > 0 && n < requests, "{n} of {requests} requests counted:\n{said}");
    let own = truth(program, "slowest_ns");
    assert!(slowest > 0 && slowest <= own, "gtrace's slowest {slowest}ns, the program's own {own}ns:\n{said}");
}

#[test]
fn a_pair_too_costly_for_the_budget_is_duty_cycled_to_the_end_and_marked_everywhere() {
    let test = "a_pair_too_costly_for_the_budget_is_duty_cycled_to_the_end_and_marked_everywhere";
    if !privileged(test) {
        return;
    }
    let bin = support::go_build("duty", &[]);
    let mut child = Command::new(&bin)
        .arg("hold")
        .args(LOAD)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the program");
    let mut stdin = child.stdin.take().unwrap();
    let out = Lines::of(child.stdout.take().unwrap());
    let pid = child.id();
    let mut child = Owned(child);
    out.wait_for(Duration::from_secs(10), |l| l == "ready").expect("the program is ready");
    let p = pid.to_string();
    let mut g = Gtrace::start(&["-e", SCRIPT, "--budget", "1%", "-p", &p, "--prometheus", "127.0.0.1:0"]);
    let addr = g.serving();
    writeln!(stdin, "go").unwrap();
    // While it runs, the export says what share of the time since the cycle began each
    // probe was attached (1 at its very start, less once it has been off).
    let share = |line: &str| line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(-1.0);
    let gauge = poll(Duration::from_secs(10), || {
        let text = ureq::get(&format!("http://{addr}/metrics")).call().ok()?.body_mut().read_to_string().ok()?;
        let line = text.lines().find(|l| l.starts_with("gtrace_probe_duty_cycle{") && l.contains("main.end"))?;
        (share(line) < 1.0).then(|| line.to_string())
    });
    let gauge = gauge.unwrap_or_else(|| panic!("no gtrace_probe_duty_cycle under 1:\n{}", g.err.text()));
    assert!(gauge.contains("@n,@slowest\""), "{gauge}");
    assert!(share(&gauge) > 0.0, "{gauge}");
    out.wait_for(Duration::from_secs(20), |l| l.starts_with("slowest_ns=")).expect("the program's count");
    // Still on at the end: never cut, never ended by the budget.
    assert!(g.running(), "{}", g.err.text());
    assert_eq!(g.stop("INT"), 0, "{}", g.err.text());
    let (said, text) = (g.err.text(), g.out.text());
    assert!(said.contains("and a cut would leave nothing: duty-cycled instead, attached "), "{said}");
    assert!(!said.contains("no probe is left attached") && !said.contains(": detached "), "{said}");
    for name in ["@n", "@slowest"] {
        let line = text.lines().find(|l| l.starts_with(&format!("{name}: "))).unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains(" (partial: duty-cycled by --budget from "), "{line}");
        assert!(line.contains("% of the time since)"), "{line}");
    }
    check_counts(&out.text(), map_value(&text, "@n"), map_value(&text, "@slowest"), &said);
    // gtrace has ended: no breakpoint is left in the program, which runs on.
    assert_eq!(bytes_changed(pid, &bin), 0, "breakpoints left after gtrace ended:\n{said}");
    drop(stdin);
    let status = child.0.wait().expect("wait for the program");
    assert!(status.success());
}

#[test]
fn a_command_duty_cycled_on_perf_event_links_runs_whole_and_its_json_says_so() {
    let test = "a_command_duty_cycled_on_perf_event_links_runs_whole_and_its_json_says_so";
    if !privileged(test) {
        return;
    }
    // Perf-event links (no multi-uprobe links): the loop makes them again itself.
    let bin = support::go_build("duty", &[]);
    let command = format!("{} run {}", bin.display(), LOAD.join(" "));
    let env = [("GTRACE_NO_UPROBE_MULTI", "1")];
    let run = support::gtrace_env(&["-e", SCRIPT, "--budget", "1%", "-f", "json", "-c", &command], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("duty-cycled instead"), "{}", run.stderr);
    assert!(!run.stderr.contains("no probe is left attached"), "{}", run.stderr);
    let maps: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "map")
        .collect();
    let value = |name: &str| {
        let map = maps.iter().find(|m| m["name"] == name).unwrap_or_else(|| panic!("no {name}: {}", run.stdout));
        let partial = map["partial"].as_str().unwrap_or_default();
        assert!(partial.starts_with("duty-cycled by --budget from "), "{map}");
        map["entries"][0]["value"].as_i64().unwrap_or_else(|| panic!("{map}"))
    };
    // The command's own lines, whole, beside gtrace's.
    check_counts(&run.stdout, value("@n"), value("@slowest"), &run.stderr);
}
