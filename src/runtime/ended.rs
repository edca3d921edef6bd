//! Forgetting what the programs keep for processes that have ended (under -b, which
//! traces every process of a file with one set of maps): the hash maps keyed by a
//! goroutine and its process (lower/layout.rs: the tgid at `K_TGID` of a 16-byte key),
//! that is the goroutines' spilled records of calls in flight, their deeper frames, the
//! parameters carried to returns and `self` variables. Nothing ever frees a goroutine's
//! record while its process runs (the runtime reuses a dead goroutine's g, with its
//! record: lower/frames.rs), so without this, processes that come and go fill those
//! tables and later calls find no room.
//!
//! A process has ended when /proc has no such pid or its leader is a zombie; anything
//! else (unreadable, another program since an exec) keeps its keys. A Go process's
//! leader is a zombie only once the process has ended: the runtime never lets the main
//! thread exit while the program runs (a goroutine that ends locked to it wedges it
//! instead, runtime/proc.go `mexit`); only C code of a cgo program calling
//! `pthread_exit` on it could, and that process's keys would go while it runs. Deleting a live
//! process's keys would break its records (a frame missing in the middle of a stack
//! stays missing), so the sweep runs only where /proc's pids are the keys' (gtrace in
//! the host's pid namespace). A delete is one atomic syscall, and no program touches a
//! key of an ended process; a pid taken again by a new process of the file between the
//! look and the delete loses that process's first records (a window of microseconds).
//! The array slots such processes claimed stay claimed (a program claims a slot by a
//! compare-and-exchange no syscall can join): later goroutines whose slot is held keep
//! their records in the hash, as any goroutine whose slot is taken does.
//!
//! The sweep walks each map key by key (about 2 us a key on this project's VM: half a
//! second for a full table of 262,144), so it runs on a thread of its own, on
//! duplicated descriptors, and never holds up the trace loop.

use super::error::RuntimeError;
use super::loader::Loaded;
use super::maps::MapHandle;
use crate::lower::layout::{KEY, K_TGID};
use crate::plan::{MapKind, MapRole};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The thread that sweeps; stopped and joined when dropped.
pub struct Sweeper {
    stop: Arc<AtomicBool>,
    forgotten: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sweeper {
    /// Stops the sweep (a pass under way ends at its next key) and says how many keys of
    /// ended processes it deleted in all: read once the thread is joined, so none it
    /// deletes after is left out.
    pub fn finish(mut self) -> u64 {
        self.stop_and_join();
        self.forgotten.load(Ordering::Relaxed)
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

impl Loaded {
    /// Starts sweeping every `every` the keys of ended processes out of the hash maps
    /// keyed by goroutine; None when the plan has none, or gtrace is not in the host's
    /// pid namespace.
    pub fn sweep_ended_processes(&self, every: Duration) -> Result<Option<Sweeper>, RuntimeError> {
        if !super::in_host_pid_namespace() {
            return Ok(None);
        }
        let swept = |m: &&MapHandle| {
            matches!(m.spec.role, MapRole::Goroutines | MapRole::Frames | MapRole::Carried | MapRole::SelfVars)
                && m.spec.kind == MapKind::Hash
                && m.spec.key_size == KEY
        };
        let maps: Vec<MapHandle> = (self.maps.iter())
            .filter(|(_, m)| swept(m))
            .map(|(name, m)| super::reader::duplicate(name, m))
            .collect::<Result<_, _>>()?;
        if maps.is_empty() {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let forgotten = Arc::new(AtomicU64::new(0));
        let counted = forgotten.clone();
        let thread = std::thread::Builder::new()
            .name("gtrace-sweep".into())
            .spawn(move || {
                while wait(&stopped, every) {
                    for map in &maps {
                        // A map that cannot be read is left as it is (as without a sweep);
                        // what a pass deleted before an error is counted all the same.
                        let _ = sweep(map, &stopped, &counted);
                    }
                }
            })
            .map_err(|source| RuntimeError::Os { action: "starting the sweep's thread", source })?;
        Ok(Some(Sweeper { stop, forgotten, thread: Some(thread) }))
    }
}

/// Waits `every`, in short steps; false once told to stop.
fn wait(stop: &AtomicBool, every: Duration) -> bool {
    let until = Instant::now() + every;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(every));
    }
    !stop.load(Ordering::SeqCst)
}

/// Deletes the keys of ended processes from `map` (each process looked at once), each
/// counted in `forgotten` as it goes.
fn sweep(map: &MapHandle, stop: &AtomicBool, forgotten: &AtomicU64) -> Result<(), RuntimeError> {
    let mut judged = std::collections::HashMap::new();
    let at = K_TGID as usize;
    for key in map.keys()? {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Some(tgid) = key.get(at..at + 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap_or([0; 4]))) else {
            continue;
        };
        // Process 0: -p and -c key their one process so.
        if tgid != 0 && *judged.entry(tgid).or_insert_with(|| ended(tgid)) && map.delete(&key)? {
            forgotten.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Whether process `tgid` has ended: no such pid in /proc, or a zombie.
fn ended(tgid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{tgid}/stat")) {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        // PID (COMM) STATE ...; COMM may hold ')'.
        Ok(stat) => {
            stat.rfind(')').and_then(|i| stat.get(i + 1..)).and_then(|r| r.split_whitespace().next()) == Some("Z")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_has_not_ended_and_one_reaped_has() {
        assert!(!ended(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().expect("run true");
        let pid = child.id();
        // Ended and not yet reaped: a zombie.
        std::thread::sleep(Duration::from_millis(200));
        assert!(ended(pid));
        child.wait().expect("wait");
        assert!(ended(pid));
    }
}
