//! A raised scheduling priority for gtrace's own short, bounded work that must not wait
//! behind the host's load for a CPU: the trap's calibration, which the budget's first
//! look waits for (tight loops pinned to each CPU in turn and calls after short sleeps:
//! a few milliseconds of CPU in all, bounded by its batches, `calibrate`). At the normal
//! priority on a saturated host it waited for the CPUs it was pinned to, and the
//! breaker's first look with it, exactly when the breaker is needed
//! (docs/performance.md, "The breaker's first look on a saturated host").
//!
//! `raise` puts the calling thread alone at the lowest real-time priority (SCHED_FIFO
//! 1) until the guard drops, then back as it was. A thread it starts meanwhile does not
//! inherit it (SCHED_RESET_ON_FORK). Without the right to (CAP_SYS_NICE, or an
//! RLIMIT_RTPRIO of at least 1) nothing changes (`Raised::held` says so) and the work
//! runs at the normal priority, as before.

use std::marker::PhantomData;

/// The thread's scheduling as it was, put back when this drops (on the same thread).
pub struct Raised {
    before: Option<(i32, libc::sched_param)>,
    /// Not Send: the policy is the raising thread's own.
    _thread: PhantomData<*const ()>,
}

/// `SCHED_RESET_ON_FORK` in linux/sched.h: a thread started meanwhile begins at the
/// normal priority.
const SCHED_RESET_ON_FORK: i32 = 0x4000_0000;

/// The lowest real-time priority: above every normal thread, below any real-time one.
const PRIORITY: i32 = 1;

/// The calling thread at SCHED_FIFO 1 until the guard drops, when it may be.
pub fn raise() -> Raised {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both read the calling thread's (0) scheduling; `param` is a valid
    // sched_param for sched_getparam to write.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 || unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Raised { before: None, _thread: PhantomData };
    }
    let fifo = libc::sched_param { sched_priority: PRIORITY };
    // SAFETY: sets the calling thread's policy from a valid sched_param.
    let raised = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | SCHED_RESET_ON_FORK, &fifo) } == 0;
    Raised { before: raised.then_some((policy, param)), _thread: PhantomData }
}

impl Raised {
    /// Whether the priority was raised.
    pub fn held(&self) -> bool {
        self.before.is_some()
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.before.take() {
            // SAFETY: puts back the calling thread's policy and parameters as they were
            // read (the guard is not Send: this is the thread that raised).
            unsafe { libc::sched_setscheduler(0, policy, &param) };
        }
    }
}

/// The calling thread's policy, without SCHED_RESET_ON_FORK (for tests).
pub fn policy() -> i32 {
    // SAFETY: reads the calling thread's policy.
    unsafe { libc::sched_getscheduler(0) & !SCHED_RESET_ON_FORK }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raised_only_while_held_and_never_for_a_thread_started_meanwhile() {
        // On a thread of its own: the test harness's thread keeps its policy whatever
        // happens here.
        std::thread::spawn(|| {
            let before = policy();
            {
                let raised = raise();
                if raised.held() {
                    assert_eq!(policy(), libc::SCHED_FIFO);
                    let child = std::thread::spawn(policy).join().unwrap();
                    assert_eq!(child, before, "a thread started while raised runs at the normal priority");
                } else {
                    // Without CAP_SYS_NICE: nothing changed.
                    assert_eq!(policy(), before);
                }
            }
            assert_eq!(policy(), before);
        })
        .join()
        .unwrap();
    }
}
