//! What `m[k]` costs in the probe, as the kernel measures the program (`--stats`' eBPF
//! ns a hit, from `run_time_ns` / `run_cnt`): benches/gomap looks keys up (half present,
//! half absent) in one map of 10, 1,000, 100,000 or 1,000,000 entries, integer or
//! string keys (`request-path-N`, 14 to 19 bytes), built by the local Go (swiss tables)
//! and by go1.23.12 (buckets), and the local build again with GODEBUG=cpu.aes=off (the
//! runtime's memhash, which the probe then computes). Beside each, the same probe without `m[k]` (`sum(k)` of
//! an integer key; `sum(len(k))` of a string key): the difference is the lookup's own
//! cost. All rows come from one run, so they compare; no row is a goal checked by a test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The map sizes measured.
const SIZES: [u64; 4] = [10, 1_000, 100_000, 1_000_000];

/// One row: a layout, a key kind, a size, and the probe's eBPF ns a hit with and
/// without `m[k]`.
pub struct Row {
    pub layout: &'static str,
    pub kind: &'static str,
    pub size: u64,
    pub with_lookup: Result<f64, String>,
    pub without: Result<f64, String>,
}

/// Builds benches/gomap with `toolchain` into `work`.
fn build(root: &Path, work: &Path, toolchain: &str) -> Result<PathBuf, String> {
    let out = work.join(format!("gomapbench-{toolchain}"));
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(root.join("benches/gomap"))
        .env("GOTOOLCHAIN", toolchain)
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", "0")
        .output()
        .map_err(|e| format!("go build: {e}"))?;
    if !status.status.success() {
        return Err(format!("go build with {toolchain}: {}", String::from_utf8_lossy(&status.stderr)));
    }
    Ok(out)
}

/// The eBPF ns a hit `--stats` prints for the probe on `function`.
fn ebpf_per_hit(stderr: &str, function: &str) -> Result<f64, String> {
    let row = format!("on entry {function} ");
    let line = stderr.lines().find(|l| l.starts_with(&row)).ok_or_else(|| format!("no --stats row: {stderr}"))?;
    let cell = line.split_whitespace().nth(4).ok_or("a short --stats row")?;
    let (number, scale) = match cell {
        c if c.ends_with("ns") => (&c[..c.len() - 2], 1.0),
        c if c.ends_with("us") => (&c[..c.len() - 2], 1e3),
        c if c.ends_with("µs") => (&c[..c.len() - "µs".len()], 1e3),
        c if c.ends_with("ms") => (&c[..c.len() - 2], 1e6),
        c => return Err(format!("eBPF/hit `{c}`")),
    };
    number.parse::<f64>().map(|n| n * scale).map_err(|e| format!("eBPF/hit `{cell}`: {e}"))
}

/// Runs gtrace with `script` on the bench program and reads the probe's eBPF ns a hit.
fn measure(
    gtrace: &str,
    bin: &Path,
    kind: &str,
    size: u64,
    calls: u64,
    script: &str,
    godebug: &str,
) -> Result<f64, String> {
    let command = format!("{} {kind} {size} {calls}", bin.display());
    let out = Command::new(gtrace)
        .args(["--stats", "-e", script, "-c", &command])
        .env("GODEBUG", godebug)
        .output()
        .map_err(|e| format!("gtrace: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || stderr.contains("skipped") {
        return Err(format!("gtrace: {}", stderr.lines().rev().take(3).collect::<Vec<_>>().join(" | ")));
    }
    let function = if kind == "int" { "main.lookupInt" } else { "main.lookupStr" };
    ebpf_per_hit(&stderr, function)
}

/// Every row: both layouts, both key kinds, every size.
pub fn measure_all(gtrace: &str, root: &Path, work: &Path, quick: bool) -> Vec<Row> {
    let calls = if quick { 20_000 } else { 200_000 };
    let mut rows = Vec::new();
    let variants = [("swiss", "local", ""), ("buckets", "go1.23.12", ""), ("swiss, memhash", "local", "cpu.aes=off")];
    for (layout, toolchain, godebug) in variants {
        let bin = build(root, work, toolchain);
        for kind in ["int", "str"] {
            let (lookup, plain) = match kind {
                "int" => ("on entry main.lookupInt { @s = sum(m[k]) }", "on entry main.lookupInt { @s = sum(k) }"),
                _ => ("on entry main.lookupStr { @s = sum(m[k]) }", "on entry main.lookupStr { @s = sum(len(k)) }"),
            };
            for size in SIZES {
                let run = |script| match &bin {
                    Ok(b) => measure(gtrace, b, kind, size, calls, script, godebug),
                    Err(e) => Err(e.clone()),
                };
                let row = Row { layout, kind, size, with_lookup: run(lookup), without: run(plain) };
                eprintln!("m[k]: {layout} {kind} {size} done");
                rows.push(row);
            }
        }
    }
    rows
}

/// The table, in markdown.
pub fn render(rows: &[Row]) -> String {
    let mut s = String::from(
        "### m[k] in the probe (eBPF ns a hit, `--stats`)\n\n\
         | layout | keys | entries | with m[k] | without | m[k] itself |\n|---|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let cell = |v: &Result<f64, String>| match v {
            Ok(ns) => format!("{ns:.0} ns"),
            Err(e) => format!("n/a ({})", e.chars().take(60).collect::<String>()),
        };
        let diff = match (&r.with_lookup, &r.without) {
            (Ok(a), Ok(b)) => format!("{:.0} ns", a - b),
            _ => "n/a".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.layout,
            r.kind,
            r.size,
            cell(&r.with_lookup),
            cell(&r.without),
            diff
        ));
    }
    s
}
