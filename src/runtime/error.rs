//! Every way the runtime can fail, with a hint for what the user should do about it.

use std::io;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    /// The kernel verifier rejected a program; `log` is the whole verifier log.
    #[error("the kernel verifier rejected program `{program}`")]
    Verifier { program: String, log: String },

    /// The kernel refused an operation for lack of privileges.
    #[error("permission denied while {action}")]
    Permission {
        action: String,
        #[source]
        source: io::Error,
    },

    /// The object could not be parsed or its maps created.
    #[error("cannot load the BPF object")]
    Load {
        #[source]
        source: Box<aya::EbpfError>,
    },

    /// A kfunc call of the object could not be linked to the running kernel.
    #[error("cannot link the call of kernel function `{function}`: {problem}")]
    Kfunc { function: String, problem: &'static str },

    /// A program of the plan is missing from the object, or has the wrong kind.
    #[error("program `{program}` {problem}")]
    BadProgram { program: String, problem: &'static str },

    /// Loading a program failed for a reason other than the verifier or privileges.
    #[error("cannot load program `{program}`")]
    ProgramLoad {
        program: String,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },

    /// Attaching a probe failed.
    #[error("cannot attach a uprobe to {function} at file offset {offset:#x} of {}", binary.display())]
    Attach {
        function: String,
        offset: u64,
        binary: PathBuf,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },

    /// A link with fewer sites could not replace one the budget cut down: the program's
    /// other `sites` were detached with it.
    #[error("cannot reattach `{program}` at its {sites} other probe points")]
    Reattach {
        program: String,
        sites: usize,
        #[source]
        source: Box<RuntimeError>,
    },

    /// A cut whose smaller link could not be attached (`reattach`, its `sites` detached
    /// with it) could not end the handover of the links it replaced either.
    #[error("cannot end the handover of `{program}`'s links, after its {sites} other probe points could not be reattached ({reattach})")]
    HandoverAfterReattach {
        program: String,
        sites: usize,
        reattach: String,
        #[source]
        source: Box<RuntimeError>,
    },

    /// The traced executable could not be opened to attach probes to it.
    #[error("cannot open {} to attach probes to it", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Something gtrace cannot do (yet).
    #[error("unsupported: {what}")]
    Unsupported { what: String },

    /// No map of that name in the object (or the plan).
    #[error("no map `{map}` in the object")]
    NoSuchMap { map: String },

    /// A BPF map syscall failed.
    #[error("{op} on map `{map}` failed")]
    MapSyscall {
        map: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },

    /// The ring buffer could not be set up.
    #[error("cannot open the event ring buffer `{map}`")]
    RingBuf {
        map: String,
        #[source]
        source: Box<aya::maps::MapError>,
    },

    /// Waiting for events failed.
    #[error("waiting for events failed")]
    Poll {
        #[source]
        source: io::Error,
    },

    /// gtrace's own trigger functions (for `on begin`/`on end`/`on interval`) were not found
    /// in its memory map.
    #[error("cannot find gtrace's own trigger function `{function}` in /proc/self/maps")]
    TriggerNotFound { function: &'static str },

    /// The file to attach to is not the one gtrace read and compiled for (written over
    /// in place, or replaced, meanwhile).
    #[error("{} changed while gtrace read it: the probes were placed for what it was", path.display())]
    ChangedSinceRead { path: PathBuf },

    /// A `-p PID` that names no process.
    #[error("no process with pid {pid}")]
    NoSuchProcess { pid: u32 },

    /// The `-p PID` process ended after gtrace read it and before the probes were
    /// attached (a process now at that pid is another one: nothing is attached to it).
    #[error("pid {pid} ended before gtrace attached: nothing was attached")]
    EndedBeforeAttach { pid: u32 },

    /// A `-p PID` whose process has no executable to trace, or hides it.
    #[error("cannot trace pid {pid} ({comm}): {why}")]
    NotTraceable { pid: u32, comm: String, why: String },

    /// The `-c` command is not an executable file, nor found in PATH.
    #[error("command not found: {command}")]
    CommandNotFound { command: String },

    /// The `-c` command names something that cannot run.
    #[error("cannot run `{command}`: it is {what}")]
    NotACommand { command: String, what: String },

    /// The command could not be executed.
    #[error("cannot execute {}", path.display())]
    Exec {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The `-c` command's file was replaced (renamed over) after the probes were
    /// attached to it and before the command started: it runs a file without probes.
    #[error(
        "{} was replaced after gtrace attached its probes to it: the command (pid {pid}) started another file, which \
         nothing traces; the command was ended",
        path.display()
    )]
    Replaced { path: PathBuf, pid: u32 },

    /// An empty command line, or one with a NUL byte.
    #[error("invalid command line: {problem}")]
    BadCommand { problem: &'static str },

    /// A system call about processes failed.
    #[error("{action} failed")]
    Os {
        action: &'static str,
        #[source]
        source: io::Error,
    },
}

impl RuntimeError {
    /// What the user should do about it, when there is something to say.
    pub fn hint(&self) -> Option<&str> {
        match self {
            // One perf-event uprobe a site: what kernels without multi-uprobe links (before
            // 6.6) attach with, and since the fix for CVE-2025-38466 that needs
            // CAP_SYS_ADMIN (seen on Debian's 6.1 in tests/vm).
            RuntimeError::Permission { action, .. } if action.starts_with("attaching a uprobe") => Some(
                "run gtrace as root, or grant it CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN \
                 (setcap cap_bpf,cap_perfmon,cap_sys_admin+ep gtrace): this kernel attaches one \
                 perf-event uprobe a site (no multi-uprobe links before Linux 6.6), which needs \
                 CAP_SYS_ADMIN since the fix for CVE-2025-38466",
            ),
            RuntimeError::Permission { .. } => Some(
                "run gtrace as root, or grant it CAP_BPF and CAP_PERFMON \
                 (setcap cap_bpf,cap_perfmon+ep gtrace)",
            ),
            RuntimeError::Verifier { .. } => {
                Some("this is a bug in gtrace's code generation; please report it with the script")
            }
            RuntimeError::NoSuchProcess { .. } => Some("check the pid; the process may have exited"),
            RuntimeError::EndedBeforeAttach { .. } => {
                Some("a process now at that pid is another one; give the pid of the process to trace as it runs now")
            }
            RuntimeError::ChangedSinceRead { .. } => Some("run gtrace again once the new file is in place"),
            RuntimeError::NotTraceable { .. } => {
                Some("give the pid of a running Go program (`pgrep -f NAME`), or its executable with -b PATH")
            }
            RuntimeError::CommandNotFound { .. } => Some("give a path to the executable, or make sure it is in PATH"),
            RuntimeError::NotACommand { .. } => {
                Some("-c takes the Go program to start and its arguments: -c './server --port 8080'")
            }
            RuntimeError::Attach { .. } => Some("check that the binary was not replaced since gtrace read it"),
            RuntimeError::Replaced { .. } => {
                Some("run gtrace again once the file is no longer being written (a build or a deploy replaced it)")
            }
            _ => None,
        }
    }

    /// True for errors that come from missing privileges.
    pub fn is_permission(&self) -> bool {
        matches!(self, RuntimeError::Permission { .. })
    }
}

/// The first `io::Error` in `err`'s source chain, if it is EPERM or EACCES.
pub(crate) fn permission_error(err: &(dyn std::error::Error + 'static)) -> Option<io::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if let Some(code @ (libc::EPERM | libc::EACCES)) = io.raw_os_error() {
                return Some(io::Error::from_raw_os_error(code));
            }
        }
        cur = e.source();
    }
    None
}

/// Whether an `io::Error` with `errno` is in `err`'s source chain.
pub(crate) fn has_errno(err: &(dyn std::error::Error + 'static), errno: i32) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<io::Error>().and_then(io::Error::raw_os_error) == Some(errno) {
            return true;
        }
        cur = e.source();
    }
    false
}

impl RuntimeError {
    /// For a refusal for lack of privileges: the capabilities gtrace's process lacks of
    /// those the refused step needs, in words (none when it holds them all).
    fn missing_capabilities(&self) -> Option<String> {
        let RuntimeError::Permission { action, .. } = self else { return None };
        let needed = super::capabilities::needed(action.starts_with("attaching a uprobe"));
        super::capabilities::say_missing(&super::capabilities::missing_here(&needed), &needed)
    }
}

impl From<RuntimeError> for crate::diag::Failure {
    fn from(e: RuntimeError) -> crate::diag::Failure {
        let hint = match (e.missing_capabilities(), e.hint()) {
            (Some(missing), Some(hint)) => Some(format!("{missing}: {hint}")),
            (missing, hint) => missing.or(hint.map(str::to_string)),
        };
        crate::diag::Failure::system(&e, hint.as_deref())
    }
}
