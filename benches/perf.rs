//! The performance benchmark of issue 5, in one command:
//!
//!     cargo bench --bench perf              # full: more rounds and calls, writes docs/performance.md
//!     cargo bench --bench perf -- --quick   # a quick look (also writes the file, marked quick)
//!     cargo bench --bench perf -- --governor   # only the budget's breaker, printed (no file)
//!     cargo bench --bench perf -- --ebpf       # only the eBPF programs' own cost (no file)
//!     cargo bench --bench perf -- --server     # only the real server (echo): untraced, two empty uprobes, `gtrace http`, bpftrace
//!     cargo bench --bench perf -- --gomap      # only m[k]'s eBPF cost by map size (no file)
//!     cargo bench --bench perf -- --wildcard   # only the budget on a real server's wildcard, and its settled extra CPU (no file)
//!     cargo bench --bench perf -- --estimate   # only the estimate against a real server's CPU a request (no file)
//!     cargo bench --bench perf -- --startup    # only start-up and RSS on a small binary and Caddy (no file)
//!
//! `GTRACE_BENCH_BIN=PATH` runs the one-section modes (`--governor`, `--server`,
//! `--wildcard`, `--estimate`, `--gomap`, `--ebpf`, `--startup`) with another gtrace binary (a build before a change,
//! to compare two builds back to back on a loaded host).
//!
//! On one Go target (benches/go, a hot `//go:noinline` function that the program times
//! itself, printing ns/call), it measures: untraced; the empty-uprobe floor (gtrace and
//! bpftrace); gtrace count() and hist(elapsed); bpftrace count() and its go-bpf-gen-style
//! latency (entry + a uprobe at each RET, keyed by tid); `dlv trace`; start-up to
//! `Attached` and exit after SIGINT with 1 and 1,000 probes; and `gtrace --check` of a
//! large script against cmd/compile (wall time, peak RSS); the budget's circuit breaker on
//! the hot function (`perf/governor.rs`); a third-party HTTP server's CPU time per
//! request under `gtrace http` against two empty uprobes (`perf/server.rs`). Every number is a median over
//! rounds, run interleaved so that the machine's noise spreads over all rows. A tool that
//! is missing is reported as missing; no number is made up.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON), Go, and for the comparisons bpftrace, objcopy,
//! dlv (`go install github.com/go-delve/delve/cmd/dlv@latest`) and /usr/bin/time.

#[path = "perf/ebpf.rs"]
mod ebpf;
#[path = "perf/estimate.rs"]
mod estimate;
#[path = "perf/gomap.rs"]
mod gomap;
#[path = "perf/governor.rs"]
mod governor;
#[path = "perf/server.rs"]
mod server;
#[path = "perf/settled.rs"]
mod settled;
#[path = "perf/startup.rs"]
mod startup;
#[path = "perf/wildcard.rs"]
mod wildcard;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const GTRACE: &str = env!("CARGO_BIN_EXE_gtrace");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

struct Config {
    quick: bool,
    /// Rounds of every per-call row.
    rounds: usize,
    /// Calls of the hot function per traced run.
    calls: u64,
    /// Calls under dlv trace (a ptrace stop per call).
    dlv_calls: u64,
    /// Rounds of each start/exit row.
    start_rounds: usize,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let cfg = if quick {
        Config { quick, rounds: 3, calls: 20_000, dlv_calls: 200, start_rounds: 3 }
    } else {
        Config { quick, rounds: 7, calls: 100_000, dlv_calls: 1_000, start_rounds: 5 }
    };
    let work = Path::new(ROOT).join("target/bench");
    std::fs::create_dir_all(&work).expect("creating target/bench");
    let target = build_target(&work);
    // The binary the one-section modes run (GTRACE_BENCH_BIN, else the one cargo built).
    let bin: &'static str = match std::env::var("GTRACE_BENCH_BIN") {
        Ok(b) => Box::leak(b.into_boxed_str()),
        Err(_) => GTRACE,
    };
    if std::env::args().any(|a| a == "--governor") {
        let g = governor::measure(bin, &target, quick);
        print!("{}\n{}\n", g.render(), g.goals().join("\n"));
        return;
    }
    if std::env::args().any(|a| a == "--server") {
        let s = server::measure(bin, Path::new(ROOT), &work, quick);
        print!("{}\n{}\n", s.render(), s.goals().join("\n"));
        return;
    }
    if std::env::args().any(|a| a == "--startup") {
        print!("{}", startup::measure(bin, Path::new(ROOT), &work, quick));
        return;
    }
    if std::env::args().any(|a| a == "--wildcard") {
        let w = wildcard::measure(bin, Path::new(ROOT), &work, quick);
        print!("{}\n{}\n", w.render(), w.goals().join("\n"));
        return;
    }
    if std::env::args().any(|a| a == "--estimate") {
        print!("{}", estimate::measure(bin, Path::new(ROOT), &work, quick).render());
        return;
    }
    if std::env::args().any(|a| a == "--gomap") {
        print!("{}", gomap::render(&gomap::measure_all(bin, Path::new(ROOT), &work, quick)));
        return;
    }
    let tools = Tools::find();
    if std::env::args().any(|a| a == "--ebpf") {
        let cases = ebpf_costs(bin, &cfg, &work, &target, &tools);
        print!("{}\n{}\n", ebpf::render(&cases), ebpf::goals(&cases).join("\n"));
        return;
    }
    let mut report = Report::default();
    report.note(format!("tools: {}", tools.describe()));

    per_call(&cfg, &work, &target, &tools, &mut report);
    report.ebpf = ebpf_costs(GTRACE, &cfg, &work, &target, &tools);
    eprintln!("m[k] ...");
    report.gomap = gomap::measure_all(GTRACE, Path::new(ROOT), &work, cfg.quick);
    startup_and_exit(&cfg, &target, &tools, &mut report);
    compiler(&cfg, &work, &mut report);
    eprintln!("the budget's breaker ...");
    report.governor = Some(governor::measure(GTRACE, &target, cfg.quick));
    eprintln!("a real server ...");
    report.server = Some(server::measure(GTRACE, Path::new(ROOT), &work, cfg.quick));

    let text = report.render(&cfg);
    print!("{text}");
    let doc = Path::new(ROOT).join("docs/performance.md");
    let merged = merge_into_doc(&doc, &text);
    std::fs::write(&doc, merged).expect("writing docs/performance.md");
    eprintln!("wrote {}", doc.display());
}

// ---------------------------------------------------------------- tools

struct Tools {
    bpftrace: Option<String>,
    dlv: Option<PathBuf>,
    objcopy: bool,
    time: bool,
}

impl Tools {
    fn find() -> Tools {
        let bpftrace = Command::new("bpftrace")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        let gopath = Command::new("go")
            .args(["env", "GOPATH"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let dlv =
            [PathBuf::from(&gopath).join("bin/dlv"), PathBuf::from("/usr/bin/dlv")].into_iter().find(|p| p.exists());
        let objcopy = Command::new("objcopy").arg("--version").output().is_ok_and(|o| o.status.success());
        let time = Path::new("/usr/bin/time").exists();
        Tools { bpftrace, dlv, objcopy, time }
    }

    fn describe(&self) -> String {
        let dlv = self.dlv.as_ref().map(|p| {
            let v = Command::new(p).arg("version").output().map(|o| String::from_utf8_lossy(&o.stdout).to_string());
            v.ok().and_then(|v| v.lines().find(|l| l.starts_with("Version")).map(str::to_string)).unwrap_or_default()
        });
        format!(
            "bpftrace: {}; dlv: {}; objcopy: {}; /usr/bin/time: {}",
            self.bpftrace.as_deref().unwrap_or("NOT INSTALLED"),
            dlv.as_deref().unwrap_or("NOT INSTALLED"),
            if self.objcopy { "yes" } else { "NOT INSTALLED" },
            if self.time { "yes" } else { "NOT INSTALLED" },
        )
    }
}

/// Builds benches/go into `work`.
fn build_target(work: &Path) -> PathBuf {
    let out = work.join("benchtarget");
    let ok = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(Path::new(ROOT).join("benches/go"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "go build of benches/go failed");
    out
}

// ---------------------------------------------------------------- per-call costs

/// The eBPF programs' own cost per call (benches/perf/ebpf.rs).
fn ebpf_costs(gtrace: &str, cfg: &Config, work: &Path, target: &Path, tools: &Tools) -> Vec<ebpf::Case> {
    let rets =
        if tools.bpftrace.is_some() && tools.objcopy { ret_symbols(work, target, "main.hot").ok() } else { None };
    let rets = rets.map(|(copy, names)| (copy.display().to_string(), names));
    let cases = ebpf::cases(gtrace, &target.display().to_string(), tools.bpftrace.is_some(), rets);
    ebpf::measure_all(cases, cfg.calls.min(100_000), if cfg.quick { 3 } else { 5 })
}

/// One way of running the target: the command line, and an environment.
struct Row {
    name: &'static str,
    argv: Option<Vec<String>>,
    env: Vec<(&'static str, &'static str)>,
    /// Fewer calls than the others (dlv).
    calls: u64,
    missing: Option<String>,
}

fn per_call(cfg: &Config, work: &Path, target: &Path, tools: &Tools, report: &mut Report) {
    let bin = target.display().to_string();
    let run = |calls: u64| format!("{bin} bench {calls}");
    let gtrace = |script: &str, calls: u64| {
        Some(vec![GTRACE.to_string(), "-e".into(), script.to_string(), "-c".into(), run(calls)])
    };
    let n = cfg.calls;
    let mut rows = vec![
        Row {
            name: "untraced",
            argv: Some(vec![bin.clone(), "bench".into(), n.to_string()]),
            env: vec![],
            calls: n,
            missing: None,
        },
        Row {
            name: "gtrace empty `on entry F { }` (floor)",
            argv: gtrace("on entry main.hot { }", n),
            env: vec![],
            calls: n,
            missing: None,
        },
        Row {
            name: "gtrace empty, perf-event link (GTRACE_NO_UPROBE_MULTI)",
            argv: gtrace("on entry main.hot { }", n),
            env: vec![("GTRACE_NO_UPROBE_MULTI", "1")],
            calls: n,
            missing: None,
        },
        Row {
            name: "gtrace empty entry + empty return (2x floor)",
            argv: gtrace("on entry main.hot { } on return main.hot { }", n),
            env: vec![],
            calls: n,
            missing: None,
        },
        Row {
            name: "gtrace count() on entry",
            argv: gtrace("on entry main.hot < count() >", n),
            env: vec![],
            calls: n,
            missing: None,
        },
        Row {
            name: "gtrace hist(elapsed) on return",
            argv: gtrace("on return main.hot < hist(elapsed) >", n),
            env: vec![],
            calls: n,
            missing: None,
        },
    ];
    let bpftrace_missing = tools.bpftrace.is_none().then(|| "bpftrace is not installed".to_string());
    let bpf = |script: String| -> Option<Vec<String>> {
        tools.bpftrace.as_ref().map(|_| vec!["bpftrace".into(), "-e".into(), script, "-c".into(), run(n)])
    };
    rows.push(Row {
        name: "bpftrace empty `uprobe:BIN:main.hot {}` (floor)",
        argv: bpf(format!("uprobe:{bin}:main.hot {{}}")),
        env: vec![],
        calls: n,
        missing: bpftrace_missing.clone(),
    });
    rows.push(Row {
        name: "bpftrace count()",
        argv: bpf(format!("uprobe:{bin}:main.hot {{ @ = count() }}")),
        env: vec![],
        calls: n,
        missing: bpftrace_missing.clone(),
    });
    // go-bpf-gen style: entry + a uprobe at each RET (symbols added with objcopy), by tid.
    let latency = match (&tools.bpftrace, tools.objcopy) {
        (None, _) => Err("bpftrace is not installed".to_string()),
        (_, false) => Err("objcopy is not installed".to_string()),
        _ => ret_symbols(work, target, "main.hot"),
    };
    match latency {
        Ok((copy, rets)) => {
            let c = copy.display().to_string();
            let probes: Vec<String> = rets.iter().map(|r| format!("uprobe:{c}:{r}")).collect();
            let script = format!(
                "uprobe:{c}:main.hot {{ @start[tid] = nsecs; }} {} {{ if (@start[tid]) {{ @lat = hist(nsecs - @start[tid]); delete(@start[tid]); }} }}",
                probes.join(", ")
            );
            rows.push(Row {
                name: "bpftrace latency, go-bpf-gen style (entry + each RET, by tid)",
                argv: Some(vec!["bpftrace".into(), "-e".into(), script, "-c".into(), format!("{c} bench {n}")]),
                env: vec![],
                calls: n,
                missing: None,
            });
        }
        Err(why) => rows.push(Row {
            name: "bpftrace latency, go-bpf-gen style",
            argv: None,
            env: vec![],
            calls: n,
            missing: Some(why),
        }),
    }
    match &tools.dlv {
        Some(dlv) => rows.push(Row {
            name: "dlv trace main.hot",
            argv: Some(vec![
                dlv.display().to_string(),
                "trace".into(),
                "--exec".into(),
                bin.clone(),
                "^main\\.hot$".into(),
                "--".into(),
                "bench".into(),
                cfg.dlv_calls.to_string(),
            ]),
            env: vec![],
            calls: cfg.dlv_calls,
            missing: None,
        }),
        None => rows.push(Row {
            name: "dlv trace main.hot",
            argv: None,
            env: vec![],
            calls: cfg.dlv_calls,
            missing: Some("dlv is not installed".into()),
        }),
    }

    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    let mut failures: Vec<Option<String>> = vec![None; rows.len()];
    for round in 0..cfg.rounds {
        for (i, row) in rows.iter().enumerate() {
            let Some(argv) = &row.argv else { continue };
            // dlv stops the process at every call: a few rounds are enough.
            if row.calls < n && round >= 3 {
                continue;
            }
            match ns_per_call(argv, &row.env, row.calls) {
                Ok(ns) => samples[i].push(ns),
                Err(e) => failures[i] = Some(e),
            }
        }
        eprintln!("per-call round {} of {} done", round + 1, cfg.rounds);
    }
    let untraced = median(&samples[0]).unwrap_or(0.0);
    let floor = median(&samples[1]);
    let mut table = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let med = median(&samples[i]);
        table.push(PerCall {
            name: row.name,
            calls: row.calls,
            rounds: samples[i].len(),
            ns_per_call: med,
            cost: med.map(|m| m - untraced),
            missing: row.missing.clone().or_else(|| if med.is_none() { failures[i].clone() } else { None }),
        });
    }
    report.per_call = table;
    report.floor_cost = floor.map(|f| f - untraced);
}

/// Runs `argv`, returns the ns/call the target printed.
fn ns_per_call(argv: &[String], env: &[(&str, &str)], calls: u64) -> Result<f64, String> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with("ns/call ")).ok_or_else(|| {
        let err = String::from_utf8_lossy(&out.stderr);
        format!("{} printed no ns/call: {}", argv[0], err.lines().rev().take(3).collect::<Vec<_>>().join(" | "))
    })?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let ns: f64 = words.get(1).and_then(|w| w.parse().ok()).ok_or("bad ns/call line")?;
    let seen: u64 = words.get(3).and_then(|w| w.parse().ok()).ok_or("bad ns/call line")?;
    if seen != calls {
        return Err(format!("the target made {seen} calls, not {calls}"));
    }
    Ok(ns)
}

/// A copy of `binary` with a symbol `hot_retK` at each RET of `function` (from `go tool
/// objdump`), each one byte long: bpftrace 0.17 refuses symbols of size 0.
fn ret_symbols(work: &Path, binary: &Path, function: &str) -> Result<(PathBuf, Vec<String>), String> {
    let dump = Command::new("go")
        .args(["tool", "objdump", "-s", &format!("^{}$", function.replace('.', "\\."))])
        .arg(binary)
        .output()
        .map_err(|e| format!("go tool objdump: {e}"))?;
    let text = String::from_utf8_lossy(&dump.stdout);
    let rets: Vec<u64> = text
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == "RET"))
        .filter_map(|l| {
            l.split_whitespace().nth(1).and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        })
        .collect();
    if rets.is_empty() {
        return Err(format!("no RET found in {function}"));
    }
    let data = std::fs::read(binary).map_err(|e| e.to_string())?;
    let text_addr = section_addr(&data, ".text").ok_or("no .text")?;
    let copy = work.join("benchtarget-rets");
    let mut cmd = Command::new("objcopy");
    let names: Vec<String> = (0..rets.len()).map(|i| format!("hot_ret{i}")).collect();
    for (name, addr) in names.iter().zip(&rets) {
        cmd.arg("--add-symbol").arg(format!("{name}=.text:{:#x},function,global", addr - text_addr));
    }
    let ok = cmd.arg(binary).arg(&copy).status().is_ok_and(|s| s.success());
    if !ok {
        return Err("objcopy --add-symbol failed".into());
    }
    let mut bytes = std::fs::read(&copy).map_err(|e| e.to_string())?;
    set_symbol_sizes(&mut bytes, &names, 1).ok_or("cannot set the symbols' sizes")?;
    std::fs::write(&copy, bytes).map_err(|e| e.to_string())?;
    Ok((copy, names))
}

fn section_addr(data: &[u8], name: &str) -> Option<u64> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(data).ok()?;
    Some(file.section_by_name(name)?.address())
}

/// Writes `size` into `st_size` of the ELF64 symbols named `names` in .symtab.
fn set_symbol_sizes(bytes: &mut [u8], names: &[String], size: u64) -> Option<()> {
    use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
    use object::Endianness;
    let (symtab_off, symtab_size, strtab_off) = {
        let file = ElfFile64::<Endianness>::parse(&*bytes).ok()?;
        let e = file.endian();
        let sections = file.elf_header().sections(e, &*bytes).ok()?;
        let (index, symtab) = sections.iter().enumerate().find(|(_, s)| s.sh_type(e) == object::elf::SHT_SYMTAB)?;
        let _ = index;
        let strtab = sections.section(object::SectionIndex(symtab.sh_link(e) as usize)).ok()?;
        (symtab.sh_offset(e) as usize, symtab.sh_size(e) as usize, strtab.sh_offset(e) as usize)
    };
    let mut found = 0;
    for off in (symtab_off..symtab_off + symtab_size).step_by(24) {
        let name_off = u32::from_le_bytes(bytes[off..off + 4].try_into().ok()?) as usize;
        let start = strtab_off + name_off;
        let end = start + bytes[start..].iter().position(|b| *b == 0)?;
        let name = std::str::from_utf8(&bytes[start..end]).ok()?;
        if names.iter().any(|n| n == name) {
            bytes[off + 16..off + 24].copy_from_slice(&size.to_le_bytes());
            found += 1;
        }
    }
    (found == names.len()).then_some(())
}

// ---------------------------------------------------------------- start-up and exit

struct StartExit {
    name: String,
    probes: String,
    attached_ms: Option<f64>,
    ready_ms: Option<f64>,
    exit_ms: Option<f64>,
    total_ms: Option<f64>,
    rounds: usize,
    note: Option<String>,
}

/// Up to 1,000 runtime functions of `binary` whose names both tools take unquoted.
fn runtime_functions(binary: &Path, n: usize) -> Vec<String> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let data = std::fs::read(binary).expect("reading the target");
    let file = object::File::parse(&*data).expect("parsing the target");
    let mut names: Vec<(u64, String)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter_map(|s| Some((s.address(), s.name().ok()?.to_string())))
        .filter(|(_, n)| {
            n.starts_with("runtime.") && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
        })
        .collect();
    names.sort();
    names.dedup_by_key(|n| n.0);
    names.into_iter().take(n).map(|(_, n)| n).collect()
}

fn startup_and_exit(cfg: &Config, target: &Path, tools: &Tools, report: &mut Report) {
    let bin = target.display().to_string();
    let wait = format!("{bin} wait");
    let thousand = runtime_functions(target, 1000);
    let quoted: Vec<String> = thousand.iter().map(|f| format!("\"{f}\"")).collect();
    let g1 = vec![GTRACE.to_string(), "-e".into(), "on entry main.hot { }".into(), "-c".into(), wait.clone()];
    let g1000 = vec![
        GTRACE.to_string(),
        "-e".into(),
        format!("on entry {} {{ @[func] = count() }}", quoted.join(", ")),
        "-c".into(),
        wait.clone(),
    ];
    let mut cases: Vec<(String, String, Option<Vec<String>>, Vec<(&str, &str)>, usize, Option<String>)> = vec![
        ("gtrace".into(), "1".into(), Some(g1), vec![], cfg.start_rounds, None),
        ("gtrace".into(), format!("{}", thousand.len()), Some(g1000.clone()), vec![], cfg.start_rounds, None),
        (
            "gtrace, perf-event links".into(),
            format!("{}", thousand.len()),
            Some(g1000),
            vec![("GTRACE_NO_UPROBE_MULTI", "1")],
            if cfg.quick { 0 } else { 1 },
            cfg.quick.then(|| "skipped in --quick mode (takes minutes)".to_string()),
        ),
    ];
    match &tools.bpftrace {
        Some(_) => {
            cases.push((
                "bpftrace".into(),
                "1".into(),
                Some(vec![
                    "bpftrace".into(),
                    "-e".into(),
                    format!("uprobe:{bin}:main.hot {{}}"),
                    "-c".into(),
                    wait.clone(),
                ]),
                vec![],
                cfg.start_rounds,
                None,
            ));
            let probes: Vec<String> = thousand.iter().map(|f| format!("uprobe:{bin}:{f}")).collect();
            cases.push((
                "bpftrace (BPFTRACE_MAX_PROBES/_BPF_PROGS=2000)".into(),
                format!("{}", thousand.len()),
                Some(vec![
                    "bpftrace".into(),
                    "-e".into(),
                    format!("{} {{ @[probe] = count() }}", probes.join(", ")),
                    "-c".into(),
                    wait.clone(),
                ]),
                vec![("BPFTRACE_MAX_PROBES", "2000"), ("BPFTRACE_MAX_BPF_PROGS", "2000")],
                if cfg.quick { 0 } else { 1 },
                cfg.quick.then(|| "skipped in --quick mode (takes minutes)".to_string()),
            ));
        }
        None => {
            for p in ["1", "1000"] {
                cases.push(("bpftrace".into(), p.into(), None, vec![], 0, Some("bpftrace is not installed".into())));
            }
        }
    }
    for (name, probes, argv, env, rounds, note) in cases {
        let mut att = Vec::new();
        let mut ready = Vec::new();
        let mut exit = Vec::new();
        let mut total = Vec::new();
        let mut note = note;
        if let Some(argv) = &argv {
            for _ in 0..rounds {
                match start_and_stop(argv, &env) {
                    Ok(m) => {
                        if let Some(a) = m.attached {
                            att.push(ms(a));
                        }
                        ready.push(ms(m.ready));
                        exit.push(ms(m.exit));
                        total.push(ms(m.ready + m.exit));
                    }
                    Err(e) => note = Some(e),
                }
            }
            eprintln!("start/exit: {name} with {probes} probes done");
        }
        report.start_exit.push(StartExit {
            name,
            probes,
            attached_ms: median(&att),
            ready_ms: median(&ready),
            exit_ms: median(&exit),
            total_ms: median(&total),
            rounds: exit.len(),
            note,
        });
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct StartStop {
    /// Launch to gtrace's `Attached` line (bpftrace: `Attaching N probes...` comes before
    /// attaching, so it is not counted).
    attached: Option<Duration>,
    /// Launch to the target's first line: the probes are in place and the target runs.
    ready: Duration,
    /// SIGINT to the tracer's exit.
    exit: Duration,
}

/// Launches `argv` (a tracer running `benchtarget wait`), waits for the target's `ready`,
/// sends SIGINT and times the exit.
fn start_and_stop(argv: &[String], env: &[(&str, &str)]) -> Result<StartStop, String> {
    let start = Instant::now();
    let mut child: Child = Command::new(&argv[0])
        .args(&argv[1..])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    let (tx, rx) = mpsc::channel::<(bool, String, Instant)>();
    let readers: Vec<_> = [
        (true, Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>),
        (false, Box::new(child.stderr.take().unwrap())),
    ]
    .into_iter()
    .map(|(is_out, pipe)| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send((is_out, line, Instant::now()));
            }
        })
    })
    .collect();
    drop(tx);
    let mut attached = None;
    let mut ready = None;
    let mut last_err = String::new();
    let deadline = start + Duration::from_secs(120);
    while ready.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, line, at)) if line == "ready" => ready = Some(at - start),
            Ok((false, line, at)) if line.starts_with("Attached") => attached = Some(at - start),
            Ok((false, line, _)) => last_err = line,
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} never started the target: {last_err}", argv[0]));
            }
        }
    }
    // Let the tracer settle into its loop, as a user would before pressing Ctrl-C.
    std::thread::sleep(Duration::from_millis(200));
    // The tracer's children (the target), to make sure they are gone afterwards.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id())).unwrap_or_default();
    let stop = Instant::now();
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let status = child.wait().map_err(|e| e.to_string())?;
    let exit = stop.elapsed();
    for r in readers {
        let _ = r.join();
    }
    let _ = status;
    // gtrace kills its target on exit; whatever tracer this is, make sure it is gone.
    for pid in children.split_whitespace() {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe.file_name().is_some_and(|n| n.to_string_lossy().starts_with("benchtarget")) {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
    Ok(StartStop { attached, ready: ready.unwrap_or_default(), exit })
}

// ---------------------------------------------------------------- the compiler alone

struct CompilerResult {
    binary: String,
    binary_mb: f64,
    probes: usize,
    wall_ms: Option<f64>,
    peak_mb: Option<f64>,
    rounds: usize,
    note: Option<String>,
}

fn compiler(cfg: &Config, work: &Path, report: &mut Report) {
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
    // The script: 200 entry probes on ssa functions with an int parameter (read by name),
    // and one return probe over a wildcard with hist(elapsed).
    let listing = Command::new(GTRACE).args(["-l", "cmd/compile/internal/ssa.*", "-b"]).arg(&big).output();
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

// ---------------------------------------------------------------- the report

struct PerCall {
    name: &'static str,
    calls: u64,
    rounds: usize,
    ns_per_call: Option<f64>,
    /// ns/call minus untraced.
    cost: Option<f64>,
    missing: Option<String>,
}

#[derive(Default)]
struct Report {
    notes: Vec<String>,
    per_call: Vec<PerCall>,
    floor_cost: Option<f64>,
    start_exit: Vec<StartExit>,
    compiler: Option<CompilerResult>,
    governor: Option<governor::Governor>,
    server: Option<server::Server>,
    ebpf: Vec<ebpf::Case>,
    gomap: Vec<gomap::Row>,
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 { s[m] } else { (s[m - 1] + s[m]) / 2.0 })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into())
}

impl Report {
    fn note(&mut self, n: String) {
        self.notes.push(n);
    }

    fn cost_of(&self, prefix: &str) -> Option<f64> {
        self.per_call.iter().find(|r| r.name.starts_with(prefix)).and_then(|r| r.cost)
    }

    fn render(&self, cfg: &Config) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "<!-- BEGIN GENERATED by `cargo bench --bench perf{}` -->",
            if cfg.quick { " -- --quick" } else { "" }
        );
        let _ = writeln!(s, "## Results{}\n", if cfg.quick { " (quick mode: fewer rounds and calls)" } else { "" });
        let _ = writeln!(s, "- date: {}", sh("date -u '+%Y-%m-%d %H:%M UTC'"));
        let _ = writeln!(
            s,
            "- machine: {}; {} CPUs; kernel {}",
            sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs"),
            sh("nproc"),
            sh("uname -r")
        );
        let _ = writeln!(s, "- {}", sh("go version"));
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        let _ = writeln!(
            s,
            "- per-call rounds: {}, {} calls per run (dlv: {}, 3 rounds at most); medians\n",
            cfg.rounds, cfg.calls, cfg.dlv_calls
        );

        let _ = writeln!(s, "### Cost per call of main.hot\n");
        let _ = writeln!(
            s,
            "cost = ns/call traced − ns/call untraced; ratios against gtrace's empty uprobe (the floor).\n"
        );
        let _ = writeln!(s, "| run | rounds | ns/call | cost ns/call | × floor |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|");
        for r in &self.per_call {
            let ratio = match (r.cost, self.floor_cost) {
                (Some(c), Some(f)) if f > 0.0 && r.name != "untraced" => format!("{:.3}", c / f),
                _ => "–".into(),
            };
            let cost = if r.name == "untraced" { "0".into() } else { opt(r.cost, 0) };
            let name = match &r.missing {
                Some(m) => format!("{} — **not measured: {}**", r.name, m),
                None => r.name.to_string(),
            };
            let _ = writeln!(s, "| {name} | {} | {} | {cost} | {ratio} |", r.rounds, opt(r.ns_per_call, 1));
            let _ = r.calls;
        }

        s.push_str(&ebpf::render(&self.ebpf));
        s.push('\n');
        s.push_str(&gomap::render(&self.gomap));

        let _ = writeln!(s, "\n### Start-up and exit (target `benchtarget wait`)\n");
        let _ = writeln!(s, "attached: launch → `Attached` line; running: launch → the target's first line; exit: SIGINT → tracer gone.\n");
        let _ =
            writeln!(s, "| tracer | probes | rounds | attached ms | running ms | exit ms | running + exit ms | note |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---|");
        for r in &self.start_exit {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                r.name,
                r.probes,
                r.rounds,
                opt(r.attached_ms, 1),
                opt(r.ready_ms, 1),
                opt(r.exit_ms, 1),
                opt(r.total_ms, 1),
                r.note.as_deref().unwrap_or("")
            );
        }

        if let Some(c) = &self.compiler {
            let _ = writeln!(s, "\n### The compiler alone: `gtrace --check`\n");
            let _ = writeln!(s, "| binary | size MB | probes in script | rounds | wall ms | peak RSS MB | note |");
            let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---|");
            let _ = writeln!(
                s,
                "| {} | {:.1} | {} | {} | {} | {} | {} |",
                c.binary,
                c.binary_mb,
                c.probes,
                c.rounds,
                opt(c.wall_ms, 0),
                opt(c.peak_mb, 1),
                c.note.as_deref().unwrap_or("")
            );
        }

        if let Some(g) = &self.governor {
            s.push_str(&g.render());
        }
        if let Some(server) = &self.server {
            s.push('\n');
            s.push_str(&server.render());
        }

        let _ = writeln!(s, "\n### Goals\n");
        let floor = self.floor_cost;
        let two = self.cost_of("gtrace empty entry + empty return");
        let count = self.cost_of("gtrace count()");
        let hist = self.cost_of("gtrace hist");
        let bpf_lat = self.cost_of("bpftrace latency");
        let dlv = self.cost_of("dlv trace");
        let goal = |ok: Option<bool>| match ok {
            Some(true) => "**met**",
            Some(false) => "**not met**",
            None => "not measured",
        };
        let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
        let r = ratio(count, floor);
        let _ = writeln!(
            s,
            "- count() within 1.05× of the empty-uprobe floor: {} ({}×)",
            goal(r.map(|r| r <= 1.05)),
            opt(r, 3)
        );
        let r2 = ratio(hist, two);
        let _ = writeln!(
            s,
            "- hist(elapsed) within 1.05× of two empty uprobes: {} ({}×)",
            goal(r2.map(|r| r <= 1.05)),
            opt(r2, 3)
        );
        let r3 = ratio(hist, bpf_lat);
        let _ = writeln!(
            s,
            "- hist(elapsed) cheaper than bpftrace's go-bpf-gen-style latency: {} ({}×)",
            goal(r3.map(|r| r < 1.0)),
            opt(r3, 3)
        );
        let r4 = ratio(dlv, hist.or(count));
        let _ = writeln!(
            s,
            "- at least 100× cheaper per call than dlv trace: {} (dlv / gtrace hist = {}×)",
            goal(r4.map(|r| r >= 100.0)),
            opt(r4, 0)
        );
        let one = self.start_exit.iter().find(|r| r.name == "gtrace" && r.probes == "1");
        let a = one.and_then(|r| r.attached_ms);
        let _ = writeln!(
            s,
            "- 1 probe: `Attached` within 50 ms of launch: {} ({} ms)",
            goal(a.map(|a| a <= 50.0)),
            opt(a, 1)
        );
        let k = self.start_exit.iter().find(|r| r.name == "gtrace" && r.probes != "1");
        let t = k.and_then(|r| r.total_ms);
        let _ = writeln!(
            s,
            "- {} probes attached, run and detached in under 1 s: {} ({} ms)",
            k.map(|k| k.probes.as_str()).unwrap_or("1000"),
            goal(t.map(|t| t < 1000.0)),
            opt(t, 0)
        );
        if let Some(c) = &self.compiler {
            let _ = writeln!(
                s,
                "- --check against a {:.0} MB Go binary under 300 ms and 100 MB: {} ({} ms, {} MB)",
                c.binary_mb,
                goal(c.wall_ms.zip(c.peak_mb).map(|(w, p)| w < 300.0 && p < 100.0)),
                opt(c.wall_ms, 0),
                opt(c.peak_mb, 1)
            );
        }
        for line in ebpf::goals(&self.ebpf) {
            let _ = writeln!(s, "{line}");
        }
        for line in self.governor.iter().flat_map(|g| g.goals()) {
            let _ = writeln!(s, "{line}");
        }
        for line in self.server.iter().flat_map(|g| g.goals()) {
            let _ = writeln!(s, "{line}");
        }
        let _ = writeln!(s, "<!-- END GENERATED -->");
        s
    }
}

fn sh(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Replaces the generated block of `doc` (or appends one), keeping the hand-written text.
fn merge_into_doc(doc: &Path, generated: &str) -> String {
    let old = std::fs::read_to_string(doc).unwrap_or_else(|_| "# Performance\n\n".into());
    let begin = old.find("<!-- BEGIN GENERATED");
    let end = old.find("<!-- END GENERATED -->").map(|e| e + "<!-- END GENERATED -->\n".len());
    match (begin, end) {
        (Some(b), Some(e)) if e > b => {
            format!("{}{}{}", &old[..b], generated, &old[e.min(old.len())..])
        }
        _ => format!("{old}\n{generated}"),
    }
}
