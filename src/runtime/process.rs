//! The target process: start a command held before its first instruction (so probes
//! scoped to its pid are attached first), watch it, and look up a running process.

use super::error::RuntimeError;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

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

/// A forked child blocked before `exec` until [`HeldChild::release`].
#[derive(Debug)]
pub struct HeldChild {
    pid: u32,
    /// Write end of the pipe the child waits on; `None` once released.
    go: Option<std::fs::File>,
    /// Read end of the CLOEXEC pipe the child writes `errno` to if exec fails.
    exec_err: Option<std::fs::File>,
    path: PathBuf,
    status: Option<ExitStatus>,
}

/// Forks a child that waits, then executes `argv` (`argv[0]` resolved through `PATH`).
///
/// The child is never orphaned: it asks the kernel for SIGKILL when its parent dies
/// (PR_SET_PDEATHSIG, kept across exec), so it dies with gtrace however gtrace ends,
/// SIGKILL included. The kernel ties that signal to the *thread* that forked: call this
/// from a thread that lives as long as the trace (gtrace calls it from its main thread).
pub fn spawn_held(argv: &[String]) -> Result<HeldChild, RuntimeError> {
    spawn_held_with(argv, false).map(|(child, _)| child)
}

/// The command's output, read by gtrace instead of going to the terminal.
#[derive(Debug)]
pub struct Captured {
    pub stdout: std::fs::File,
    pub stderr: std::fs::File,
}

/// The ends of the pipes a captured child writes to, and /dev/null for its stdin; raw
/// fds made before fork, so that the child only calls dup2.
struct Redirect {
    stdin: i32,
    stdout: (i32, i32),
    stderr: (i32, i32),
}

impl Redirect {
    fn new() -> Result<Redirect, RuntimeError> {
        // SAFETY: a NUL-terminated path and valid flags.
        let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if null < 0 {
            return Err(RuntimeError::Os { action: "open /dev/null", source: io::Error::last_os_error() });
        }
        Ok(Redirect { stdin: null, stdout: pipe()?, stderr: pipe()? })
    }

    /// In the child: stdin from /dev/null, stdout and stderr into the pipes (dup2 clears
    /// close-on-exec on the copies; the originals close at exec).
    ///
    /// SAFETY: to be called in the child of fork only; dup2 is async-signal-safe.
    unsafe fn apply(&self) -> bool {
        libc::dup2(self.stdin, 0) >= 0 && libc::dup2(self.stdout.1, 1) >= 0 && libc::dup2(self.stderr.1, 2) >= 0
    }

    /// In the parent: the read ends, the rest closed.
    fn parent(self) -> Captured {
        // SAFETY: closing fds this process owns; the read ends become owned Files.
        unsafe {
            libc::close(self.stdin);
            libc::close(self.stdout.1);
            libc::close(self.stderr.1);
            use std::os::fd::FromRawFd;
            Captured {
                stdout: std::fs::File::from_raw_fd(self.stdout.0),
                stderr: std::fs::File::from_raw_fd(self.stderr.0),
            }
        }
    }
}

/// `spawn_held`, and with `capture` the command's stdin from /dev/null and its stdout
/// and stderr into pipes that gtrace reads (`--live` holds the terminal).
pub fn spawn_held_with(argv: &[String], capture: bool) -> Result<(HeldChild, Option<Captured>), RuntimeError> {
    let argv0 = argv.first().ok_or(RuntimeError::BadCommand { problem: "empty command" })?;
    let path = resolve_command(argv0)?;
    // Everything the child needs is allocated before fork: after fork in a threaded
    // process the child may only make async-signal-safe calls.
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| RuntimeError::BadCommand { problem: "NUL byte in the command" })?;
    let c_args = argv
        .iter()
        .map(|a| CString::new(OsStr::new(a).as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| RuntimeError::BadCommand { problem: "NUL byte in an argument" })?;
    let mut c_argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    c_argv.push(std::ptr::null());

    let (go_read, go_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let redirect = if capture { Some(Redirect::new()?) } else { None };
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };

    // SAFETY: fork has no memory-safety preconditions; the child branch below only calls
    // async-signal-safe functions (read, write, close, open, getdents64, fcntl, prctl,
    // getppid, dup2, execv, _exit) on data prepared above.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(RuntimeError::Os { action: "fork", source: io::Error::last_os_error() });
    }
    if pid == 0 {
        // SAFETY: child of fork; only async-signal-safe calls on valid fds and buffers.
        unsafe {
            libc::close(go_write);
            libc::close(err_read);
            // Die with the parent; if it already died (before the prctl), never run.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0
                || libc::getppid() != parent
            {
                libc::_exit(127);
            }
            let mut byte = 0u8;
            let n = loop {
                let n = libc::read(go_read, &mut byte as *mut u8 as *mut libc::c_void, 1);
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break n;
            };
            // EOF: gtrace went away (or dropped us) without releasing: never run.
            if n != 1 {
                libc::_exit(127);
            }
            libc::close(go_read);
            if redirect.as_ref().is_some_and(|r| !r.apply()) {
                libc::_exit(127);
            }
            super::child_fds::close_own(err_write);
            libc::execv(c_path.as_ptr(), c_argv.as_ptr());
            let errno: i32 = *libc::__errno_location();
            libc::write(err_write, &errno as *const i32 as *const libc::c_void, 4);
            libc::_exit(127);
        }
    }
    // SAFETY: closing our copies of the child's ends; the others become owned Files.
    let (go, exec_err) = unsafe {
        libc::close(go_read);
        libc::close(err_write);
        use std::os::fd::FromRawFd;
        (std::fs::File::from_raw_fd(go_write), std::fs::File::from_raw_fd(err_read))
    };
    let child = HeldChild { pid: pid as u32, go: Some(go), exec_err: Some(exec_err), path, status: None };
    Ok((child, redirect.map(Redirect::parent)))
}

fn pipe() -> Result<(i32, i32), RuntimeError> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(RuntimeError::Os { action: "pipe2", source: io::Error::last_os_error() });
    }
    Ok((fds[0], fds[1]))
}

impl HeldChild {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The executable the child runs.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lets the child exec its command; returns once exec succeeded, or the reason it
    /// failed.
    pub fn release(&mut self) -> Result<(), RuntimeError> {
        use std::io::{Read, Write};
        let Some(mut go) = self.go.take() else {
            return Ok(());
        };
        go.write_all(&[1]).map_err(|source| RuntimeError::Os { action: "releasing the command", source })?;
        drop(go);
        let Some(mut err) = self.exec_err.take() else {
            return Ok(());
        };
        let mut buf = [0u8; 4];
        // EOF (0 bytes): the CLOEXEC pipe closed on a successful exec.
        let n = loop {
            match err.read(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match n {
            Ok(4) => {
                let errno = i32::from_ne_bytes(buf);
                self.wait();
                Err(RuntimeError::Exec { path: self.path.clone(), source: io::Error::from_raw_os_error(errno) })
            }
            Ok(_) => Ok(()),
            Err(source) => Err(RuntimeError::Os { action: "waiting for exec", source }),
        }
    }

    /// The exit status, if the child has exited (reaping it).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.reap(libc::WNOHANG)
    }

    /// How the child ended, if it has (reaping it).
    pub fn ended(&mut self) -> Option<Ended> {
        Ended::from_wait_status(self.try_wait()?.into_raw())
    }

    /// Waits for the child to exit.
    pub fn wait(&mut self) -> Option<ExitStatus> {
        self.reap(0)
    }

    fn reap(&mut self, flags: i32) -> Option<ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our own child with a valid status pointer.
            let ret = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, flags) };
            if ret < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                if flags & libc::WNOHANG != 0 {
                    return None;
                }
                continue;
            }
            if ret == self.pid as libc::pid_t {
                self.status = Some(ExitStatus::from_raw(status));
            }
            return self.status;
        }
    }

    /// Kills the child (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: signalling our own, not yet reaped, child.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
            self.wait();
        }
    }
}

impl Drop for HeldChild {
    /// A child that has not exited is killed (and reaped): a command gtrace started
    /// never outlives its trace, whichever way the trace ends.
    fn drop(&mut self) {
        self.kill();
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
    fn how_a_child_ended_and_a_zombie_ended() {
        for (script, ended) in [("exit 3", Ended::Exited(3)), ("kill -SEGV $$", Ended::Signaled(libc::SIGSEGV))] {
            let mut child = spawn_held(&["/bin/sh".into(), "-c".into(), script.into()]).unwrap();
            child.release().unwrap();
            // Not reaped yet: a zombie, whose status /proc still holds.
            let pid = child.pid();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while ended_zombie(pid).is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert_eq!(ended_zombie(pid), Some(ended), "{script}");
            child.wait();
            assert_eq!(child.ended(), Some(ended), "{script}");
            assert_eq!(ended_zombie(pid), None, "{script}: reaped, gone");
        }
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGABRT), "SIGABRT");
        assert_eq!(signal_name(libc::SIGSYS), "SIGSYS");
        assert_eq!(signal_name(40), "signal 40");
        assert_eq!(signal_name(0), "signal 0");
    }

    #[test]
    fn held_child_runs_only_after_release() {
        let dir = std::env::temp_dir().join(format!("gtrace-held-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let argv: Vec<String> = vec!["sh".into(), "-c".into(), format!("touch {}", dir.display())];
        let mut child = spawn_held(&argv).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(child.try_wait().is_none());
        assert!(!dir.exists(), "ran before release");
        child.release().unwrap();
        let status = child.wait().unwrap();
        assert!(status.success());
        assert!(dir.exists());
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn a_child_inherits_what_was_passed_down_and_not_what_gtrace_opened() {
        use std::os::fd::AsRawFd;
        let own = std::fs::File::open("/proc/self/status").unwrap();
        // SAFETY: dup of an open descriptor; the copy has no close-on-exec, as a
        // descriptor gtrace's parent passed down would not.
        let passed = unsafe { libc::dup(own.as_raw_fd()) };
        assert!(passed > 2);
        let script = format!("test -e /proc/self/fd/{passed} && ! test -e /proc/self/fd/{}", own.as_raw_fd());
        let mut child = spawn_held(&["sh".into(), "-c".into(), script]).unwrap();
        child.release().unwrap();
        let ended = child.wait().unwrap();
        // SAFETY: the copy made above, closed once.
        unsafe { libc::close(passed) };
        assert!(ended.success(), "{ended:?}");
    }

    #[test]
    fn unreleased_child_is_killed_on_drop() {
        let child = spawn_held(&["sh".to_string(), "-c".to_string(), "true".to_string()]).unwrap();
        let pid = child.pid();
        assert!(is_alive(pid));
        drop(child);
        assert!(!is_alive(pid));
    }

    #[test]
    fn exec_failure_is_reported_after_release() {
        let dir = std::env::temp_dir().join(format!("gtrace-noexec-{}", std::process::id()));
        std::fs::write(&dir, b"\x7fELF garbage").unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut child = spawn_held(&[dir.display().to_string()]).unwrap();
        let err = child.release().unwrap_err();
        assert!(matches!(err, RuntimeError::Exec { .. }), "{err:?}");
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn own_process_is_alive_and_has_an_exe() {
        assert!(is_alive(std::process::id()));
        assert!(process_exe(std::process::id()).is_ok());
        assert!(matches!(process_exe(0x3fff_fff0), Err(RuntimeError::NoSuchProcess { pid: 0x3fff_fff0 })));
        assert!(!is_alive(0x3fff_fff0));
    }
}
