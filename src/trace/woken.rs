//! What traps cost beyond their calibrated cost because a thread's first trap after it
//! was put on a CPU pays the trap's kernel path cold (`runtime::TrapCost::woken_ns`,
//! measured at start-up after the calibration thread slept).
//!
//! A server's thread wakes for a request, runs the network stack and other code, and
//! traps once or a few times before it sleeps again: on Caddy a probe hit once a
//! request cost 1.7-3.3 us of the server's CPU a hit in the trap's path (cpu-clock
//! samples) where the calibration, timed in a tight loop, said 0.9-1.1; on a test
//! program, a trap timed right after a sleep cost 2.0-3.0 us, and the same trap between
//! calls of a large working set only 1.0-1.2 (docs/performance.md, "A trap after its
//! thread woke"). So the extra is paid at most once each time a thread is put on a CPU (its
//! schedstat's third field, `runtime::Schedstat::slices`), and never more often than the
//! probes are hit: `woken_ns * min(hits, slices)`, shared among the probes by their hits
//! (which of them comes first after a wake-up cannot be told). A tight loop that is
//! rarely scheduled out pays it almost never; a target whose threads wake more often
//! than the probes are hit pays it on every hit.

/// What the hits of a trace cost beyond their calibrated traps, ns: `each_ns` on at
/// most one hit each time a thread of the target was put on a CPU.
pub fn extra_ns(each_ns: f64, hits: u64, slices: u64) -> f64 {
    each_ns * hits.min(slices) as f64
}

/// The same shared among `hits`: what each hit pays on average, ns.
pub fn per_hit_ns(each_ns: f64, hits: u64, slices: u64) -> f64 {
    if hits == 0 {
        0.0
    } else {
        extra_ns(each_ns, hits, slices) / hits as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_one_hit_a_wake_up_pays_it() {
        // Caddy at 8,300 requests a second, its threads put on a CPU 4,200 times a
        // second: a probe hit once a request pays it on half its hits.
        assert_eq!(extra_ns(1500.0, 8300, 4200), 1500.0 * 4200.0);
        assert_eq!(per_hit_ns(1500.0, 8300, 4200), 1500.0 * 4200.0 / 8300.0);
        // Threads that wake more often than the probes are hit: every hit pays it.
        assert_eq!(per_hit_ns(1500.0, 1000, 30_000), 1500.0);
        // A tight loop scheduled out a few times: almost nothing a hit.
        assert!(per_hit_ns(1500.0, 2_000_000, 12) < 0.01);
        // No hits, no wake-ups, or nothing calibrated: nothing.
        assert_eq!(per_hit_ns(1500.0, 0, 100), 0.0);
        assert_eq!(extra_ns(1500.0, 100, 0), 0.0);
        assert_eq!(extra_ns(0.0, 100, 100), 0.0);
    }

    #[test]
    fn fewer_hits_left_pay_more_each_up_to_all_of_them() {
        // A wildcard's 400,000 hits a second share 4,200 wake-ups; the one function a cut
        // keeps, hit 8,300 times, then pays on half its hits: the total falls, what each
        // of its hits pays rises.
        let (all, kept) = (per_hit_ns(1500.0, 400_000, 4200), per_hit_ns(1500.0, 8300, 4200));
        assert!(kept > 40.0 * all);
        assert!(extra_ns(1500.0, 8300, 4200) <= extra_ns(1500.0, 400_000, 4200));
    }
}
