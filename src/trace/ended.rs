//! Under -b, the sweep of ended processes' keys out of the maps (runtime/ended.rs says
//! what and why): every 5 seconds, so that a node tracing processes that come and go
//! for days keeps room for the live ones' calls in flight.

use crate::runtime::{Loaded, RuntimeError, Sweeper};
use std::time::Duration;

/// How often the maps are swept by default.
const EVERY: Duration = Duration::from_secs(5);

/// Test hook: the sweep's period in milliseconds (tests/goroutines.rs).
pub const EVERY_ENV: &str = "GTRACE_TEST_HOOK_SWEEP_MS";

/// Starts the sweep of a trace of every process of a file (-b); -p and -c trace one
/// process, and key it 0.
pub fn sweep(loaded: &Loaded) -> Result<Option<Sweeper>, RuntimeError> {
    let hook = std::env::var(EVERY_ENV).ok().and_then(|ms| ms.parse().ok()).map(Duration::from_millis);
    loaded.sweep_ended_processes(hook.unwrap_or(EVERY))
}
