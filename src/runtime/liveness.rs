//! Whether a traced process is still alive, asked at every turn of the trace loop (every
//! 20 ms): its `/proc/PID/stat` kept open and read again in place, one system call,
//! where asking afresh took nine (a signal 0, an open, a stat, five reads, a close). The
//! open file is the process's own, so a new process that takes its pid once it is gone
//! is not taken for it.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::process::{is_alive, ProcStat};

#[derive(Debug)]
pub struct Liveness {
    pid: u32,
    stat: Option<File>,
}

impl Liveness {
    /// Watches `pid` (a process gtrace may not be allowed to open is asked afresh each
    /// time, as `is_alive` does).
    pub fn new(pid: u32) -> Liveness {
        Liveness { pid, stat: File::open(format!("/proc/{pid}/stat")).ok() }
    }

    /// As `is_alive(pid)`: running, not a zombie, not gone.
    pub fn is_alive(&self) -> bool {
        let Some(file) = &self.stat else { return is_alive(self.pid) };
        let mut buf = [0u8; 1024];
        match file.read_at(&mut buf, 0) {
            // Once the process is reaped its files read ESRCH.
            Ok(n) if n > 0 => {
                std::str::from_utf8(&buf[..n]).ok().and_then(ProcStat::parse).is_some_and(|s| s.running())
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks until the child `pid` has ended, leaving it a zombie (not reaped).
    fn until_a_zombie(pid: u32) {
        // SAFETY: waitid writes one siginfo_t we own; WNOWAIT leaves the child unreaped.
        let ret = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        assert_eq!(ret, 0, "waitid: {}", std::io::Error::last_os_error());
    }

    /// Alive while it runs, not once it is a zombie, nor once it is reaped. The child is
    /// `cat`, which runs until its input closes: no step waits for a time to pass.
    #[test]
    fn a_child_is_alive_then_a_zombie_then_gone() {
        use std::process::{Command, Stdio};
        let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().expect("cat runs");
        let watched = Liveness::new(child.id());
        assert!(watched.stat.is_some());
        assert!(watched.is_alive());
        drop(child.stdin.take());
        until_a_zombie(child.id());
        assert!(!is_alive(child.id()), "a zombie taken for alive by is_alive");
        assert!(!watched.is_alive());
        child.wait().unwrap();
        assert!(!watched.is_alive());
    }
}
