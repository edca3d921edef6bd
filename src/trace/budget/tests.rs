//! The breaker's decisions on made-up windows: what a look cuts, keeps and says.

use super::*;

#[test]
fn a_decision_detaches_each_program_once() {
    let site = |program: &str, function: Option<&str>| SiteRef {
        program: program.into(),
        function: function.map(str::to_string),
    };
    let sites = [site("p0", Some("main.a")), site("p1", Some("main.b")), site("p0", Some("main.c")), site("p2", None)];
    let grouped = by_program(&sites);
    assert_eq!(
        grouped,
        [
            ("p0".to_string(), Some(vec!["main.a".to_string(), "main.c".to_string()])),
            ("p1".to_string(), Some(vec!["main.b".to_string()])),
            ("p2".to_string(), None),
        ]
    );
    // A whole program and one of its functions: the whole program.
    assert_eq!(by_program(&[site("p0", Some("main.a")), site("p0", None)]), [("p0".to_string(), None)]);
}
use crate::output::stats::{ProbeStats, SiteStats};
use crate::plan::{Accounting, AttachPoint, ProbeAttach, ProbeSpec};

fn point(function: &str) -> AttachPoint {
    AttachPoint { function: function.into(), address: 0, file_offset: 0, cookie: 0 }
}

fn probe(program: &str, describe: &str, functions: &[&str]) -> ProbeSpec {
    ProbeSpec {
        program: program.into(),
        section: format!("uprobe/{program}"),
        attach: ProbeAttach::Uprobe(functions.iter().map(|f| point(f)).collect()),
        describe: describe.into(),
        source_lines: Vec::new(),
        maps: Vec::new(),
    }
}

/// Stats of p0 (main.hot, main.cold) after `hot` and `cold` ns of cost.
fn stats(hot: f64, cold: f64, elapsed: Duration) -> Stats {
    let site = |f: &str, c: f64| SiteStats {
        function: f.into(),
        hits: (c / 1000.0) as u64,
        cost_ns: c,
        ..SiteStats::default()
    };
    let p0 = ProbeStats {
        program: "p0".into(),
        cost_ns: hot + cold,
        sites: vec![site("main.hot", hot), site("main.cold", cold)],
        ..ProbeStats::default()
    };
    Stats { elapsed_ns: elapsed.as_nanos() as u64, probes: vec![p0], ..Stats::default() }
}

fn plan() -> Plan {
    let accounting = Accounting { hits: true, generation_programs: vec!["p0".into()], ..Accounting::default() };
    Plan {
        probes: vec![probe("p0", "on entry main.hot, main.cold", &["main.hot", "main.cold"])],
        accounting,
        ..Plan::default()
    }
}

#[test]
fn trips_on_the_hot_site_and_keeps_the_cold_one() {
    let mut g = Governor::new(&plan(), 1.0).unwrap();
    let t0 = Instant::now();
    assert!(g.check(&stats(0.0, 0.0, Duration::ZERO), t0).is_none());
    // 100 ms later the hot site has cost 50 ms (50% of a CPU), the cold one 10 us.
    let d = g.check(&stats(50e6, 10e3, TICK), t0 + TICK).expect("a cut");
    assert_eq!(d.detached.len(), 1, "{d:?}");
    assert_eq!(d.sites, vec![SiteRef { program: "p0".into(), function: Some("main.hot".into()) }]);
    assert_eq!(d.detached[0].what, "on entry main.hot, main.cold at main.hot");
    assert_eq!(d.detached[0].programs, vec!["p0".to_string()]);
    assert!(d.message.contains("50% of a CPU"), "{}", d.message);
    assert!(g.anything_left());
    // Detached, it costs nothing more; the cold site alone stays under the budget.
    assert!(g.check(&stats(50e6, 20e3, 2 * TICK), t0 + 2 * TICK).is_none());
}

#[test]
fn stays_quiet_under_the_budget_and_ends_when_nothing_is_left() {
    let mut g = Governor::new(&plan(), 10.0).unwrap();
    let t0 = Instant::now();
    g.check(&stats(0.0, 0.0, Duration::ZERO), t0);
    // 5% of a CPU for a whole window: under 10%.
    for i in 1..=10 {
        assert!(g.check(&stats(5e6 * i as f64, 0.0, TICK * i), t0 + TICK * i).is_none());
    }
    // The hot site at 54.5% and the cold one at 40% over the last second: both go,
    // costliest first (40% alone is still over), and a duty cycle at 8% of each
    // second would be under its floor (duty.rs).
    let d = g.check(&stats(5e6 * 10.0 + 500e6, 400e6, TICK * 11), t0 + TICK * 11).expect("a cut");
    assert_eq!(d.detached.len(), 2, "{d:?}");
    assert!(d.detached[0].what.ends_with("at main.hot") && d.detached[1].what.ends_with("at main.cold"));
    assert!(d.message.starts_with("--budget 10%: detached 2 probe units that cost"), "{}", d.message);
    assert!(!g.anything_left());
}

#[test]
fn a_late_look_weighs_its_spend_by_the_time_it_covers() {
    let mut g = Governor::new(&plan(), 2.0).unwrap();
    let t0 = Instant::now();
    g.check(&stats(0.0, 0.0, Duration::ZERO), t0);
    // The next look comes 1.3 s later (the loop was busy): 1.6% of a CPU over it is
    // 20.8 ms, more than one second's allowance (20 ms) but under the budget's rate.
    let late = Duration::from_millis(1300);
    assert!(g.check(&stats(20.8e6, 0.0, late), t0 + late).is_none());
    assert!(g.anything_left());
}

#[test]
fn tied_sites_go_together() {
    let mut plan = plan();
    plan.probes.push(probe("p1", "on return main.hot", &["main.hot"]));
    plan.accounting.ties = vec![vec![
        SiteRef { program: "p1".into(), function: Some("main.hot".into()) },
        SiteRef { program: "p0".into(), function: Some("main.hot".into()) },
    ]];
    let g = Governor::new(&plan, 1.0).unwrap();
    assert_eq!(g.units.len(), 2, "{:?}", g.units);
    let tied = g.units.iter().find(|u| u.sites.len() == 2).expect("a tied unit");
    // In the tie's order.
    assert_eq!(g.describe(tied), "on return main.hot + on entry main.hot, main.cold at main.hot");
}

#[test]
fn a_unit_of_many_functions_names_a_few_and_counts_the_rest() {
    let functions: Vec<String> = (0..1500).map(|i| format!("main.f{i}")).collect();
    let names: Vec<&str> = functions.iter().map(String::as_str).collect();
    let mut plan = plan();
    plan.probes.push(probe("p1", "entry times for elapsed", &names));
    plan.accounting.generation_programs.push("p1".into());
    plan.accounting.ties =
        vec![names.iter().map(|f| SiteRef { program: "p1".into(), function: Some(f.to_string()) }).collect()];
    let g = Governor::new(&plan, 1.0).unwrap();
    let tied = g.units.iter().find(|u| u.sites.len() == 1500).expect("the tied unit");
    assert_eq!(g.describe(tied), "entry times for elapsed at 1,500 functions (main.f0, main.f1, main.f2, ...)");
}

#[test]
fn the_first_window_begins_at_the_attach() {
    // Read as the probes attached, a few hits in already.
    let t0 = Instant::now();
    let mut g = Governor::new(&plan(), 1.0).unwrap();
    g.begin_at(stats(2e6, 0.0, Duration::ZERO), t0);
    // The first look is due a tick after the attach, not at the loop's first turn.
    assert!(!g.due(t0 + TICK / 2) && g.due(t0 + TICK));
    assert_eq!(g.until_due(t0 + TICK / 4), TICK * 3 / 4);
    let (first, at) = g.first.take().expect("the window's start, until the first look");
    g.begin_priced(&first, at);
    // That look weighs what the probes cost since the attach (not what they cost
    // before it): the hot site, 50% of a CPU over that tick, is cut at once, where a
    // first look that began the window would wait a tick.
    let d = g.check(&stats(52e6, 10e3, TICK), t0 + TICK).expect("a cut at the first look");
    assert_eq!(d.sites, vec![SiteRef { program: "p0".into(), function: Some("main.hot".into()) }]);
    assert!(d.message.contains("50% of a CPU"), "{}", d.message);
}

#[test]
fn the_loop_waits_for_events_no_longer_than_until_the_next_look() {
    use crate::trace::stats::{Calibration, Meter};
    let most = Duration::from_millis(20);
    // The first look is due at once (no window begun at the attach): no wait.
    let costs = Costs::new(Meter::new(&plan(), Calibration::none(), Some(1.0)), &plan());
    assert_eq!(costs.wait(most), Duration::ZERO);
    // Without a budget, the loop's own wait.
    let costs = Costs::new(Meter::new(&plan(), Calibration::none(), None), &plan());
    assert_eq!(costs.wait(most), most);
}

/// `stats` with the target's CPU and run-queue wait since the attach, and its share
/// before.
fn with_target(mut s: Stats, cpu_ms: u64, wait_ms: u64, before_percent: f64) -> Stats {
    s.target = Some(crate::output::measured::TargetMeasure {
        cpu_ns: cpu_ms * 1_000_000,
        wait_ns: wait_ms * 1_000_000,
        before_percent: Some(before_percent),
        ..Default::default()
    });
    s
}

#[test]
fn a_first_window_the_host_held_the_target_back_in_is_weighed_at_its_share_before() {
    // Caddy on a saturated host: over the first tick it ran 15 ms (40% of a CPU before
    // the attach), its threads waiting 120 ms for a CPU; the hot site cost 12 ms of it,
    // under a whole window's allowance at 2% (20 ms). At its share before it would have
    // cost 32 ms: cut at the first look, the cold site kept.
    let t0 = Instant::now();
    let look = |cpu_ms, wait_ms| {
        let mut g = Governor::new(&plan(), 2.0).unwrap();
        g.check(&with_target(stats(0.0, 0.0, Duration::ZERO), 0, 0, 40.0), t0);
        g.check(&with_target(stats(12e6, 10e3, TICK), cpu_ms, wait_ms, 40.0), t0 + TICK)
    };
    let d = look(15, 120).expect("a cut at the first look");
    assert_eq!(d.sites, vec![SiteRef { program: "p0".into(), function: Some("main.hot".into()) }]);
    // It says what the probes cost as they ran.
    assert!(d.message.contains("it cost 12% of a CPU over the last 0.1s"), "{}", d.message);
    // A target that was idle, not held back (it did not wait for a CPU), is weighed as
    // it ran: no cut yet.
    assert!(look(15, 0).is_none());
    // Nor one that had its share.
    assert!(look(45, 120).is_none());
    // A whole window is weighed as it ran: 1.6% of a CPU over 1.3 s, the target held
    // back, is under the budget.
    let mut g = Governor::new(&plan(), 2.0).unwrap();
    g.check(&with_target(stats(0.0, 0.0, Duration::ZERO), 0, 0, 40.0), t0);
    let late = Duration::from_millis(1300);
    assert!(g.check(&with_target(stats(20.8e6, 0.0, late), 195, 1500, 40.0), t0 + late).is_none());
}

#[test]
fn the_loop_is_raised_until_the_first_look_is_done() {
    use crate::trace::stats::{Calibration, Meter};
    // On a thread of its own: the harness's thread keeps its policy.
    std::thread::spawn(|| {
        let normal = crate::runtime::priority::policy();
        let mut costs = Costs::new(Meter::new(&plan(), Calibration::none(), Some(1.0)), &plan());
        let raised = crate::runtime::priority::raise();
        let held = raised.held();
        costs.raised_until_first_look(Some(raised));
        let g = costs.governor.as_mut().unwrap();
        assert!(!g.looked());
        if held {
            assert_eq!(crate::runtime::priority::policy(), libc::SCHED_FIFO);
        }
        // The first look (the governor's part of it): then back to normal.
        g.check(&stats(0.0, 0.0, Duration::ZERO), Instant::now());
        assert!(g.looked());
        costs.drop_raised_once_looked();
        assert_eq!(crate::runtime::priority::policy(), normal);
    })
    .join()
    .unwrap();
}
