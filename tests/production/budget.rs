//! `--budget`: the hot probe (or one function of a probe, or a return probe with its
//! entry timing) detached and the others kept exact, a multi-uprobe link cut down while
//! hot, map sizes and budgets checked before anything loads, and a wildcard of thousands
//! of functions settled in one decision.

use super::*;

/// `prod hotcold N K` under `script` with `--budget 1%`: the target's truth, gtrace's
/// output and what it said.
fn hot_and_cold(script: &str) -> (support::Run, i64, i64) {
    let run = trace(&["-e", script, "--budget", "1%", "--stats"], "hotcold 3000000 20000");
    // --stats sets the target's own CPU time beside the estimate.
    let target = run.stderr.lines().find(|l| l.starts_with("target: ")).unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(target.contains("of CPU while traced") && !target.starts_with("target: 0ns"), "{target}");
    let hot = truth(&run.stdout, "hot_calls");
    let cold = truth(&run.stdout, "cold_calls");
    assert_eq!(hot, 3_000_000, "the target did not finish its work:\n{}", run.stdout);
    (run, hot, cold)
}

#[test]
fn budget_detaches_the_hot_probe_and_keeps_the_cold_one_exact() {
    if !privileged("budget_detaches_the_hot_probe_and_keeps_the_cold_one_exact") {
        return;
    }
    let (run, hot, cold) = hot_and_cold("on entry main.hot { @hot = count() } on entry main.cold { @cold = count() }");
    assert!(run.stderr.contains("--budget 1%: detached on entry main.hot: it cost"), "{}", run.stderr);
    assert!(!run.stderr.contains("detached on entry main.cold"), "{}", run.stderr);
    assert!(run.stderr.contains("detached by --budget 1%: on entry main.hot"), "{}", run.stderr);
    assert_eq!(map_value(&run.stdout, "@cold"), cold);
    // The hot probe's map says it is partial; the cold one's is whole.
    assert!(
        run.stdout.contains("@hot: ")
            && run.stdout.lines().any(|l| l.starts_with("@hot: ") && l.contains("(partial: "))
    );
    assert!(run.stdout.lines().any(|l| l.starts_with("@cold: ") && !l.contains("partial")), "{}", run.stdout);
    let counted = map_value(&run.stdout, "@hot");
    assert!(counted > 0 && counted < hot, "{counted} of {hot} hot calls counted");
}

#[test]
fn budget_detaches_one_function_of_a_probe_and_keeps_the_others_exact() {
    if !privileged("budget_detaches_one_function_of_a_probe_and_keeps_the_others_exact") {
        return;
    }
    // One program at both functions: its multi-uprobe link is replaced by one without
    // main.hot while main.cold keeps being called.
    let (run, hot, cold) = hot_and_cold("on entry main.hot, main.cold { @[func] = count() }");
    assert!(run.stderr.contains("detached on entry main.hot, main.cold at main.hot"), "{}", run.stderr);
    assert_eq!(map_value(&run.stdout, "@[main.cold]"), cold);
    let counted = map_value(&run.stdout, "@[main.hot]");
    assert!(counted > 0 && counted < hot, "{counted} of {hot} hot calls counted");
}

#[test]
fn budget_detaches_a_return_probe_with_its_entry_timing_and_ends_when_nothing_is_left() {
    if !privileged("budget_detaches_a_return_probe_with_its_entry_timing_and_ends_when_nothing_is_left") {
        return;
    }
    let (run, _, cold) =
        hot_and_cold("on return main.hot { @lat = hist(elapsed) } on entry main.cold { @cold = count() }");
    assert!(run.stderr.contains("detached on return main.hot + entry times for elapsed"), "{}", run.stderr);
    assert_eq!(map_value(&run.stdout, "@cold"), cold);
    // Only the hot probe: once it is gone, the command runs on untraced to its end, its
    // own output intact, and the maps print then, marked partial (text and JSON). Cut
    // whole, not duty-cycled: the budget is a fortieth of what it costs this host by the
    // estimate of a shorter run (`support::cost::a_fortieth`).
    let hot = "on entry main.hot { @hot = count() }";
    let short = format!("{} hotcold 300000 20000", prod());
    let budget =
        support::cost::a_fortieth(support::cost::percent_of_cpu(&support::cost::stats_of(&["-e", hot, "-c", &short])));
    let cmd = format!("{} hotcold 3000000 20000", prod());
    for format in ["text", "json"] {
        let run = cut_whole(&["-e", hot, "-f", format, "-c", &cmd], &budget);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let said = "no probe is left attached; the command runs on untraced, and the maps print when it ends";
        assert!(run.stderr.contains(said), "{}", run.stderr);
        assert_eq!(truth(&run.stdout, "hot_calls"), 3_000_000, "{}", run.stdout);
        if format == "text" {
            assert!(map_value(&run.stdout, "@hot") > 0);
            let line = run.stdout.lines().find(|l| l.starts_with("@hot: ")).unwrap();
            assert!(line.contains(" (partial: on entry main.hot detached by --budget after "), "{line}");
        } else {
            let map = run
                .stdout
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|v| v["name"] == "@hot")
                .unwrap_or_else(|| panic!("no @hot in {}", run.stdout));
            let partial = map["partial"].as_str().unwrap_or_default();
            assert!(partial.starts_with("on entry main.hot detached by --budget after "), "{map}");
        }
    }
}

/// gtrace with `args` and `--budget` `budget`, whose probes must be cut whole: a trace
/// that was duty-cycled all the same (the loop's pace not the measure's) is made again
/// with a budget measured again (of `prod hotcold 300000 20000`), up to three times.
fn cut_whole(args: &[&str], budget: &str) -> support::Run {
    let mut budget = budget.to_string();
    let mut cycled = Vec::new();
    loop {
        let run = support::gtrace(&[args, &["--budget", &budget]].concat());
        if !run.stderr.contains("duty-cycled instead") {
            return run;
        }
        cycled.push(format!("--budget {budget}:\n{}", run.stderr));
        assert!(cycled.len() < 3, "duty-cycled, not cut, in three traces:\n{}", cycled.join("\n"));
        let short = format!("{} hotcold 300000 20000", prod());
        let hot = "on entry main.hot { @hot = count() }";
        let measured = support::cost::percent_of_cpu(&support::cost::stats_of(&["-e", hot, "-c", &short]));
        budget = support::cost::a_fortieth(measured);
    }
}

#[test]
fn a_multi_uprobe_link_cut_down_while_hot_neither_misses_nor_double_counts_a_hit() {
    if !privileged("a_multi_uprobe_link_cut_down_while_hot_neither_misses_nor_double_counts_a_hit") {
        return;
    }
    use gtrace::runtime::{self, Scope};
    // One program at main.cold and a few dozen functions the target does not call in
    // this mode; while main.cold is called in tight loops on two goroutines, the link is
    // replaced once per other function, each time by one with that function left out
    // (the old and the new link both attached for a while, a hit in flight in both).
    let binary = support::go_build("prod", &[]);
    let target = gtrace::gobin::Target::open(&binary).unwrap();
    let root = gtrace::library::Root {
        name: "<test>".into(),
        text: "on entry main.cold, main.record, main.setter, main.getter, main.emit, main.hot, \"strconv.*\", \"unicode*\" \
               { @[func] = count() }"
            .into(),
        dir: None,
    };
    let mut opts = gtrace::compile::Options::default();
    opts.lowering.accounting = true;
    let compiled = gtrace::compile(root, &target, &opts).unwrap_or_else(|r| panic!("{}", r.render(false)));
    let plan = &compiled.plan;
    assert_eq!(plan.accounting.generation_programs, vec!["p0".to_string()]);
    let gone: Vec<String> = plan.functions.iter().filter(|f| *f != "main.cold").cloned().collect();
    assert!(gone.len() >= 15, "{gone:?}");
    let mut loaded = runtime::load(&compiled.object, plan).unwrap();
    let out = std::env::temp_dir().join(format!("gtrace-cold-{}", std::process::id()));
    let sh = format!("exec {} cold 400000 2 > {}", binary.display(), out.display());
    let mut child = runtime::spawn_held(&["sh".into(), "-c".into(), sh]).unwrap();
    loaded.attach(&binary, Scope::Process(child.pid()), None).unwrap();
    child.release().unwrap();
    let sites = loaded.attached();
    for f in &gone {
        std::thread::sleep(Duration::from_millis(10));
        assert!(loaded.detach_sites("p0", Some(std::slice::from_ref(f))).unwrap() >= 1, "{f}");
        assert!(loaded.is_attached("p0", Some("main.cold")) && !loaded.is_attached("p0", Some(f)), "{f}");
    }
    assert!(loaded.attached() < sites);
    let status = child.wait().unwrap();
    let truth_text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(status.success(), "{truth_text}");
    let spec = plan
        .maps
        .iter()
        .find(|m| matches!(&m.role, gtrace::plan::MapRole::User { name, .. } if name.is_empty()))
        .unwrap();
    let dump = gtrace::output::decode_map(spec, &loaded.map_entries(&spec.object_name).unwrap(), plan).unwrap();
    let counted: u64 = dump
        .entries
        .iter()
        .filter(|e| gtrace::output::text::value(&e.keys[0]) == "main.cold")
        .map(|e| match e.value {
            gtrace::output::value::AggValue::Count(c) => c,
            ref other => panic!("{other:?}"),
        })
        .sum();
    assert_eq!(counted as i64, truth(&truth_text, "cold_calls"), "{truth_text}");
}

#[test]
fn map_sizes_and_budgets_are_checked_before_anything_loads() {
    // These need no privileges: --check runs the whole compiler.
    let bin = prod();
    let check = |args: &[&str]| {
        let mut all = vec!["-e", "on entry main.record { @m[k] = count() }", "--check", "-b", &bin];
        all.extend(args);
        support::gtrace(&all)
    };
    let r = check(&["--map-size", "@nosuch=10"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("the script has no map @nosuch") && r.stderr.contains("its maps: @m"), "{}", r.stderr);
    for bad in ["0", "@m=", "paths=3", "@m=99999999999"] {
        let r = check(&["--map-size", bad]);
        assert_ne!(r.code, 0, "--map-size {bad} passed");
        assert!(r.stderr.contains("--map-size"), "{}", r.stderr);
    }
    for bad in ["0%", "150%", "lots"] {
        let r = check(&["--budget", bad]);
        assert_ne!(r.code, 0, "--budget {bad} passed");
        assert!(r.stderr.contains("share of one CPU"), "{}", r.stderr);
    }
    assert_eq!(check(&["--map-size", "@m=10", "--map-size", "self=100", "--rate", "5", "--budget", "off"]).code, 0);
    assert_ne!(check(&["--rate", "0"]).code, 0);
}

/// A Go program with `n` small functions, `main.f0000` to `main.fNNNN`, under a steady
/// load like a server's (requests at a fixed rate that it keeps up with even traced: a
/// cut does not make the others hotter): `wide ROUNDS MS HOT` calls the HOT first
/// functions once every MS milliseconds, and one of the others in turn, ROUNDS times,
/// then prints `calls=` and `sum=`. Generated here, as `target/gen/wide-N`, built once.
fn wide(n: usize) -> std::path::PathBuf {
    support::many_functions("wide", n, "tests/production/budget.rs (wide)", MAIN_WIDE)
}

/// What follows the functions in `wide`'s program: its `main`.
const MAIN_WIDE: &str = "
func main() {
\trounds, _ := strconv.Atoi(os.Args[1])
\tperiod, _ := strconv.Atoi(os.Args[2])
\thot, _ := strconv.Atoi(os.Args[3])
\tcalls, sum := 0, 0
\tnext := time.Now()
\tfor r := 0; r < rounds; r++ {
\t\tfor _, f := range fs[:hot] {
\t\t\tsum += f(r)
\t\t\tcalls++
\t\t}
\t\tsum += fs[hot+r%(len(fs)-hot)](r)
\t\tcalls++
\t\tnext = next.Add(time.Duration(period) * time.Millisecond)
\t\tif d := time.Until(next); d > 0 {
\t\t\ttime.Sleep(d)
\t\t} else {
\t\t\tnext = time.Now()
\t\t}
\t}
\tfmt.Printf(\"calls=%d sum=%d\\n\", calls, sum)
}
";

#[test]
fn a_wildcard_of_thousands_of_functions_settles_in_one_decision() {
    if !privileged("a_wildcard_of_thousands_of_functions_settles_in_one_decision") {
        return;
    }
    // A wildcard of 2,000 functions, 300 of them called every 5 ms for 2 s (about 3 ms
    // of traps a round where each costs 9 us), the others in turn, one a round.
    let bin = wide(2000);
    let cmd = format!("{} 400 5 300", bin.display());
    let script = r#"on entry "main.f*" { @calls = count() }"#;
    let run = support::gtrace(&["-e", script, "--budget", "2%", "-c", &cmd]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let calls = truth(&run.stdout, "calls");
    assert_eq!(calls, 400 * 301, "the program did not finish its work:\n{}", run.stdout);
    let said = support::budget_decisions(&run.stderr);
    let first = said.first().unwrap_or_else(|| panic!("no decision:\n{}", run.stderr));
    // One decision cut most of the 2,000 units at once, and left what stays under the
    // budget by the estimate it acted on.
    let cut: u64 = first
        .split("detached ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .map(|n| n.replace(',', "").parse().unwrap_or(0))
        .unwrap_or(0);
    assert!(cut >= 150, "the first decision cut {cut} of the 300 hot units:\n{}", run.stderr);
    let stays: f64 = first
        .rsplit("what stays costs ")
        .next()
        .and_then(|r| r.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("no cost of what stays in `{first}`"));
    assert!(stays <= 2.0 * budget_margin(), "{first}");
    // Each later decision (the load shifts once the cut frees the target: a busy
    // machine's target catches up) is small beside the first.
    for later in &said[1..] {
        let n: u64 = later
            .split("detached ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .map(|n| n.replace(',', "").parse().unwrap_or(1))
            .unwrap_or(1);
        assert!(n <= cut, "a later decision cut {n} units after {cut}:\n{}", run.stderr);
    }
    assert!(said.len() <= 4, "the budget kept cutting:\n{}", run.stderr);
    assert!(first.len() < 600, "the decision is one short line: {first}");
    // What was counted before the cut is marked partial, and is less than the calls.
    let counted = map_value(&run.stdout, "@calls");
    assert!(counted > 0 && counted < calls, "{counted} of {calls}");
    let line = run.stdout.lines().find(|l| l.starts_with("@calls: ")).unwrap();
    assert!(line.contains(" (partial: on entry main.f* at main.f"), "{line}");
    assert!(line.contains("detached by --budget after "), "{line}");
}

/// What stays after a cut, as a share of the budget (trace::budget::MARGIN).
fn budget_margin() -> f64 {
    gtrace::trace::budget::MARGIN
}
