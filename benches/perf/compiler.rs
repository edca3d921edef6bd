//! The compiler alone: `gtrace --check` of a large script (200 entry probes and a
//! wildcard's return probe) against cmd/compile built with DWARF, its wall time and peak
//! RSS under /usr/bin/time.

use super::report::{median, Report};
use super::{ms, Config, GTRACE};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

pub(crate) struct CompilerResult {
    pub(crate) binary: String,
    pub(crate) binary_mb: f64,
    pub(crate) probes: usize,
    pub(crate) wall_ms: Option<f64>,
    pub(crate) peak_mb: Option<f64>,
    pub(crate) rounds: usize,
    pub(crate) note: Option<String>,
}

pub(crate) fn compiler(cfg: &Config, work: &Path, report: &mut Report) {
    let big = work.join("compile");
    if !big.exists() {
        eprintln!("building cmd/compile with DWARF (once) ...");
        let ok =
            Command::new("go").args(["build", "-o"]).arg(&big).arg("cmd/compile").status().is_ok_and(|s| s.success());
        if !ok {
            report.compiler = Some(CompilerResult {
                binary: "cmd/compile".into(),
                binary_mb: 0.0,
                probes: 0,
                wall_ms: None,
                peak_mb: None,
                rounds: 0,
                note: Some("go build cmd/compile failed".into()),
            });
            return;
        }
    }
    let binary_mb = std::fs::metadata(&big).map(|m| m.len() as f64 / 1e6).unwrap_or(0.0);
    let (script, probes) = large_script(&big);
    let path = work.join("large.gt");
    std::fs::write(&path, &script).expect("writing the script");
    let mut wall = Vec::new();
    let mut peak = Vec::new();
    let mut note = None;
    let rounds = if cfg.quick { 3 } else { 7 };
    for _ in 0..rounds {
        let started = Instant::now();
        let out = Command::new("/usr/bin/time")
            .args(["-f", "maxrss_kb %M"])
            .arg(GTRACE)
            .arg("--check")
            .arg(&path)
            .arg("-b")
            .arg(&big)
            .output();
        let elapsed = started.elapsed();
        match out {
            Ok(o) if o.status.success() => {
                wall.push(ms(elapsed));
                let err = String::from_utf8_lossy(&o.stderr);
                if let Some(kb) =
                    err.lines().find_map(|l| l.strip_prefix("maxrss_kb ")).and_then(|v| v.trim().parse::<f64>().ok())
                {
                    peak.push(kb / 1024.0);
                }
            }
            Ok(o) => {
                note = Some(format!(
                    "--check failed: {}",
                    String::from_utf8_lossy(&o.stderr).lines().take(4).collect::<Vec<_>>().join(" | ")
                ))
            }
            Err(e) => note = Some(format!("cannot run /usr/bin/time: {e}")),
        }
    }
    report.compiler = Some(CompilerResult {
        binary: "cmd/compile (go build, with DWARF)".into(),
        binary_mb,
        probes: probes + 1,
        wall_ms: median(&wall),
        peak_mb: median(&peak),
        rounds: wall.len(),
        note,
    });
}

/// The script: 200 entry probes on ssa functions with an int parameter (read by name),
/// and one return probe over a wildcard with hist(elapsed); and how many entry probes.
fn large_script(big: &Path) -> (String, usize) {
    let listing = Command::new(GTRACE).args(["-l", "cmd/compile/internal/ssa.*", "-b"]).arg(big).output();
    let listing = listing.map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
    let mut script = String::new();
    let mut probes = 0;
    for line in listing.lines() {
        // `NAME(params) (results)`; a pointer receiver's `(*T)` is part of NAME.
        let Some(open) =
            line.char_indices().find(|&(i, c)| c == '(' && !line[i + 1..].starts_with('*')).map(|(i, _)| i)
        else {
            continue;
        };
        let (name, rest) = (&line[..open], &line[open + 1..]);
        if name.contains(['[', ' ', '"']) {
            continue;
        }
        let params = rest.split(')').next().unwrap_or("");
        let Some(param) = params.split(", ").find_map(|p| {
            let w: Vec<&str> = p.split_whitespace().collect();
            (w.len() >= 2
                && matches!(w[1], "int" | "int64" | "int32")
                && w[0].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .then(|| w[0].to_string())
        }) else {
            continue;
        };
        let _ = writeln!(script, "on entry \"{name}\" {{ @calls[func] = count(); @sum[func] = sum({param}) }}");
        probes += 1;
        if probes == 200 {
            break;
        }
    }
    script.push_str("on return \"cmd/compile/internal/ssa.(*Func).*\" { @lat[func] = hist(elapsed) }\n");
    (script, probes)
}
