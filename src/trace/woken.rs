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
//!
//! It is priced as it accrues (`Ledger`): interval by interval, each interval's
//! `min(hits, slices)` shared by that interval's hits. Over the whole trace at once a
//! function a budget cut kept of a wide wildcard was priced at the wildcard's share
//! (many hits a wake-up before the cut), though after it every one of its hits follows a
//! wake-up; so were a duty cycle's parts and any trace whose hit rate changed.

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

/// What the hits of a trace have paid after wake-ups so far, priced interval by
/// interval: each reading of the hit counters (`accrue`) ends an interval, whose wake-ups
/// are paid by at most as many of its own hits (`extra_ns`), shared among them. The
/// counters are a flat list in a fixed order (the same at every reading); a count lower
/// than at the last reading (a counter read anew) starts again from there.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    /// Each counter's hits and the target's wake-ups at the last reading.
    hits: Vec<u64>,
    slices: u64,
    /// Each counter's hits that paid a wake-up so far (a share of a hit where an
    /// interval had more hits than wake-ups).
    paid: Vec<f64>,
}

impl Ledger {
    /// One interval ends now: `hits` is each counter's hits so far, `slices` the times
    /// the target's threads were put on a CPU so far (both since the attach). Returns
    /// each counter's hits that paid a wake-up so far.
    pub fn accrue(&mut self, hits: &[u64], slices: u64) -> &[f64] {
        self.hits.resize(hits.len(), 0);
        self.paid.resize(hits.len(), 0.0);
        let new: Vec<u64> = hits.iter().zip(&self.hits).map(|(now, was)| now.saturating_sub(*was)).collect();
        let all: u64 = new.iter().sum();
        // Wake-ups of threads that have since ended leave the sum: none are counted then.
        let woke = slices.saturating_sub(self.slices);
        let share = if all == 0 { 0.0 } else { extra_ns(1.0, all, woke) / all as f64 };
        for (paid, n) in self.paid.iter_mut().zip(&new) {
            *paid += *n as f64 * share;
        }
        self.hits.copy_from_slice(hits);
        self.slices = slices;
        &self.paid
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

    #[test]
    fn a_survivor_of_a_cut_pays_what_its_intervals_after_the_cut_say() {
        // A wildcard's two counters: a helper hit 200 times a request, the survivor once;
        // 2,000 requests a second, each after a wake-up, read every 100 ms. The cut takes
        // the helper after the first 0.2 s; the trace runs 3 s.
        let mut ledger = Ledger::default();
        let (mut helper, mut survivor, mut slices) = (0u64, 0u64, 0u64);
        let mut paid = Vec::new();
        for look in 1..=30 {
            if look <= 2 {
                helper += 40_000;
            }
            survivor += 200;
            slices += 200;
            paid = ledger.accrue(&[helper, survivor], slices).to_vec();
        }
        // Before the cut its 400 hits paid 1/201 each, after it every one of its 5,600.
        let expected = 400.0 / 201.0 + 5600.0;
        assert!((paid[1] - expected).abs() < 1e-6, "{paid:?}");
        assert!((paid[0] - 80_000.0 * 200.0 / 40_200.0).abs() < 1e-6, "{paid:?}");
        // Over the whole trace at once it would have paid 6,000 of 86,000 hits' share.
        let whole = per_hit_ns(1.0, helper + survivor, slices) * survivor as f64;
        assert!(whole < 0.08 * paid[1], "{whole} against {}", paid[1]);
        // Every wake-up was paid once, never more.
        assert!((paid.iter().sum::<f64>() - slices as f64).abs() < 1e-6);
    }

    #[test]
    fn an_interval_without_hits_pays_nothing_and_counts_going_down_start_again() {
        let mut ledger = Ledger::default();
        // A duty cycle's detached part: wake-ups, no hits.
        assert_eq!(ledger.accrue(&[0, 0], 500), [0.0, 0.0]);
        // Attached again: 100 hits after 80 more wake-ups pay 80, by their hits.
        assert_eq!(ledger.accrue(&[75, 25], 580), [60.0, 20.0]);
        // A thread ended (fewer wake-ups in the sum) and a counter read anew (lower):
        // from there on, nothing paid twice or lost below zero.
        assert_eq!(ledger.accrue(&[75, 10], 300), [60.0, 20.0]);
        assert_eq!(ledger.accrue(&[85, 20], 320), [70.0, 30.0]);
        // A counter more (the list grows): it starts at nothing.
        assert_eq!(ledger.accrue(&[85, 20, 5], 400), [70.0, 30.0, 5.0]);
    }
}
