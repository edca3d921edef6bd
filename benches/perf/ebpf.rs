//! What the eBPF programs themselves cost, as the kernel measures them (`run_time_ns` /
//! `run_cnt` of each program, while the benchmark holds `BPF_ENABLE_STATS`): the part of
//! a probe's cost that is gtrace's to make small, and which holds on any machine however
//! slow its uprobe traps (on this VM a trap costs ten times what the programs do, so the
//! per-call ratios of the other table cannot show it).
//!
//! Each tracer runs `benchtarget bench N`; while it runs, the programs it holds (its file
//! descriptors, /proc/PID/fdinfo) are sampled every 25 ms, and the last sample of each is
//! kept. Programs of one name (gtrace loads a uprobe program twice: aya's copy and the
//! multi-uprobe copy that runs) are added together. A call costs the programs' run time
//! over the calls (main.hot has two RETs: a program at each runs for some calls).

use gtrace::runtime::progstats;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One measured case: a tracer, a script, and what it cost a call of main.hot.
pub struct Case {
    pub name: String,
    /// Median over rounds of the programs' ns a call.
    pub per_call: Option<f64>,
    /// Median ns per run of each program, by name.
    pub programs: Vec<(String, f64)>,
    pub rounds: usize,
    pub note: Option<String>,
}

/// What one run measured: ns per run and runs, by program name.
type Sample = BTreeMap<String, (f64, u64)>;

/// Runs `argv` to its end, sampling the programs its process holds.
fn run(argv: &[String]) -> Result<Sample, String> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    let pid = child.id();
    let mut last: BTreeMap<u32, (String, gtrace::runtime::RunStats)> = BTreeMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        for id in progstats::programs_of(pid) {
            if let Ok(s) = progstats::program_stats(id) {
                last.insert(id, s);
            }
        }
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            return Err("the run took over 5 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{} failed: {}", argv[0], err.lines().rev().take(2).collect::<Vec<_>>().join(" | ")));
    }
    let mut by_name: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (name, s) in last.into_values().filter(|(_, s)| s.run_count > 0) {
        let e = by_name.entry(name).or_default();
        e.0 += s.run_ns;
        e.1 += s.run_count;
    }
    Ok(by_name.into_iter().map(|(n, (ns, runs))| (n, (ns as f64 / runs as f64, runs))).collect())
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Measures `argv` (which runs main.hot `calls` times) over `rounds` rounds.
pub fn measure(name: &str, argv: Option<Vec<String>>, calls: u64, rounds: usize) -> Case {
    let mut case = Case { name: name.to_string(), per_call: None, programs: Vec::new(), rounds: 0, note: None };
    let Some(argv) = argv else {
        case.note = Some("the tool is not installed".into());
        return case;
    };
    let _stats = match progstats::hold_run_stats() {
        Ok(s) => s,
        Err(e) => {
            case.note = Some(format!("cannot turn the kernel's BPF statistics on: {e}"));
            return case;
        }
    };
    let mut totals = Vec::new();
    let mut per_program: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..rounds {
        match run(&argv) {
            Ok(sample) => {
                // A program that ran only a few times is not one of the probes (a begin or
                // end program); nor is gtrace's calibration of the trap cost (--stats).
                let probes: Vec<_> = (sample.iter())
                    .filter(|(name, (_, runs))| *runs * 100 >= calls && !name.starts_with("gtrace_calib"))
                    .collect();
                if probes.is_empty() {
                    case.note = Some("no program ran at the calls".into());
                    continue;
                }
                totals.push(probes.iter().map(|(_, (ns, runs))| ns * *runs as f64 / calls as f64).sum());
                for (n, (ns, _)) in probes {
                    per_program.entry(n.clone()).or_default().push(*ns);
                }
            }
            Err(e) => case.note = Some(e),
        }
    }
    case.rounds = totals.len();
    case.per_call = median(&mut totals);
    case.programs = per_program.into_iter().filter_map(|(n, mut v)| Some((n, median(&mut v)?))).collect();
    case
}

/// The cases of the table: gtrace's and bpftrace's empty probe, count() and latency
/// histogram on main.hot.
pub fn cases(
    gtrace: &str,
    target: &str,
    bpftrace: bool,
    rets: Option<(String, Vec<String>)>,
) -> Vec<(String, Option<Vec<String>>)> {
    let run = |calls: &str| format!("{target} bench {calls}");
    let g = |script: &str| Some(vec![gtrace.into(), "-e".into(), script.into(), "-c".into(), run("CALLS")]);
    let b = |script: String| bpftrace.then(|| vec!["bpftrace".into(), "-e".into(), script, "-c".into(), run("CALLS")]);
    let mut out = vec![
        ("gtrace empty `on entry F { }`".to_string(), g("on entry main.hot { }")),
        ("gtrace count()".to_string(), g("on entry main.hot < count() >")),
        // One event a call: the record reserved, written and sent (BPF_RB_NO_WAKEUP until a
        // quarter of the ring buffer waits), drained by the trace loop.
        ("gtrace printf (an event a call)".to_string(), g(r#"on entry main.hot { printf("%d\n", n) }"#)),
        ("gtrace hist(elapsed) (entry + return)".to_string(), g("on return main.hot < hist(elapsed) >")),
        // A named map without keys (the bare ones above are keyed by `func`).
        ("gtrace @c = count(), a map without keys".to_string(), g("on entry main.hot < @c = count() >")),
        (
            "gtrace @h = hist(elapsed), a map without keys (entry + return)".to_string(),
            g("on return main.hot < @h = hist(elapsed) >"),
        ),
        (
            "gtrace count() with hits counted (--stats, --budget: the default with -p)".to_string(),
            Some(vec![
                gtrace.into(),
                "--stats".into(),
                "-e".into(),
                "on entry main.hot < count() >".into(),
                "-c".into(),
                run("CALLS"),
            ]),
        ),
        ("bpftrace empty".to_string(), b(format!("uprobe:{target}:main.hot {{}}"))),
        ("bpftrace count()".to_string(), b(format!("uprobe:{target}:main.hot {{ @ = count() }}"))),
    ];
    let latency = rets.filter(|_| bpftrace).map(|(copy, rets)| {
        let probes: Vec<String> = rets.iter().map(|r| format!("uprobe:{copy}:{r}")).collect();
        let script = format!(
            "uprobe:{copy}:main.hot {{ @start[tid] = nsecs; }} {} {{ if (@start[tid]) {{ @lat = hist(nsecs - @start[tid]); delete(@start[tid]); }} }}",
            probes.join(", ")
        );
        vec!["bpftrace".into(), "-e".into(), script, "-c".into(), format!("{copy} bench CALLS")]
    });
    out.push(("bpftrace latency hist, go-bpf-gen style (by tid)".to_string(), latency));
    out
}

/// Every case, measured with `calls` calls a run.
pub fn measure_all(cases: Vec<(String, Option<Vec<String>>)>, calls: u64, rounds: usize) -> Vec<Case> {
    cases
        .into_iter()
        .map(|(name, argv)| {
            let argv = argv.map(|a| a.into_iter().map(|s| s.replace("CALLS", &calls.to_string())).collect());
            let case = measure(&name, argv, calls, rounds);
            eprintln!("eBPF cost: {name} done");
            case
        })
        .collect()
}

fn find<'a>(cases: &'a [Case], prefix: &str) -> Option<&'a Case> {
    cases.iter().find(|c| c.name.starts_with(prefix))
}

/// The table and its goals, in markdown.
pub fn render(cases: &[Case]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "\n### What the eBPF programs cost (the kernel's run_time_ns / run_cnt)\n");
    let _ = writeln!(
        s,
        "ns a call of main.hot spent in the tracer's programs, beside the trap (which the table above includes); medians over rounds.\n"
    );
    let _ = writeln!(s, "| case | rounds | eBPF ns a call | programs (ns a run) | note |");
    let _ = writeln!(s, "|---|---:|---:|---|---|");
    for c in cases {
        let programs: Vec<String> = c.programs.iter().map(|(n, ns)| format!("{n} {ns:.0}")).collect();
        let per = c.per_call.map_or("–".to_string(), |v| format!("{v:.0}"));
        let _ = writeln!(
            s,
            "| {} | {} | {per} | {} | {} |",
            c.name,
            c.rounds,
            programs.join(", "),
            c.note.as_deref().unwrap_or("")
        );
    }
    s
}

/// The goals of issue 12 on these numbers.
pub fn goals(cases: &[Case]) -> Vec<String> {
    let per = |p: &str| find(cases, p).and_then(|c| c.per_call);
    let goal = |ok: Option<bool>| match ok {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "not measured",
    };
    let count = per("gtrace count()");
    let bcount = per("bpftrace count()");
    let hist = per("gtrace hist(elapsed)");
    let opt = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0}"));
    vec![
        format!(
            "- eBPF: count() at most bpftrace's count(): {} ({} ns against {} ns)",
            goal(count.zip(bcount).map(|(a, b)| a <= b)),
            opt(count),
            opt(bcount)
        ),
        format!(
            "- eBPF: hist(elapsed), entry and return together, at most 300 ns: {} ({} ns)",
            goal(hist.map(|h| h <= 300.0)),
            opt(hist)
        ),
    ]
}
