//! A traced process in a container: another mount namespace (and usually another pid
//! namespace and root). gtrace reads and attaches to its executable through
//! `/proc/PID/exe`, which opens the very file it runs from any namespace, even when the
//! container's path now names another file (an upgrade in place) or none; this module
//! names that file as the process does (`/app/server`) and, where it is still there,
//! as the host reaches it (`/proc/PID/root/app/server`: the path `-b` takes to trace every
//! process of that file). Pids are the host's throughout: `-p` takes the host's pid,
//! and the kernel's helpers give eBPF programs the host's pids.

use super::error::RuntimeError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How a process names its executable, and where that is from here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExeNames {
    /// The path the process has for its executable, in its own mount namespace
    /// (`/app/server`); with ` (deleted)` when the kernel says so.
    pub own: PathBuf,
    /// The same file from gtrace's mount namespace, when a path reaches it: `own` itself
    /// in the same namespace and root, else `/proc/PID/root` + `own`.
    pub from_here: Option<PathBuf>,
    /// The process has another mount namespace or root than gtrace (a container).
    pub elsewhere: bool,
}

/// `/proc/PID/exe` and `/proc/PID/root` must both be readable (the kernel lets a
/// process read them for processes it may ptrace: its own user's, or any as root or
/// with CAP_SYS_PTRACE); the error says which one is not, and why.
pub(super) fn readable(pid: u32, comm: &str) -> Result<(), RuntimeError> {
    for (what, name) in [("root", "root directory"), ("exe", "executable")] {
        let path = format!("/proc/{pid}/{what}");
        let Err(e) = std::fs::metadata(&path) else { continue };
        let why = if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
            format!(
                "the kernel refuses access to its {name} ({path}: {e}); reading another user's process needs root or CAP_SYS_PTRACE"
            )
        } else {
            format!("its {name} cannot be read ({path}: {e})")
        };
        return Err(RuntimeError::NotTraceable { pid, comm: comm.to_string(), why });
    }
    Ok(())
}

/// Names `pid`'s executable; None when the kernel will not say (the process ended, or
/// its `/proc` entries are not readable: `readable` says why).
pub fn exe_names(pid: u32) -> Option<ExeNames> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let root = proc.join("root");
    let root_meta = std::fs::metadata(&root).ok()?;
    let own = std::fs::read_link(proc.join("exe")).ok()?;
    let exe = std::fs::metadata(proc.join("exe")).ok()?;
    let same_file = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.dev() == exe.dev() && m.ino() == exe.ino());
    let ours = std::fs::metadata("/").ok();
    let same_root = ours.is_some_and(|m| m.dev() == root_meta.dev() && m.ino() == root_meta.ino());
    let elsewhere = !same_root || !same_namespace(pid, "mnt");
    let candidate = if elsewhere { root.join(own.strip_prefix("/").unwrap_or(&own)) } else { own.clone() };
    let from_here = same_file(&candidate).then_some(candidate);
    Some(ExeNames { own, from_here, elsewhere })
}

/// Whether `pid` is in gtrace's own namespace of `kind` (`mnt`, `pid`, `cgroup`): the
/// same namespace inode. Unknown (unreadable) counts as another.
pub fn same_namespace(pid: u32, kind: &str) -> bool {
    let ns = |p: String| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    match (ns(format!("/proc/self/ns/{kind}")), ns(format!("/proc/{pid}/ns/{kind}"))) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `PROC_PID_INIT_INO`: the inode of the initial pid namespace, the host's.
const PROC_PID_INIT_INO: u64 = 0xEFFF_FFFC;

/// Whether gtrace runs in the host's pid namespace, where the pids it is given and
/// prints are the pids that eBPF sees (in a pod: `hostPID: true`).
pub fn in_host_pid_namespace() -> bool {
    std::fs::metadata("/proc/self/ns/pid").is_ok_and(|m| m.ino() == PROC_PID_INIT_INO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_not_elsewhere() {
        let me = std::process::id();
        readable(me, "test").unwrap();
        let names = exe_names(me).unwrap();
        assert!(!names.elsewhere);
        assert_eq!(names.own, std::env::current_exe().unwrap());
        assert_eq!(names.from_here.as_deref(), Some(names.own.as_path()));
        assert!(same_namespace(me, "mnt"));
    }
}
