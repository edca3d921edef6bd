//! Goroutines end to end: goroutine-scoped `self` variables and `elapsed` stay exact when
//! goroutines migrate between threads, stacks are copied, panics skip returns, and many
//! goroutines come and go. tests/go/goroutines prints its own truth. Needs root (SKIP
//! without it, unless CI=true: then it fails).

mod support;

use support::{map_value, privileged, truth};

use std::process::Command;

fn gtrace_on(script: &str, args: &str) -> String {
    let cmd = format!("{} {args}", support::go_build("goroutines", &[]).display());
    let out = Command::new(env!("CARGO_BIN_EXE_gtrace")).args(["-e", script, "-c", &cmd]).output().expect("run gtrace");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "gtrace failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn map_line<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    out.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")))
}

/// A duration as printed (`24.5ms`) in nanoseconds.
fn nanos(text: &str) -> f64 {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap();
    let (n, unit) = text.trim().split_at(split);
    let n: f64 = n.parse().unwrap();
    n * match unit.trim() {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => panic!("unit {u}"),
    }
}

#[test]
fn self_variables_follow_goroutines_across_gosched() {
    if !privileged("self_variables_follow_goroutines_across_gosched") {
        return;
    }
    let out = gtrace_on(
        "on entry main.work { self.id = id } on return main.work { if self.id == ret { @match = count() } else { @mismatch = count() } }",
        "gosched 3000",
    );
    assert_eq!(map_value(&out, "@match"), truth(&out, "calls"), "{out}");
    assert!(map_line(&out, "@mismatch").is_none(), "{out}");
}

#[test]
fn elapsed_covers_the_sleep_on_many_goroutines_at_once() {
    if !privileged("elapsed_covers_the_sleep_on_many_goroutines_at_once") {
        return;
    }
    let out = gtrace_on("on return main.nap { @min = min(elapsed); @max = max(elapsed); @n = count() }", "sleep 64");
    assert_eq!(map_value(&out, "@n"), truth(&out, "calls"));
    let slept = truth(&out, "sleep_ms") as f64 * 1e6;
    let min = nanos(map_line(&out, "@min").unwrap());
    let max = nanos(map_line(&out, "@max").unwrap());
    assert!(min >= slept, "min {min} below the sleep {slept}:\n{out}");
    assert!(max < 2e9, "max {max} is absurd:\n{out}");
}

#[test]
fn panics_leave_no_stale_pairing() {
    if !privileged("panics_leave_no_stale_pairing") {
        return;
    }
    let out = gtrace_on(
        "on entry main.mayPanic { @entries = count() } on return main.mayPanic { @returns = count(); @max = max(elapsed) }",
        "panic 100000",
    );
    assert_eq!(map_value(&out, "@entries"), truth(&out, "calls"));
    assert_eq!(map_value(&out, "@returns"), truth(&out, "returned"));
    // A call that panicked left its entry time behind at the same goroutine and depth; the
    // next call there overwrote it. Nothing here is timed precisely (the machine may be
    // loaded): the longest call must only be far from the whole run's length.
    let max = nanos(map_line(&out, "@max").unwrap());
    assert!(max < 2e9, "a return was paired with a stale entry: max {max}ns\n{out}");
}

#[test]
fn self_variables_are_freed_when_goroutines_exit() {
    if !privileged("self_variables_are_freed_when_goroutines_exit") {
        return;
    }
    // 100,000 goroutines each set a self variable and exit. The table holds 65,536: if
    // exits did not free their variables, the later goroutines could not store theirs and
    // would read 0 back.
    let out = gtrace_on(
        "on entry main.setter { self.v = v } on return main.setter { if self.v == ret { @ok = count() } else { @bad = count() } }",
        "exit 100000",
    );
    assert_eq!(map_value(&out, "@ok"), truth(&out, "calls"), "{out}");
    assert!(map_line(&out, "@bad").is_none(), "{out}");
}

#[test]
fn parameters_at_returns_follow_goroutines_across_gosched() {
    if !privileged("parameters_at_returns_follow_goroutines_across_gosched") {
        return;
    }
    // work(id) returns id: the parameter carried from each call's entry must be its own,
    // though the goroutine resumed on another thread and 3000 calls are in flight.
    let out = gtrace_on(
        "on return main.work { if id == ret { @match = count() } else { @mismatch = count() } }",
        "gosched 3000",
    );
    assert_eq!(map_value(&out, "@match"), truth(&out, "calls"), "{out}");
    assert!(map_line(&out, "@mismatch").is_none(), "{out}");
}

#[test]
fn parameters_at_returns_are_not_paired_with_a_panicked_call() {
    if !privileged("parameters_at_returns_are_not_paired_with_a_panicked_call") {
        return;
    }
    // mayPanic(i) returns i or panics: a panicked call leaves its entry record behind at
    // the same goroutine and depth, and the next call there must replace it.
    let out = gtrace_on(
        "on return main.mayPanic { if i == ret { @match = count() } else { @mismatch = count() } }",
        "panic 10000",
    );
    assert_eq!(map_value(&out, "@match"), truth(&out, "returned"), "{out}");
    assert!(map_line(&out, "@mismatch").is_none(), "{out}");
}

#[test]
fn self_variables_of_different_sizes_share_one_table() {
    if !privileged("self_variables_of_different_sizes_share_one_table") {
        return;
    }
    // A string and an integer self variable: the table's values are as large as the
    // string's; storing the integer must not read past its own slot.
    let out = gtrace_on(
        r#"on entry main.work { self.tag = "w"; self.id = id } on return main.work { if self.id == ret && self.tag == "w" { @match = count() } }"#,
        "gosched 100",
    );
    assert_eq!(map_value(&out, "@match"), truth(&out, "calls"), "{out}");
}

/// Runs gtrace with `args` on `goroutines MODE` started with -c; fails on a non-zero exit.
fn trace(args: &[&str], mode: &str) -> support::Run {
    let cmd = format!("{} {mode}", support::go_build("goroutines", &[]).display());
    let mut all = args.to_vec();
    all.extend(["-c", &cmd]);
    let run = support::gtrace(&all);
    assert_eq!(run.code, 0, "gtrace {all:?} failed:\n{}\n{}", run.stdout, run.stderr);
    run
}

/// The number of timed calls the line of losses says were missed (0 when it says none).
fn missed_calls(stderr: &str) -> i64 {
    let Some(part) = stderr.lines().flat_map(|l| l.split("; ")).find(|p| p.contains("timed call")) else { return 0 };
    part.split_whitespace().next().unwrap().replace(',', "").parse().unwrap_or_else(|_| panic!("{part}"))
}

const HOLD: &str = "on return main.hold { @n = count(); @longest = max(elapsed) }";

#[test]
fn every_call_in_flight_on_40000_and_100000_goroutines_is_timed() {
    if !privileged("every_call_in_flight_on_40000_and_100000_goroutines_is_timed") {
        return;
    }
    for n in [40_000, 100_000] {
        let run = trace(&["-e", HOLD], &format!("hold {n}"));
        assert_eq!(truth(&run.stdout, "calls"), n);
        assert_eq!(map_value(&run.stdout, "@n"), truth(&run.stdout, "returned"), "{}\n{}", run.stdout, run.stderr);
        assert_eq!(missed_calls(&run.stderr), 0, "{}", run.stderr);
    }
}

#[test]
fn calls_past_the_inflight_table_are_counted_exactly() {
    if !privileged("calls_past_the_inflight_table_are_counted_exactly") {
        return;
    }
    // 100,000 calls in flight at once; the array keeps at most 16,384 goroutines, the
    // table 20,000 more: every other call is missed, and said.
    let run = trace(&["-e", HOLD, "--map-size", "inflight=20000"], "hold 100000");
    let returned = truth(&run.stdout, "returned");
    let timed = map_value(&run.stdout, "@n");
    let missed = missed_calls(&run.stderr);
    assert!(missed > 0 && timed < returned, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(timed + missed, returned, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("timed calls of main.hold missed (their returns not seen): the table of goroutines with calls in flight is full at 20,000 goroutines (--map-size inflight=N holds more)"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_tables_of_calls_in_flight_are_sized_to_a_running_target() {
    use std::io::Write;
    use support::processes::{Gtrace, Lines, Owned};
    if !privileged("the_tables_of_calls_in_flight_are_sized_to_a_running_target") {
        return;
    }
    // A target that has had 200,000 goroutines at once (the runtime keeps their g's):
    // traced with -p, its tables are sized to it, so 300,000 calls in flight at once
    // (more than the 16,384 + 262,144 the defaults hold) are all timed.
    let bin = support::go_build("goroutines", &[]);
    let mut child = std::process::Command::new(&bin)
        .args(["peak", "200000"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the program");
    let mut stdin = child.stdin.take().expect("stdin");
    let out = Lines::of(child.stdout.take().expect("stdout"));
    let pid = child.id().to_string();
    let _child = Owned(child);
    out.wait_for(std::time::Duration::from_secs(60), |l| l == "ready").expect("the program says ready");
    let peak = truth(&out.text(), "peak");
    let mut g = Gtrace::start(&["-e", HOLD, "-p", &pid, "--budget", "off"]);
    g.attached();
    let said = g.err.text();
    let part = said
        .lines()
        .find(|l| l.contains("goroutines: the tables of calls in flight hold"))
        .unwrap_or_else(|| panic!("{said}"));
    let number = |w: &str| w.replace(',', "").parse::<i64>().unwrap_or_else(|_| panic!("{part}"));
    let words: Vec<&str> = part.split_whitespace().collect();
    let had = number(words[words.iter().position(|w| *w == "had").unwrap() + 1]);
    let size = number(words[words.iter().position(|w| *w == "hold").unwrap() + 1]);
    assert!(had >= peak && had < peak + 1_000, "{part}");
    assert_eq!(size, (2 * had as u64).next_power_of_two() as i64, "{part}");
    writeln!(stdin, "300000").expect("write");
    let line = out.wait_for(std::time::Duration::from_secs(120), |l| l.starts_with("calls=")).expect("the calls end");
    drop(stdin);
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    assert_eq!(truth(&line, "calls"), 300_000);
    assert_eq!(map_value(&g.out.text(), "@n"), truth(&line, "returned"), "{}\n{}", g.out.text(), g.err.text());
    assert_eq!(missed_calls(&g.err.text()), 0, "{}", g.err.text());
}
