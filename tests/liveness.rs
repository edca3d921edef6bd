//! Whether a traced process still runs, asked of its `/proc/PID/stat` kept open
//! (`runtime::Liveness`, the -p trace loop's check): a new process that takes the pid of
//! one gone is not taken for it, where asking by the number (`runtime::is_alive`) says
//! the pid is alive; and a -p target that ends after gtrace read it and whose pid a new
//! process of the same binary takes before the attach is said gone, nothing attached to
//! the new one. The kernel hands the pid on when told the last pid it gave
//! (`/proc/sys/kernel/ns_last_pid`), which needs root (SKIP without it, a failure when
//! CI=true).

mod support;

use clap::Parser;
use gtrace::compile::{compile, Options};
use gtrace::gobin::Target;
use gtrace::library::Root;
use gtrace::plan::Bundle;
use gtrace::runtime::{self, is_alive, Liveness};
use gtrace::trace::Process;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `cat`, which runs until its input closes.
fn cat() -> Child {
    Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().expect("cat runs")
}

/// A new process `start` starts with pid `pid`: the kernel told its last pid was the
/// one before (other processes starting meanwhile may take it first: tried again).
fn started_at(pid: u32, start: impl Fn() -> Child) -> Option<Child> {
    for _ in 0..100 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).expect("write ns_last_pid");
        let mut child = start();
        if child.id() == pid {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

#[test]
fn a_process_that_took_the_pid_of_one_gone_is_not_taken_for_it() {
    let test = "a_process_that_took_the_pid_of_one_gone_is_not_taken_for_it";
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return support::skip(test, "setting the next pid (ns_last_pid) needs root");
    }
    let mut first = cat();
    let pid = first.id();
    let watched = Liveness::new(pid);
    assert!(watched.is_alive());
    drop(first.stdin.take());
    first.wait().unwrap();
    assert!(!watched.is_alive(), "a process reaped still alive");
    let mut second = started_at(pid, cat).expect("no new process took the pid in 100 tries");
    assert!(is_alive(pid), "the new process at {pid} not alive by its number");
    assert!(!watched.is_alive(), "the new process at {pid} taken for the one gone");
    drop(second.stdin.take());
    second.wait().unwrap();
}

/// The export program, idle until its input closes.
fn idle(binary: &Path) -> Child {
    let spawned = Command::new(binary).stdin(Stdio::piped()).stdout(Stdio::null()).spawn();
    spawned.expect("the export program runs")
}

/// A -p target read (its identity taken, as the driver takes it), then ended, and its
/// pid taken by a new process of the same binary before the attach: the trace ends
/// before attaching, saying the target is gone, where attaching by the pid would trace
/// the new process (until --duration, then end as if all was well).
#[test]
fn a_target_whose_pid_is_taken_before_the_attach_is_said_gone() {
    let test = "a_target_whose_pid_is_taken_before_the_attach_is_said_gone";
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return support::skip(test, "setting the next pid (ns_last_pid) needs root");
    }
    if !support::privileged(test) {
        return;
    }
    let binary = support::processes::export_program();
    let script = "on entry main.handle { @n = count() }";
    let target = Target::open(&binary).expect("the export program opens");
    let root = Root { name: "<-e>".into(), text: script.into(), dir: None };
    let compiled = compile(root, &target, &Options::default()).unwrap_or_else(|r| panic!("{}", r.render(false)));
    let bundle = Bundle { plan: compiled.plan, object: compiled.object };
    let mut first = idle(&binary);
    let pid = first.id();
    // What the driver reads of a -p process before compiling (driver/scope.rs).
    let alive = Some(Liveness::new(pid));
    let exe = runtime::process_exe(pid).expect("its executable");
    let read_as = runtime::file_guard::FileStamp::of_path(&exe);
    let process = Process {
        binary: exe,
        shown: binary.clone(),
        pid: Some(pid),
        alive,
        command: None,
        cgroup: None,
        cpu_before: None,
        read_as,
    };
    drop(first.stdin.take());
    first.wait().unwrap();
    let mut second = started_at(pid, || idle(&binary)).expect("no new process took the pid in 100 tries");
    let cli = gtrace::cli::Cli::try_parse_from(["gtrace", "-e", script, "-p", &pid.to_string(), "--duration", "2s"]);
    let args = cli.expect("the command line parses").trace;
    let result = gtrace::trace::run(&bundle, target, process, &args);
    let still = is_alive(pid);
    drop(second.stdin.take());
    second.wait().unwrap();
    let said = match result {
        Ok(code) => panic!("the process now at pid {pid} was traced as the one gone (exit {code})"),
        Err(f) => f.render(false),
    };
    assert!(said.contains(&format!("pid {pid} ended before gtrace attached")), "{said}");
    assert!(still, "the new process at {pid} was harmed");
}
