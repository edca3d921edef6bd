//! Issue 26: how fast gtrace starts and how small it stays, on a small binary (the echo
//! server of benches/server) and on an 80 MB one (Caddy, from the Go module proxy, built
//! once into target/bench/caddy), first run (empty cache) and cached run, side by side
//! with bpftrace attaching a uprobe to the same function in the same run:
//!
//! - one probe without values, one reading a parameter, `gtrace http`: launch to the
//!   `Attached` line (bpftrace: to `Attaching 1 probe...`), peak RSS, and RSS a moment
//!   after attaching (steady), with `-b` (every process of the binary: none needs to run);
//! - `-l '*'`: to the end of the listing, peak RSS;
//! - the first three again with a cache that `-l '*'` filled (every unit and lookup):
//!   a cache file is read only as far as the script needs;
//! - `gtrace http -p` of a running, idle Caddy: launch to `Attached`, first run and
//!   cached, which (unlike `-b`) takes the target's share of a CPU untraced before
//!   attaching (the default budget: `trace::untraced_baseline`);
//! - `-l '*'` on a 69 MB binary (Hugo, from the Go module proxy, built once into
//!   target/bench/hugo), the size the goal names: first run, cached and
//!   `--no-cache`.
//!
//! Each number is the median of `rounds` runs; CPU time (user + system) is printed next
//! to the wall time because a loaded machine stretches the wall time, not the CPU time.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Caddy's version, pinned: an 82 MB binary with DWARF.
const CADDY: &str = "github.com/caddyserver/caddy/v2/cmd/caddy@v2.11.9";
const SERVE: &str = "\"net/http.(*conn).serve\"";

/// One measured run.
#[derive(Clone, Copy, Default)]
struct Sample {
    /// Launch to `Attached` (or to the end, for a listing).
    wall: f64,
    /// User + system CPU seconds of the whole run.
    cpu: f64,
    peak_mb: f64,
    /// RSS 300 ms after attaching (none for a listing).
    steady_mb: Option<f64>,
}

struct Row {
    binary: String,
    case: String,
    tool: String,
    sample: Result<Sample, String>,
}

/// Hugo's version, pinned: a 69 MB binary with DWARF (45,151 functions), the size of
/// binary issue 26's `-l '*'` goal names. Built as it was by hand for the
/// measurements in docs/performance.md: `GOFLAGS=-mod=mod`, without cgo.
const HUGO: &str = "github.com/gohugoio/hugo@v0.150.0";

/// Caddy, built once with `go install` into `work`.
fn caddy(work: &Path) -> Result<PathBuf, String> {
    go_install(work, "caddy", CADDY, &[])
}

/// Hugo, built once with `go install` into `work` (about 20 minutes on the 2-CPU VM
/// with other builds running, its modules' download included; kept like Caddy).
fn hugo(work: &Path) -> Result<PathBuf, String> {
    go_install(work, "hugo", HUGO, &[("GOFLAGS", "-mod=mod")])
}

/// `go install module` into `work` once (the binary `name` there is reused).
fn go_install(work: &Path, name: &str, module: &str, env: &[(&str, &str)]) -> Result<PathBuf, String> {
    let out = work.join(name);
    if out.exists() {
        return Ok(out);
    }
    eprintln!("building {module} (once) ...");
    let ok = Command::new("go")
        .args(["install", module])
        .env("GOBIN", work)
        .env("CGO_ENABLED", "0")
        .envs(env.iter().copied())
        .status()
        .is_ok_and(|s| s.success());
    if ok && out.exists() {
        Ok(out)
    } else {
        Err(format!("go install {module} failed"))
    }
}

/// Runs `argv` under /usr/bin/time; with `until` the start of a line (of stdout or
/// stderr: bpftrace says `Attaching` on stdout) to wait for, then the RSS 300 ms later
/// and SIGINT; without, to the end.
fn run(argv: &[String], env: &[(&str, String)], until: Option<&str>) -> Result<Sample, String> {
    let start = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "gtrace-bench %e %U %S %M"])
        .args(argv)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run /usr/bin/time: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let pipes: Vec<Box<dyn std::io::Read + Send>> =
        vec![Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
    let readers: Vec<_> = pipes
        .into_iter()
        .map(|pipe| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            })
        })
        .collect();
    drop(tx);
    let mut sample = Sample::default();
    let mut last = String::new();
    let mut stats = None;
    if let Some(marker) = until {
        loop {
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(l) if l.starts_with(marker) => break,
                Ok(l) => last = l,
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("no `{marker}`: {last}"));
                }
            }
        }
        sample.wall = start.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(300));
        let tracer = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id())).unwrap_or_default();
        let pid = tracer.split_whitespace().next().unwrap_or("0").to_string();
        sample.steady_mb = rss_mb(&pid);
        let _ = Command::new("kill").args(["-INT", &pid]).status();
    }
    for l in rx {
        if let Some(rest) = l.strip_prefix("gtrace-bench ") {
            stats = Some(rest.to_string());
        }
        last = l;
    }
    let _ = child.wait();
    for r in readers {
        let _ = r.join();
    }
    let stats = stats.ok_or_else(|| format!("no time line: {last}"))?;
    let v: Vec<f64> = stats.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    if v.len() != 4 {
        return Err(format!("time said {stats}"));
    }
    if until.is_none() {
        sample.wall = v[0];
    }
    sample.cpu = v[1] + v[2];
    sample.peak_mb = v[3] / 1024.0;
    Ok(sample)
}

fn rss_mb(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb / 1024.0)
}

fn median(mut samples: Vec<Sample>) -> Sample {
    let mid = |f: fn(&Sample) -> f64, s: &mut Vec<Sample>| {
        s.sort_by(|a, b| f(a).total_cmp(&f(b)));
        f(&s[s.len() / 2])
    };
    let wall = mid(|s| s.wall, &mut samples);
    let cpu = mid(|s| s.cpu, &mut samples);
    let peak_mb = mid(|s| s.peak_mb, &mut samples);
    let steady_mb = samples[0].steady_mb.map(|_| mid(|s| s.steady_mb.unwrap_or(0.0), &mut samples));
    Sample { wall, cpu, peak_mb, steady_mb }
}

/// Every row on `binary`, `rounds` times each, interleaved.
fn rows_for(gtrace: &str, binary: &Path, label: &str, cache: &Path, rounds: usize) -> Vec<Row> {
    let b = binary.display().to_string();
    let home = vec![("XDG_CACHE_HOME", cache.display().to_string())];
    let g = |args: &[&str]| -> Vec<String> {
        let mut v = vec![gtrace.to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        v.extend(["-b".to_string(), b.clone()]);
        v
    };
    let plain = format!("on entry {SERVE} {{ @c = count() }}");
    let param = format!("on entry {SERVE} {{ @c[c.remoteAddr] = count() }}");
    let cases: Vec<(&str, Vec<String>, Option<&str>)> = vec![
        ("1 probe, no values", g(&["-e", &plain]), Some("Attached")),
        ("1 probe, a parameter", g(&["-e", &param]), Some("Attached")),
        ("gtrace http", g(&["http"]), Some("Attached")),
        ("-l '*'", g(&["-l", "*"]), None),
    ];
    let mut rows = Vec::new();
    for (case, argv, until) in &cases {
        let mut first = Vec::new();
        let mut cached = Vec::new();
        let mut listed = Vec::new();
        let mut failure = None;
        for _ in 0..rounds {
            let _ = std::fs::remove_dir_all(cache);
            for (into, _) in [(&mut first, "first"), (&mut cached, "cached")] {
                match run(argv, &home, *until) {
                    Ok(s) => into.push(s),
                    Err(e) => failure = Some(e),
                }
            }
            // With a cache that holds every unit and lookup (what `-l '*'` leaves): a
            // file opened reads only what the script reaches.
            if until.is_some() {
                let _ = std::fs::remove_dir_all(cache);
                let _ = run(&g(&["-l", "*"]), &home, None);
                match run(argv, &home, *until) {
                    Ok(s) => listed.push(s),
                    Err(e) => failure = Some(e),
                }
            }
        }
        let mut tools = vec![("gtrace, first run", first), ("gtrace, cached", cached)];
        if until.is_some() {
            tools.push(("gtrace, cache of -l '*'", listed));
        }
        for (tool, samples) in tools {
            let sample = match samples.len() == rounds {
                true => Ok(median(samples)),
                false => Err(failure.clone().unwrap_or_else(|| "no run".into())),
            };
            rows.push(Row { binary: label.into(), case: case.to_string(), tool: tool.into(), sample });
        }
        if until.is_some() && *case == "1 probe, no values" {
            let script = format!("uprobe:{b}:{SERVE} {{ @c = count(); }}");
            let argv = vec!["bpftrace".to_string(), "-B".into(), "line".into(), "-e".into(), script];
            let samples: Result<Vec<Sample>, String> =
                (0..rounds).map(|_| run(&argv, &[], Some("Attaching"))).collect();
            rows.push(Row {
                binary: label.into(),
                case: case.to_string(),
                tool: "bpftrace".into(),
                sample: samples.map(median),
            });
        }
    }
    rows
}

/// `-l '*'` on `binary`: first run (empty cache: it writes every unit), cached, and
/// `--no-cache`, `rounds` times each, interleaved.
fn listing_rows(gtrace: &str, binary: &Path, label: &str, cache: &Path, rounds: usize) -> Vec<Row> {
    let b = binary.display().to_string();
    let home = vec![("XDG_CACHE_HOME", cache.display().to_string())];
    let argv = |extra: &[&str]| -> Vec<String> {
        let mut v = vec![gtrace.to_string()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(["-l".into(), "*".into(), "-b".into(), b.clone()]);
        v
    };
    let (mut runs, mut failure): ([Vec<Sample>; 3], _) = (Default::default(), None);
    for _ in 0..rounds {
        let _ = std::fs::remove_dir_all(cache);
        for (i, extra) in [&[][..], &[], &["--no-cache"]].into_iter().enumerate() {
            match run(&argv(extra), &home, None) {
                Ok(s) => runs[i].push(s),
                Err(e) => failure = Some(e),
            }
        }
    }
    let tools = ["gtrace, first run", "gtrace, cached", "gtrace, --no-cache"];
    tools
        .into_iter()
        .zip(runs)
        .map(|(tool, samples)| {
            let sample = match samples.len() == rounds {
                true => Ok(median(samples)),
                false => Err(failure.clone().unwrap_or_else(|| "no run".into())),
            };
            Row { binary: label.into(), case: "-l '*'".into(), tool: tool.into(), sample }
        })
        .collect()
}

/// `gtrace http -p` of `caddy respond` on a free local port, idle, once it listens and
/// is over 2 s old (a younger target's share over its life is not taken): first run
/// and cached, `rounds` times each, interleaved.
fn served_rows(gtrace: &str, caddy: &Path, cache: &Path, rounds: usize) -> Vec<Row> {
    let row = |tool: &str, sample| Row {
        binary: "Caddy".into(),
        case: "gtrace http -p (idle Caddy)".into(),
        tool: tool.into(),
        sample,
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port());
    let listen = format!("127.0.0.1:{}", port.unwrap_or(18088));
    let spawned = Command::new(caddy)
        .args(["respond", "--listen", &listen, "--body", "hello"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut server = match spawned {
        Ok(s) => s,
        Err(e) => return vec![row("gtrace", Err(format!("cannot start caddy: {e}")))],
    };
    let up = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        std::net::TcpStream::connect(&listen).is_ok()
    });
    std::thread::sleep(Duration::from_secs(2));
    let home = vec![("XDG_CACHE_HOME", cache.display().to_string())];
    let argv: Vec<String> = vec![gtrace.into(), "http".into(), "-p".into(), server.id().to_string()];
    let (mut first, mut cached, mut failure) = (Vec::new(), Vec::new(), None);
    for _ in 0..rounds.max(1) * usize::from(up) {
        let _ = std::fs::remove_dir_all(cache);
        for into in [&mut first, &mut cached] {
            match run(&argv, &home, Some("Attached")) {
                Ok(s) => into.push(s),
                Err(e) => failure = Some(e),
            }
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    let why = failure.unwrap_or_else(|| format!("caddy did not listen on {listen}"));
    [("gtrace, first run", first), ("gtrace, cached", cached)]
        .into_iter()
        .map(|(tool, samples)| {
            let sample = if up && samples.len() == rounds.max(1) { Ok(median(samples)) } else { Err(why.clone()) };
            row(tool, sample)
        })
        .collect()
}

/// Measures every row, and renders the table with the ratios to bpftrace and the
/// issue's goals.
pub fn measure(gtrace: &str, root: &Path, work: &Path, quick: bool) -> String {
    let rounds = if quick { 1 } else { 3 };
    let cache = work.join("startup-cache");
    let mut rows = Vec::new();
    match super::server::build(root, work) {
        Ok(small) => rows.extend(rows_for(gtrace, &small, "echo server", &cache, rounds)),
        Err(e) => rows.push(Row { binary: "echo server".into(), case: "-".into(), tool: "-".into(), sample: Err(e) }),
    }
    match caddy(work) {
        Ok(big) => {
            rows.extend(rows_for(gtrace, &big, "Caddy", &cache, rounds));
            rows.extend(served_rows(gtrace, &big, &cache, rounds));
        }
        Err(e) => rows.push(Row { binary: "Caddy".into(), case: "-".into(), tool: "-".into(), sample: Err(e) }),
    }
    match hugo(work) {
        Ok(h) => rows.extend(listing_rows(gtrace, &h, "Hugo", &cache, rounds)),
        Err(e) => rows.push(Row { binary: "Hugo".into(), case: "-".into(), tool: "-".into(), sample: Err(e) }),
    }
    let _ = std::fs::remove_dir_all(&cache);
    format!("{}\n{}\n", render(&rows), goals(&rows).join("\n"))
}

/// The goals on the big binary, each with what was measured (wall time to
/// `Attached`, CPU beside it: a loaded machine stretches only the former).
fn goals(rows: &[Row]) -> Vec<String> {
    let on = |binary: &'static str| {
        move |case: &str, tool: &str| {
            rows.iter()
                .find(|r| r.binary == binary && r.case == case && r.tool == tool)
                .and_then(|r| r.sample.as_ref().ok())
        }
    };
    let get = on("Caddy");
    let line = |what: &str, goal: &str, met: Option<bool>, got: String| {
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        format!("goal: {what} {goal}: {verdict} ({got})")
    };
    let secs = |s: &Sample| format!("{:.0} ms wall, {:.0} ms CPU", s.wall * 1e3, s.cpu * 1e3);
    let mut out = Vec::new();
    let plain = get("1 probe, no values", "gtrace, first run");
    out.push(line(
        "one probe without values on Caddy",
        "under 0.1 s and 60 MB",
        plain.map(|s| s.wall < 0.1 && s.peak_mb < 60.0),
        plain.map_or("-".into(), |s| format!("{}, {:.0} MB peak", secs(s), s.peak_mb)),
    ));
    for (tool, limit) in [("gtrace, first run", 0.2), ("gtrace, cached", 0.1)] {
        let http = get("gtrace http", tool);
        out.push(line(
            &format!("gtrace http attached on Caddy, {tool}"),
            &format!("under {limit} s"),
            http.map(|s| s.wall < limit),
            http.map_or("-".into(), secs),
        ));
    }
    let steady = get("gtrace http", "gtrace, cached").and_then(|s| s.steady_mb);
    out.push(line(
        "RSS while tracing (gtrace http on Caddy)",
        "under 50 MB",
        steady.map(|m| m < 50.0),
        steady.map_or("-".into(), |m| format!("{m:.0} MB")),
    ));
    let list = get("-l '*'", "gtrace, first run");
    out.push(line(
        "-l '*' on an 80 MB binary (Caddy; the issue names a 70 MB one)",
        "under 1 s",
        list.map(|s| s.wall < 1.0),
        list.map_or("-".into(), secs),
    ));
    for tool in ["gtrace, first run", "gtrace, cached"] {
        let list = on("Hugo")("-l '*'", tool);
        out.push(line(
            &format!("-l '*' on a 70 MB binary (Hugo), {tool}"),
            "under 1 s",
            list.map(|s| s.wall < 1.0),
            list.map_or("-".into(), secs),
        ));
    }
    out
}

fn render(rows: &[Row]) -> String {
    let mut s = String::from(
        "| binary | case | tool | to Attached (wall) | CPU | peak RSS | steady RSS | vs bpftrace (wall, peak) |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let bpf =
            rows.iter().find(|o| o.binary == r.binary && o.tool == "bpftrace").and_then(|o| o.sample.as_ref().ok());
        let line = match &r.sample {
            Ok(x) => {
                let ratio = match (bpf, r.tool.as_str()) {
                    (Some(b), t) if t != "bpftrace" => {
                        format!("{:.1}x, {:.1}x", x.wall / b.wall, x.peak_mb / b.peak_mb)
                    }
                    _ => "-".into(),
                };
                let steady = x.steady_mb.map_or("-".into(), |m| format!("{m:.0} MB"));
                format!("| {:.0} ms | {:.0} ms | {:.0} MB | {steady} | {ratio} |", x.wall * 1e3, x.cpu * 1e3, x.peak_mb)
            }
            Err(e) => format!("| failed: {e} | | | | |"),
        };
        s.push_str(&format!("| {} | {} | {} {line}\n", r.binary, r.case, r.tool));
    }
    s
}
