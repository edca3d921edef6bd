//! The target's file mapped read-only (memmap2) instead of read into memory: opening an
//! 80 MB binary costs only the pages a question touches (the headers, the symbol table,
//! the parts of `.gopclntab` and DWARF it reads), and once the probes are attached
//! `Mapped::shed` gives every page back (the trace touches again only what it
//! symbolizes), and `trim_heap` returns the freed compiler tables to the system. The
//! reader (src/gobin) sees a byte slice, as from a `Vec`.
//!
//! A mapped file that another process truncates turns a read past its new end into
//! SIGBUS. Why that is acceptable, and how it is guarded:
//! - only a regular file is mapped (`crate::input` refuses anything else first), at the
//!   size `fstat` gives for the opened file, and never an empty one;
//! - a running executable cannot be opened for writing (ETXTBSY): with `-p` and `-c`,
//!   and with `-b` while any process runs it, the file cannot be truncated; Go's
//!   toolchain and `install` replace a binary by a new file (rename), which leaves the
//!   mapped one whole;
//! - what remains (a file written over in place, `cp new old`, while no process runs
//!   it) ends gtrace with one clear line instead of a crash: a SIGBUS handler checks
//!   that the faulting address is in a mapped file, says so, and exits with status
//!   1 (probes are detached by the kernel when gtrace's descriptors close; a `-c`
//!   command dies with it). A SIGBUS anywhere else, or one sent by another process
//!   (`kill -BUS`), gets the action that was there before gtrace's handler. The target
//!   is never touched either way.
//!
//! The mapping is shared, not private, though gtrace only reads it: the kernel puts a
//! uprobe's breakpoint (int3, 0xcc) into every private mapping of the file that may
//! execute (`VM_MAYEXEC`, which a read-only mapping of a file on an exec mount has),
//! whoever made it. A private mapping read the breakpoints of another gtrace's `-b`
//! probes as the file's code (`main.tick` refused for opcode 0xcc while a `-b` trace of
//! the same file ran: tests/globals.rs, tests/e2e.rs); a shared one (`VM_MAYSHARE`) never
//! gets them, and reads the page cache, which is the file.
//!
//! What a mapping does not guard: a file written over in place at the same size or
//! larger while nothing runs it (possible only with `-b`, where no traced process pins
//! the file) raises no SIGBUS, and the pages read after that (stacks symbolized after
//! the attach) hold the new bytes, where a copy read at the start kept the old ones.
//! Replace binaries by renaming (as Go's toolchain does), or restart a `-b` trace after
//! overwriting one in place.

use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file mapped read-only and shared (nothing gtrace could do writes to the file, and
/// no uprobe's breakpoint is put in it: the module doc).
pub struct Mapped {
    map: memmap2::Mmap,
}

impl Mapped {
    /// Maps all `len` bytes of `file` (its size when opened; not 0).
    pub fn map(file: &File, len: u64) -> std::io::Result<Mapped> {
        let len = usize::try_from(len).map_err(|_| std::io::Error::other("file too large to map"))?;
        if len == 0 {
            return Err(std::io::Error::other("an empty file is not mapped"));
        }
        // SAFETY: the mapping is read-only; the bytes are only read through the slice
        // it derefs to. Another process truncating the file is the one hazard (SIGBUS),
        // which the module doc discusses and `guard` reports. Shared (MAP_SHARED,
        // PROT_READ), so that no uprobe writes its breakpoints into it; private where a
        // filesystem maps no file shared (FUSE's direct I/O before Linux 6.6).
        let map = unsafe {
            let shared = memmap2::MmapOptions::new().len(len).map(file);
            shared.or_else(|_| memmap2::MmapOptions::new().len(len).map_copy_read_only(file))?
        };
        guard(map.as_ptr() as usize, len);
        Ok(Mapped { map })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Gives the mapped pages back to the kernel (they leave the process's RSS); a
    /// later read faults them in again from the page cache, with the same bytes.
    pub fn shed(&self) {
        // SAFETY: a read-only shared mapping of a file holds no page of its own (the
        // pages are the page cache's), so dropping them loses nothing: they are read
        // again from the file when touched. The private fallback (`map`) holds at most
        // pages the kernel copied to put a uprobe's breakpoint in (gtrace writes none):
        // dropping them gives the file's own bytes back, which is what gtrace reads it
        // for, and the kernel, removing such a breakpoint later, finds none there and
        // leaves the page alone. No slice into the mapping is invalidated either way:
        // the addresses stay mapped.
        let _ = unsafe { self.map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    }

    /// `shed`, for the pages holding bytes `start..start + len` only (and whatever else
    /// shares their first and last page): a big table read once leaves the RSS when
    /// read, not at the end of the compile.
    pub fn shed_range(&self, start: usize, len: usize) {
        let Some(len) = self.map.len().checked_sub(start).map(|left| left.min(len)).filter(|l| *l > 0) else {
            return;
        };
        // SAFETY: as `shed`: the range is within the mapping (memmap2 widens it to whole
        // pages, still within it), whose pages are read again from the file if touched.
        let _ = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
    }
}

/// Returns the heap's free memory to the system (glibc keeps what is freed for later
/// allocations): after attaching, the compiler's tables are freed for good.
pub fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        unguard(self.map.as_ptr() as usize);
    }
}

/// The mapped files' ranges (start, length), for the SIGBUS handler: a few slots (the
/// binary and a debug file), lock-free so that the handler may read them.
const SLOTS: usize = 8;
static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

fn guard(start: usize, len: usize) {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(install);
    for (s, l) in STARTS.iter().zip(&LENS) {
        if s.compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            l.store(len, Ordering::SeqCst);
            return;
        }
    }
}

fn unguard(start: usize) {
    for (s, l) in STARTS.iter().zip(&LENS) {
        if s.load(Ordering::SeqCst) == start {
            l.store(0, Ordering::SeqCst);
            s.store(0, Ordering::SeqCst);
        }
    }
}

fn install() {
    // SAFETY: a plain sigaction with SA_SIGINFO; the handler only reads atomics, writes
    // to stderr and exits, or restores the default action.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &action, &mut previous) == 0 {
            let _ = PREVIOUS.set(Previous(previous));
        }
    }
}

/// The SIGBUS action before gtrace's handler (std's, or the default), put back for a
/// SIGBUS that is not a read past a mapped file's end.
struct Previous(libc::sigaction);
// SAFETY: set once by `install`, read only after (a plain C struct of a handler
// address, flags and a mask).
unsafe impl Sync for Previous {}
unsafe impl Send for Previous {}
static PREVIOUS: std::sync::OnceLock<Previous> = std::sync::OnceLock::new();

extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // A fault has a positive code (BUS_ADRERR for a read past a file's end); a signal
    // sent by a process (SI_USER, SI_QUEUE...) has none, and its si_addr is not one.
    let ours = code > 0
        && STARTS.iter().zip(&LENS).any(|(s, l)| {
            let (s, l) = (s.load(Ordering::SeqCst), l.load(Ordering::SeqCst));
            l > 0 && addr >= s && addr - s < l
        });
    const MSG: &[u8] = b"error: a file gtrace maps (the traced binary, or its debug file) was cut short by another process while gtrace read it\n  = hint: replace a binary by renaming a new file over it (go build, install do), not by writing over it in place\n";
    // SAFETY: write, _exit and signal are async-signal-safe.
    unsafe {
        if ours {
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
            libc::_exit(1);
        }
        // Not a mapped file: the action there was before, run again. A fault re-faults
        // when the handler returns; a sent signal is raised again.
        match PREVIOUS.get() {
            Some(p) => libc::sigaction(libc::SIGBUS, &p.0, std::ptr::null_mut()),
            None => {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
                0
            }
        };
        if code <= 0 {
            libc::raise(libc::SIGBUS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapped_file_reads_as_its_bytes_before_and_after_shedding() {
        let path = std::env::temp_dir().join(format!("gtrace-mapped-{}", std::process::id()));
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
        File::create(&path).and_then(|mut f| f.write_all(&bytes)).expect("writing the file");
        let file = File::open(&path).expect("opening it");
        let mapped = Mapped::map(&file, bytes.len() as u64).expect("mapping it");
        assert_eq!(mapped.bytes(), &bytes[..]);
        mapped.shed();
        assert_eq!(mapped.bytes(), &bytes[..]);
        let _ = std::fs::remove_file(&path);
        assert!(Mapped::map(&file, 0).is_err());
    }

    /// A file cut short under the mapping: a read past its new end ends the process with
    /// the one line and status 1 (in a forked child, which only reads and faults).
    #[test]
    fn a_read_past_a_truncated_files_end_says_so_and_exits_1() {
        let path = std::env::temp_dir().join(format!("gtrace-sigbus-{}", std::process::id()));
        File::create(&path).and_then(|mut f| f.write_all(&vec![7u8; 3 * 4096])).expect("writing the file");
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("opening it");
        let mapped = Mapped::map(&file, 3 * 4096).expect("mapping it");
        file.set_len(0).expect("truncating it");
        let at = mapped.bytes().as_ptr() as usize + 2 * 4096;
        let mut fds = [0; 2];
        // SAFETY: the child only calls async-signal-safe functions (dup2, a volatile read
        // that faults, _exit); the parent reads the pipe and waits for it.
        let (status, said) = unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                libc::dup2(fds[1], 2);
                let _ = std::ptr::read_volatile(at as *const u8);
                libc::_exit(0);
            }
            libc::close(fds[1]);
            let mut said = Vec::new();
            let mut buf = [0u8; 512];
            loop {
                let n = libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 {
                    break;
                }
                said.extend_from_slice(&buf[..n as usize]);
            }
            libc::close(fds[0]);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            (status, String::from_utf8_lossy(&said).into_owned())
        };
        let _ = std::fs::remove_file(&path);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 1, "status {status:#x}, said {said:?}");
        assert!(said.starts_with("error: a file gtrace maps") && said.contains("hint:"), "{said:?}");
    }
}
