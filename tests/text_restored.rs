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

use std::path::Path;
use std::time::Duration;

use support::code::{bytes_changed, start_holding};
use support::processes::{poll, Gtrace};

/// Probes of three kinds on code the target holds: function entries of a whole package,
/// RETs (`on return`), and a line.
const SCRIPT: &str = r#"
on entry "fmt.(*pp).*" { @calls = count() }
on return "strconv.*" { @returns = count() }
on return main.sleepy { @woke = count() }
"#;

/// N of gtrace's `Attached N probes`.
fn attached_sites(stderr: &str) -> usize {
    let line = stderr.lines().find(|l| l.starts_with("Attached ")).expect("an Attached line");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no count in {line}"))
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
    let (_target, pid) = start_holding(&binary, 10);
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
