//! What gtrace costs a busy server by the server's own CPU accounting, with a method
//! that beats this host's noise: the load is paced (`benchserver pace`: requests sent
//! at fixed times, an open loop below saturation); the server's CPU is sampled every
//! 5 ms (`sampler.rs`: a cpuacct cgroup of its own) and divided by the requests the
//! loader saw answered in the same stretch (its progress every 50 ms), so that a loader
//! that falls behind on this shared host does not read as a cheaper server; and traced
//! and untraced stretches alternate on the SAME server process, each traced window
//! between two untraced ones (compared with their mean: a drift that is linear over the
//! three falls out). The extra CPU a request, times the paced rate, is the extra share
//! of a CPU, set against `--budget`.
//!
//! - `gtrace http -p PID` at the default budget: gtrace runs until its duty-cycle
//!   decision, then a window of `HTTP_WINDOW`, then it is stopped. Inside that window,
//!   the probe's byte in the server's memory (int3 while attached) also splits each
//!   second into its attached and detached parts: their difference, for the attached
//!   fraction, is the same extra measured within each second (a paired design whose two
//!   halves are a few hundred ms apart, the cycle's own alternation).
//! - The wildcard `-e 'on entry "net/http.*" { @c = count() }' --budget 2%`: gtrace runs,
//!   settles (`SETTLE` after `Attached`), a window of `WILDCARD_WINDOW`, is stopped.
//!
//! Each statistic is a mean with its 95% interval; a goal is met when the interval's
//! top is under the budget, not met when its bottom is above it, and undecided otherwise.
//!
//! - The same wildcard toggled fast (`GTRACE_BENCH_TOGGLES` pairs, default 0): gtrace
//!   started, `TOGGLE_SETTLE` after `Attached` a traced window of `TOGGLE_WINDOW`,
//!   SIGINT, and an untraced window as long right after it (or, every other pair, the
//!   untraced one first): the two halves of a pair are about a second apart.
//!
//! `GTRACE_BENCH_CADDY=PATH` serves with Caddy (`caddy respond`), else with echo
//! (benches/server); `GTRACE_BENCH_RATE` is the paced rate (default 10,000 a second),
//! `GTRACE_BENCH_ROUNDS` the rounds (default 12, 4 with --quick).

use super::sampler::{load_average, mean_ci, periods, Period, Sample, Sampler};
use super::server::{lines, wait_for, Killed};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WILDCARD: &str = r#"on entry "net/http.*" { @c = count() }"#;
const HTTP_WINDOW: Duration = Duration::from_secs(10);
const WILDCARD_WINDOW: Duration = Duration::from_secs(3);
/// The fast toggle's windows, and its wait from `Attached` (past the breaker's first
/// decision at 0.1 s and its first correction at 0.5 s) and from gtrace's exit.
const TOGGLE_WINDOW: Duration = Duration::from_millis(1500);
const TOGGLE_SETTLE: Duration = Duration::from_millis(700);
const TOGGLE_GAP: Duration = Duration::from_millis(300);
/// Each untraced window.
const UNTRACED_WINDOW: Duration = Duration::from_secs(5);
/// From `Attached` (or the duty-cycle decision) to the traced window, and from gtrace's
/// exit to the untraced one.
const SETTLE: Duration = Duration::from_millis(1000);
const CONNECTIONS: &str = "64";

/// One traced window and the untraced ones on each side of it: the server's CPU ns a
/// request in each, its requests a second in the traced one, what gtrace said, and the
/// duty cycle's periods in the traced window.
pub struct Round {
    pub traced: f64,
    pub untraced: (f64, f64),
    pub rate: f64,
    pub said: Vec<String>,
    pub periods: Vec<Period>,
    /// The control: the untraced window after it split as the duty cycle split the
    /// traced one (its phase and fraction), where nothing is attached in either part.
    pub sham: Vec<Period>,
    pub load_average: f64,
}

impl Round {
    /// The traced window's extra CPU a request over its neighbours' mean, ns.
    pub fn extra_ns(&self) -> f64 {
        self.traced - (self.untraced.0 + self.untraced.1) / 2.0
    }

    /// That extra at the traced window's own rate, percent of a CPU.
    pub fn extra_percent(&self) -> f64 {
        self.extra_ns() * self.rate / 1e7
    }
}

#[derive(Default)]
pub struct DutyCpu {
    pub server: String,
    pub rate: u64,
    pub meter: String,
    pub http: Vec<Round>,
    pub wildcard: Vec<Round>,
    /// The wildcard toggled fast: each pair's traced and (one) untraced window.
    pub toggled: Vec<Round>,
    /// The loader's last progress line: how many requests were sent late.
    pub loader: String,
    pub note: Option<String>,
}

pub fn measure(gtrace: &str, root: &Path, work: &Path, quick: bool) -> DutyCpu {
    let rate = std::env::var("GTRACE_BENCH_RATE").ok().and_then(|r| r.parse().ok()).unwrap_or(10_000);
    let mut d = DutyCpu { rate, ..DutyCpu::default() };
    let rounds = std::env::var("GTRACE_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok());
    if let Err(e) = run(gtrace, root, work, rounds.unwrap_or(if quick { 4 } else { 12 }), &mut d) {
        d.note = Some(e);
    }
    d
}

/// The loader's progress: (wall-clock ns, requests answered so far), every 50 ms.
type Progress = Arc<Mutex<Vec<(u64, u64)>>>;

/// Requests answered between two wall-clock times, from the loader's progress
/// (interpolated between its lines).
fn answered(progress: &Progress, from: u64, to: u64) -> f64 {
    // The loader's line for `to` may be on its way.
    let deadline = Instant::now() + Duration::from_millis(500);
    while progress.lock().unwrap().last().is_none_or(|(ns, _)| *ns < to) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let p = progress.lock().unwrap();
    let at = |t: u64| -> Option<f64> {
        let i = p.iter().position(|(ns, _)| *ns >= t)?;
        let (t1, n1) = p[i];
        let (t0, n0) = if i == 0 { return Some(n1 as f64) } else { p[i - 1] };
        Some(n0 as f64 + (n1 - n0) as f64 * (t - t0) as f64 / (t1 - t0).max(1) as f64)
    };
    match (at(from), at(to)) {
        (Some(a), Some(b)) => b - a,
        _ => 0.0,
    }
}

fn run(gtrace: &str, root: &Path, work: &Path, rounds: usize, d: &mut DutyCpu) -> Result<(), String> {
    let bench = super::server::build(root, work)?;
    let (server, url) = serve(&bench)?;
    let server = Killed(server);
    let pid = server.0.id();
    d.server = url.clone();
    let address = probe_address(gtrace, pid)?;
    let sampler = Sampler::start(pid, Some(address))?;
    d.meter = sampler.how.clone();
    let toggles: u64 = std::env::var("GTRACE_BENCH_TOGGLES").ok().and_then(|r| r.parse().ok()).unwrap_or(0);
    let secs = (rounds as u64 + 1) * 60 + toggles * 10;
    let mut loader = Command::new(&bench)
        .args(["pace", &url, &d.rate.to_string(), &secs.to_string(), CONNECTIONS])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the load: {e}"))?;
    let lines_in = lines(loader.stdout.take().ok_or("no loader stdout")?);
    let _loader = Killed(loader);
    let progress: Progress = Arc::default();
    let last = Arc::new(Mutex::new(String::new()));
    {
        let (progress, last) = (progress.clone(), last.clone());
        std::thread::spawn(move || {
            for l in lines_in {
                let field = |k: &str| l.split_whitespace().find_map(|w| w.strip_prefix(k)?.parse::<u64>().ok());
                if let (Some(at), Some(done)) = (field("at_ns="), field("done=")) {
                    progress.lock().unwrap().push((at, done));
                }
                *last.lock().unwrap() = l;
            }
        });
    }
    let count = |from: u64, to: u64| answered(&progress, from, to);
    std::thread::sleep(Duration::from_secs(2));
    let http_args = ["http".to_string(), "-p".into(), pid.to_string()];
    let wildcard_args =
        ["-e".to_string(), WILDCARD.into(), "--budget".into(), "2%".into(), "-p".into(), pid.to_string()];
    let mut before = untraced(&sampler, &count)?.0;
    for r in 0..rounds {
        eprintln!("dutycpu: round {r} (load average {:.1})", load_average());
        let (round, after) = sandwich(gtrace, &http_args, &sampler, &count, HTTP_WINDOW, before, true)?;
        d.http.push(round);
        let (round, after) = sandwich(gtrace, &wildcard_args, &sampler, &count, WILDCARD_WINDOW, after, false)?;
        d.wildcard.push(round);
        before = after;
    }
    for r in 0..toggles {
        if r % 10 == 0 {
            eprintln!("dutycpu: toggle {r} (load average {:.1})", load_average());
        }
        d.toggled.push(toggle(gtrace, &wildcard_args, &sampler, &count, r % 2 == 1)?);
    }
    d.loader = last.lock().unwrap().clone();
    Ok(())
}

/// An untraced window after `SETTLE`: the server's CPU ns a request, and when it was.
fn untraced(sampler: &Sampler, count: &dyn Fn(u64, u64) -> f64) -> Result<(f64, Instant, Instant), String> {
    std::thread::sleep(SETTLE);
    let from = Instant::now();
    std::thread::sleep(UNTRACED_WINDOW);
    let to = Instant::now();
    Ok((sampler.per_request(from, to, count).ok_or("no samples or no requests")?.0, from, to))
}

/// One fast pair: gtrace started, a traced window once settled, stopped, and an
/// untraced window right after (`untraced_first`: right before it is started).
fn toggle(
    gtrace: &str,
    args: &[String],
    sampler: &Sampler,
    count: &dyn Fn(u64, u64) -> f64,
    untraced_first: bool,
) -> Result<Round, String> {
    let quiet = |sampler: &Sampler| -> Result<f64, String> {
        std::thread::sleep(TOGGLE_GAP);
        let from = Instant::now();
        std::thread::sleep(TOGGLE_WINDOW);
        Ok(sampler.per_request(from, Instant::now(), count).ok_or("no samples or no requests")?.0)
    };
    let before = if untraced_first { Some(quiet(sampler)?) } else { None };
    let (from, to, said) = traced_window(gtrace, args, (TOGGLE_SETTLE, TOGGLE_WINDOW), false)?;
    let (traced, rate) = sampler.per_request(from, to, count).ok_or("no samples or no requests")?;
    let untraced = match before {
        Some(u) => u,
        None => quiet(sampler)?,
    };
    let (periods, sham) = (Vec::new(), Vec::new());
    Ok(Round { traced, untraced: (untraced, untraced), rate, said, periods, sham, load_average: load_average() })
}

/// `untraced`'s samples marked attached as the duty cycle in `traced` would have been:
/// from its first re-attach, each second's first `fraction` of it.
fn sham(traced: &[Sample], untraced: &[Sample], fraction: f64) -> Vec<Sample> {
    let Some(origin) = traced.windows(2).find(|w| w[0].attached == Some(false) && w[1].attached == Some(true)) else {
        return Vec::new();
    };
    let origin = origin[1].at;
    let mark = |s: &Sample| {
        let phase = s.at.saturating_duration_since(origin).as_secs_f64().fract();
        Sample { attached: Some(phase < fraction), ..*s }
    };
    untraced.iter().map(mark).collect()
}

/// A traced window between `before` (the untraced window just run) and an untraced one
/// after it, which is returned for the next round to use.
fn sandwich(
    gtrace: &str,
    args: &[String],
    sampler: &Sampler,
    count: &dyn Fn(u64, u64) -> f64,
    window: Duration,
    before: f64,
    duty: bool,
) -> Result<(Round, f64), String> {
    let (from, to, said) = traced_window(gtrace, args, (SETTLE, window), duty)?;
    let (traced, rate) = sampler.per_request(from, to, count).ok_or("no samples or no requests")?;
    let (after, after_from, after_to) = untraced(sampler, count)?;
    let samples = sampler.between(from, to);
    let periods = if duty { periods(&samples, count) } else { Vec::new() };
    let fraction = periods.iter().map(|p| p.fraction).sum::<f64>() / periods.len().max(1) as f64;
    let sham = match periods.is_empty() {
        true => Vec::new(),
        false => super::sampler::periods(&sham(&samples, &sampler.between(after_from, after_to), fraction), count),
    };
    let round = Round { traced, untraced: (before, after), rate, said, periods, sham, load_average: load_average() };
    Ok((round, after))
}

/// The server: Caddy if `GTRACE_BENCH_CADDY` names it, else echo; and its URL.
fn serve(bench: &Path) -> Result<(Child, String), String> {
    let Ok(caddy) = std::env::var("GTRACE_BENCH_CADDY") else {
        let (child, addr) = super::server::start(bench)?;
        return Ok((child, format!("http://{addr}/hello")));
    };
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(caddy)
        .args(["respond", "--listen", &listen, "--body", "hello"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start Caddy: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&listen).is_err() {
        if Instant::now() > deadline {
            return Err("Caddy did not listen within 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((child, format!("http://{listen}/")))
}

/// The address in process `pid` of the first probe of `gtrace http` (`--emit plan`: its
/// file offset, placed by /proc/PID/maps), whose byte says whether the probes are on.
fn probe_address(gtrace: &str, pid: u32) -> Result<u64, String> {
    let out = Command::new(gtrace)
        .args(["http", "--emit", "plan", "-p", &pid.to_string()])
        .output()
        .map_err(|e| format!("cannot run gtrace: {e}"))?;
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("the plan: {e}"))?;
    let offset = (plan["plan"]["probes"].as_array().into_iter().flatten())
        .find_map(|p| p["attach"]["Uprobe"][0]["file_offset"].as_u64())
        .ok_or("no uprobe in `gtrace http`'s plan")?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| e.to_string())?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| e.to_string())?;
    for line in maps.lines().filter(|l| l.ends_with(&*exe.to_string_lossy())) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (start, end) = f[0].split_once('-').ok_or("a maps line")?;
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|e| e.to_string());
        let (start, end, off) = (hex(start)?, hex(end)?, hex(f[2])?);
        if (off..off + (end - start)).contains(&offset) {
            let address = start + offset - off;
            let mut byte = [0u8];
            std::os::unix::fs::FileExt::read_at(
                &std::fs::File::open(format!("/proc/{pid}/mem")).map_err(|e| e.to_string())?,
                &mut byte,
                address,
            )
            .map_err(|e| e.to_string())?;
            return if byte[0] == 0xCC { Err("the probe's byte is an int3 untraced".into()) } else { Ok(address) };
        }
    }
    Err("the probe's offset is in no mapping of the server".into())
}

/// gtrace run with `args` until it settles (`settle` after `Attached`, or after it says
/// it duty-cycles), then for `window`: the traced window's start and end, and what gtrace
/// said on stderr.
fn traced_window(
    gtrace: &str,
    args: &[String],
    (settle, window): (Duration, Duration),
    duty: bool,
) -> Result<(Instant, Instant, Vec<String>), String> {
    let mut g = Killed(
        Command::new(gtrace)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run gtrace: {e}"))?,
    );
    let err = lines(g.0.stderr.take().ok_or("no gtrace stderr")?);
    wait_for(&err, "Attached", "gtrace")?;
    let mut said = Vec::new();
    if duty {
        said.extend(until(&err, "duty-cycled instead", Duration::from_secs(8)));
    }
    std::thread::sleep(settle);
    let from = Instant::now();
    std::thread::sleep(window);
    let to = Instant::now();
    let _ = Command::new("kill").args(["-INT", &g.0.id().to_string()]).status();
    let _ = g.0.wait();
    said.extend(err.try_iter().filter(|l| l.starts_with("--budget")));
    Ok((from, to, said))
}

/// The lines of `rx` up to the first that contains `what`, or all within `limit`.
fn until(rx: &Receiver<String>, what: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    while let Ok(l) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let found = l.contains(what);
        if l.starts_with("--budget") {
            out.push(l);
        }
        if found {
            break;
        }
    }
    out
}

fn verdict(mean: f64, half: f64, budget: f64) -> &'static str {
    if mean + half < budget {
        "met"
    } else if mean - half > budget {
        "not met"
    } else {
        "undecided (the interval spans the budget)"
    }
}

impl DutyCpu {
    pub fn render(&self) -> String {
        let mut out = format!(
            "\n### The server's own CPU at a paced {} requests a second ({}; {})\n\n",
            self.rate, self.server, self.meter
        );
        if let Some(n) = &self.note {
            out.push_str(&format!("not measured: {n}\n"));
            return out;
        }
        out.push_str("| case | round | traced ns/req | untraced before, after | req/s | extra % of a CPU | periods | within-second extra | load avg | gtrace said |\n");
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        let cases =
            [("`gtrace http`", &self.http), ("wildcard at 2%", &self.wildcard), ("wildcard toggled", &self.toggled)];
        for (name, rounds) in cases {
            for (i, r) in rounds.iter().enumerate() {
                let within = mean_ci(&r.periods.iter().map(Period::extra).collect::<Vec<_>>());
                out.push_str(&format!(
                    "| {name} | {i} | {:.0} | {:.0}, {:.0} | {:.0} | {:.2} | {} | {} | {:.1} | {} |\n",
                    r.traced,
                    r.untraced.0,
                    r.untraced.1,
                    r.rate,
                    r.extra_percent(),
                    r.periods.len(),
                    within.map_or("-".into(), |(m, h)| format!("{m:.2} +- {h:.2}")),
                    r.load_average,
                    r.said.iter().map(|l| short(l)).collect::<Vec<_>>().join(" / "),
                ));
            }
        }
        out.push_str(&format!("\nloader: {}\n", self.loader));
        out
    }

    pub fn goals(&self) -> Vec<String> {
        let mut out = Vec::new();
        let extra = |rounds: &[Round]| rounds.iter().map(Round::extra_percent).collect::<Vec<_>>();
        let line = |what: &str, v: &[f64], n: &str, budget: f64| match mean_ci(v) {
            Some((m, h)) => format!(
                "- {what}: {m:.2}% of a CPU (95% CI {:.2} to {:.2}, {} {n}) against {budget}%: {}",
                m - h,
                m + h,
                v.len(),
                verdict(m, h, budget)
            ),
            None => format!("- {what}: not measured"),
        };
        out.push(line(
            "`gtrace http` at the default budget, traced window less its neighbours",
            &extra(&self.http),
            "rounds",
            5.0,
        ));
        let all: Vec<Period> = self.http.iter().flat_map(|r| r.periods.iter().copied()).collect();
        let within: Vec<f64> = all.iter().map(Period::extra).collect();
        out.push(line(
            "`gtrace http`, attached less detached within each second, for the attached share",
            &within,
            "periods",
            5.0,
        ));
        if let Some((m, h)) = mean_ci(&all.iter().map(|p| (p.on - p.off) / 1e3).collect::<Vec<_>>()) {
            let f = all.iter().map(|p| p.fraction).sum::<f64>() / all.len() as f64;
            let rate = all.iter().map(|p| p.rate).sum::<f64>() / all.len() as f64;
            out.push(format!(
                "  (while attached: {m:.2} +- {h:.2} us a request more; attached {:.0}% of each second; {rate:.0} requests a second)",
                100.0 * f
            ));
        }
        let sham: Vec<f64> = self.http.iter().flat_map(|r| r.sham.iter().map(Period::extra)).collect();
        out.push(line(
            "control: the untraced window after each, split at the cycle's phase and fraction",
            &sham,
            "periods",
            5.0,
        ));
        out.push(line(
            "the wildcard at --budget 2%, settled, traced window less its neighbours",
            &extra(&self.wildcard),
            "rounds",
            2.0,
        ));
        if !self.toggled.is_empty() {
            out.push(line(
                "the wildcard at --budget 2%, settled, toggled fast: traced less untraced",
                &extra(&self.toggled),
                "pairs",
                2.0,
            ));
            let cycled =
                self.toggled.iter().filter(|r| r.said.iter().any(|l| l.contains("duty-cycled instead"))).count();
            let nothing =
                self.toggled.iter().filter(|r| r.said.iter().any(|l| l.contains("what stays costs 0%"))).count();
            out.push(format!(
                "  ({} pairs: {nothing} said \"what stays costs 0%\", {cycled} duty-cycled the rest)",
                self.toggled.len()
            ));
        }
        out
    }
}

/// A decision line cut short: its start and its end (where the fraction is).
fn short(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let cut = match chars.len() {
        0..=200 => line.to_string(),
        n => format!("{} ... {}", chars[..60].iter().collect::<String>(), chars[n - 120..].iter().collect::<String>()),
    };
    cut.replace('|', "/")
}
