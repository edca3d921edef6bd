//! A command started held before its first instruction (so probes scoped to its pid are
//! attached first), released, waited for, and never outliving gtrace.

use super::error::RuntimeError;
use super::process::{resolve_command, Ended};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

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
    use crate::runtime::process::{ended_zombie, is_alive, signal_name};
    use std::os::unix::fs::PermissionsExt;

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
}
