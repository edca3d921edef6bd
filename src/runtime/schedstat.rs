//! A process's CPU time, run-queue wait and times scheduled in, from its threads'
//! `schedstat` files: read
//! once (`cpu_and_wait_ns`), or again and again while tracing (`CpuReader`, which keeps
//! each thread's file open and reads it again in place, instead of listing the threads
//! and opening a file per thread at every reading).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// How often a `CpuReader` lists the threads again to find new ones. A thread found
/// late loses nothing: its file holds its whole time since it started.
const RELIST: Duration = Duration::from_millis(100);
/// At most this many threads' files are kept open, and never more than an eighth of the
/// files gtrace may have open (`RLIMIT_NOFILE`'s soft limit, 1,024 on many hosts: then
/// 128), so that what the trace opens later (a probe's links again after a budget cut,
/// one a site where the kernel has no multi-uprobe links) finds room; the others are
/// opened at each reading.
const KEPT_OPEN: usize = 256;

/// `KEPT_OPEN`, or less under a low limit on open files.
fn kept_open() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit we own.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let soft = if read { usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX) } else { 1024 };
    KEPT_OPEN.min(soft / 8)
}

/// What the live threads of a process have done so far: the sums of the three fields
/// of each task's `/proc/PID/task/TID/schedstat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedstat {
    /// The CPU time they ran, user and kernel, ns.
    pub cpu_ns: u64,
    /// The time they waited on a run queue for a CPU, ns.
    pub wait_ns: u64,
    /// How many times they were put on a CPU (each wake-up, each return after being
    /// preempted): a thread's first trap after each of these pays the trap's kernel
    /// path cold (`runtime::TrapCost::woken_ns`).
    pub slices: u64,
}

/// `pid`'s threads' `Schedstat`. `None` when the process cannot be read (nor any of its
/// threads).
pub fn cpu_and_wait_ns(pid: u32) -> Option<Schedstat> {
    CpuReader::new(pid).read()
}

/// The three numbers of a schedstat line.
fn parse(text: &[u8]) -> Schedstat {
    let text = std::str::from_utf8(text).unwrap_or("");
    let mut fields = text.split_whitespace().map(|n| n.parse::<u64>().unwrap_or(0));
    let mut next = || fields.next().unwrap_or(0);
    Schedstat { cpu_ns: next(), wait_ns: next(), slices: next() }
}

/// What `cpu_and_wait_ns` reads, for one process read many times a second (the files
/// kept open between readings).
#[derive(Debug)]
pub struct CpuReader {
    pid: u32,
    /// The threads seen, by id (in order), with their file when kept open.
    threads: Vec<(u32, Option<File>)>,
    listed: Option<Instant>,
    /// How many files may be kept open (`kept_open`).
    kept_open: usize,
}

impl Clone for CpuReader {
    /// A copy opens its own files when it first reads.
    fn clone(&self) -> Self {
        CpuReader::new(self.pid)
    }
}

impl CpuReader {
    pub fn new(pid: u32) -> CpuReader {
        CpuReader { pid, threads: Vec::new(), listed: None, kept_open: kept_open() }
    }

    /// `cpu_and_wait_ns(pid)`, read again: `None` when the process cannot be read.
    pub fn read(&mut self) -> Option<Schedstat> {
        if self.listed.is_none_or(|at| at.elapsed() >= RELIST) {
            self.relist()?;
        }
        let (mut sum, mut read) = (Schedstat::default(), false);
        let mut buf = [0u8; 128];
        let pid = self.pid;
        self.threads.retain_mut(|(tid, file)| {
            let n = match file {
                Some(f) => f.read_at(&mut buf, 0).ok(),
                None => File::open(path(pid, *tid)).and_then(|f| f.read_at(&mut buf, 0)).ok(),
            };
            // A thread that ended is gone from the list (its time with it, as when the
            // threads are listed afresh).
            let Some(n) = n.filter(|&n| n > 0) else { return false };
            let one = parse(&buf[..n]);
            sum.cpu_ns += one.cpu_ns;
            sum.wait_ns += one.wait_ns;
            sum.slices += one.slices;
            read = true;
            true
        });
        read.then_some(sum)
    }

    /// Lists the threads again: new ones are added (their file kept open while there is
    /// room), ended ones dropped. In order, so that a process of thousands of threads
    /// costs no more than its listing (each thread looked for among all: 25 million
    /// comparisons at 5,000 threads, every 100 ms).
    fn relist(&mut self) -> Option<()> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid)).ok()?;
        let mut now: Vec<u32> = tasks.flatten().filter_map(|t| t.file_name().to_str()?.parse().ok()).collect();
        now.sort_unstable();
        self.threads.retain(|(tid, _)| now.binary_search(tid).is_ok());
        let known: Vec<u32> = self.threads.iter().map(|(tid, _)| *tid).collect();
        let mut open = self.threads.iter().filter(|(_, f)| f.is_some()).count();
        for tid in now {
            if known.binary_search(&tid).is_err() {
                let file = if open < self.kept_open { File::open(path(self.pid, tid)).ok() } else { None };
                open += usize::from(file.is_some());
                self.threads.push((tid, file));
            }
        }
        self.threads.sort_unstable_by_key(|(tid, _)| *tid);
        self.listed = Some(Instant::now());
        Some(())
    }
}

fn path(pid: u32, tid: u32) -> String {
    format!("/proc/{pid}/task/{tid}/schedstat")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU time this thread has run.
    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    /// A thread started after the first reading is found at a later listing, its file
    /// kept open, and the 60 ms of CPU it spins for read from it and counted in the
    /// total. (The test harness's other threads come and go meanwhile, their time with
    /// them, so only the worker's own time is compared.)
    #[test]
    fn a_thread_started_later_is_found_and_read() {
        use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
        use std::sync::Arc;
        let mut reader = CpuReader::new(std::process::id());
        reader.read().expect("own schedstat");
        let (tid, stop) = (Arc::new(AtomicI32::new(0)), Arc::new(AtomicBool::new(false)));
        let (t, s) = (tid.clone(), stop.clone());
        let worker = std::thread::spawn(move || {
            let mut x = 0u64;
            while thread_cpu() < Duration::from_millis(60) {
                x = x.wrapping_mul(31).wrapping_add(1);
            }
            // SAFETY: gettid has no arguments and cannot fail.
            t.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            while !s.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            x
        });
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(RELIST);
        let total = reader.read().expect("own schedstat").cpu_ns;
        let worker_tid = tid.load(Ordering::SeqCst) as u32;
        let kept = reader.threads.iter().find(|(t, _)| *t == worker_tid).and_then(|(_, f)| f.as_ref());
        let mut buf = [0u8; 128];
        let n = kept.expect("the worker's file kept open").read_at(&mut buf, 0).expect("the worker's schedstat");
        let spun = parse(&buf[..n]).cpu_ns;
        stop.store(true, Ordering::SeqCst);
        worker.join().unwrap();
        assert!(spun >= 60_000_000, "the worker's file reads {spun} ns, it spun 60 ms");
        assert!(total >= spun, "a total of {total} ns holds less than the worker's {spun}");
    }

    /// A thread that ended is gone from the list at the next reading, its file closed,
    /// and the others stay in order; no more files are kept open than `kept_open` allows.
    #[test]
    fn a_thread_that_ended_leaves_the_list() {
        let mut reader = CpuReader::new(std::process::id());
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            // SAFETY: gettid has no arguments and cannot fail.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            done_rx.recv().ok();
        });
        let tid = rx.recv().unwrap();
        reader.read().expect("own schedstat");
        assert!(reader.threads.iter().any(|(t, _)| *t == tid), "the worker not listed");
        done_tx.send(()).unwrap();
        worker.join().unwrap();
        // Joined is not yet reaped (the kernel wakes the joiner on the way out): the
        // worker leaves once its file reads nothing, up to the next listing.
        let gone = (0..1000).any(|_| {
            std::thread::sleep(Duration::from_millis(1));
            reader.read().expect("own schedstat");
            !reader.threads.iter().any(|(t, _)| *t == tid)
        });
        assert!(gone, "an ended thread still listed after a second");
        assert!(reader.threads.windows(2).all(|w| w[0].0 < w[1].0), "threads out of order");
        assert!(reader.threads.iter().filter(|(_, f)| f.is_some()).count() <= reader.kept_open);
        assert!(reader.kept_open <= KEPT_OPEN && reader.kept_open > 0);
    }

    #[test]
    fn a_line_gives_its_three_fields() {
        let line = b"2155623811 310442 1287\n";
        assert_eq!(parse(line), Schedstat { cpu_ns: 2155623811, wait_ns: 310442, slices: 1287 });
        assert_eq!(parse(b""), Schedstat::default());
    }

    /// A thread that sleeps and wakes is put on a CPU again each time.
    #[test]
    fn a_thread_that_sleeps_is_scheduled_in_again_each_time() {
        let before = cpu_and_wait_ns(std::process::id()).expect("own schedstat").slices;
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let after = cpu_and_wait_ns(std::process::id()).expect("own schedstat").slices;
        assert!(after >= before + 20, "20 sleeps, {} more times scheduled in", after.saturating_sub(before));
    }

    #[test]
    fn a_process_that_is_gone_reads_none() {
        let mut child = std::process::Command::new("true").spawn().expect("true runs");
        let pid = child.id();
        child.wait().unwrap();
        assert!(CpuReader::new(pid).read().is_none());
        assert!(cpu_and_wait_ns(pid).is_none());
    }
}
