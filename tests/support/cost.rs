//! What probes cost a target on this host, by gtrace's own estimate of a trace of it
//! (`--stats`), for the tests that give a budget: a trap's cost is the host's (0.8 us
//! for an emulated PUSH and 9.4 us for a single step on this VM; less where the CPU
//! does not exit to a hypervisor, more under load), so a fixed budget that a load
//! passes here may not be passed elsewhere (tests/duty.rs stayed on under 2.5% on CI).
//! A test measures first and gives a share of what it measured.

use serde_json::Value;

/// gtrace with `args` (a trace that ends by itself: `-c`, or `--duration`), with
/// `--stats -f json` and no budget, to its end: the stats object it printed.
pub fn stats_of(args: &[&str]) -> Value {
    let all = [args, &["--stats", "-f", "json", "--budget", "off"]].concat();
    let run = super::gtrace(&all);
    assert_eq!(run.code, 0, "measuring what the probes cost: {}", run.stderr);
    (run.stdout.lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "stats")
        .unwrap_or_else(|| panic!("no stats object:\n{}", run.stdout))
}

/// What the probes in the target cost it by `stats` (their estimated cost, `cost_ns`),
/// as a percentage of one CPU over the trace.
pub fn percent_of_cpu(stats: &Value) -> f64 {
    let probes = stats["probes"].as_array().cloned().unwrap_or_default();
    let cost: f64 = probes.iter().filter(|p| p["in_target"] == true).filter_map(|p| p["cost_ns"].as_f64()).sum();
    100.0 * cost / stats["elapsed_ns"].as_f64().unwrap_or(f64::INFINITY)
}

/// `--budget` a third of `percent` (what the probes cost by a measure), written as the
/// flag takes it: the probes are past it unless a later trace of the same load costs
/// under a third of what the measure said (tests/duty.rs gives a third too).
pub fn a_third(percent: f64) -> String {
    assert!(percent > 0.03, "the probes cost {percent}% of a CPU: too little to give a third of as a budget");
    format!("{:.3}%", percent / 3.0)
}

/// `--budget` a fortieth of `percent`, for a test whose probes must be cut whole, not
/// duty-cycled: a cut that would leave nothing cycles them instead when MARGIN (0.8) of
/// the budget fits at least the 10% floor of each second (trace/budget/duty.rs), so they
/// must cost over 8x the budget. A fortieth leaves room for the estimate to read 2x
/// from one trace to the next and for the 1.8x a cycle weighs the traps high. A fixed
/// `--budget 1%` on a tight loop held here and failed with the trap cost scaled by 0.35
/// (GTRACE_TEST_HOOK_TRAP_COST_SCALE): the loop cost 5.2% and was duty-cycled.
pub fn a_fortieth(percent: f64) -> String {
    assert!(percent > 0.4, "the probes cost {percent}% of a CPU: too little to give a fortieth of as a budget");
    format!("{:.3}%", percent / 40.0)
}
