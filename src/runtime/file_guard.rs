//! Keeps a process from running a file that was changed in place under `-b`'s probes.
//!
//! `-b` attaches uprobes to a file (its inode) for every process that runs it, now and
//! later. The kernel places a uprobe by offset and keeps a copy of the instruction it
//! replaced, read when it was first placed: if the file is then written over in place
//! (`cp new-build server`, which keeps the inode), the next process to run it gets
//! breakpoints at offsets inside the new code, and the old instruction run in their
//! place. Seen here: a Go program copied over a traced one died at once (SIGSEGV, exit
//! 2). A process that runs the file keeps it from being written (ETXTBSY), so the
//! change can only come while none does, and harm only the next one to start.
//!
//! The trace's loop looks at the file at each turn (about every 20 ms: one fstat), and
//! ends the trace, every probe detached, once it has changed; names (functions, lines,
//! types) are no longer read from it then (`TargetSymbols::distrust`). What guards the
//! moment between the write and that look:
//!
//! With CAP_SYS_ADMIN, gtrace asks the kernel (fanotify, `FAN_OPEN_EXEC_PERM`) to hold
//! every exec of the file until it answers. It compares the file with what it was when
//! the probes were attached (device, inode, size, modification and change times; the
//! change time cannot be set back by a program); when it differs, the trace's loop
//! detaches every probe first (`Loaded::file_changed`), and then the exec goes on. Should
//! the loop not detach within `DETACH_WAIT` (its output blocked), the exec is refused
//! (EPERM) rather than let the process run under misplaced probes. Ctrl-Z does not
//! suspend gtrace then (a suspended gtrace would hold every exec of the file; SIGSTOP,
//! which cannot be refused, does so until it continues). Without the
//! capability (or a kernel without fanotify's permission events), an inotify watch
//! notices a write as it happens, and the loop detaches within its next turn: a process
//! started in that moment is not covered, and gtrace says so when it starts.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How long an exec of the changed file waits for the probes to be detached.
pub const DETACH_WAIT: Duration = Duration::from_secs(2);

/// What the guard saw: the file changed since the probes were attached, and who noticed.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The process whose exec was held (fanotify), if any.
    pub exec_pid: Option<u32>,
}

/// What the guard can promise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Strength {
    /// Every exec of the file waits until the probes are off it (fanotify).
    BeforeExec,
    /// A write is noticed as it happens (inotify): an exec at that moment is not covered.
    AfterWrite,
}

/// The file's identity and times: any write or metadata change moves one of them.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

#[derive(Default)]
struct State {
    change: Option<Change>,
    detached: bool,
}

struct Shared {
    /// The file, opened again for the loop's looks.
    file: Option<std::fs::File>,
    stamp: Stamp,
    state: Mutex<State>,
    answered: Condvar,
    stop: AtomicBool,
}

/// A running guard; dropping it lets every held exec go (nothing is attached by then).
pub struct FileGuard {
    shared: Arc<Shared>,
    pub strength: Strength,
}

impl FileGuard {
    /// Starts guarding `file` (the `/proc/self/fd/N` probes were attached through) as it
    /// is now; `None` when neither fanotify nor inotify will watch it.
    pub fn start(file: &Path) -> Option<FileGuard> {
        let stamp = Stamp::of(&std::fs::metadata(file).ok()?);
        let shared = Arc::new(Shared {
            file: std::fs::File::open(file).ok(),
            stamp,
            state: Mutex::new(State::default()),
            answered: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let (fd, strength) = match watch_execs(file) {
            Some(fd) => {
                super::signals::refuse_suspend();
                (fd, Strength::BeforeExec)
            }
            None => (watch_writes(file)?, Strength::AfterWrite),
        };
        let inner = shared.clone();
        let spawned = std::thread::Builder::new().name("gtrace-file-guard".into()).spawn(move || match strength {
            Strength::BeforeExec => answer_execs(&fd, stamp, &inner),
            Strength::AfterWrite => notice_writes(&fd, &inner),
        });
        spawned.ok()?;
        Some(FileGuard { shared, strength })
    }

    /// The change seen, if the file changed since the probes were attached: by the
    /// guard's thread, or by looking at the file now.
    pub fn changed(&self) -> Option<Change> {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = self.shared.file.as_ref().and_then(|f| f.metadata().ok()).map(|m| Stamp::of(&m));
        if state.change.is_none() && now.is_some_and(|n| n != self.shared.stamp) {
            state.change = Some(Change { exec_pid: None });
        }
        state.change.clone()
    }

    /// Says that no probe is attached any more: held execs go on.
    pub fn detached(&self) {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).detached = true;
        self.shared.answered.notify_all();
    }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        self.detached();
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// A fanotify group that holds every exec of `file`; `None` without CAP_SYS_ADMIN or
/// permission events.
fn watch_execs(file: &Path) -> Option<OwnedFd> {
    let flags = libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK;
    let event_flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_LARGEFILE) as libc::c_uint;
    // SAFETY: plain syscall; the fd it returns is owned from here on.
    let raw = unsafe { libc::fanotify_init(flags, event_flags) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a new fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let path = CString::new(file.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `path` is a valid C string for the call's duration.
    let marked = unsafe {
        libc::fanotify_mark(fd.as_raw_fd(), libc::FAN_MARK_ADD, libc::FAN_OPEN_EXEC_PERM, libc::AT_FDCWD, path.as_ptr())
    };
    (marked == 0).then_some(fd)
}

/// An inotify watch on writes and metadata changes of `file`.
fn watch_writes(file: &Path) -> Option<OwnedFd> {
    // SAFETY: plain syscall; the fd it returns is owned from here on.
    let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a new fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let path = CString::new(file.as_os_str().as_encoded_bytes()).ok()?;
    let mask = libc::IN_MODIFY | libc::IN_ATTRIB | libc::IN_CLOSE_WRITE;
    // SAFETY: `path` is a valid C string for the call's duration.
    let added = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
    (added >= 0).then_some(fd)
}

/// Waits up to 100 ms for `fd` to be readable; false when the guard is stopping.
fn ready(fd: &OwnedFd, shared: &Shared) -> bool {
    let mut poll = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    while !shared.stop.load(Ordering::SeqCst) {
        // SAFETY: one pollfd, valid for the call.
        if unsafe { libc::poll(&mut poll, 1, 100) } > 0 {
            return true;
        }
    }
    false
}

/// Reads what `fd` has into `buf`; the bytes read (0 when nothing, or on an error).
fn read_some(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    n.max(0) as usize
}

/// The fanotify thread: answers every held exec, after the probes are off a changed
/// file. Ends when the guard is dropped (closing the group lets anything held go).
fn answer_execs(group: &OwnedFd, stamp: Stamp, shared: &Shared) {
    let size = std::mem::size_of::<libc::fanotify_event_metadata>();
    let mut buf = vec![0u8; 64 * size];
    while ready(group, shared) {
        let n = read_some(group, &mut buf);
        let mut at = 0;
        while at + size <= n {
            // SAFETY: the kernel wrote whole event records; read_unaligned copes with
            // the Vec's alignment.
            let event: libc::fanotify_event_metadata = unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            if event.event_len < size as u32 {
                break;
            }
            at += event.event_len as usize;
            if event.fd < 0 {
                continue;
            }
            // SAFETY: the event's fd is ours to close.
            let file = unsafe { OwnedFd::from_raw_fd(event.fd) };
            let allow = decide(&file, stamp, event.pid, shared);
            respond(group, &file, allow);
        }
    }
}

/// Whether a held exec of `file` by `pid` may go on: at once when the file is as it
/// was; else once the loop has detached every probe, or not at all when it has not
/// within `DETACH_WAIT`.
fn decide(file: &OwnedFd, stamp: Stamp, pid: i32, shared: &Shared) -> bool {
    // A file that cannot be looked at is taken as changed.
    let now = file.try_clone().ok().and_then(|f| std::fs::File::from(f).metadata().ok()).map(|m| Stamp::of(&m));
    let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    if now == Some(stamp) || state.detached {
        return true;
    }
    let change = state.change.get_or_insert(Change { exec_pid: None });
    change.exec_pid = change.exec_pid.or(u32::try_from(pid).ok());
    let (state, _) =
        shared.answered.wait_timeout_while(state, DETACH_WAIT, |s| !s.detached).unwrap_or_else(|p| p.into_inner());
    state.detached
}

fn respond(group: &OwnedFd, file: &OwnedFd, allow: bool) {
    let response = libc::fanotify_response {
        fd: file.as_raw_fd(),
        response: if allow { libc::FAN_ALLOW } else { libc::FAN_DENY },
    };
    let size = std::mem::size_of::<libc::fanotify_response>();
    // SAFETY: `response` is a valid struct of `size` bytes.
    unsafe { libc::write(group.as_raw_fd(), (&response as *const libc::fanotify_response).cast(), size) };
}

/// The inotify thread: any write or metadata change is a change.
fn notice_writes(watch: &OwnedFd, shared: &Shared) {
    let mut buf = [0u8; 4096];
    while ready(watch, shared) {
        if read_some(watch, &mut buf) > 0 {
            let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            state.change.get_or_insert(Change { exec_pid: None });
        }
    }
}
