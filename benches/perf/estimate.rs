//! The cost estimate against the target's own CPU, per request, on a real server under
//! load (issue 19): echo (benches/server) answering a steady load from another process
//! (`benchserver load-windows`, which counts the requests answered in every 100 ms).
//! In each run the server's CPU time per request (user + system, /proc/PID/stat) is
//! taken untraced over 3 s, then under `gtrace ... --stats -f json --budget off -p PID`
//! over 5 s of its 6; measured = traced − untraced. Beside it, per request of the trace:
//! gtrace's estimate at the calibrated trap cost, its corrected estimate, and gtrace's
//! own measure (the CPU it saw the target spend above its share before attaching). Rows
//! run interleaved over rounds; medians. The host's load average is printed with them:
//! the trap cost moves with it.

use super::server::{build, cpu_ns, lines, start, wait_for, Killed};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One probe set: its row name and gtrace's arguments.
const CASES: [(&str, &[&str]); 3] = [
    ("`gtrace http`", &["http"]),
    ("a one-liner: `on entry main.hello { @c = count() }`", &["-e", "on entry main.hello { @c = count() }"]),
    (
        "a wildcard: `on entry \"github.com/labstack/echo/v4.*\" { @c[func] = count() }`",
        &["-e", "on entry \"github.com/labstack/echo/v4.*\" { @c[func] = count() }"],
    ),
];

/// ns per request of one run.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    measured: f64,
    calibrated: f64,
    corrected: f64,
    gtrace_measured: Option<f64>,
    scale: Option<f64>,
    /// Intervals the correction took and set aside.
    intervals: (u64, u64),
}

pub struct Estimate {
    pub rounds: usize,
    /// (row, runs) for every case.
    rows: Vec<(&'static str, Vec<Run>)>,
    /// The host's load average (1 min) at the start and the end.
    load: (String, String),
    pub notes: Vec<String>,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

pub fn measure(gtrace: &str, root: &Path, work: &Path, quick: bool) -> Estimate {
    let rounds = if quick { 2 } else { 3 };
    let mut e = Estimate {
        rounds,
        rows: CASES.iter().map(|(n, _)| (*n, Vec::new())).collect(),
        load: (load_average(), String::new()),
        notes: Vec::new(),
    };
    let bin = match build(root, work) {
        Ok(b) => b,
        Err(err) => {
            e.notes.push(err);
            return e;
        }
    };
    for round in 0..rounds {
        for (i, (_, args)) in CASES.iter().enumerate() {
            match one_run(&bin, gtrace, args) {
                Ok(run) => e.rows[i].1.push(run),
                Err(err) => e.notes.push(err),
            }
        }
        eprintln!("estimate round {} of {rounds} done", round + 1);
    }
    e.load.1 = load_average();
    e
}

/// The requests answered in the windows that ended within (from, to], unix ns.
fn requests(windows: &[(u64, u64)], from: u64, to: u64) -> u64 {
    windows.iter().filter(|(at, _)| *at > from && *at <= to).map(|(_, n)| n).sum()
}

fn windows(rx: &Receiver<String>, into: &mut Vec<(u64, u64)>) {
    let field = |l: &str, k: &str| -> Option<u64> {
        l.split_whitespace().find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
    };
    while let Ok(l) = rx.try_recv() {
        if let (Some(at), Some(n)) = (field(&l, "at_ns"), field(&l, "requests")) {
            into.push((at, n));
        }
    }
}

fn one_run(bin: &Path, gtrace: &str, args: &[&str]) -> Result<Run, String> {
    let (server, addr) = start(bin)?;
    let server = Killed(server);
    let pid = server.0.id();
    let url = format!("http://{addr}/hello");
    let mut load = Killed(
        Command::new(bin)
            .args(["load-windows", &url, "16", "4"])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run the load: {e}"))?,
    );
    let rx = lines(load.0.stdout.take().ok_or("no load stdout")?);
    let mut seen = Vec::new();
    // Warm up, then the untraced CPU per request over 3 s.
    std::thread::sleep(Duration::from_secs(2));
    let (t0, cpu0) = (now_ns(), cpu_ns(pid)?);
    std::thread::sleep(Duration::from_secs(3));
    let (t1, cpu1) = (now_ns(), cpu_ns(pid)?);
    let mut g = Killed(
        Command::new(gtrace)
            .args(args)
            .args(["--stats", "-f", "json", "--budget", "off", "--duration", "6s", "-p", &pid.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run gtrace: {e}"))?,
    );
    let err = lines(g.0.stderr.take().ok_or("no gtrace stderr")?);
    let out = lines(g.0.stdout.take().ok_or("no gtrace stdout")?);
    wait_for(&err, "Attached", "gtrace")?;
    let attached = now_ns();
    std::thread::sleep(Duration::from_millis(500));
    let (t2, cpu2) = (now_ns(), cpu_ns(pid)?);
    std::thread::sleep(Duration::from_secs(5));
    let (t3, cpu3) = (now_ns(), cpu_ns(pid)?);
    let deadline = Instant::now() + Duration::from_secs(30);
    while g.0.try_wait().map_err(|e| e.to_string())?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ended = now_ns();
    // The windows up to the trace's end and one more.
    std::thread::sleep(Duration::from_millis(200));
    windows(&rx, &mut seen);
    let stats = out
        .try_iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find(|v| v["type"] == "stats")
        .ok_or("gtrace printed no stats")?;
    let (untraced_n, traced_n, trace_n) =
        (requests(&seen, t0, t1), requests(&seen, t2, t3), requests(&seen, attached, ended));
    if untraced_n == 0 || traced_n == 0 || trace_n == 0 {
        return Err(format!("no requests counted ({untraced_n} untraced, {traced_n} traced)"));
    }
    let untraced = (cpu1 - cpu0) / untraced_n as f64;
    let traced = (cpu3 - cpu2) / traced_n as f64;
    let in_target: Vec<&serde_json::Value> =
        stats["probes"].as_array().ok_or("no probes")?.iter().filter(|p| p["in_target"] == true).collect();
    let sum = |f: &dyn Fn(&serde_json::Value) -> f64| in_target.iter().map(|p| f(p)).sum::<f64>() / trace_n as f64;
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    let target = &stats["target"];
    let gtrace_measured = target["before_percent"]
        .as_f64()
        .map(|b| (num(&target["cpu_ns"]) - b / 100.0 * num(&stats["elapsed_ns"])) / trace_n as f64);
    Ok(Run {
        measured: traced - untraced,
        calibrated: sum(&|p| num(&p["traps_ns"]) + num(&p["run_ns"])),
        corrected: sum(&|p| num(&p["cost_ns"])),
        gtrace_measured,
        scale: target["trap_scale"].as_f64(),
        intervals: (target["intervals"].as_u64().unwrap_or(0), target["set_aside"].as_u64().unwrap_or(0)),
    })
}

impl Estimate {
    pub fn render(&self) -> String {
        let mut s = format!(
            "### The estimate against the server's own CPU (echo under load, benches/server)\n\n\
             {} rounds, medians, ns of CPU per request; measured = the server's CPU per request traced − untraced \
             (its own /proc accounting and the load's request count); gtrace's measure = the CPU it saw the server \
             spend above its share before attaching, per request. Load average {} at the start, {} at the end.\n\n\
             | probes | estimate (calibrated) | corrected | trap cost x | measured | gtrace's measure |\n|---|---:|---:|---:|---:|---:|\n",
            self.rounds, self.load.0, self.load.1
        );
        let med = |runs: &[Run], f: &dyn Fn(&Run) -> Option<f64>| {
            super::median(&runs.iter().filter_map(f).collect::<Vec<_>>())
        };
        let ns = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.0}"));
        for (name, runs) in &self.rows {
            s += &format!(
                "| {name} | {} | {} | {} | {} | {} |\n",
                ns(med(runs, &|r| Some(r.calibrated))),
                ns(med(runs, &|r| Some(r.corrected))),
                med(runs, &|r| r.scale).map_or("–".into(), |v| format!("{v:.2}")),
                ns(med(runs, &|r| Some(r.measured))),
                ns(med(runs, &|r| r.gtrace_measured)),
            );
        }
        for (name, runs) in &self.rows {
            let each: Vec<String> = runs
                .iter()
                .map(|r| {
                    let (taken, aside) = r.intervals;
                    format!(
                        "{:.0}/{:.0}/{:.0} ({taken} taken, {aside} set aside)",
                        r.calibrated, r.corrected, r.measured
                    )
                })
                .collect();
            s += &format!("\n{name}, each run (calibrated/corrected/measured ns a request): {}\n", each.join(", "));
        }
        s.push('\n');
        for n in &self.notes {
            s += &format!("\nnote: {n}\n");
        }
        s
    }
}
