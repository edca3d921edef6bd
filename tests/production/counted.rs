//! `--rate` and `--stats`: printed events limited and what was dropped counted; the hits
//! `--stats` says equal to the calls the target made, a function with inlined copies
//! counted once.

use super::*;

#[test]
fn rate_limits_printed_events_and_counts_what_it_dropped() {
    if !privileged("rate_limits_printed_events_and_counts_what_it_dropped") {
        return;
    }
    let started = Instant::now();
    let run =
        trace(&["-e", "on entry main.emit { printf(\"e %d\\n\", i); @n = count() }", "--rate", "100"], "paced 1500 1");
    let seconds = started.elapsed().as_secs_f64();
    let calls = truth(&run.stdout, "calls") as u64;
    let printed = count_lines(&run.stdout, "e ");
    let dropped =
        lost(&run.stderr, "dropped ", "--rate 100").unwrap_or_else(|| panic!("no drop said:\n{}", run.stderr));
    assert_eq!(printed + dropped, calls, "{}", run.stderr);
    // Counting is not limited: only printing is.
    assert_eq!(map_value(&run.stdout, "@n"), calls as i64);
    // A burst of a second's worth, then 100 a second, over a run that took `seconds`.
    assert!(printed >= 100, "{printed} printed");
    assert!(printed as f64 <= 100.0 * (seconds + 1.0), "{printed} printed in {seconds:.2}s");
}

#[test]
fn stats_hits_equal_the_calls_the_target_made() {
    if !privileged("stats_hits_equal_the_calls_the_target_made") {
        return;
    }
    let script = "on entry main.record { @n = count() } on entry main.record, main.setter { @[func] = count() }";
    let run = trace(&["-e", script, "--stats", "-f", "json"], "keys 2000");
    let calls = truth(&run.stdout, "calls") as u64;
    let stats: serde_json::Value = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "stats")
        .unwrap_or_else(|| panic!("no stats object in:\n{}", run.stdout));
    let probes = stats["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{stats}");
    for p in probes {
        assert_eq!(p["hits"], calls, "{p}");
        assert!(p["cost_ns"].as_f64().unwrap() > 0.0, "{p}");
    }
    let sites = probes[1]["sites"].as_array().unwrap();
    let hits = |f: &str| sites.iter().find(|s| s["function"] == f).map(|s| s["hits"].as_u64().unwrap());
    assert_eq!(hits("main.record"), Some(calls));
    assert_eq!(hits("main.setter"), Some(0));
    // Each site says how the kernel runs the instruction under it.
    assert!(sites.iter().all(|s| ["Step", "Push", "Branch"].contains(&s["kind"].as_str().unwrap_or(""))), "{sites:?}");
    assert!(stats["trap"]["step_ns"].as_f64().unwrap() > 0.0, "{stats}");
    // p0, at one function, took its hits above from the kernel's run count (root holds
    // the kernel's statistics); p1, at two, from its counters: both are the target's
    // calls. A plan written for elsewhere counts its hits itself (the host that runs it
    // may not grant CAP_SYS_ADMIN).
    let dir = support::unique_tmp(&support::root().join("target"), "production-plan");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plan.json");
    let written = support::gtrace(&["-e", script, "--emit", "plan", "-o", file.to_str().unwrap(), "-b", &prod()]);
    assert_eq!(written.code, 0, "{}", written.stderr);
    let plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(plan["plan"]["accounting"]["kernel_hits"], serde_json::json!([]), "{}", plan["plan"]["accounting"]);
    // Traced here, p0's code counts nothing itself (no attach cookie, its slot's
    // counter): p1's does.
    let asm = support::gtrace(&["-e", script, "--stats", "--emit", "asm", "-b", &prod()]);
    assert_eq!(asm.code, 0, "{}", asm.stderr);
    let (p0, p1) = asm.stdout.split_once("; program p1").expect("two programs");
    assert!(!p0.contains("bpf_get_attach_cookie") && p1.contains("bpf_get_attach_cookie"), "{}", asm.stdout);
    assert_eq!(probes[0]["run_count"], calls, "{}", probes[0]);
    // The same through that plan run by `gtrace run`, with the accounting a budget turns
    // on: the hits the budget weighs are the calls.
    let cmd = format!("{} keys 2000", prod());
    let run = support::gtrace(&["run", file.to_str().unwrap(), "--budget", "50%", "--stats", "-f", "json", "-c", &cmd]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let calls = truth(&run.stdout, "calls") as u64;
    let objects = run.stdout.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    let stats = objects.filter(|v| v["type"] == "stats").last().unwrap_or_else(|| panic!("no stats:\n{}", run.stdout));
    let hits: Vec<u64> = stats["probes"].as_array().unwrap().iter().filter_map(|p| p["hits"].as_u64()).collect();
    assert_eq!(hits, [calls, calls], "{stats}");
    // The text table says the same.
    let run = trace(&["-e", script, "--stats"], "keys 2000");
    let row = run.stderr.lines().find(|l| l.starts_with("on entry main.record ")).expect("no row");
    assert_eq!(row.split_whitespace().nth(3), Some("2,000"), "{}", run.stderr);
    let kind = row.split_whitespace().nth(4);
    assert!(["step", "push", "branch"].contains(&kind.unwrap_or("")), "{}", run.stderr);
}

/// A function both called and inlined elsewhere has sites listed apart in the plan (its
/// entry among the functions, its inlined copies after them), all on one hit counter:
/// `--stats` counts each function once, so a probe's hits are its runs, not more.
#[test]
fn stats_count_a_function_with_inlined_copies_once() {
    if !privileged("stats_count_a_function_with_inlined_copies_once") {
        return;
    }
    let bin = support::go_build("inline", &[]);
    let script = r#"on entry "strconv.*", "unicode/utf8.*", "fmt.*", "sync.*", "time.*", "os.*" { @n = count() }"#;
    let run = support::gtrace(&["-e", script, "--stats", "-f", "json", "-c", bin.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let objects: Vec<serde_json::Value> = run.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let stats = objects.iter().find(|v| v["type"] == "stats").expect("a stats object");
    let p0 = &stats["probes"][0];
    let sites: Vec<&str> = p0["sites"].as_array().unwrap().iter().filter_map(|s| s["function"].as_str()).collect();
    let distinct: std::collections::HashSet<&&str> = sites.iter().collect();
    assert_eq!(sites.len(), distinct.len(), "each function once: {sites:?}");
    let counted = objects.iter().find(|v| v["name"] == "@n").expect("@n")["entries"][0]["value"].as_u64();
    assert!(counted.is_some_and(|n| n > 0), "{}", run.stdout);
    assert_eq!(p0["hits"].as_u64(), counted, "{p0}");
    assert_eq!(p0["run_count"].as_u64(), counted, "{p0}");
}
