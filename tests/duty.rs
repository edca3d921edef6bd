//! Duty-cycling under `--budget` (trace/budget/duty.rs): a start/end pair on a Go program
//! that makes requests at a steady rate (tests/go/duty), under a budget low enough that a
//! cut would take both probes. The trace stays on to its end, duty-cycled; every output
//! marks its maps (text, JSON, Prometheus); what it counted is more than nothing and less
//! than the program's own count; no latency is longer than the program's own slowest
//! (a start whose end fell in a detached interval would pair with a later request's end:
//! the tables of starts are emptied before each re-attach); the program's own output is
//! whole; and after the trace no probe is left in its code (its bytes are its file's).
//! Over OTLP, a real OpenTelemetry Collector (built from the Go module proxy, as
//! tests/otlp.rs builds it) receives the `gtrace_probe_duty_cycle` gauge while the
//! probes cycle, and at the end the share the text output says.
//! Needs root (SKIP without it, a failure when CI=true). No timing is asserted.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::code::bytes_changed;
use support::collector::{self, attributes, metric, number};
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

/// 12,000 requests a second on 8 workers.
const LOAD: [&str; 3] = ["4", "12000", "8"];

/// The budget these tests give: a third of what the pair costs this host at that load,
/// by gtrace's own estimate of a short run of it (`--stats`, no budget).
/// A fixed budget held on one machine and not another: the estimate was 8-10% of a CPU
/// here at load 3-14, 2.8% on a quiet host, and under 2.5% on CI's, where the pair then
/// stayed on. At a third the pair is past the budget and a cut must take both (one
/// alone costs half, past 80% of the budget), and 80% of the budget fits at least the
/// 10% floor of each second unless the pair costs 2.7x the measure (1.8x weighed high
/// before `-p`'s correction): it cycles, not stays on or is cut, wherever it costs from
/// 0.53x to 1.8x what the measure said.
fn budget() -> String {
    let bin = support::go_build("duty", &[]);
    let command = format!("{} run 2 {} {}", bin.display(), LOAD[1], LOAD[2]);
    let stats = support::cost::stats_of(&["-e", SCRIPT, "-c", &command]);
    let percent = support::cost::percent_of_cpu(&stats);
    assert_eq!(stats["probes"].as_array().map(Vec::len), Some(2), "{stats}");
    let budget = support::cost::a_third(percent);
    eprintln!("the pair costs {percent:.2}% of a CPU by the estimate: --budget {budget}");
    budget
}

/// How many traces a test makes, each with its budget measured again, before it says
/// the pair was never duty-cycled: a loaded host's 2 s measures of the pair spread by
/// 2x (1.5-3.3% of a CPU at load 11-18), past what a third of one tolerates.
const TRIES: usize = 3;

/// Fails once `TRIES` traces were not duty-cycled (`tried`: what each said).
fn another_try(tried: &mut Vec<String>, budget: &str, said: String) {
    tried.push(format!("--budget {budget}:\n{said}"));
    assert!(tried.len() < TRIES, "not duty-cycled in {TRIES} traces, each budget measured again:\n{}", tried.join("\n"));
}

/// One load at a time: each test's program makes 12,000 requests a second, and two at
/// once on this 2-CPU machine raise the trap's cost past what even 10% of each second
/// fits (the probes are cut, not cycled).
static ONE_LOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_load() -> std::sync::MutexGuard<'static, ()> {
    ONE_LOAD.lock().unwrap_or_else(|e| e.into_inner())
}

/// tests/go/duty started with `hold`: ready, its load waiting for a line on its stdin.
fn held_program() -> (Owned, std::process::ChildStdin, Lines, u32, std::path::PathBuf) {
    let bin = support::go_build("duty", &[]);
    let mut child = Command::new(&bin)
        .arg("hold")
        .args(LOAD)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the program");
    let stdin = child.stdin.take().unwrap();
    let out = Lines::of(child.stdout.take().unwrap());
    let pid = child.id();
    let child = Owned(child);
    out.wait_for(Duration::from_secs(10), |l| l == "ready").expect("the program is ready");
    (child, stdin, out, pid, bin)
}

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
    let _one = one_load();
    // While it runs, the export says what share of the time since the cycle began each
    // probe was attached (1 at its very start, less once it has been off).
    let share = |line: &str| line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(-1.0);
    let mut tried = Vec::new();
    let (mut child, stdin, out, pid, bin, mut g, gauge) = loop {
        let (child, mut stdin, out, pid, bin) = held_program();
        let (p, budget) = (pid.to_string(), budget());
        let mut g = Gtrace::start(&["-e", SCRIPT, "--budget", &budget, "-p", &p, "--prometheus", "127.0.0.1:0"]);
        let addr = g.serving();
        writeln!(stdin, "go").unwrap();
        let gauge = poll(Duration::from_secs(10), || {
            let text = ureq::get(&format!("http://{addr}/metrics")).call().ok()?.body_mut().read_to_string().ok()?;
            let line = text.lines().find(|l| l.starts_with("gtrace_probe_duty_cycle{") && l.contains("main.end"))?;
            (share(line) < 1.0).then(|| line.to_string())
        });
        if let Some(gauge) = gauge {
            break (child, stdin, out, pid, bin, g, gauge);
        }
        g.stop("INT");
        another_try(&mut tried, &budget, format!("no gtrace_probe_duty_cycle under 1:\n{}", g.err.text()));
    };
    assert!(gauge.contains("maps=\"@n,@slowest\""), "{gauge}");
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
    let _one = one_load();
    // Perf-event links (no multi-uprobe links): the loop makes them again itself.
    let bin = support::go_build("duty", &[]);
    let command = format!("{} run {}", bin.display(), LOAD.join(" "));
    let env = [("GTRACE_NO_UPROBE_MULTI", "1")];
    let mut tried = Vec::new();
    let run = loop {
        let budget = budget();
        let run = support::gtrace_env(&["-e", SCRIPT, "--budget", &budget, "-f", "json", "-c", &command], &env);
        assert_eq!(run.code, 0, "{}", run.stderr);
        if run.stderr.contains("duty-cycled instead") && !run.stderr.contains("no probe is left attached") {
            break run;
        }
        another_try(&mut tried, &budget, run.stderr);
    };
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

/// The `gtrace_probe_duty_cycle` points of an OTLP metrics request: (probe, maps, share).
fn duty_points(request: &serde_json::Value) -> Vec<(String, String, f64)> {
    let Some(m) = metric(request, "gtrace_probe_duty_cycle") else { return Vec::new() };
    let points = m["gauge"]["dataPoints"].as_array().cloned().unwrap_or_default();
    let label = |p: &serde_json::Value, key: &str| {
        attributes(p).into_iter().find(|(k, _)| k == key).map(|(_, v)| v).unwrap_or_default()
    };
    points.iter().map(|p| (label(p, "probe"), label(p, "maps"), number(&p["asDouble"]))).collect()
}

#[test]
fn a_real_collector_receives_the_duty_cycle_gauge_while_the_probes_cycle() {
    let test = "a_real_collector_receives_the_duty_cycle_gauge_while_the_probes_cycle";
    let Some(c) = collector::for_test(test, "duty-otlp") else { return };
    let _one = one_load();
    // While the program runs: a push whose gauge says the pair was attached part of the
    // time, naming the maps whose counts are of that time only.
    let cycling = |r: &serde_json::Value| duty_points(r).into_iter().any(|(_, _, v)| v > 0.0 && v < 1.0);
    let mut tried = Vec::new();
    let (mut child, stdin, out, mut g, pushed) = loop {
        let (child, mut stdin, out, pid, _) = held_program();
        let (p, budget) = (pid.to_string(), budget());
        let args = ["-e", SCRIPT, "--budget", &budget, "-p", &p, "--otlp", &c.url, "--otlp-interval", "200ms"];
        let mut g = Gtrace::start(&args);
        g.attached();
        writeln!(stdin, "go").unwrap();
        let pushed = poll(Duration::from_secs(15), || c.received().into_iter().find(|r| cycling(r)));
        if let Some(pushed) = pushed {
            break (child, stdin, out, g, pushed);
        }
        g.stop("INT");
        another_try(&mut tried, &budget, format!("no gtrace_probe_duty_cycle under 1 received:\n{}", g.err.text()));
    };
    let points = duty_points(&pushed);
    let end = points.iter().find(|(probe, _, _)| probe.contains("main.end")).unwrap_or_else(|| panic!("{points:?}"));
    // The private `@_t0` is not named: it is never printed or exported.
    assert_eq!(end.1, "@n,@slowest", "{points:?}");
    assert!(metric(&pushed, "gtrace_probe_duty_cycle").unwrap()["gauge"].is_object(), "{pushed}");
    out.wait_for(Duration::from_secs(20), |l| l.starts_with("slowest_ns=")).expect("the program's count");
    assert_eq!(g.stop("INT"), 0, "{}", g.err.text());
    let (said, text) = (g.err.text(), g.out.text());
    assert!(said.contains("duty-cycled instead"), "{said}");
    // The push at exit: the share the text says ("attached N% of the time since"), and
    // the count it prints, of fewer requests than the program made.
    let line = text.lines().find(|l| l.starts_with("@n: ")).unwrap_or_else(|| panic!("{text}"));
    let said_share: f64 = line
        .split("attached ")
        .nth(1)
        .and_then(|r| r.split('%').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    let n = map_value(&text, "@n") as f64;
    let counted = |r: &serde_json::Value| {
        metric(r, "gtrace_n").map(|m| number(&m["sum"]["dataPoints"][0]["asDouble"])) == Some(n)
    };
    // The pushes made after the program's load ended count the same @n with shares that
    // drift as time passes: the one at exit is the last, once nothing more arrives.
    let all_in = poll(Duration::from_secs(10), || {
        let before = c.received().len();
        std::thread::sleep(Duration::from_millis(1000));
        (before > 0 && c.received().len() == before).then_some(())
    });
    assert!(all_in.is_some(), "the collector kept receiving after gtrace ended");
    let last = c.received().into_iter().filter(|r| counted(r)).last();
    let last = last.unwrap_or_else(|| panic!("no push with @n = {n}:\n{said}"));
    let share = duty_points(&last).into_iter().find(|(probe, _, _)| probe.contains("main.end")).map(|p| p.2);
    let share = share.unwrap_or_else(|| panic!("no gauge in the last push: {last}"));
    assert!((100.0 * share - said_share).abs() <= 1.0, "pushed {share}, printed {said_share}%: {line}");
    check_counts(&out.text(), n as i64, map_value(&text, "@slowest"), &said);
    drop(stdin);
    let status = child.0.wait().expect("wait for the program");
    assert!(status.success());
}
