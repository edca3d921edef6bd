//! Under -b, every few seconds: forget what the maps keep for processes of the file that
//! have ended (runtime/ended.rs says what and why), so that a node tracing processes
//! that come and go for days keeps room for the live ones' calls in flight. A process
//! has ended when it no longer maps the file (gone, a zombie, or running another
//! program since an exec).

use crate::runtime::{self, Loaded, RuntimeError};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often the maps are swept by default.
const EVERY: Duration = Duration::from_secs(5);

/// Test hook: the sweep's period in milliseconds (tests/goroutines.rs).
pub const EVERY_ENV: &str = "GTRACE_TEST_HOOK_SWEEP_MS";

/// The sweeps of one -b trace.
pub struct Sweeper {
    binary: PathBuf,
    every: Duration,
    last: Instant,
}

impl Sweeper {
    /// A sweeper for a trace of every process of `binary` (-b); -p and -c trace one
    /// process, whose keys are never an ended one's.
    pub fn for_all_processes(binary: PathBuf) -> Sweeper {
        let hook = std::env::var(EVERY_ENV).ok().and_then(|ms| ms.parse().ok()).map(Duration::from_millis);
        Sweeper { binary, every: hook.unwrap_or(EVERY), last: Instant::now() }
    }

    /// Sweeps when a period has passed since the last sweep.
    pub fn turn(&mut self, loaded: &Loaded) -> Result<(), RuntimeError> {
        if self.last.elapsed() < self.every {
            return Ok(());
        }
        self.last = Instant::now();
        let binary = &self.binary;
        loaded.forget_ended_processes(|tgid| runtime::mapping_start(tgid, binary).is_none()).map(|_| ())
    }
}
