//! SIGINT, SIGTERM and SIGHUP end the trace cleanly: the handler only sets a flag, and without
//! SA_RESTART a blocking wait for events returns early, so the driver's loop sees the flag,
//! prints the maps and detaches.
//!
//! Probes never outlive gtrace: every attachment is a file descriptor the kernel releases
//! when the process ends, however it ends; `Loaded`'s `Drop` detaches on every ordinary
//! exit path, including unwinding from a panic.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers (once is enough; calling again is harmless) and returns the flag
/// they set.
pub fn install() -> &'static AtomicBool {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic (which is
        // async-signal-safe) and no SA_RESTART flag.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = 0;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    &STOP
}

/// Ctrl-Z (SIGTSTP) no longer suspends gtrace: while `file_guard` holds execs of a file,
/// a suspended gtrace would hold them until it went on. (SIGSTOP cannot be refused: a
/// gtrace stopped so holds them until it continues or ends.)
pub fn refuse_suspend() {
    // SAFETY: setting a signal's disposition to SIG_IGN.
    unsafe { libc::signal(libc::SIGTSTP, libc::SIG_IGN) };
}

/// Whether SIGINT, SIGTERM or SIGHUP arrived since `install`.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigterm_sets_the_flag() {
        let flag = install();
        // SAFETY: raising a signal whose handler we just installed.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(flag.load(Ordering::SeqCst));
        STOP.store(false, Ordering::SeqCst);
    }
}
