//! Goroutines end to end, where a case cannot say it (tests/cases/goroutines.cases has
//! `self` variables and parameters at returns): `elapsed` stays exact when goroutines
//! migrate between threads, panics skip returns, and many goroutines are in flight at
//! once, or share a slot of the array of records at once; the tables of calls in
//! flight, full or sized to a running target; two processes of one binary traced with
//! -b whose goroutines are at the same g's (tests/go/sharedg).
//! tests/go/goroutines prints its own truth. Needs root (SKIP
//! without it, unless CI=true: then it fails).

mod support;

use support::{map_value, privileged, truth};

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
fn elapsed_covers_the_sleep_on_many_goroutines_at_once() {
    if !privileged("elapsed_covers_the_sleep_on_many_goroutines_at_once") {
        return;
    }
    let out =
        trace(&["-e", "on return main.nap { @min = min(elapsed); @max = max(elapsed); @n = count() }"], "sleep 64")
            .stdout;
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
    let script =
        "on entry main.mayPanic { @entries = count() } on return main.mayPanic { @returns = count(); @max = max(elapsed) }";
    let out = trace(&["-e", script], "panic 100000").stdout;
    assert_eq!(map_value(&out, "@entries"), truth(&out, "calls"));
    assert_eq!(map_value(&out, "@returns"), truth(&out, "returned"));
    // A call that panicked left its entry time behind at the same goroutine and depth; the
    // next call there overwrote it. Nothing here is timed precisely (the machine may be
    // loaded): the longest call must only be far from the whole run's length.
    let max = nanos(map_line(&out, "@max").unwrap());
    assert!(max < 2e9, "a return was paired with a stale entry: max {max}ns\n{out}");
}

/// Runs gtrace with `args` on `goroutines MODE` started with -c; fails on a non-zero exit.
fn trace(args: &[&str], mode: &str) -> support::Run {
    support::trace_command(args, &support::go_build("goroutines", &[]), mode)
}

/// The number of timed calls the line of losses says were missed (0 when it says none).
fn missed_calls(stderr: &str) -> i64 {
    let Some(part) =
        stderr.lines().flat_map(|l| l.split("; ")).find(|p| p.contains("timed call") && p.contains(" missed "))
    else {
        return 0;
    };
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
fn goroutines_sharing_a_slot_of_the_array_at_once_lose_no_call() {
    use gtrace::lower::layout::{SLOT_BITS, SLOT_HASH};
    if !privileged("goroutines_sharing_a_slot_of_the_array_at_once_lose_no_call") {
        return;
    }
    // Pairs of goroutines whose g's hash to one slot of the array of records (the
    // program computes the slot as gtrace does, one pair a slot), each pair making its
    // first timed call at once on two threads (`elapsed` makes the calls timed: pushed
    // at the entry, found at the return). The table of spilled records holds every
    // goroutine here: every call is timed, none missed.
    let (hash, bits) = (format!("{SLOT_HASH:#x}"), SLOT_BITS.to_string());
    let mode = format!("collide 6000 {hash} {bits}");
    let run = trace(&["-e", "on return main.tick { @n = count(); @m = max(elapsed) }"], &mode);
    assert!(truth(&run.stdout, "threads") >= 2, "the race needs two threads at once:\n{}", run.stdout);
    assert_eq!(truth(&run.stdout, "pairs"), 6000, "{}", run.stdout);
    assert_eq!(map_value(&run.stdout, "@n"), truth(&run.stdout, "calls"), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(missed_calls(&run.stderr), 0, "{}", run.stderr);
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

/// tests/go/sharedg at `bin` started with `args`, its stdin and stdout piped: its pid,
/// stdin, stdout read as it comes, and the process (ended when dropped).
fn start_sharedg(
    bin: &std::path::Path,
    args: &[&str],
) -> (String, std::process::ChildStdin, support::processes::Lines, support::processes::Owned) {
    let mut child = std::process::Command::new(bin)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the program");
    let stdin = child.stdin.take().expect("stdin");
    let out = support::processes::Lines::of(child.stdout.take().expect("stdout"));
    (child.id().to_string(), stdin, out, support::processes::Owned(child))
}

/// `@NAME[KEY]: VALUE` of a text output.
fn keyed_line<'a>(out: &'a str, name: &str, key: &str) -> &'a str {
    map_line(out, &format!("{name}[{key}]")).unwrap_or_else(|| panic!("no {name}[{key}] in:\n{out}"))
}

#[test]
fn two_processes_with_goroutines_at_the_same_g_keep_their_calls_apart() {
    use std::collections::BTreeSet;
    use std::io::Write;
    use std::time::Duration;
    use support::processes::{scratch_dir, Gtrace, Lines};
    if !privileged("two_processes_with_goroutines_at_the_same_g_keep_their_calls_apart") {
        return;
    }
    // A binary whose heap is at a fixed address (as Go before 1.26 puts it): two of its
    // processes make goroutines at the same g's. A file of its own: -b traces every
    // process of it, and no other test runs it.
    let env = [("GOEXPERIMENT", "norandomizedheapbase64")];
    let bin = scratch_dir("sharedg").join("sharedg");
    support::copy_executable(&support::go_build_env("sharedg", &[], &env), &bin);
    // Each call's elapsed (entry to return), its parameter carried to the return, and a
    // `self` variable set at the entry: each by the process that made the call.
    let script = "on entry main.nap { self.t = nsecs } on return main.nap { @n = count(); @min[pid] = min(elapsed); \
                  @ms[pid] = sum(ms); @own[pid] = min(duration(nsecs - self.t)) }";
    // No budget: 2,000 calls in a second on a loaded host may cost more than its 5%.
    let mut g = Gtrace::start(&["-b", bin.to_str().expect("a path"), "-e", script, "--budget", "off"]);
    g.attached();
    // Two processes, 100 goroutines each making 10 naps (20ms in one, 30ms in the
    // other), all at once once both are ready.
    let start = |ms: &str| start_sharedg(&bin, &["100", "10", ms]);
    let gs = |out: &Lines| -> BTreeSet<String> {
        out.wait_for(Duration::from_secs(60), |l| l == "ready").expect("the program says ready");
        out.text().lines().filter_map(|l| l.strip_prefix("g=")).map(String::from).collect()
    };
    // Where a process's runtime starts allocating g's varies (here about one pair in
    // two shares most of them, the others a few): pairs are started until one shares
    // at least 20, before any of them naps (one that shares fewer is killed first).
    let mut tried = Vec::new();
    let (procs, shared) = loop {
        let procs = [start("20"), start("30")];
        let shared = gs(&procs[0].2).intersection(&gs(&procs[1].2)).count();
        tried.push(shared);
        if shared >= 20 || tried.len() == 20 {
            break (procs, shared);
        }
    };
    assert!(shared >= 20, "pairs of processes shared {tried:?} g's of 100: the test needs goroutines at one g");
    for (_, stdin, _, _) in &procs {
        writeln!(&*stdin, "go").expect("write");
    }
    let truths: Vec<String> = (procs.iter())
        .map(|(_, _, out, _)| {
            out.wait_for(Duration::from_secs(120), |l| l.starts_with("calls=")).expect("the calls end")
        })
        .collect();
    assert_eq!(g.stop("INT"), 0, "{}", g.err.text());
    let (out, err) = (g.out.text(), g.err.text());
    let calls = |i: usize| truth(&truths[i], "calls");
    assert_eq!(map_value(&out, "@n"), calls(0) + calls(1), "{out}\n{err}");
    assert_eq!(missed_calls(&err), 0, "{err}");
    for (i, (pid, ..)) in procs.iter().enumerate() {
        let ms = truth(&truths[i], "ms");
        let slept = ms as f64 * 1e6;
        let what = format!("pid {pid} ({ms}ms naps, {shared} g's shared):\n{out}\n{err}");
        assert_eq!(keyed_line(&out, "@ms", pid).trim().parse::<i64>().ok(), Some(ms * calls(i)), "{what}");
        assert!(nanos(keyed_line(&out, "@min", pid)) >= slept, "elapsed below the nap: {what}");
        assert!(nanos(keyed_line(&out, "@own", pid)) >= slept, "self.t another process's: {what}");
    }
}

#[test]
fn under_b_processes_that_come_and_go_leave_room_for_the_next() {
    use std::io::Write;
    use std::time::Duration;
    use support::processes::{scratch_dir, Gtrace};
    if !privileged("under_b_processes_that_come_and_go_leave_room_for_the_next") {
        return;
    }
    // A file of its own: -b traces every process of it, and no other test runs it.
    let bin = scratch_dir("comeandgo").join("sharedg");
    support::copy_executable(&support::go_build("sharedg", &[]), &bin);
    // Twelve processes one after the other, 2,000 goroutines each making one timed call:
    // 24,000 goroutines' records in all, more than the array's 16,384 slots and a table
    // of 3,000 for the rest hold, while one process's 2,000 fit whatever the array holds.
    // gtrace sweeps the table of the ended processes' keys every 200 ms here (5 s by
    // default); without the sweep the later processes' calls find no room.
    let (processes, goroutines): (i64, i64) = (12, 2000);
    let gtrace = env!("CARGO_BIN_EXE_gtrace");
    let sweep = "GTRACE_TEST_HOOK_SWEEP_MS=200";
    let script = "on return main.nap { @n = count(); @longest = max(elapsed) }";
    let args = [sweep, gtrace, "-b", bin.to_str().expect("a path"), "-e", script, "--budget", "off"];
    let mut g = Gtrace::start_command("env", &[&args[..], &["--map-size", "inflight=3000", "--stats"]].concat());
    g.attached();
    let mut calls = 0;
    for _ in 0..processes {
        let (_, stdin, out, mut child) = start_sharedg(&bin, &[goroutines.to_string().as_str(), "1", "1"]);
        out.wait_for(Duration::from_secs(60), |l| l == "ready").expect("the program says ready");
        writeln!(&stdin, "go").expect("write");
        let said = out.wait_for(Duration::from_secs(60), |l| l.starts_with("calls=")).expect("the calls end");
        calls += truth(&said, "calls");
        let _ = child.0.wait();
        // A sweep or two after its end.
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(g.stop("INT"), 0, "{}", g.err.text());
    let (out, err) = (g.out.text(), g.err.text());
    assert_eq!(calls, processes * goroutines, "{out}");
    assert_eq!(missed_calls(&err), 0, "{out}\n{err}");
    assert_eq!(map_value(&out, "@n"), calls, "{out}\n{err}");
    // Every goroutine's record the array could not hold went to the table, and every
    // process ended half a second (two sweeps) before the next began or gtrace stopped:
    // --stats says at least those were forgotten.
    const SLOTS: i64 = 16_384;
    let line = err.lines().find(|l| l.starts_with("-b: ")).unwrap_or_else(|| panic!("no sweep line:\n{err}"));
    let forgotten: i64 = line.split_whitespace().nth(1).and_then(|n| n.replace(',', "").parse().ok()).expect("a count");
    assert!(forgotten >= calls - SLOTS, "{line}: fewer than the {} records the array could not hold", calls - SLOTS);
}
