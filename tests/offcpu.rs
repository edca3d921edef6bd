//! The `offcpu` library, end to end: tests/go/offcpu blocks in known places (a channel
//! receive, a sync.Mutex, a sleep, a select) for known times and prints, for each, the
//! waits it made and their total time as it measured them around the blocking call.
//! gtrace's count of waits with that function on the stack must equal the program's
//! exactly, with the runtime's wait reason; its time must lie within the program's: at
//! most the program's total (a park happens between the program's two clock reads, and
//! both read CLOCK_MONOTONIC), and at least 95% of it (the rest is the program's own
//! work around the park: a channel's or mutex's fast path, a mutex's spinning, the two
//! uprobe traps). With `-p` and `--pprof`, `go tool pprof -raw` reads the profile and
//! its samples give the same counts. Under a goroutine that parks as often as it can,
//! `--budget` detaches the library in one step and the maps say they are partial.
//! Needs root (CAP_BPF + CAP_PERFMON): without it these tests say SKIP, except on CI
//! (CI=true), where they fail.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::processes::{Gtrace, Lines, Owned};
use support::toolchain::{self, Kind, PLAIN};
use support::{gtrace, privileged, truth, Run};

/// Each place the program waits: its function, the line of its truth, and the wait
/// reason the runtime gives it (for a sync.Mutex, by Go release: `minor` is 1.MINOR).
fn places(minor: u32) -> [(&'static str, &'static str, &'static str); 4] {
    let mutex = if minor >= 20 { "sync.Mutex.Lock" } else { "semacquire" };
    [
        ("main.waitChan", "chan", "chan receive"),
        ("main.waitMutex", "mutex", mutex),
        ("main.waitSleep", "sleep", "sleep"),
        ("main.waitSelect", "select", "select"),
    ]
}

/// 1.MINOR of a toolchain name (`go1.17.13`, or `local`: the installed go's).
fn minor(toolchain: &str) -> u32 {
    let version = if toolchain == "local" { support::go_version() } else { toolchain.to_string() };
    let rest = version.strip_prefix("go1.").unwrap_or_else(|| panic!("not a Go version: {version}"));
    rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|m| m.parse().ok()).expect("1.MINOR")
}

/// `gtrace ARGS -c 'PROGRAM N WAIT'`; must succeed.
fn trace(args: &[&str], program: &Path, n: u32, wait: &str) -> Run {
    support::trace_command(args, program, &format!("{n} {wait}"))
}

/// The entries of map `name` in `-f json` output: (reason, stack frames, value).
fn json_entries(out: &str, name: &str) -> Vec<(String, Vec<String>, i64)> {
    let object = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .find(|o| o["type"] == "map" && o["name"] == name)
        .unwrap_or_else(|| panic!("no map {name} in:\n{out}"));
    let entries = object["entries"].as_array().expect("entries");
    entries
        .iter()
        .map(|e| {
            let reason = match &e["keys"]["reason"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let stack = e["keys"]["ustack"].as_array().expect("ustack").iter().map(|f| f.as_str().unwrap().to_string());
            (reason, stack.collect(), e["value"].as_i64().expect("a number"))
        })
        .collect()
}

/// The reasons and summed values of the entries whose stack passes through `function`.
fn through(entries: &[(String, Vec<String>, i64)], function: &str) -> (Vec<String>, i64) {
    let mut reasons = Vec::new();
    let mut sum = 0;
    for (reason, stack, value) in entries {
        if stack.iter().any(|f| f.split('+').next() == Some(function)) {
            if !reasons.contains(reason) {
                reasons.push(reason.clone());
            }
            sum += value;
        }
    }
    (reasons, sum)
}

/// gtrace's time against the program's: at most it, at least 95% of it.
fn assert_time_within(what: &str, gtrace_ns: i64, program_ns: i64) {
    assert!(
        gtrace_ns <= program_ns && gtrace_ns * 100 >= program_ns * 95,
        "{what}: gtrace timed {gtrace_ns}ns of waiting, the program {program_ns}ns around the waits \
         (gtrace's must be at most the program's and at least 95% of it)"
    );
}

#[test]
fn offcpu_counts_and_times_each_wait_by_reason_and_stack_on_every_toolchain() {
    if !privileged("offcpu_counts_and_times_each_wait_by_reason_and_stack_on_every_toolchain") {
        return;
    }
    for tc in toolchain::toolchains() {
        let Some(program) = toolchain::build_plain("offcpu", &tc) else { continue };
        let r = trace(&["offcpu", "-f", "json"], &program, 10, "20ms");
        let counts = json_entries(&r.stdout, "@offcpu_count");
        let times = json_entries(&r.stdout, "@offcpu_time");
        for (function, kind, reason) in places(minor(&tc)) {
            let line = r.stdout.lines().find(|l| l.starts_with(&format!("{kind} count="))).expect("the truth");
            let (reasons, count) = through(&counts, function);
            assert_eq!(reasons, [reason], "{tc}: reasons of the waits in {function}:\n{}", r.stdout);
            assert_eq!(count, truth(line, "count"), "{tc}: waits in {function}:\n{}", r.stdout);
            let (_, ns) = through(&times, function);
            assert_time_within(&format!("{tc}: {function}"), ns, truth(line, "ns"));
        }
        // The histogram of each reason has at least the program's waits.
        let hist = r.stdout.lines().find(|l| l.contains("\"@offcpu_by_reason\"")).expect("@offcpu_by_reason");
        assert!(hist.contains("\"select\""), "{tc}: {hist}");
    }
}

/// `runtime.waitReasonStrings` as a binary without DWARF or symbols gives it (found by
/// its first texts) is where DWARF puts it in the same binary before `objcopy
/// --strip-all` took its symbols and DWARF, on every toolchain. Its length is counted as
/// far as Go strings follow, so it may take in a neighbour's (harmless: the runtime never
/// parks with a reason past its own array); never fewer.
#[test]
fn wait_reason_names_are_found_in_a_stripped_binary_where_dwarf_puts_them() {
    use gtrace::gobin::Target;
    use gtrace::gotypes::TypeKind;
    let array = |path: &Path| {
        let t = Target::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let v = t.variable("runtime.waitReasonStrings").expect("read the binary").expect("found");
        let len = match &t.types().get(v.ty).kind {
            TypeKind::Array { len, .. } => *len,
            other => panic!("not an array: {other:?}"),
        };
        (v.addr, len)
    };
    let dir = support::unique_tmp(&support::root().join("target/tmp"), "offcpu-strip");
    std::fs::create_dir_all(&dir).expect("a folder");
    for tc in toolchain::toolchains() {
        let Some(plain) = toolchain::build_plain("offcpu", &tc) else { continue };
        let stripped = dir.join(format!("offcpu-{tc}"));
        let status = Command::new("objcopy").arg("--strip-all").arg(&plain).arg(&stripped).status();
        assert!(status.is_ok_and(|s| s.success()), "objcopy --strip-all {}", plain.display());
        let (dwarf, found) = (array(&plain), array(&stripped));
        assert_eq!(found.0, dwarf.0, "{tc}: the address found stripped, and DWARF's");
        assert!(found.1 >= dwarf.1 && dwarf.1 >= 20, "{tc}: entries found stripped {}, in DWARF {}", found.1, dwarf.1);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// In a stripped binary the reasons are named as in one with DWARF, and the stacks and
/// counts are as exact (symbolized from .gopclntab).
#[test]
fn offcpu_in_a_stripped_binary_names_the_reasons_too() {
    if !privileged("offcpu_in_a_stripped_binary_names_the_reasons_too") {
        return;
    }
    let stripped = Kind { stripped: true, ..PLAIN };
    let program = match toolchain::build("offcpu", "local", stripped) {
        Ok(p) => p,
        Err(toolchain::NotBuilt::NoToolchain(e)) => panic!("the local toolchain builds: {e}"),
    };
    let r = trace(&["offcpu", "-f", "json"], &program, 5, "10ms");
    let counts = json_entries(&r.stdout, "@offcpu_count");
    for (function, kind, reason) in places(minor("local")) {
        let line = r.stdout.lines().find(|l| l.starts_with(&format!("{kind} count="))).expect("the truth");
        let (reasons, count) = through(&counts, function);
        assert_eq!(reasons, [reason], "reasons of the waits in {function}:\n{}", r.stdout);
        assert_eq!(count, truth(line, "count"), "waits in {function}:\n{}", r.stdout);
    }
}

/// What `go tool pprof -raw` prints: samples (values, location ids, labels) and each
/// location's functions.
struct Raw {
    types: Vec<String>,
    samples: Vec<(Vec<i64>, Vec<u64>, Vec<String>)>,
    functions: HashMap<u64, Vec<String>>,
}

fn pprof_raw(profile: &Path) -> Raw {
    let out = Command::new("go").args(["tool", "pprof", "-raw"]).arg(profile).output().expect("go tool pprof");
    assert!(out.status.success(), "go tool pprof -raw: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut raw = Raw { types: Vec::new(), samples: Vec::new(), functions: HashMap::new() };
    let (mut section, mut last) = ("", 0);
    for line in text.lines() {
        let t = line.trim();
        if ["Samples:", "Locations", "Mappings"].contains(&t) {
            section = if t == "Samples:" {
                "s"
            } else if t == "Locations" {
                "l"
            } else {
                "m"
            };
            continue;
        }
        match section {
            "s" if raw.types.is_empty() => {
                raw.types = t.split_whitespace().map(|w| w.trim_end_matches("[dflt]").to_string()).collect()
            }
            "s" if t.contains(":[") => raw.samples.last_mut().expect("a sample").2.push(t.to_string()),
            "s" if !t.is_empty() => {
                let (values, ids) = t.split_once(':').expect("values: ids");
                let values = values.split_whitespace().map(|v| v.parse().expect("a value")).collect();
                let ids = ids.split_whitespace().map(|v| v.parse().expect("an id")).collect();
                raw.samples.push((values, ids, Vec::new()));
            }
            "l" if !t.is_empty() => {
                // `ID: 0xADDR M=1 FUNCTION FILE:LINE:COL s=N`, then inlined callers'
                // lines `FUNCTION FILE:LINE:COL s=N`.
                let function = match t.split_once(": 0x") {
                    Some((id, rest)) => {
                        last = id.parse().expect("location id");
                        rest.split_whitespace().nth(2)
                    }
                    None => t.split_whitespace().next(),
                };
                raw.functions.entry(last).or_default().push(function.expect("a function").to_string());
            }
            _ => {}
        }
    }
    raw
}

#[test]
fn offcpu_pprof_of_a_running_process_reads_in_go_tool_pprof() {
    if !privileged("offcpu_pprof_of_a_running_process_reads_in_go_tool_pprof") {
        return;
    }
    let program = support::go_build("offcpu", &[]);
    let mut child = Command::new(&program)
        .args(["10", "10ms", "stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the program");
    let mut stdin = child.stdin.take();
    let out = Lines::of(child.stdout.take().expect("stdout"));
    let pid = child.id().to_string();
    let _child = Owned(child);
    out.wait_for(Duration::from_secs(10), |l| l == "ready").expect("the program says ready");
    let dir = support::unique_tmp(&support::root().join("target/tmp"), "offcpu");
    std::fs::create_dir_all(&dir).expect("a folder for the profile");
    let profile = dir.join("wait.pb.gz");
    let mut g = Gtrace::start(&["offcpu", "--pprof", profile.to_str().unwrap(), "-p", &pid]);
    g.attached();
    use std::io::Write;
    writeln!(stdin.as_mut().expect("stdin"), "go").expect("write go");
    out.wait_for(Duration::from_secs(30), |l| l == "---").expect("the program prints its counts");
    assert_eq!(g.stop("INT"), 0, "gtrace:\n{}", g.err.text());
    drop(stdin);
    let truth_text = out.text();
    let raw = pprof_raw(&profile);
    // Like Go's block profile: counts and time, the time shown by default (last).
    assert_eq!(raw.types, ["calls/count", "wall/nanoseconds"], "sample types");
    for (function, kind, reason) in places(minor("local")) {
        let line = truth_text.lines().find(|l| l.starts_with(&format!("{kind} count="))).expect("the truth");
        let (mut calls, mut ns) = (0, 0);
        for (values, ids, labels) in &raw.samples {
            let on_stack = ids.iter().any(|id| raw.functions.get(id).is_some_and(|f| f.iter().any(|f| f == function)));
            if on_stack {
                assert_eq!(labels, &[format!("reason:[{reason}]")], "{function}'s sample labels");
                calls += values[0];
                ns += values[1];
            }
        }
        assert_eq!(calls, truth(line, "count"), "{function}: calls in the profile");
        assert_time_within(function, ns, truth(line, "ns"));
    }
}

/// gopark is hot: a goroutine that parks as often as it can costs more than a small
/// budget, which detaches both of the library's probes (gopark's and execute's, which
/// share its tables of waits in progress) in one step; every map says so.
#[test]
fn offcpu_on_a_goroutine_parking_as_fast_as_it_can_is_detached_by_the_budget() {
    if !privileged("offcpu_on_a_goroutine_parking_as_fast_as_it_can_is_detached_by_the_budget") {
        return;
    }
    let program = support::go_build("offcpu", &[]);
    // Detached, not duty-cycled (a cut takes both probes, and would leave nothing): the
    // budget is a fortieth of what they cost this host by the estimate of a shorter run
    // (`support::cost::a_fortieth`). A fixed 5% held here and was duty-cycled with the
    // trap cost scaled by 0.35 (24% of a CPU, attached 16% of each second). The storm's
    // pace is the host's scheduling: one trace's first window ran 38,267 hits/s where
    // its measure's ran about 190,000, and was duty-cycled. That trace says nothing of
    // the cut: measured and traced again, up to three times.
    let short = format!("{} storm 1s", program.display());
    let cmd = format!("{} storm 2s", program.display());
    let cut = ": detached on entry runtime.gopark + on entry runtime.execute";
    let mut cycled = Vec::new();
    let r = loop {
        let measured = support::cost::percent_of_cpu(&support::cost::stats_of(&["offcpu", "-c", &short]));
        let budget = support::cost::a_fortieth(measured);
        let r = gtrace(&["offcpu", "--budget", &budget, "-c", &cmd]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        if !r.stderr.contains("duty-cycled instead") {
            let said = r.stderr.lines().any(|l| l.starts_with("--budget ") && l.contains(cut));
            assert!(said, "the budget does not detach offcpu (--budget {budget}):\n{}", r.stderr);
            break r;
        }
        cycled.push(format!("measured {measured:.2}%, --budget {budget}:\n{}", r.stderr));
        assert!(cycled.len() < 3, "duty-cycled, not cut, in three traces:\n{}", cycled.join("\n"));
    };
    assert!(r.stdout.contains("storm handoffs="), "the program ran to its end:\n{}", r.stdout);
    let heads: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("@offcpu_by_reason[")).collect();
    assert!(!heads.is_empty(), "{}", r.stdout);
    for head in heads {
        assert!(head.contains("(partial: on entry runtime.gopark"), "not marked partial: {head}");
    }
}

/// `--set offcpu_min_wait=D` leaves out the waits shorter than D (the runtime's own short
/// parks at start-up): every wait counted is at least D, and the program's, all longer,
/// are all there.
#[test]
fn offcpu_min_wait_leaves_out_the_short_waits() {
    if !privileged("offcpu_min_wait_leaves_out_the_short_waits") {
        return;
    }
    let program = support::go_build("offcpu", &[]);
    let r = trace(&["offcpu", "--set", "offcpu_min_wait=5ms", "-f", "json"], &program, 3, "10ms");
    let hist = r
        .stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .find(|o| o["name"] == "@offcpu_by_reason")
        .unwrap_or_else(|| panic!("no @offcpu_by_reason:\n{}", r.stdout));
    for e in hist["entries"].as_array().expect("entries") {
        let min = e["min"].as_i64().expect("min");
        assert!(min >= 5_000_000, "a wait of {min}ns counted under offcpu_min_wait=5ms: {e}");
    }
    let counts = json_entries(&r.stdout, "@offcpu_count");
    for (function, kind, _) in places(minor("local")) {
        let line = r.stdout.lines().find(|l| l.starts_with(&format!("{kind} count="))).expect("the truth");
        assert_eq!(through(&counts, function).1, truth(line, "count"), "waits in {function}:\n{}", r.stdout);
    }
}

/// A probe left with nothing to do in a binary (all of its body under a `defined(...)`
/// this binary does not satisfy) is not attached: with DWARF offcpu probes only the
/// entries of gopark and execute (no RET, no entry timing); without, gopark's entry
/// and return and the runtime probes that keep its calls in flight.
#[test]
fn offcpu_attaches_only_what_the_binary_needs() {
    let plain = support::go_build("offcpu", &[]);
    let r = support::check_against(&["offcpu"], &plain);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("(2 programs at 2 uprobe sites)"), "{}", r.stderr);
    let stripped = match toolchain::build("offcpu", "local", Kind { stripped: true, ..PLAIN }) {
        Ok(p) => p,
        Err(toolchain::NotBuilt::NoToolchain(e)) => panic!("the local toolchain builds: {e}"),
    };
    let r = support::check_against(&["offcpu"], &stripped);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("(4 programs at 4 uprobe sites)"), "{}", r.stderr);
    let idle =
        "on return runtime.gopark { if !defined(reason) { @x = count() } } on entry main.waitChan { @c = count() }";
    let r = support::check_against(&["-e", idle], &plain);
    assert!(r.stderr.contains("(1 program at 1 uprobe site)"), "{}", r.stderr);
    // Written empty, it is attached (its hits are what --stats counts).
    let r =
        support::check_against(&["-e", "on entry runtime.gopark {} on entry main.waitChan { @c = count() }"], &plain);
    assert!(r.stderr.contains("(2 programs at 2 uprobe sites)"), "{}", r.stderr);
}
