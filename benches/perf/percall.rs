//! The cost per call of the hot function (benches/go's `main.hot`) traced each way:
//! untraced, gtrace's rows, bpftrace's (its latency as go-bpf-gen does it, with symbols
//! added at each RET), dlv trace; each run in rounds, interleaved, and its median.

use super::report::{median, PerCall, Report};
use super::{Config, Tools, GTRACE};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One way of running the target: the command line, and an environment.
struct Row {
    name: &'static str,
    argv: Option<Vec<String>>,
    env: Vec<(&'static str, &'static str)>,
    /// Fewer calls than the others (dlv).
    calls: u64,
    missing: Option<String>,
}

/// The per-call rows (`rows`), each run `cfg.rounds` times interleaved, their medians
/// and costs against the untraced row into `report`.
pub(crate) fn per_call(cfg: &Config, work: &Path, target: &Path, tools: &Tools, report: &mut Report) {
    let rows = rows(cfg, work, target, tools);
    let n = cfg.calls;
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

/// Every way of running the target: untraced, gtrace's rows, bpftrace's, dlv's.
fn rows(cfg: &Config, work: &Path, target: &Path, tools: &Tools) -> Vec<Row> {
    let bin = target.display().to_string();
    let mut rows = gtrace_rows(&bin, cfg.calls);
    rows.extend(bpftrace_rows(&bin, cfg.calls, work, target, tools));
    rows.push(dlv_row(&bin, cfg, tools));
    rows
}

/// Untraced, and gtrace's rows: the empty uprobe (the floor, also through perf-event
/// links), an empty entry and return, count(), hist(elapsed).
fn gtrace_rows(bin: &str, n: u64) -> Vec<Row> {
    let run = |calls: u64| format!("{bin} bench {calls}");
    let gtrace = |script: &str, calls: u64| {
        Some(vec![GTRACE.to_string(), "-e".into(), script.to_string(), "-c".into(), run(calls)])
    };
    vec![
        Row {
            name: "untraced",
            argv: Some(vec![bin.to_string(), "bench".into(), n.to_string()]),
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
    ]
}

/// bpftrace's rows: its empty uprobe, count(), and go-bpf-gen's latency (entry and a
/// uprobe at each RET, by tid); each said missing where a tool is.
fn bpftrace_rows(bin: &str, n: u64, work: &Path, target: &Path, tools: &Tools) -> Vec<Row> {
    let run = |calls: u64| format!("{bin} bench {calls}");
    let mut rows = Vec::new();
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
    rows
}

/// dlv trace's row (fewer calls: it stops the target at each).
fn dlv_row(bin: &str, cfg: &Config, tools: &Tools) -> Row {
    match &tools.dlv {
        Some(dlv) => Row {
            name: "dlv trace main.hot",
            argv: Some(vec![
                dlv.display().to_string(),
                "trace".into(),
                "--exec".into(),
                bin.to_string(),
                "^main\\.hot$".into(),
                "--".into(),
                "bench".into(),
                cfg.dlv_calls.to_string(),
            ]),
            env: vec![],
            calls: cfg.dlv_calls,
            missing: None,
        },
        None => Row {
            name: "dlv trace main.hot",
            argv: None,
            env: vec![],
            calls: cfg.dlv_calls,
            missing: Some("dlv is not installed".into()),
        },
    }
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
pub(crate) fn ret_symbols(work: &Path, binary: &Path, function: &str) -> Result<(PathBuf, Vec<String>), String> {
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
