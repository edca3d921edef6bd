//! The cost estimate against what the target itself spends. tests/go/prod `cpu K` is a
//! program under a steady load (K calls of main.hot every millisecond) that prints its
//! own CPU time (its threads' schedstat) every 100 ms. Traced with -p, what it spent
//! above its untraced share, by its own report, is what `--stats` estimates the probes
//! cost it, within 15%; and the corrected estimate is nearer that than the estimate at
//! the calibrated trap cost (up to what gtrace's own measure may differ from the
//! program's: below). Once with the correction made at exit only (`--budget off`), once
//! as it goes (a budget too high to cut: it looks every 100 ms). One trace at a time, and
//! only one whose premise held (`trace_steady`) is checked. Needs root (SKIP without
//! it, unless CI=true: then it fails).

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::processes::{Lines, Owned};

/// The two traces measure CPU time: run side by side on this 2-CPU host, each one's
/// program and gtrace took the other's CPUs, and the intervals that said so (a program
/// held back) were set aside while the others moved the correction (a CI run saw 2 of 4
/// taken and the corrected estimate 18% high). One at a time.
static MEASURING: Mutex<()> = Mutex::new(());

/// The program's lines: when (unix ns), its calls so far, its CPU time so far (ns).
fn readings(lines: &Lines) -> Vec<(u64, u64, u64)> {
    lines.all.lock().unwrap().iter().filter_map(|l| readings_of(l)).collect()
}

/// One line of the program, if it is a reading.
fn readings_of(l: &str) -> Option<(u64, u64, u64)> {
    let field = |k: &str| -> Option<u64> {
        l.split_whitespace().find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
    };
    Some((field("at_ns")?, field("calls")?, field("cpu_ns")?))
}

/// Its calls a second and share of a CPU (a fraction) between `from` and `to` (unix ns).
fn rates(readings: &[(u64, u64, u64)], from: u64, to: u64) -> (f64, f64) {
    let inside: Vec<_> = readings.iter().filter(|r| r.0 >= from && r.0 <= to).collect();
    let (first, last) = (inside.first().expect("no reading"), inside.last().unwrap());
    let wall = (last.0 - first.0) as f64;
    assert!(wall >= 5e8, "a window of {wall} ns: {readings:?}");
    ((last.1 - first.1) as f64 / wall * 1e9, (last.2 - first.2) as f64 / wall)
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// What one trace of `prod cpu K` saw, each as a share of a CPU: what the program spent
/// above its untraced share by its own report (`extra`, over `before`), gtrace's
/// corrected estimate and the one at the calibrated trap cost, the share before
/// attaching gtrace measured itself, and the stats object.
struct Seen {
    extra: f64,
    before: f64,
    /// Its calls a second traced over those before.
    pace: f64,
    corrected: f64,
    calibrated: f64,
    gtrace_before: f64,
    stats: serde_json::Value,
}

/// The test hook that multiplies gtrace's calibrated trap cost (`trace::stats::TEST_SCALE_ENV`).
const TRAP_COST_SCALE: &str = "GTRACE_TEST_HOOK_TRAP_COST_SCALE";

/// None when the budget cut the probe: the estimate before any correction passed it
/// (made 2.5 times too high on top of the calibration's own error, a fresh-clone CI run
/// read 98% of a CPU in the first second against a budget of 95%).
fn trace_prod(budget: &str, scale: Option<f64>) -> Option<Seen> {
    let prod = support::go_build("prod", &[]);
    let _alone = MEASURING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let k = calls_a_millisecond();
    let mut program =
        Owned(Command::new(&prod).args(["cpu", &k]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
    let out = Lines::of(program.0.stdout.take().unwrap());
    std::thread::sleep(Duration::from_millis(2500));
    let started = now_ns();
    let pid = program.0.id().to_string();
    let script = "on entry main.hot { @calls = count() }";
    let args = ["-e", script, "-p", &pid, "--stats", "-f", "json", "--budget", budget, "--duration", "4s"];
    let mut command = support::gtrace_command();
    if let Some(f) = scale {
        command.env(TRAP_COST_SCALE, f.to_string());
    }
    let mut gtrace = Owned(command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let stdout = Lines::of(gtrace.0.stdout.take().unwrap());
    let stderr = Lines::of(gtrace.0.stderr.take().unwrap());
    let attached = stderr.wait_for(Duration::from_secs(60), |l| l.starts_with("Attached")).map(|_| now_ns());
    let attached = attached.unwrap_or_else(|| panic!("gtrace did not attach:\n{}", stderr.text()));
    let code = support::wait_bounded(&mut gtrace.0, Duration::from_secs(60), "gtrace");
    let ended = now_ns();
    // Its output read to the end: the stats object is its last line.
    assert!(stdout.wait_end(Duration::from_secs(10)) && stderr.wait_end(Duration::from_secs(10)));
    // Every reading up to the end of the trace read (lines come in order; it prints one
    // every 100 ms): a sleep of 300 ms stood for this.
    let after = |l: &str| readings_of(l).is_some_and(|r| r.0 >= ended);
    assert!(out.wait_for(Duration::from_secs(30), after).is_some(), "the program stopped reporting");
    let _ = program.0.stdin.take().unwrap().write_all(b"\n");
    assert_eq!(code, 0, "{}", stderr.text());
    if stderr.text().contains("detached") {
        eprintln!("the budget cut the probe: {}", stderr.text());
        return None;
    }

    let readings = readings(&out);
    let (calls_before, before) = rates(&readings, readings[0].0 + 500_000_000, started);
    // From a little after the attach (the first hits pay for the kernel's set-up) to
    // before the detach.
    let (calls_traced, traced) = rates(&readings, attached + 300_000_000, ended - 300_000_000);
    // The premise (`trace_steady` checks it): the same load traced as untraced, the
    // program keeping its pace.
    let pace = calls_traced / calls_before;
    let stats: serde_json::Value = stdout
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "stats")
        .unwrap_or_else(|| panic!("no stats object in:\n{}", stdout.text()));
    let elapsed = stats["elapsed_ns"].as_f64().unwrap();
    let in_target: Vec<&serde_json::Value> =
        stats["probes"].as_array().unwrap().iter().filter(|p| p["in_target"] == true).collect();
    let corrected = in_target.iter().map(|p| p["cost_ns"].as_f64().unwrap()).sum::<f64>() / elapsed;
    let calibrated =
        in_target.iter().map(|p| p["traps_ns"].as_f64().unwrap() + p["run_ns"].as_f64().unwrap()).sum::<f64>()
            / elapsed;
    let gtrace_before = stats["target"]["before_percent"].as_f64().unwrap_or_else(|| panic!("{stats}")) / 100.0;
    let seen = Seen { extra: traced - before, before, pace, corrected, calibrated, gtrace_before, stats };
    eprintln!(
        "--budget {budget}: spent {:.4} of a CPU above {before:.4} (gtrace saw {gtrace_before:.4} before, pace x{:.3}); estimated {corrected:.4} corrected, {calibrated:.4} at the calibrated trap cost; {}",
        seen.extra, seen.pace, seen.stats["target"]
    );
    Some(seen)
}

/// `prod cpu K`'s K, its calls of main.hot a millisecond: 20, where each is a single
/// step (9.4 us on this VM) and the probe cost 15-25% of a CPU under load, 7% by the
/// estimate at load 14 (2026-11-28); but a trap's cost is the host's, and where it is a
/// third of this one's the probe would cost about the 2% of a CPU the checks need to
/// measure anything (`extra > 0.02`). So where gtrace estimates that 2 s of `cpu 20`
/// cost under 5% of a CPU, as many calls as bring it to 10% (at most 400). Measured
/// once, while no other trace runs.
fn calls_a_millisecond() -> String {
    static K: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let measure = || {
        let prod = support::go_build("prod", &[]);
        let mut program = Owned(
            Command::new(&prod).args(["cpu", "20"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap(),
        );
        let out = Lines::of(program.0.stdout.take().unwrap());
        out.wait_for(Duration::from_secs(10), |l| readings_of(l).is_some()).expect("the program reports");
        let pid = program.0.id().to_string();
        let script = "on entry main.hot { @calls = count() }";
        let stats = support::cost::stats_of(&["-e", script, "-p", &pid, "--duration", "2s"]);
        let _ = program.0.stdin.take().unwrap().write_all(b"\n");
        let percent = support::cost::percent_of_cpu(&stats);
        let k = if percent < 5.0 { (20.0 * 10.0 / percent.max(0.5)).ceil().min(400.0) as u32 } else { 20 };
        eprintln!("cpu 20 costs {percent:.2}% of a CPU by the estimate: cpu {k}");
        k.to_string()
    };
    K.get_or_init(measure).clone()
}

/// A trace of `prod cpu K` whose premise held: the program's untraced share was
/// steady, so what it spent above it traced is what the probes cost, and it kept its
/// pace (within 5%): a program the host held back did less of its own work while traced,
/// and what it spent above its share is then only a floor of the probes' cost, which
/// gtrace's correction does not take as a measure (`trace::correction`). gtrace measures
/// that share over the program's life up to its start when that agrees with what the
/// program spent over gtrace's start-up, else over a quiet 100 ms before the attach
/// (`trace::untraced_baseline`), the program over the two seconds before;
/// on a host whose other work comes and goes they differ (a run beside four compilers
/// saw 0.104 of a CPU by the program, 0.043 by gtrace: the extra then says nothing of
/// the probes). Such a trace, and one the budget cut, is taken again, up to three times;
/// then the test fails.
fn trace_steady(budget: &str, scale: Option<f64>) -> Seen {
    let mut moved = Vec::new();
    for _ in 0..3 {
        let Some(seen) = trace_prod(budget, scale) else {
            moved.push("cut by the budget".to_string());
            continue;
        };
        let apart = (seen.gtrace_before - seen.before).abs();
        if apart <= (0.25 * seen.before).max(0.01) && seen.pace >= 0.95 {
            return seen;
        }
        eprintln!(
            "not steady: the untraced share {:.4} by the program, {:.4} by gtrace, its pace traced x{:.3}; again",
            seen.before, seen.gtrace_before, seen.pace
        );
        moved.push(format!("{:.4} {:.4} x{:.3}", seen.before, seen.gtrace_before, seen.pace));
    }
    panic!("the program was never steady on this host (its share untraced, gtrace's measure of it, its pace traced): {moved:?}");
}

/// The checks both traces make: `Err` says which failed.
fn check(seen: &Seen) -> Result<(), String> {
    let Seen { extra, before, corrected, calibrated, gtrace_before, stats, .. } = seen;
    let context = format!("the program spent {before:.4} of a CPU untraced, {extra:.4} more traced; {stats}");
    let ensure = |ok: bool, what: String| if ok { Ok(()) } else { Err(what) };
    ensure(*extra > 0.02, format!("the probes must cost something measurable: {context}"))?;
    let target = &stats["target"];
    if target["intervals"] == 0 {
        // Every interval set aside: the program's threads waited for a CPU, and what it
        // spent then says as much of the host as of the probes (trace::correction). The
        // estimate stays the calibrated one.
        ensure(target["set_aside"].as_u64() > Some(0), format!("nothing taken, nothing set aside: {context}"))?;
        ensure(
            target["trap_scale"].is_null() && (corrected - calibrated).abs() < 1e-9,
            format!("corrected with nothing taken: {context}"),
        )?;
        // The calibration is still checked: the extra a held-back program spends is a
        // floor of what the probes cost, so only a loose bound is honest here (half of
        // it either way; the calibration's errors seen on this VM were 13-26%).
        ensure(
            (calibrated - extra).abs() <= 0.5 * extra,
            format!("calibrated {calibrated:.4} of a CPU, spent {extra:.4} (a floor): {context}"),
        )?;
        eprintln!("no interval taken (all set aside): the estimate is the calibrated one");
        return Ok(());
    }
    ensure(
        (corrected - extra).abs() <= 0.15 * extra,
        format!("estimated {corrected:.4} of a CPU, spent {extra:.4}: {context}"),
    )?;
    // Nearer than the calibrated estimate, up to what gtrace's measure may differ from
    // the program's: gtrace takes the share before attaching over the program's life
    // (its start included) or a quiet 100 ms, the program over two seconds, and that
    // difference moves gtrace's target as much; 2% of the extra more for the rest
    // (gtrace's intervals end at its looks, the program's window 0.3 s inside the trace).
    let margin = (gtrace_before - before).abs() + 0.02 * extra;
    ensure(
        (corrected - extra).abs() <= (calibrated - extra).abs() + margin,
        format!(
            "corrected {corrected:.4}, calibrated {calibrated:.4}, spent {extra:.4} (margin {margin:.4}): {context}"
        ),
    )
}

/// A steady trace that meets `check`, of up to three. The estimate is a measurement on a
/// shared VM: its trap cost is calibrated in a moment at start-up, and the fresh-clone CI
/// once saw it 2.3x what the program then spent, on an idle host, with every interval set
/// aside (the program, woken by its ticker every millisecond, waited for a CPU a quarter
/// as long as it ran). One trace of three must meet the bounds; an estimate wrong every
/// time fails all three, and each failure is printed.
fn traced_and_checked(budget: &str, scale: Option<f64>, check: fn(&Seen) -> Result<(), String>) -> Seen {
    let mut failed = Vec::new();
    for _ in 0..3 {
        let seen = trace_steady(budget, scale);
        match check(&seen) {
            Ok(()) => return seen,
            Err(why) => {
                eprintln!("not met: {why}; again");
                failed.push(why);
            }
        }
    }
    panic!("three traces, none within the bounds:\n{}", failed.join("\n"));
}

#[test]
fn the_estimate_is_within_15_percent_of_what_the_target_spent_above_its_untraced_share() {
    if !support::privileged("the_estimate_is_within_15_percent_of_what_the_target_spent_above_its_untraced_share") {
        return;
    }
    let seen = traced_and_checked("off", None, check);
    // Without a budget the correction is made at exit, from the whole trace.
    let target = &seen.stats["target"];
    assert_eq!(target["intervals"].as_u64().unwrap() + target["set_aside"].as_u64().unwrap(), 1, "{target}");
}

#[test]
fn the_estimate_is_corrected_as_the_trace_goes() {
    if !support::privileged("the_estimate_is_corrected_as_the_trace_goes") {
        return;
    }
    // A budget no probe here comes near (the probe costs 7-25% of a CPU): its looks
    // correct the trap cost every second.
    let seen = traced_and_checked("95%", None, check);
    // 4 s traced: intervals end at 0.5, 1.5, 2.5 and 3.5 s, and the look at exit may
    // find the last under a second (not taken): 3 or 4, unless some were set aside.
    let target = &seen.stats["target"];
    let (taken, aside) = (target["intervals"].as_u64().unwrap(), target["set_aside"].as_u64().unwrap());
    assert!(taken + aside >= 3, "{target}");
}

/// What a trace with the calibration made `MISCALIBRATED` times too high must show: the
/// estimate at that calibration far above what the program spent (the premise: the hook
/// took), the correction taken from intervals that agreed although each was implausible
/// alone, and the corrected estimate within 15% of what the program spent.
fn check_recovered(seen: &Seen) -> Result<(), String> {
    let Seen { extra, before, corrected, calibrated, stats, .. } = seen;
    let context = format!("the program spent {before:.4} of a CPU untraced, {extra:.4} more traced; {stats}");
    let ensure = |ok: bool, what: String| if ok { Ok(()) } else { Err(what) };
    ensure(*extra > 0.02, format!("the probes must cost something measurable: {context}"))?;
    ensure(
        *calibrated >= 1.5 * extra,
        format!("the calibration times {MISCALIBRATED}: {calibrated:.4} of a CPU, not off from {extra:.4}: {context}"),
    )?;
    let taken = stats["target"]["intervals"].as_u64().unwrap_or(0);
    ensure(taken >= 2, format!("{taken} intervals taken: {context}"))?;
    let scale = stats["target"]["trap_scale"].as_f64().unwrap_or(1.0);
    ensure(scale < SCALE_FLOOR, format!("trap cost x{scale:.3}: not past the usual bounds: {context}"))?;
    ensure(
        (corrected - extra).abs() <= 0.15 * extra,
        format!(
            "estimated {corrected:.4} of a CPU corrected ({calibrated:.4} calibrated), spent {extra:.4}: {context}"
        ),
    )
}

/// How far off the test makes the calibration: 2.5 times the measured trap cost (with the
/// calibration's own error, 0.7-1.5x what the program spent here under load, 1.8-3.8x in
/// all: at twice, one trace in three read a factor the usual bounds allow, 0.70, and
/// showed nothing of the recovery).
const MISCALIBRATED: f64 = 2.5;

#[test]
fn the_correction_recovers_from_a_calibration_far_too_high() {
    if !support::privileged("the_correction_recovers_from_a_calibration_far_too_high") {
        return;
    }
    // Looks every 100 ms (a budget too high to cut): intervals end at 0.5, 1.5, 2.5 and
    // 3.5 s; the first, alone, is set aside, the next agree with it and are taken.
    traced_and_checked("95%", Some(MISCALIBRATED), check_recovered);
}

/// The lowest factor the correction reaches without agreeing intervals (trace::correction's
/// SCALE_RANGE): a calibration this far off needs them.
const SCALE_FLOOR: f64 = 0.67;
