//! The real-server benchmark: a third-party HTTP server (echo, from the Go module proxy:
//! benches/server) under a bounded local load, and what a request costs the server, in
//! one run, rows interleaved over rounds (medians):
//!
//! - untraced;
//! - two empty entry uprobes (gtrace, at echo's ServeHTTP and the handler `main.hello`:
//!   two hits a request at entries after the stack check, the least any tracer of a
//!   request's latency pays without a return probe);
//! - `gtrace http` (two hits a request too, at net/http's entries);
//! - the same work written for bpftrace (`BPFTRACE_HTTP`: the start by the request's
//!   address, method, path and status read at finishRequest, a count and a latency
//!   histogram by them, each string read once), at the same two functions' first
//!   instructions. Those are the stack check, which the kernel single-steps, where
//!   gtrace attaches after it (an emulated PUSH): bpftrace 0.17 can attach at an offset
//!   (`"sym"+N`), which this row does not use yet, so its CPU row pays two single-steps
//!   where gtrace's pays two emulated traps. Its eBPF row compares like with like, but
//!   for the histograms (bpftrace's log2 against gtrace's log-linear with sum and
//!   extremes) and the slow-request check gtrace makes and bpftrace does not.
//!
//! The server's CPU time is the run time the scheduler counts for each of its threads,
//! in ns (/proc/PID/task/TID/schedstat: the traps and the eBPF programs run on the
//! traced thread, so they are in it; the load runs in another process, so it is not):
//! resolution to the ns where /proc's utime and stime count 10 ms ticks. Beside it, the
//! eBPF programs' own time per request (run_time_ns of the tracer's programs while the
//! benchmark holds `BPF_ENABLE_STATS`). Goal (issue 19): `gtrace http` at most 1.0x the
//! two empty entry uprobes in CPU per request over untraced; the traps' cost (two hits a
//! request in both) counts in both.

use gtrace::runtime::progstats;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct Server {
    pub rounds: usize,
    pub requests: u64,
    /// Per row, when it ran: the medians of the server's CPU ns per request and of the
    /// tracer's eBPF ns per request.
    pub rows: Vec<(&'static str, Option<Sample>)>,
    /// Per row, its cost over untraced (CPU ns per request) in each round that measured both.
    pub costs: Vec<Vec<f64>>,
    pub note: Option<String>,
}

/// What one row measured (or the median over rounds of it).
#[derive(Clone, Copy)]
pub struct Sample {
    pub cpu: f64,
    pub ebpf: Option<f64>,
}

const UNTRACED: &str = "untraced";
const EMPTY: &str = "two empty entry uprobes (gtrace, at echo's ServeHTTP and main.hello)";
const HTTP: &str = "`gtrace http`";
const BPFTRACE: &str = "bpftrace, the same work as `gtrace http` (BPFTRACE_HTTP)";

/// `gtrace http`'s HTTP/1 work for bpftrace, at the start of the same two functions, for
/// Go's register ABI on amd64 (req in DI at serverHandler.ServeHTTP, w in AX at
/// finishRequest) and the field offsets of net/http on Go 1.26 (response.req 8,
/// response.status 120; Request.Method 0, Request.URL 16; URL.Path 56): a bpftrace user
/// types them in. The run is checked: it must count every request under GET /hello 200.
const BPFTRACE_HTTP: &str = r#"
uprobe:BIN:"net/http.serverHandler.ServeHTTP" { @t0[reg("di")] = nsecs; }
uprobe:BIN:"net/http.(*response).finishRequest" {
  $w = reg("ax");
  $req = *(uint64 *)($w + 8);
  $t0 = @t0[$req];
  if ($t0 != 0) {
    $u = *(uint64 *)($req + 16);
    $s = *(int64 *)($w + 120);
    if ($s == 0) { $s = 200; }
    $m = str(*(uint64 *)$req, *(uint64 *)($req + 8));
    $p = str(*(uint64 *)($u + 56), *(uint64 *)($u + 64));
    @http_requests[$m, $p, $s] = count();
    @http_latency[$m, $p] = hist(nsecs - $t0);
    delete(@t0[$req]);
  }
}
"#;

/// A tracer of a row: gtrace with arguments, or bpftrace with a script.
#[derive(Clone, Copy)]
enum Tracer {
    None,
    Gtrace(&'static [&'static str]),
    Bpftrace,
}

/// gtrace's rows run without a budget: what they cost is measured, not what the budget
/// leaves attached (the default 5% detaches even the two empty uprobes at this load on a
/// slow-trap VM).
const EMPTY_ARGS: &[&str] = &[
    "--budget",
    "off",
    "-e",
    r#"on entry main.hello { } on entry "github.com/labstack/echo/v4.(*Echo).ServeHTTP" { }"#,
];
const HTTP_ARGS: &[&str] = &["--budget", "off", "http"];

impl Tracer {
    fn is(self, args: &[&str]) -> bool {
        matches!(self, Tracer::Gtrace(a) if a == args)
    }
}

/// Measures; `quick` runs fewer rounds and requests.
pub fn measure(gtrace: &str, root: &Path, work: &Path, quick: bool) -> Server {
    let (rounds, requests) = if quick { (3, 10_000) } else { (7, 30_000) };
    let mut server = Server { rounds, requests, rows: Vec::new(), costs: Vec::new(), note: None };
    let bin = match build(root, work) {
        Ok(b) => b,
        Err(e) => {
            server.note = Some(e);
            return server;
        }
    };
    let _stats = match progstats::hold_run_stats() {
        Ok(s) => Some(s),
        Err(e) => {
            server.note = Some(format!("no eBPF time: cannot turn the kernel's BPF statistics on: {e}"));
            None
        }
    };
    let bpftrace = Command::new("bpftrace").arg("--version").output().is_ok_and(|o| o.status.success());
    let mut rows = vec![
        (UNTRACED, Tracer::None),
        (EMPTY, Tracer::Gtrace(EMPTY_ARGS)),
        (HTTP, Tracer::Gtrace(HTTP_ARGS)),
        (BPFTRACE, Tracer::Bpftrace),
    ];
    if !bpftrace {
        rows.pop();
        server.note = Some("bpftrace is not installed: its row is not measured".into());
    }
    // A round's samples, by row (None: the row failed that round).
    let mut samples: Vec<Vec<Option<Sample>>> = vec![Vec::new(); rows.len()];
    for round in 0..rounds {
        for (i, (_, tracer)) in rows.iter().enumerate() {
            match one_run(&bin, gtrace, *tracer, requests) {
                Ok(s) => samples[i].push(Some(s)),
                Err(e) => {
                    samples[i].push(None);
                    server.note = Some(e);
                }
            }
        }
        eprintln!("server round {} of {rounds} done", round + 1);
    }
    server.costs = samples.iter().map(|row| paired_costs(&samples[0], row)).collect();
    let flat = |row: &Vec<Option<Sample>>| row.iter().flatten().copied().collect::<Vec<_>>();
    server.rows = rows.iter().zip(&samples).map(|((name, _), s)| (*name, median_sample(&flat(s)))).collect();
    server
}

/// Each round's cost over the empty uprobes' (rounds where those cost nothing left out).
fn ratios(empty: &[f64], costs: &[f64]) -> Vec<f64> {
    empty.iter().zip(costs).filter(|(e, _)| **e > 0.0).map(|(e, c)| c / e).collect()
}

/// A row's cost over untraced in each round (both measured in it, one after the other:
/// the host's load moves less within a round than across them).
fn paired_costs(untraced: &[Option<Sample>], row: &[Option<Sample>]) -> Vec<f64> {
    untraced.iter().zip(row).filter_map(|(u, r)| Some(r.as_ref()?.cpu - u.as_ref()?.cpu)).collect()
}

fn median_sample(s: &[Sample]) -> Option<Sample> {
    let cpu = super::median(&s.iter().map(|s| s.cpu).collect::<Vec<_>>())?;
    let ebpf = super::median(&s.iter().filter_map(|s| s.ebpf).collect::<Vec<_>>());
    Some(Sample { cpu, ebpf })
}

pub fn build(root: &Path, work: &Path) -> Result<PathBuf, String> {
    let out = work.join("benchserver");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(root.join("benches/server"))
        .status()
        .map_err(|e| format!("cannot run go: {e}"))?;
    status.success().then_some(out).ok_or_else(|| "go build of benches/server failed".to_string())
}

/// A child killed (and waited for) when dropped: no bench leaves a server or a gtrace
/// behind, whatever way it ends.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lines of a child's pipe, as they come.
pub fn lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line from `rx` that starts with `prefix`, within 60 s.
pub fn wait_for(rx: &mpsc::Receiver<String>, prefix: &str, what: &str) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) if l.starts_with(prefix) => return Ok(l),
            Ok(l) => last = l,
            Err(_) => return Err(format!("{what} did not say {prefix:?}: {last}")),
        }
    }
}

/// The process's CPU time so far: the scheduler's run time of each of its threads, in ns
/// (the first field of /proc/PID/task/TID/schedstat). Go keeps its threads to the end.
pub fn cpu_ns(pid: u32) -> Result<f64, String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| format!("/proc/{pid}/task: {e}"))?;
    let mut total = 0u64;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        let ns = stat.split_whitespace().next().and_then(|f| f.parse::<u64>().ok());
        total += ns.ok_or_else(|| format!("no run time in {}/schedstat", task.path().display()))?;
    }
    Ok(total as f64)
}

/// The eBPF programs' run time so far, in ns, of the programs process `pid` holds
/// (gtrace's calibration of the trap cost left out).
fn ebpf_ns(pid: u32) -> u64 {
    let stats = progstats::programs_of(pid).into_iter().filter_map(|id| progstats::program_stats(id).ok());
    stats.filter(|(name, _)| !name.starts_with("gtrace_calib")).map(|(_, s)| s.run_ns).sum()
}

pub fn load(bin: &Path, addr: &str, n: u64, conns: u32) -> Result<(), String> {
    let url = format!("http://{addr}/hello");
    let out = Command::new(bin)
        .args(["load", &url, &n.to_string(), &conns.to_string()])
        .output()
        .map_err(|e| format!("cannot run the load: {e}"))?;
    out.status.success().then_some(()).ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The server started, and the address it listens on once it says it.
pub fn start(bin: &Path) -> Result<(Child, String), String> {
    let mut server = Command::new(bin)
        .arg("serve")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the server: {e}"))?;
    let out = lines(server.stdout.take().ok_or("no server stdout")?);
    match wait_for(&out, "listening ", "the server") {
        Ok(line) => Ok((server, line.trim_start_matches("listening ").to_string())),
        Err(e) => {
            let _ = server.kill();
            let _ = server.wait();
            Err(e)
        }
    }
}

/// One server, traced by `tracer`: its CPU ns and the tracer's eBPF ns per request.
fn one_run(bin: &Path, gtrace: &str, tracer: Tracer, requests: u64) -> Result<Sample, String> {
    let (mut server, addr) = start(bin)?;
    let result = traced_run(bin, gtrace, &server, &addr, tracer, requests);
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// A tracer running: the process, and the lines of the pipe it said "attached" on.
type Running = (Child, mpsc::Receiver<String>);

/// The tracer started on `pid` and attached (None: untraced).
fn start_tracer(bin: &Path, gtrace: &str, pid: u32, tracer: Tracer) -> Result<Option<Running>, String> {
    let mut cmd = match tracer {
        Tracer::None => return Ok(None),
        Tracer::Gtrace(args) => {
            let mut c = Command::new(gtrace);
            c.args(args).args(["-p", &pid.to_string()]);
            c
        }
        Tracer::Bpftrace => {
            let mut c = Command::new("bpftrace");
            c.args(["-p", &pid.to_string(), "-e", &BPFTRACE_HTTP.replace("BIN", &bin.display().to_string())]);
            c
        }
    };
    let mut child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| format!("cannot run the tracer: {e}"))?;
    // gtrace says it on stderr, bpftrace on stdout (where it prints its maps at the end).
    let (pipe, prefix): (Box<dyn std::io::Read + Send>, _) = match tracer {
        Tracer::Bpftrace => (Box::new(child.stdout.take().ok_or("no stdout")?), "Attaching"),
        _ => (Box::new(child.stderr.take().ok_or("no stderr")?), "Attached"),
    };
    let rx = lines(pipe);
    if let Err(e) = wait_for(&rx, prefix, "the tracer") {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(Some((child, rx)))
}

fn traced_run(bin: &Path, gtrace: &str, server: &Child, addr: &str, tracer: Tracer, n: u64) -> Result<Sample, String> {
    let pid = server.id();
    let running = start_tracer(bin, gtrace, pid, tracer)?;
    let tracer_pid = running.as_ref().map(|(c, _)| c.id());
    // Warm up (connections, the server's goroutines; bpftrace attaches after it says so),
    // then measure.
    let measured = load(bin, addr, 300, 4).and_then(|_| {
        std::thread::sleep(Duration::from_millis(200));
        let (cpu0, ebpf0) = (cpu_ns(pid)?, tracer_pid.map(ebpf_ns));
        load(bin, addr, n, 4)?;
        let (cpu1, ebpf1) = (cpu_ns(pid)?, tracer_pid.map(ebpf_ns));
        let ebpf = ebpf0.zip(ebpf1).map(|(a, b)| b.saturating_sub(a) as f64 / n as f64);
        Ok(Sample { cpu: (cpu1 - cpu0) / n as f64, ebpf })
    });
    if let Some((child, rx)) = running {
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        // What the tracer printed at its end: on stdout (bpftrace's was read as it came).
        let printed: Vec<String> = match tracer {
            Tracer::Bpftrace => rx.iter().collect(),
            _ => String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect(),
        };
        if measured.is_ok() && (matches!(tracer, Tracer::Bpftrace) || tracer.is(HTTP_ARGS)) {
            check_counted(&printed, n)?;
        }
    }
    measured
}

/// The tracer counted every request (the warm-up's and the measured) under GET /hello
/// 200: `gtrace http` was not detached, and bpftrace's offsets fit this net/http.
fn check_counted(out: &[String], n: u64) -> Result<(), String> {
    let line = out.iter().find(|l| l.starts_with("@http_requests[")).map(String::as_str).unwrap_or_default();
    let counted: u64 = line.rsplit(':').next().and_then(|c| c.trim().parse().ok()).unwrap_or(0);
    if line.starts_with("@http_requests[GET, /hello, 200]") && counted >= n {
        Ok(())
    } else {
        Err(format!("the tracer counted {counted} of over {n} requests ({line:?}): detached, or (bpftrace) offsets that do not fit this net/http"))
    }
}

impl Server {
    /// A row's CPU per request over untraced: the median of its rounds' paired costs.
    fn cost(&self, row: &str) -> Option<f64> {
        let i = self.rows.iter().position(|(n, _)| *n == row)?;
        super::median(self.costs.get(i)?)
    }

    /// `row`'s cost over untraced against two empty uprobes' cost: the median of the
    /// rounds' ratios.
    fn ratio(&self, row: &str) -> Option<f64> {
        let at = |name: &str| self.rows.iter().position(|(n, _)| *n == name).and_then(|i| self.costs.get(i));
        let (empty, costs) = (at(EMPTY)?, at(row)?);
        super::median(&ratios(empty, costs))
    }

    /// The lowest and highest of the rounds' ratios of `row`: how far the host's load
    /// moves the CPU measure.
    fn spread(&self, row: &str) -> Option<(f64, f64)> {
        let at = |name: &str| self.rows.iter().position(|(n, _)| *n == name).and_then(|i| self.costs.get(i));
        let r = ratios(at(EMPTY)?, at(row)?);
        let lo = r.iter().copied().reduce(f64::min)?;
        Some((lo, r.iter().copied().fold(lo, f64::max)))
    }

    pub fn render(&self) -> String {
        let mut s = format!(
            "### A real server: echo under load (benches/server)\n\n{} GET requests over 4 keep-alive \
             connections a run, {} rounds, medians of the server's own CPU time per request (the \
             scheduler's run time of its threads, ns) and of the tracer's eBPF programs' run time \
             per request (BPF stats); cost = traced − untraced in the same round, ratio = cost / \
             the two empty uprobes' cost in the same round (medians over rounds).\n\n| run | CPU ns/request | cost ns/request | ratio | eBPF ns/request |\n\
             |---|---:|---:|---:|---:|\n",
            self.requests, self.rounds
        );
        let num = |v: Option<f64>, d: usize| v.map(|v| format!("{v:.d$}")).unwrap_or_else(|| "–".into());
        for (name, v) in &self.rows {
            let (cost, ratio) = (self.cost(name), self.ratio(name));
            let ebpf = v.and_then(|v| v.ebpf);
            let cpu = num(v.map(|v| v.cpu), 0);
            s += &format!("| {name} | {cpu} | {} | {} | {} |\n", num(cost, 0), num(ratio, 2), num(ebpf, 0));
        }
        if let Some(n) = &self.note {
            s += &format!("\nnote: {n}\n");
        }
        s
    }

    pub fn goals(&self) -> Vec<String> {
        let mut out = match self.ratio(HTTP) {
            Some(r) => {
                let (lo, hi) = self.spread(HTTP).unwrap_or((r, r));
                vec![format!(
                    "- `gtrace http` costs {r:.2}x two empty entry uprobes per request on echo, traps included \
                     in both (rounds from {lo:.2}x to {hi:.2}x; goal: at most 1.0x): {}",
                    if lo <= 0.0 {
                        // A round whose traced run cost less than untraced, or the empty
                        // uprobes nothing: the load's noise is larger than the costs.
                        "cannot be told (a round's ratio at or under 0: noise larger than the costs)"
                    } else if hi <= 1.0 {
                        "met"
                    } else if r <= 1.0 {
                        "met by the median, not in every round"
                    } else {
                        "NOT met"
                    }
                )]
            }
            None => vec!["- `gtrace http` vs two empty uprobes: not measured (see the note)".into()],
        };
        if let Some((h, b)) = self.cost(HTTP).zip(self.cost(BPFTRACE)) {
            out.push(format!("- `gtrace http` costs {:.2}x bpftrace's same work per request", h / b));
        }
        out
    }
}
