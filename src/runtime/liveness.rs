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

    /// Alive while it runs, not once it is a zombie, nor once it is reaped.
    #[test]
    fn a_child_is_alive_then_a_zombie_then_gone() {
        let mut child = std::process::Command::new("sleep").arg("0.2").spawn().expect("sleep runs");
        let watched = Liveness::new(child.id());
        assert!(watched.stat.is_some());
        assert!(watched.is_alive());
        // A zombie until waited for: wait until its state says so.
        let pid = child.id();
        let zombie = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !is_alive(pid)
        });
        assert!(zombie, "sleep 0.2 still alive after 2 s");
        assert!(!watched.is_alive());
        child.wait().unwrap();
        assert!(!watched.is_alive());
    }
}
