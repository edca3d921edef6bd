//! Whether a traced process still runs, asked of its `/proc/PID/stat` kept open
//! (`runtime::Liveness`, the -p trace loop's check): a new process that takes the pid of
//! one gone is not taken for it, where asking by the number (`runtime::is_alive`) says
//! the pid is alive. The kernel hands the pid on when told the last pid it gave
//! (`/proc/sys/kernel/ns_last_pid`), which needs root (SKIP without it, a failure when
//! CI=true).

mod support;

use gtrace::runtime::{is_alive, Liveness};
use std::process::{Child, Command, Stdio};

/// `cat`, which runs until its input closes.
fn cat() -> Child {
    Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().expect("cat runs")
}

/// A new `cat` with pid `pid`: the kernel told its last pid was the one before (other
/// processes starting meanwhile may take it first: tried again).
fn cat_at(pid: u32) -> Option<Child> {
    for _ in 0..100 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).expect("write ns_last_pid");
        let mut child = cat();
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
    let mut second = cat_at(pid).expect("no new process took the pid in 100 tries");
    assert!(is_alive(pid), "the new process at {pid} not alive by its number");
    assert!(!watched.is_alive(), "the new process at {pid} taken for the one gone");
    drop(second.stdin.take());
    second.wait().unwrap();
}
