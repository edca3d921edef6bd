//! The budget on a target under load that runs faster once freed, as a server does: a
//! wildcard of thousands of functions on a Go program that does its own work between
//! calls as fast as it can (`serve`). Cut, the program speeds up and the probes that stay
//! are hit as much more often; the breaker weighs them at that speed, so it settles in
//! one decision (trace/budget/speedup.rs). Needs root (SKIP without it, unless CI=true:
//! then it fails). No timing is asserted: the decisions are counted.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use support::privileged;

/// A Go program of `n` tiny functions `f0000`...: `loaded serve SECS HOT WORK` prints
/// `ready`, then for SECS seconds does WORK iterations of its own work, calls the HOT
/// first functions and one of the others in turn, as fast as it can, and prints `calls=`
/// and `sum=`. Generated here, as `target/gen/loaded-N`, built once.
fn loaded(n: usize) -> std::path::PathBuf {
    support::many_functions("loaded", n, "tests/budget_load.rs", MAIN_LOADED)
}

/// What follows the functions in `loaded`'s program: its `main`.
const MAIN_LOADED: &str = "
// work is the program's own work between calls (not traced: not main.f*).
//
//go:noinline
func work(n int) int {
\ts := 1
\tfor i := 0; i < n; i++ {
\t\ts += i ^ (s >> 3)
\t}
\treturn s
}

func main() {
\tsecs, _ := strconv.Atoi(os.Args[2])
\thot, _ := strconv.Atoi(os.Args[3])
\tw, _ := strconv.Atoi(os.Args[4])
\tfmt.Println(\"ready\")
\tend := time.Now().Add(time.Duration(secs) * time.Second)
\tcalls, sum := 0, 0
\tfor r := 0; time.Now().Before(end); r++ {
\t\tsum += work(w)
\t\tfor _, f := range fs[:hot] {
\t\t\tsum += f(r)
\t\t\tcalls++
\t\t}
\t\tsum += fs[hot+r%(len(fs)-hot)](r)
\t\tcalls++
\t}
\tfmt.Printf(\"calls=%d sum=%d\\n\", calls, sum)
}
";

#[test]
fn a_wildcard_on_a_target_that_speeds_up_when_freed_settles_in_one_decision() {
    if !privileged("a_wildcard_on_a_target_that_speeds_up_when_freed_settles_in_one_decision") {
        return;
    }
    // 2,000 functions, 100 of them called each round between the program's own work,
    // the others one a round in turn: traced, the traps take about a third of a round
    // (the program runs about 1.4x faster once they go; a speedup much larger than the
    // trap cost's estimate can tell in the first window is a second cut: on echo one run
    // in three, docs/performance.md).
    let bin = loaded(2000);
    let mut program = Command::new(&bin)
        .args(["serve", "12", "100", "1500000"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the loaded program");
    let mut out = BufReader::new(program.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");
    let pid = program.id().to_string();
    let script = r#"on entry "main.f*" { @calls = count() }"#;
    let run = support::gtrace(&["-e", script, "--budget", "2%", "--duration", "4s", "-p", &pid]);
    let _ = program.kill();
    let _ = program.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let said = support::budget_decisions(&run.stderr);
    assert_eq!(said.len(), 1, "not one decision:\n{}", run.stderr);
    let first = said[0];
    // It cut most of the hot functions, and weighed what stays at the speed the program
    // regains: under the budget with the margin.
    let cut: u64 = first
        .split("detached ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("no count in `{first}`"));
    assert!(cut >= 50, "the decision cut {cut} of the 100 hot units:\n{}", run.stderr);
    let stays: f64 = first
        .rsplit("what stays costs ")
        .next()
        .and_then(|r| r.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("no cost of what stays in `{first}`"));
    assert!(stays <= 2.0 * gtrace::trace::budget::MARGIN, "{first}");
    // What was counted is marked partial.
    let line = run.stdout.lines().find(|l| l.starts_with("@calls: ")).unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(line.contains("detached by --budget after "), "{line}");
}
