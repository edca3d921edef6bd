//! Taking the probes off: every one (`Loaded::detach_all`, which `Drop` calls, so on
//! every way out), the target's (`detach_target`), or at the end of a trace on a thread
//! of their own (`leave_target`, then `wait_left` before the last events and the
//! maps). Each release waits for the kernel's grace period, so `release` overlaps them.

use super::attach::Link;
use super::loader::Loaded;

/// At most this many threads release links at once.
const RELEASERS: usize = 32;

impl Loaded {
    /// Detaches every probe (the programs stay loaded, the maps keep their contents).
    pub fn detach_all(&mut self) {
        self.wait_left();
        self.parked.clear();
        release(std::mem::take(&mut self.links));
        self.intervals.clear();
        if let Some(guard) = &self.file_guard {
            guard.detached();
        }
    }

    /// Detaches every probe on the target's file, keeping gtrace's own (`on end` still
    /// runs); under -b, a process held at its exec then goes on, once a duty cycle's
    /// thread is done (links it made again meanwhile are released first).
    pub fn detach_target(&mut self) {
        self.forget_parked();
        self.join_parking();
        let target = self.take_target_links();
        release(target);
        if let Some(guard) = &self.file_guard {
            guard.detached();
        }
    }

    /// At the end of a trace: the probes leave the target's file (under -b nothing looks
    /// at it any more), still counted as attached for what is said at exit. Each release
    /// waits for the kernel's grace period (about 70 ms on Caddy's 7 links), so they go
    /// on a thread of their own (under -b from the loop's end, while the terminal and
    /// the sink are closed). Until they are gone they still fire: `wait_left` waits for
    /// that, and the caller reads what they sent before it prints the maps. The file
    /// guard lets held execs go on once they are gone. Nothing when no probe is on the
    /// file (they left already, or a duty cycle has them off: it is stopped, and what
    /// it made again released, before the guard hears).
    pub fn leave_target(&mut self) {
        let target = self.take_target_links();
        if target.is_empty() {
            if !self.parked.is_empty() || self.parking.is_some() {
                self.forget_parked();
                self.join_parking();
                self.file_guard.iter().for_each(|g| g.detached());
            }
            return;
        }
        self.wait_left();
        self.left_at_end.extend(target.iter().map(|l| (l.program.clone(), l.points.clone())));
        let detached = self.file_guard.as_ref().map(|g| g.on_detached());
        let work = move || {
            release(target);
            detached.into_iter().for_each(|d| d());
        };
        // Without a thread, the links are released as `work` is dropped (one by one) and
        // the guard hears it from `detach_all`.
        self.leaving = std::thread::Builder::new().name("gtrace-leave".into()).spawn(work).ok();
    }

    /// Waits until the probes that `leave_target` released are gone (at once when none
    /// are leaving): no hit of theirs comes after.
    pub fn wait_left(&mut self) {
        if let Some(thread) = self.leaving.take() {
            let _ = thread.join();
        }
        self.join_parking();
    }

    /// The links on the target's file, taken out of `links`.
    pub(super) fn take_target_links(&mut self) -> Vec<Link> {
        let (target, own): (Vec<Link>, Vec<Link>) =
            std::mem::take(&mut self.links).into_iter().partition(|l| !l.points.is_empty());
        self.links = own;
        target
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        self.detach_all();
    }
}

/// Detaches `links`. Each release waits for the kernel's grace period before it returns
/// (30-200 ms each on this project's busy VM: a cut of one function from 25 links took
/// 7.6 s one by one), so they are released on threads of their own and the grace periods
/// overlap.
pub(super) fn release(links: Vec<Link>) {
    if links.len() <= 1 {
        return;
    }
    let per_thread = links.len().div_ceil(RELEASERS);
    let mut links = links;
    std::thread::scope(|s| {
        while !links.is_empty() {
            let share: Vec<Link> = links.drain(..per_thread.min(links.len())).collect();
            s.spawn(move || drop(share));
        }
    });
}
