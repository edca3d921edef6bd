//! The target's code is the file's again once gtrace ends, however it ends. A uprobe is a
//! breakpoint the kernel writes into the traced process's copy of its code; gtrace never
//! writes the target's memory itself, and every breakpoint must be gone when its probe is.
//! The truth is the executable file: every executable mapping of the running target is
//! compared byte for byte with the file's bytes at the mapping's offset, before gtrace
//! attaches (equal), while it is attached (breakpoints present: the test sees what it
//! checks for), and after gtrace ended by Ctrl-C, SIGTERM, SIGKILL and its own
//! `--duration` (equal again), with uprobe multi-links and with one link a site.
//!
//! Needs root (SKIP without it, a failure when CI=true).

mod support;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::processes::{poll, Gtrace, Lines, Owned};

/// Probes of three kinds on code the target holds: function entries of a whole package,
/// RETs (`on return`), and a line.
const SCRIPT: &str = r#"
on entry "fmt.(*pp).*" { @calls = count() }
on return "strconv.*" { @returns = count() }
on return main.sleepy { @woke = count() }
"#;

/// The executable mappings of `pid` backed by `binary`: (start, end, file offset).
fn code_mappings(pid: u32, binary: &Path) -> Vec<(u64, u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("read the target's maps");
    let name = binary.to_str().unwrap();
    maps.lines()
        .filter(|l| l.ends_with(name))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if !f[1].contains('x') {
                return None;
            }
            let (lo, hi) = f[0].split_once('-').unwrap();
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
            Some((hex(lo), hex(hi), hex(f[2])))
        })
        .collect()
}

/// How many bytes of the target's code differ from the file's.
fn bytes_changed(pid: u32, binary: &Path) -> usize {
    let file = std::fs::read(binary).expect("read the binary");
    let mut mem = File::open(format!("/proc/{pid}/mem")).expect("open the target's memory");
    let mappings = code_mappings(pid, binary);
    assert!(!mappings.is_empty(), "no executable mapping of {} in {pid}", binary.display());
    let mut changed = 0;
    for (lo, hi, off) in mappings {
        let mut live = vec![0u8; (hi - lo) as usize];
        mem.seek(SeekFrom::Start(lo)).unwrap();
        mem.read_exact(&mut live).expect("read the target's code");
        let end = (off as usize + live.len()).min(file.len());
        let on_disk = &file[off as usize..end];
        changed += live.iter().zip(on_disk).filter(|(a, b)| a != b).count();
    }
    changed
}

/// N of gtrace's `Attached N probes`.
fn attached_sites(stderr: &str) -> usize {
    let line = stderr.lines().find(|l| l.starts_with("Attached ")).expect("an Attached line");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no count in {line}"))
}

/// The test program, holding on in main.sleepy for 300 s after ten calls of main.add
/// (it is killed when the test ends).
fn start_target(binary: &Path) -> (Owned, u32) {
    let mut child = Command::new(binary)
        .args(["hold", "10", "300000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the target");
    let out = Lines::of(child.stdout.take().unwrap());
    let pid = child.id();
    out.wait_for(Duration::from_secs(10), |l| l.starts_with("calls=")).expect("the target says its calls");
    (Owned(child), pid)
}

/// Attaches, checks that breakpoints are in, ends gtrace by `how`, and checks that the
/// code is the file's again.
fn attach_and_end(binary: &Path, pid: u32, how: &str, env: &[(&str, &str)]) {
    let pid_arg = pid.to_string();
    let mut args = vec!["-e", SCRIPT, "-p", &pid_arg];
    if how == "duration" {
        args.extend(["--duration", "2s"]);
    }
    let mut argv: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    argv.push(env!("CARGO_BIN_EXE_gtrace").to_string());
    argv.extend(args.iter().map(|a| a.to_string()));
    let mut g = Gtrace::start_command("env", &argv.iter().map(String::as_str).collect::<Vec<_>>());
    g.attached();
    // Each site's breakpoint changes at least one byte (x86's INT3; arm64's BRK is four).
    let sites = attached_sites(&g.err.text());
    let written = bytes_changed(pid, binary);
    assert!(sites >= 20, "{how}: only {sites} sites attached:\n{}", g.err.text());
    assert!(
        written >= sites,
        "{how}: {written} bytes of the target's code changed for {sites} sites:\n{}",
        g.err.text()
    );
    match how {
        "duration" => {
            g.wait();
        }
        "INT" | "TERM" | "KILL" => {
            g.stop(how);
        }
        _ => unreachable!(),
    }
    // The kernel removes a breakpoint when the last reference to its probe goes; after a
    // SIGKILL that is the exit's closing of gtrace's files, which may finish a moment later.
    let restored = poll(Duration::from_secs(10), || (bytes_changed(pid, binary) == 0).then_some(()));
    assert!(
        restored.is_some(),
        "{how}: {} bytes of the target's code still differ from the file after gtrace ended:\n{}",
        bytes_changed(pid, binary),
        g.err.text()
    );
}

fn every_way_of_ending(test: &str, env: &[(&str, &str)]) {
    if !support::privileged(test) {
        return;
    }
    let binary = support::go_build("e2e", &[]);
    let (_target, pid) = start_target(&binary);
    assert_eq!(bytes_changed(pid, &binary), 0, "the target's code differs from its file before any trace");
    for how in ["INT", "TERM", "KILL", "duration"] {
        attach_and_end(&binary, pid, how, env);
    }
    // The target lives on, untouched.
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the target died");
}

#[test]
fn the_targets_code_is_the_files_again_after_every_end() {
    every_way_of_ending("the_targets_code_is_the_files_again_after_every_end", &[]);
}

#[test]
fn the_targets_code_is_the_files_again_with_a_link_a_site() {
    every_way_of_ending("the_targets_code_is_the_files_again_with_a_link_a_site", &[("GTRACE_NO_UPROBE_MULTI", "1")]);
}
