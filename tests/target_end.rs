//! A target that dies of a signal is said, with the signal's name, and a -c command's
//! death is gtrace's exit code as a shell gives it (128 + the signal). The truth is the
//! program's own end when it runs without gtrace (tests/go/e2e, mode `die`: a nil
//! pointer dereference with GOTRACEBACK=crash, SIGTERM or SIGKILL sent to itself), and
//! its own count of the calls made before it died.
//!
//! Needs root (SKIP without it, a failure when CI=true).

mod support;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(60);

/// The signal the program dies of when run alone in `how`.
fn signal_alone(bin: &str, how: &str) -> i32 {
    let status =
        Command::new(bin).args(["die", "3", how]).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap();
    status.signal().unwrap_or_else(|| panic!("{how}: the program did not die of a signal: {status}"))
}

/// Linux's name of a signal, as `kill -l` says it.
fn name_of(signal: i32) -> String {
    let out = Command::new("sh").args(["-c", &format!("kill -l {signal}")]).output().unwrap();
    format!("SIG{}", String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn a_command_that_dies_of_a_signal_is_said_and_is_the_exit_code() {
    if !support::privileged("a_command_that_dies_of_a_signal_is_said_and_is_the_exit_code") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let b = bin.to_str().unwrap();
    for how in ["crash", "term", "kill"] {
        let signal = signal_alone(b, how);
        let r = support::gtrace(&["-e", "on entry main.add { @calls = count() }", "-c", &format!("{b} die 5 {how}")]);
        let name = bin.file_name().unwrap().to_str().unwrap();
        let said = format!("{name} ended by {}", name_of(signal));
        assert_eq!(r.code, 128 + signal, "{how}: {}", r.stderr);
        assert!(r.stderr.lines().any(|l| l == said), "{how}: no `{said}` in:\n{}", r.stderr);
        // The trace itself is whole: every call made before the death counted.
        assert_eq!(support::map_value(&r.stdout, "@calls"), support::truth(&r.stdout, "calls"), "{}", r.stdout);
    }
    // A command that exits is no death: no line, exit 0.
    let r = support::gtrace(&["-e", "on entry main.add { @calls = count() }", "-c", &format!("{b} add 5")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("ended by"), "{}", r.stderr);
}

#[test]
fn a_process_that_dies_of_a_signal_under_p_is_said_when_it_can_be_known() {
    if !support::privileged("a_process_that_dies_of_a_signal_under_p_is_said_when_it_can_be_known") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let b = bin.to_str().unwrap();
    let signal = signal_alone(b, "term");
    let go = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("target-end-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    // This test is the program's parent and collects it only after gtrace ends: gtrace
    // sees the zombie, whose status /proc holds.
    let mut program = Command::new(b)
        .args(["die", "5", "term", go.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(program.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");
    let pid = program.id().to_string();
    let mut gtrace = support::gtrace_command()
        .args(["-e", "on entry main.add { @calls = count() }", "-p", &pid])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(gtrace.stderr.take().unwrap());
    let mut attached = String::new();
    err.read_line(&mut attached).unwrap();
    assert!(attached.starts_with("Attached"), "{attached}");
    std::fs::write(&go, "").unwrap();
    let code = support::wait_bounded(&mut gtrace, BOUND, "gtrace -p");
    let mut stdout = String::new();
    gtrace.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let mut stderr = String::new();
    err.read_to_string(&mut stderr).unwrap();
    let mut own = String::new();
    out.read_to_string(&mut own).unwrap();
    let status = program.wait().unwrap();
    assert_eq!(status.signal(), Some(signal));
    // -p: said, and gtrace's own run was whole, so it exits 0.
    let said = format!("{} ended by {}", bin.file_name().unwrap().to_str().unwrap(), name_of(signal));
    assert!(stderr.lines().any(|l| l == said), "no `{said}` in:\n{stderr}");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(support::map_value(&stdout, "@calls"), support::truth(&own, "calls"), "{stdout}");
    let _ = std::fs::remove_file(&go);
}

/// Ctrl-C in a terminal reaches gtrace and its command (one process group): the command's
/// death by SIGINT is then the stop gtrace was asked for, not news. Exit 0, no line.
#[test]
fn ctrl_c_to_the_process_group_is_a_normal_stop() {
    if !support::privileged("ctrl_c_to_the_process_group_is_a_normal_stop") {
        return;
    }
    use std::os::unix::process::CommandExt;
    let bin = support::go_build("e2e", &[]);
    let mut g = support::gtrace_command()
        .args(["-e", "on entry main.add { @calls = count() }", "-c", &format!("{} hold 3", bin.display())])
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(g.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("calls="), "{line}");
    // SAFETY: signalling the process group this test made.
    assert_eq!(unsafe { libc::kill(-(g.id() as i32), libc::SIGINT) }, 0);
    let code = support::wait_bounded(&mut g, BOUND, "gtrace after Ctrl-C");
    let mut stderr = String::new();
    g.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let mut stdout = String::new();
    out.read_to_string(&mut stdout).unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("ended by"), "{stderr}");
    assert_eq!(support::map_value(&stdout, "@calls"), support::truth(&line, "calls"), "{stdout}");
}
