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
//! The file's identity (device, inode, size, modification time: `FileStamp`) is taken
//! before gtrace reads it, and the file it attaches through must still have it: a write
//! while gtrace compiled is an error at the attach. While tracing, the loop looks at the
//! file at each turn (about every 20 ms: one fstat) and, once it has changed, detaches
//! every probe on it and ends the trace (gtrace's own `on end` still runs); names
//! (functions, lines, types) are no longer read from it then (`TargetSymbols::distrust`).
//! The change time is not compared: a rename or a link moves it, and a deploy by rename
//! (a new file at the path) changes nothing of the file traced.
//!
//! A duty cycle (the budget's, runtime/park.rs) takes the probes off the file and puts
//! them back many times a minute, on a thread of its own: it tells the guard each way
//! (`Cycling`). Off, nothing is on the file, so a held exec goes on; before they go back,
//! the file must still have its stamp, or they stay off (the change is recorded, and the
//! loop's look ends the trace); back on, an exec of a changed file is held again. A
//! detach for good waits for that thread first (`Loaded::detach_target`): links it made
//! again are gone before the guard lets a held exec go.
//!
//! For the moment between the write and that look, with CAP_SYS_ADMIN gtrace asks the
//! kernel (fanotify, `FAN_OPEN_EXEC_PERM`) to hold every exec of the file until it
//! answers: when the file differs, the exec waits until the loop has detached the probes;
//! should that not come within `DETACH_WAIT` of the first held exec (the loop blocked on
//! its output), every held exec is refused (EPERM) rather than run under misplaced
//! probes. Ctrl-Z does not suspend gtrace then (a suspended gtrace would hold every exec
//! of the file; SIGSTOP, which cannot be refused, does so until it continues). Without
//! the capability (or a kernel without fanotify's permission events), only the loop's
//! look guards it: a process started in that moment is not covered, and gtrace says so
//! when it starts.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long held execs of the changed file wait for the probes to be detached, from
/// the first one held.
pub const DETACH_WAIT: Duration = Duration::from_secs(2);

/// What the guard saw: the file changed since the probes were attached.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Change {
    /// The process whose exec was held (fanotify), if any.
    pub exec_pid: Option<u32>,
}

/// What the guard can promise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Strength {
    /// Every exec of the file waits until the probes are off it (fanotify).
    BeforeExec,
    /// Only the loop's look: an exec between a write and that look is not covered.
    LoopOnly,
}

/// A file's identity and contents' marks: a write in place moves its size or its
/// modification time (the change time is left out: a rename or a link moves it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

impl FileStamp {
    fn of(m: &std::fs::Metadata) -> FileStamp {
        FileStamp { dev: m.dev(), ino: m.ino(), size: m.size(), mtime: (m.mtime(), m.mtime_nsec()) }
    }

    /// The stamp of the file at `path` now (taken before reading it).
    pub fn of_path(path: &Path) -> Option<FileStamp> {
        std::fs::metadata(path).ok().map(|m| FileStamp::of(&m))
    }
}

#[derive(Default)]
struct State {
    change: Option<Change>,
    detached: bool,
    /// When held execs stop waiting: `DETACH_WAIT` after the first one held.
    deadline: Option<Instant>,
}

struct Shared {
    state: Mutex<State>,
    answered: Condvar,
    stop: AtomicBool,
    /// Held execs whose answer the kernel did not take.
    unanswered: AtomicU32,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn detached(&self) {
        self.state().detached = true;
        self.answered.notify_all();
    }
}

/// A guard on the file the probes are attached through; dropping it lets every held
/// exec go (nothing is attached by then).
pub struct FileGuard {
    /// The file, for the loop's looks.
    file: std::fs::File,
    stamp: FileStamp,
    shared: Arc<Shared>,
    pub strength: Strength,
}

impl FileGuard {
    /// Starts guarding `file` (the `/proc/self/fd/N` probes are attached through) as it
    /// is now; `None` when it cannot be opened.
    pub fn start(file: &Path) -> Option<FileGuard> {
        let opened = std::fs::File::open(file).ok()?;
        let stamp = FileStamp::of(&opened.metadata().ok()?);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            answered: Condvar::new(),
            stop: AtomicBool::new(false),
            unanswered: AtomicU32::new(0),
        });
        let inner = shared.clone();
        let held = watch_execs(file).and_then(|group| {
            let thread = std::thread::Builder::new().name("gtrace-file-guard".into());
            thread.spawn(move || answer_execs(&group, stamp, &inner)).ok()
        });
        let strength = match held {
            Some(_) => {
                super::signals::refuse_suspend();
                Strength::BeforeExec
            }
            None => Strength::LoopOnly,
        };
        Some(FileGuard { file: opened, stamp, shared, strength })
    }

    /// The file's stamp when the guard started.
    pub fn stamp(&self) -> FileStamp {
        self.stamp
    }

    /// The change seen, if the file changed since the probes were attached: by looking
    /// at it now, or at an exec the guard held.
    pub fn changed(&self) -> Option<Change> {
        let mut state = self.shared.state();
        look(&self.file, self.stamp, &mut state);
        state.change.clone()
    }

    /// Says that no probe is on the file any more: held execs go on.
    pub fn detached(&self) {
        self.shared.detached();
    }

    /// `detached`, to call from the thread that releases the probes (`Loaded::leave_target`).
    pub fn on_detached(&self) -> impl FnOnce() + Send + 'static {
        let shared = self.shared.clone();
        move || shared.detached()
    }

    /// What a duty cycle's thread tells the guard as it takes the probes off the file and
    /// puts them back; `None` when the file cannot be opened again.
    pub fn cycling(&self) -> Option<Cycling> {
        let file = self.file.try_clone().ok()?;
        Some(Cycling { file, stamp: self.stamp, shared: self.shared.clone() })
    }

    /// Held execs whose answer the kernel did not take (they waited until gtrace ended).
    pub fn unanswered(&self) -> u32 {
        self.shared.unanswered.load(Ordering::SeqCst)
    }
}

/// The guard as a duty cycle's thread sees it (`FileGuard::cycling`).
pub struct Cycling {
    file: std::fs::File,
    stamp: FileStamp,
    shared: Arc<Shared>,
}

impl Cycling {
    /// The probes are off the file (released): held execs go on.
    pub fn off(&self) {
        self.shared.detached();
    }

    /// Before the probes go back on the file: false when it changed since they were first
    /// placed (the change is recorded for the loop's look; they must stay off); else from
    /// here on an exec of a changed file is held again until they are off.
    pub fn back_on(&self) -> bool {
        let mut state = self.shared.state();
        if look(&self.file, self.stamp, &mut state) {
            return false;
        }
        state.detached = false;
        true
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
fn answer_execs(group: &OwnedFd, stamp: FileStamp, shared: &Shared) {
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
            if !respond(group, &file, allow) {
                shared.unanswered.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// Records a change when `file` no longer has `stamp` (or cannot be looked at): whether
/// a change is recorded, now or before.
fn look(file: &std::fs::File, stamp: FileStamp, state: &mut State) -> bool {
    if file.metadata().ok().map(|m| FileStamp::of(&m)) != Some(stamp) {
        state.change.get_or_insert_with(Change::default);
    }
    state.change.is_some()
}

/// Whether a held exec of `file` by `pid` may go on: at once when the file is as it
/// was; else once the loop has detached every probe, or not at all when it has not by
/// the change's deadline (`DETACH_WAIT` after the first exec held for it).
fn decide(file: &OwnedFd, stamp: FileStamp, pid: i32, shared: &Shared) -> bool {
    // A file that cannot be looked at is taken as changed.
    let now = file.try_clone().ok().and_then(|f| std::fs::File::from(f).metadata().ok()).map(|m| FileStamp::of(&m));
    let mut state = shared.state();
    if now == Some(stamp) || state.detached {
        return true;
    }
    let change = state.change.get_or_insert_with(Change::default);
    change.exec_pid = change.exec_pid.or(u32::try_from(pid).ok());
    let deadline = *state.deadline.get_or_insert_with(|| Instant::now() + DETACH_WAIT);
    let left = deadline.saturating_duration_since(Instant::now());
    let (state, _) =
        shared.answered.wait_timeout_while(state, left, |s| !s.detached).unwrap_or_else(|p| p.into_inner());
    state.detached
}

/// Writes the answer; false when the kernel did not take it.
fn respond(group: &OwnedFd, file: &OwnedFd, allow: bool) -> bool {
    let response = libc::fanotify_response {
        fd: file.as_raw_fd(),
        response: if allow { libc::FAN_ALLOW } else { libc::FAN_DENY },
    };
    let size = std::mem::size_of::<libc::fanotify_response>();
    // SAFETY: `response` is a valid struct of `size` bytes.
    let written = unsafe { libc::write(group.as_raw_fd(), (&response as *const libc::fanotify_response).cast(), size) };
    written == size as isize
}
