//! What `--stats` says a function that survived a budget cut of a wide wildcard cost a
//! hit (trace/woken.rs: the wake-ups priced interval by interval). tests/go/survivor
//! makes requests that arrive alone, each waking a thread, each a call of main.request
//! and then STEPS calls of main.step. Under `on entry "main.*"` with a budget that cuts
//! main.step and keeps main.request, what `--stats` (-f json) says main.request cost a
//! hit is what it costs in a trace of main.request alone on the same program, within
//! `TOLERANCE`. Priced over the whole trace at once, its hits after the cut shared the
//! wake-ups with the wildcard's hits before it (STEPS of them a wake-up) and it read far
//! less. Needs root (SKIP without it, a failure when CI=true). No timing is asserted:
//! the two traces' estimates are compared, and the hits with the program's own count.

mod support;

use support::{privileged, truth};

/// Requests a second, workers, calls of main.step a request, seconds.
const LOAD: [&str; 4] = ["2000", "4", "200", "4"];
const ALONE: &str = "on entry main.request { @n = count() }";
const WILDCARD: &str = "on entry \"main.*\" { @n = count() }";

/// How far the survivor's cost a hit may be from its cost alone (at the same
/// calibration), as a part of that: see docs/performance.md, "A survivor's cost a hit"
/// (statsweigh).
const TOLERANCE: f64 = 0.25;

/// The `stats` object of a `-f json` run's stdout.
fn stats_of(stdout: &str) -> serde_json::Value {
    (stdout.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "stats")
        .unwrap_or_else(|| panic!("no stats:\n{stdout}"))
}

/// main.request in one trace: its hits, what `--stats` says they cost (ns), whether it
/// was attached at the end, and its cost a hit's parts as that trace priced them: the
/// calibrated trap at its site, its program's eBPF time a run, and what one hit after a
/// wake-up costs more (`trap.woken_ns`).
struct Request {
    hits: u64,
    cost_ns: f64,
    attached: bool,
    trap_ns: f64,
    ebpf_ns: f64,
    woken_each_ns: f64,
}

impl Request {
    /// main.request's site in whichever probe of `stats` holds it.
    fn of(stats: &serde_json::Value) -> Request {
        let probes = stats["probes"].as_array().cloned().unwrap_or_default();
        let (probe, site) = (probes.iter())
            .find_map(|p| {
                let sites = p["sites"].as_array().cloned().unwrap_or_default();
                Some((p.clone(), sites.into_iter().find(|s| s["function"] == "main.request")?))
            })
            .unwrap_or_else(|| panic!("no main.request: {stats}"));
        let number = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{v} in {stats}"));
        Request {
            hits: site["hits"].as_u64().unwrap_or_else(|| panic!("{site}")),
            cost_ns: number(&site["cost_ns"]),
            attached: site["attached"] == true,
            trap_ns: number(&site["trap_ns"]),
            ebpf_ns: number(&probe["run_ns"]) / number(&probe["run_count"]).max(1.0),
            woken_each_ns: number(&stats["trap"]["woken_ns"]),
        }
    }

    fn per_hit(&self) -> f64 {
        self.cost_ns / self.hits as f64
    }

    /// The share of its hits that paid a wake-up, as its trace priced them.
    fn woken_share(&self) -> f64 {
        (self.per_hit() - self.trap_ns - self.ebpf_ns) / self.woken_each_ns
    }
}

/// One trace of the program under `script` (with `more` arguments) to its end: the
/// stats, gtrace's stderr, and the program's count of requests.
fn trace(script: &str, more: &[&str]) -> (serde_json::Value, String, i64) {
    let bin = support::go_build("survivor", &[]);
    let command = format!("{} {}", bin.display(), LOAD.join(" "));
    let mut args = vec!["-e", script, "--stats", "-f", "json"];
    args.extend(more);
    args.extend(["-c", &command]);
    let run = support::gtrace(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    (stats_of(&run.stdout), run.stderr, truth(&run.stdout, "requests"))
}

#[test]
fn a_function_a_budget_kept_of_a_wildcard_costs_a_hit_what_it_costs_alone() {
    let test = "a_function_a_budget_kept_of_a_wildcard_costs_a_hit_what_it_costs_alone";
    if !privileged(test) {
        return;
    }
    // main.request alone: what a hit costs, and the budget from what it costs this host.
    let (stats, said, requests) = trace(ALONE, &[]);
    let alone = Request::of(&stats);
    assert_eq!(alone.hits as i64, requests, "{said}");
    let percent = 100.0 * alone.cost_ns / stats["elapsed_ns"].as_f64().unwrap_or(f64::INFINITY);
    assert!(percent > 0.01, "main.request alone cost {percent}% of a CPU: {stats}");
    // Three times what it costs alone: it stays (80% of the budget fits it 2.4 times
    // over), and main.step, hit STEPS times as often, goes (tens of times the budget).
    let budget = format!("{:.3}%", 3.0 * percent);
    let (stats, said, requests) = trace(WILDCARD, &["--budget", &budget]);
    let kept = Request::of(&stats);
    assert!(said.contains(": detached ") && said.contains("main.step"), "{said}");
    assert!(kept.attached, "main.request was cut too: {said}");
    // Never detached: every request it made was counted.
    assert_eq!(kept.hits as i64, requests, "{said}");
    // Each trace calibrates the trap and the wake-up itself, and two calibrations differ
    // by up to 1.5x on this host: what main.request costs alone is priced at the kept
    // trace's calibration (its trap and wake-up there, its own eBPF time and share of
    // hits after a wake-up alone) before the two are compared.
    let expected = kept.trap_ns + alone.ebpf_ns + alone.woken_share() * kept.woken_each_ns;
    eprintln!(
        "main.request a hit: {:.0} ns alone ({:.2} of its hits after a wake-up), {:.0} ns kept of the wildcard at \
         --budget {budget} ({:.2}), {expected:.0} ns expected at the kept trace's calibration",
        alone.per_hit(),
        alone.woken_share(),
        kept.per_hit(),
        kept.woken_share(),
    );
    assert!(
        (kept.per_hit() / expected - 1.0).abs() <= TOLERANCE,
        "main.request cost {:.0} ns a hit kept of the wildcard, {expected:.0} ns expected from its trace alone:\n{said}\n{stats}",
        kept.per_hit()
    );
}
