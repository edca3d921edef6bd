//! The target process: find a command's executable, watch a process, say how it ended,
//! and look up a running one (held.rs starts a command held before its first
//! instruction).

use super::error::RuntimeError;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The executable `argv0` names: a path if it holds a `/`, else the first executable file
/// of that name in `PATH` (as `execvp` would find it). What is there and cannot run (a
/// directory, a file without execute permission, a FIFO) is named in the error.
pub fn resolve_command(argv0: &str) -> Result<PathBuf, RuntimeError> {
    let not_found = || RuntimeError::CommandNotFound { command: argv0.to_string() };
    if argv0.is_empty() {
        return Err(not_found());
    }
    if argv0.contains('/') {
        let path = PathBuf::from(argv0);
        return match why_not_executable(&path) {
            None => Ok(path),
            Some(Some(what)) => Err(RuntimeError::NotACommand { command: argv0.to_string(), what }),
            Some(None) => Err(not_found()),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut seen = None;
    for path in std::env::split_paths(&search)
        .map(|dir| if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir })
        .map(|dir| dir.join(argv0))
    {
        match why_not_executable(&path) {
            None => return Ok(path),
            Some(Some(what)) if seen.is_none() => seen = Some((path, what)),
            Some(_) => {}
        }
    }
    Err(match seen {
        // Found in PATH, but not something that runs: say what it is, and where.
        Some((path, what)) => RuntimeError::NotACommand { command: path.display().to_string(), what },
        None => not_found(),
    })
}

/// None when `path` is an executable regular file; else what it is (`a directory`, `a
/// regular file without execute permission`), or Some(None) when nothing is there.
fn why_not_executable(path: &Path) -> Option<Option<String>> {
    let Ok(meta) = std::fs::metadata(path) else { return Some(None) };
    if !meta.is_file() {
        return Some(Some(crate::input::kind_of(&meta).to_string()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Some(Some("a regular file without execute permission".to_string()));
    }
    None
}

/// The executable of a running process: the `/proc/PID/exe` link itself, which opens the
/// very file the process runs even if it was deleted or lives in another mount namespace.
/// A process that has none (a zombie, a kernel thread) or hides it (its exe or root is
/// not readable: another user's process without root) is an error that says what the
/// process is and why it cannot be traced.
pub fn process_exe(pid: u32) -> Result<PathBuf, RuntimeError> {
    let link = PathBuf::from(format!("/proc/{pid}/exe"));
    if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(RuntimeError::NoSuchProcess { pid });
    }
    let stat = ProcStat::read(pid);
    let comm = stat.as_ref().map(|s| s.comm.clone()).unwrap_or_else(|| "?".into());
    let not_traceable = |why: String| RuntimeError::NotTraceable { pid, comm: comm.clone(), why };
    if let Some(s) = &stat {
        if !s.running() {
            return Err(not_traceable(
                "it is a zombie: it has exited and waits for its parent to collect it, so it runs no code".into(),
            ));
        }
        if s.flags & PF_KTHREAD != 0 {
            return Err(not_traceable("it is a kernel thread: it runs kernel code, not an executable".into()));
        }
    }
    super::container::readable(pid, &comm)?;
    Ok(link)
}

/// `PF_KTHREAD` in the flags of /proc/PID/stat: a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;

/// What /proc/PID/stat says of a process: its name, state and flags.
pub(super) struct ProcStat {
    comm: String,
    state: char,
    flags: u64,
}

impl ProcStat {
    fn read(pid: u32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Whether it runs: not a zombie, not dead.
    pub(super) fn running(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }

    /// From a stat line.
    pub(super) fn parse(stat: &str) -> Option<ProcStat> {
        // PID (COMM) STATE PPID PGRP SESSION TTY TPGID FLAGS ...; COMM may hold ')'.
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let comm = stat.get(open + 1..close)?.to_string();
        let mut rest = stat.get(close + 1..)?.split_whitespace();
        let state = rest.next()?.chars().next()?;
        let flags = rest.nth(5)?.parse().ok()?;
        Some(ProcStat { comm, state, flags })
    }
}

/// Where `pid` mapped byte 0 of `exe` (matched by device and inode in /proc/PID/maps):
/// with the link address of that byte, the load bias of a PIE. None when not (yet) mapped.
pub fn mapping_start(pid: u32, exe: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(exe).ok()?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|line| {
        // start-end perms offset dev inode path
        let mut f = line.split_whitespace();
        let range = f.next()?;
        let _perms = f.next()?;
        let offset = u64::from_str_radix(f.next()?, 16).ok()?;
        let _dev = f.next()?;
        let inode: u64 = f.next()?.parse().ok()?;
        (offset == 0 && inode == meta.ino()).then(|| u64::from_str_radix(range.split('-').next()?, 16).ok()).flatten()
    })
}

/// The u64 at `addr` in the memory of process `pid` (/proc/PID/mem, read only: the
/// target is never written), `None` when it cannot be read.
pub fn read_u64(pid: u32, addr: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut word = [0u8; 8];
    mem.read_exact_at(&mut word, addr).ok()?;
    Some(u64::from_ne_bytes(word))
}

/// Every process that has `exe` mapped, with where it mapped its byte 0.
pub fn processes_mapping(exe: &Path) -> Vec<(u32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, mapping_start(pid, exe)?)))
        .collect()
}

/// Whether `pid` is a live (not zombie) process.
pub fn is_alive(pid: u32) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid_t <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let ret = unsafe { libc::kill(pid_t, 0) };
    if ret != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    ProcStat::read(pid).is_some_and(|s| s.running())
}

/// How a traced process ended, as far as gtrace can know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (SIGSEGV, SIGABRT, SIGKILL, ...).
    Signaled(i32),
}

impl Ended {
    /// From a status as `waitpid` writes it.
    pub fn from_wait_status(status: i32) -> Option<Ended> {
        if libc::WIFSIGNALED(status) {
            Some(Ended::Signaled(libc::WTERMSIG(status)))
        } else if libc::WIFEXITED(status) {
            Some(Ended::Exited(libc::WEXITSTATUS(status)))
        } else {
            None
        }
    }
}

/// How a process that is not gtrace's child ended: its exit status as `waitpid` would
/// give it, read from field 52 of /proc/PID/stat. Only a zombie still has it (its parent
/// has not collected it yet); once collected, nothing says it, and this is None.
pub fn ended_zombie(pid: u32) -> Option<Ended> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After `(COMM)`, field 3 (the state) comes first: field 52 is the 50th.
    let mut rest = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = rest.next()?;
    if state != "Z" {
        return None;
    }
    Ended::from_wait_status(rest.nth(48)?.parse().ok()?)
}

/// A signal's name (`SIGSEGV`) by its number on Linux (the same on amd64 and arm64).
pub fn signal_name(signal: i32) -> String {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(signal).ok().and_then(|n| NAMES.get(n.checked_sub(1)?)) {
        Some(name) => (*name).to_string(),
        None => format!("signal {signal}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_through_path_and_rejects_unknown() {
        assert!(resolve_command("sh").unwrap().is_absolute());
        assert!(matches!(resolve_command("no-such-command-gtrace"), Err(RuntimeError::CommandNotFound { .. })));
        assert!(matches!(resolve_command("/no/such/file"), Err(RuntimeError::CommandNotFound { .. })));
        let what = |c: &str| match resolve_command(c) {
            Err(RuntimeError::NotACommand { what, .. }) => what,
            other => panic!("{c}: {other:?}"),
        };
        assert_eq!(what("/etc/passwd"), "a regular file without execute permission");
        assert_eq!(what("/tmp/"), "a directory");
        assert_eq!(what("/dev/null"), "a character device");
    }

    #[test]
    fn own_process_is_alive_and_has_an_exe() {
        assert!(is_alive(std::process::id()));
        assert!(process_exe(std::process::id()).is_ok());
        assert!(matches!(process_exe(0x3fff_fff0), Err(RuntimeError::NoSuchProcess { pid: 0x3fff_fff0 })));
        assert!(!is_alive(0x3fff_fff0));
    }
}
