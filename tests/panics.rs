//! `on panic F` against tests/go/panics' own truth, on the local toolchain, the oldest
//! supported release and the newest: every call a panic ends fires once, with the panic's
//! value (the one recover() returned, or the one the program dies of), `recovered`, and an
//! `elapsed`; calls that return normally (a function that recovers its own panic, a
//! goroutine ended by runtime.Goexit) never fire; a panic in a deferred call, a panic
//! replaced by another and one that kills the program are each followed; many panics
//! leave nothing behind. Needs root (SKIP without it, unless CI=true: then it fails).

mod support;

use gtrace::gobin::Target;
use std::collections::BTreeMap;
use support::toolchain::{build, build_plain, toolchains, Kind, NotBuilt};
use support::{gtrace, map_value, privileged, truth};

/// The functions of tests/go/panics that panics end, or that must never fire.
const TRACED: &str = "main.boom, main.guard, main.inner, main.middle, main.outer, main.deferer, main.thrower, \
                      main.rethrow, main.twice, main.selfish, main.exiter, main.doomed, main.deeper";

const SCRIPT: &str = r#"on panic TRACED {
    printf("want %s recovered=%v panic=%v\n", func, recovered, panic)
    @elapsed_ok[elapsed > 0] = count()
}"#;

fn script() -> String {
    SCRIPT.replace("TRACED", TRACED)
}

/// The program's `want ... count=N` lines, and gtrace's `want ...` lines counted.
fn wants_and_fired(stdout: &str) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let mut wants = BTreeMap::new();
    let mut fired = BTreeMap::new();
    for l in stdout.lines().filter(|l| l.starts_with("want ")) {
        match l.rsplit_once(" count=") {
            Some((what, n)) => *wants.entry(what.to_string()).or_insert(0) += n.parse::<i64>().unwrap(),
            None => *fired.entry(l.to_string()).or_insert(0) += 1,
        }
    }
    (wants, fired)
}

#[test]
fn every_call_a_panic_ends_fires_once_with_its_value() {
    if !privileged("every_call_a_panic_ends_fires_once_with_its_value") {
        return;
    }
    for toolchain in toolchains() {
        let Some(bin) = build_plain("panics", &toolchain) else { continue };
        let run = gtrace(&["-e", &script(), "-c", &format!("{} mix 25", bin.display())]);
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        let (wants, fired) = wants_and_fired(&run.stdout);
        assert!(!wants.is_empty(), "{toolchain}: the program printed no truth:\n{}", run.stdout);
        assert_eq!(fired, wants, "{toolchain}:\n{}", run.stdout);
        // guard, selfish and exiter's calls end by a RET or by Goexit: never in `fired`.
        let calls: i64 = wants.values().sum();
        assert_eq!(map_value(&run.stdout, "@elapsed_ok[true]"), calls, "{toolchain}:\n{}", run.stdout);
        assert!(truth(&run.stdout, "guards") > 0 && truth(&run.stdout, "selfish") > 0);
    }
}

/// A probe over many functions (TRACED but main.middle, and every function of fmt, which
/// no panic ends) is one program that looks each ended call up among its functions: it
/// reports exactly what the program says, and nothing of main.middle, whose calls another
/// probe times (so panics end frames of it too).
#[test]
fn a_probe_over_many_functions_reports_only_its_own() {
    if !privileged("a_probe_over_many_functions_reports_only_its_own") {
        return;
    }
    let bin = support::go_build("panics", &[]);
    let traced = TRACED.replace("main.middle, ", "");
    let script = SCRIPT.replace("TRACED", &format!("{traced}, \"fmt.*\""))
        + "\non return main.middle { @middle[elapsed > 0] = count() }";
    let plan = gtrace(&["-e", &script, "--emit", "plan", "-b", bin.to_str().unwrap()]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).expect("the plan is JSON");
    let functions = plan["plan"]["maps"]
        .as_array()
        .expect("maps")
        .iter()
        .find_map(|m| m["role"]["PanicFunctions"]["functions"].as_array().map(|f| f.len()));
    // More than the 32 functions one program compared inline before the lookup.
    assert!(functions.is_some_and(|n| n > 32), "the probe covers fmt's functions: {functions:?}");
    let programs: Vec<&str> = plan["plan"]["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .filter_map(|p| p["program"].as_str())
        .filter(|p| p.starts_with("p0"))
        .collect();
    assert_eq!(programs, ["p0"], "one program for the whole probe");
    let command = format!("{} mix 25", bin.display());
    let run = gtrace(&["-e", &script, "-c", &command]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let (mut wants, fired) = wants_and_fired(&run.stdout);
    let all = wants.len();
    wants.retain(|want, _| !want.starts_with("want main.middle "));
    assert!(all > wants.len() && !wants.is_empty(), "the program ended calls of main.middle:\n{}", run.stdout);
    assert_eq!(fired, wants, "{}", run.stdout);
    // The same plan run by `gtrace run` (where the runtime fills the map from the plan
    // alone), and with one uprobe link per site instead of multi-uprobe links.
    let file = support::root().join(format!("target/panics-plan-{}.json", std::process::id()));
    let written = gtrace(&["-e", &script, "--emit", "plan", "-o", file.to_str().unwrap(), "-b", bin.to_str().unwrap()]);
    assert_eq!(written.code, 0, "{}", written.stderr);
    let by_plan = gtrace(&["run", file.to_str().unwrap(), "-c", &command]);
    let _ = std::fs::remove_file(&file);
    let single = support::gtrace_env(&["-e", &script, "-c", &command], &[("GTRACE_NO_UPROBE_MULTI", "1")]);
    for (how, run) in [("gtrace run", by_plan), ("single links", single)] {
        assert_eq!(run.code, 0, "{how}: {}\n{}", run.stdout, run.stderr);
        let (mut wants, fired) = wants_and_fired(&run.stdout);
        wants.retain(|want, _| !want.starts_with("want main.middle "));
        assert_eq!(fired, wants, "{how}: {}", run.stdout);
    }
}

/// A --budget cut of an `on panic` probe under load detaches its programs in an order
/// that never leaves a frame its return does not pop while the probe can still report
/// it: what fired before the cut is a part of what the program says ended, nothing else.
/// (`on entry main.main` stays attached, so the trace goes on to the program's end.)
#[test]
fn a_budget_cut_reports_nothing_false() {
    if !privileged("a_budget_cut_reports_nothing_false") {
        return;
    }
    let bin = support::go_build("panics", &[]);
    let script = script() + "\non entry main.main { @main = count() }";
    let run = gtrace(&["-e", &script, "--budget", "1", "-c", &format!("{} mix 20000", bin.display())]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("--budget 1%: detached on panic"), "the cut happened:\n{}", run.stderr);
    let (wants, fired) = wants_and_fired(&run.stdout);
    assert!(!wants.is_empty(), "the program printed its truth:\n{}", run.stdout);
    let counted: i64 = fired.values().sum();
    assert!(counted > 0 && counted < wants.values().sum::<i64>(), "{counted} fired before the cut");
    for (what, n) in &fired {
        assert!(
            wants.get(what).is_some_and(|w| n <= w),
            "{what} fired {n} times, the program says {:?}",
            wants.get(what)
        );
    }
}

#[test]
fn a_panic_that_kills_the_program_is_seen_before_it_dies() {
    if !privileged("a_panic_that_kills_the_program_is_seen_before_it_dies") {
        return;
    }
    for toolchain in toolchains() {
        let Some(bin) = build_plain("panics", &toolchain) else { continue };
        let run = gtrace(&["-e", &script(), "-c", &format!("{} die", bin.display())]);
        // The target died of its panic; gtrace itself ends normally, printing its maps.
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        let (wants, fired) = wants_and_fired(&run.stdout);
        assert_eq!(wants.len(), 2, "{toolchain}:\n{}", run.stdout);
        assert_eq!(fired, wants, "{toolchain}:\n{}", run.stdout);
    }
}

/// Each panic frees what the calls it ended held: after many panics, the timed calls
/// that return are still paired exactly and nothing was refused for want of room.
#[test]
fn many_panics_leave_nothing_behind() {
    if !privileged("many_panics_leave_nothing_behind") {
        return;
    }
    let bin = support::go_build("panics", &[]);
    let script = "on panic main.boom { @panics = count() }
                  on return main.guard { @returns = count(); @slow[elapsed > 1s] = count() }";
    let run = gtrace(&["-e", script, "--stats", "-c", &format!("{} many 1000000", bin.display())]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let n = truth(&run.stdout, "panics");
    assert_eq!(map_value(&run.stdout, "@panics"), n, "{}", run.stdout);
    assert_eq!(map_value(&run.stdout, "@returns"), n, "{}", run.stdout);
    assert_eq!(map_value(&run.stdout, "@slow[false]"), n, "{}", run.stdout);
    // The one line that says what was lost, or refused for want of room, is not there.
    assert!(!run.stderr.contains(" refused: ") && !run.stderr.contains("lost "), "{}", run.stderr);
}

/// Without DWARF the runtime's panic state is found by Go version: the table agrees with
/// the DWARF of each tested release, and a stripped build is traced as its twin with
/// symbols is. Besides the usual toolchains: Go 1.21 (the last of g.sigcode0, which it
/// moved) and Go 1.22 (the first of the rewritten panics).
#[test]
fn stripped_binaries_use_the_runtime_layout_of_their_release() {
    let mut releases = toolchains();
    if std::env::var("GTRACE_GO_VERSIONS").is_err() {
        releases.extend(["go1.21.13".to_string(), "go1.22.12".to_string()]);
    }
    for toolchain in releases {
        let Some(plain) = build_plain("panics", &toolchain) else { continue };
        let stripped = match build("panics", &toolchain, Kind { stripped: true, pie: false, cgo: false }) {
            Ok(b) => b,
            Err(NotBuilt::NoToolchain(e)) => panic!("{toolchain}: {e}"),
        };
        let from_dwarf = Target::open(&plain).unwrap().panic_layout_from_dwarf();
        assert!(from_dwarf.is_some(), "{toolchain}: no panic layout in DWARF");
        let stripped_target = Target::open(&stripped).unwrap();
        assert_eq!(stripped_target.panic_layout_from_dwarf(), None, "{toolchain}");
        assert_eq!(stripped_target.panic_layout(), from_dwarf, "{toolchain}: the table by version is wrong");
        if !privileged("stripped_binaries_use_the_runtime_layout_of_their_release") {
            continue;
        }
        let script = "on panic main.boom, main.inner, main.middle, main.outer { @[func, recovered] = count() }";
        let run = gtrace(&["-e", script, "-c", &format!("{} mix 10", stripped.display())]);
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        for f in ["boom", "inner", "middle", "outer"] {
            assert_eq!(map_value(&run.stdout, &format!("@[main.{f}, true]")), 10, "{toolchain}:\n{}", run.stdout);
        }
    }
}

/// One panic that ends more traced calls than a probe reports at once (16) reports the
/// outermost ones and says how many panics were cut short.
#[test]
fn a_panic_through_deep_recursion_reports_what_it_can_and_says_so() {
    if !privileged("a_panic_through_deep_recursion_reports_what_it_can_and_says_so") {
        return;
    }
    let bin = support::go_build("panics", &[]);
    for depth in [9, 40] {
        let run =
            gtrace(&["-e", "on panic main.dive { @n = count() }", "-c", &format!("{} deep {depth}", bin.display())]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let dives = truth(&run.stdout, "dives");
        let cut = run.stderr.contains("more than 16 traced calls at once");
        assert_eq!(map_value(&run.stdout, "@n"), dives.min(16), "{}", run.stdout);
        assert_eq!(cut, dives > 16, "{}", run.stderr);
    }
}

/// A fully stripped build (no symbol table: no `runtime.types`) names a panic value's
/// dynamic type from the runtime's type data found through its moduledata, so it prints
/// what the unstripped build prints, on every tested release.
#[test]
fn stripped_binaries_print_panic_values_as_unstripped_ones_do() {
    if !privileged("stripped_binaries_print_panic_values_as_unstripped_ones_do") {
        return;
    }
    let script = r#"on panic main.boom, main.inner { printf("%s %v %#v\n", func, panic, panic) }"#;
    let printed = |binary: &std::path::Path| -> Vec<String> {
        let run = gtrace(&["-e", script, "-c", &format!("{} mix 3", binary.display())]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let mut lines: Vec<String> = run.stdout.lines().filter(|l| l.starts_with("main.")).map(String::from).collect();
        lines.sort();
        lines
    };
    for toolchain in toolchains() {
        let Some(plain) = build_plain("panics", &toolchain) else { continue };
        let stripped = match build("panics", &toolchain, Kind { stripped: true, pie: false, cgo: false }) {
            Ok(b) => b,
            Err(NotBuilt::NoToolchain(e)) => panic!("{toolchain}: {e}"),
        };
        let want = printed(&plain);
        assert!(want.iter().any(|l| l.contains("*errors.errorString")), "{toolchain}: {want:?}");
        assert_eq!(printed(&stripped), want, "{toolchain}");
    }
}
