//! How much faster the target will run once a cut frees it: what the breaker weighs the
//! probes it keeps by, so that one decision leaves them under the budget at the speed the
//! target regains, not at the speed the probes held it to.
//!
//! A server under load that a wide wildcard slows down (Caddy answered 8x slower) runs
//! faster once the costliest probes go, and the probes that stay are hit as much more
//! often: judged at the slowed rate, they passed the budget again a few windows later,
//! and the breaker cut again and again for seconds (benches/perf --wildcard: 3-7
//! decisions over 0.8-1.5 s after a first cut at 0.1-0.2 s). Over the window the breaker looks
//! at, the target spent `cpu` (its threads' own accounting), of which the probes'
//! estimate `probes`; the rest is its own work. Freed, its work is taken to fill the CPU
//! it has been using, with the probes kept: a busy server's does (its load waits on it).
//! A target whose load is fixed (it had idle time while traced) does not speed up, and
//! for it the cut is deeper than needed: the budget holds, with fewer probes left. The
//! share of a CPU the target had before attaching would bound it, but is no guide on a
//! loaded host: taken while gtrace itself compiles and attaches, it read 13% where the
//! server untraced used about 50% (benches/perf --wildcard, load average 19 on 2 CPUs).

/// The most a cut is taken to speed the target up by: about what echo regains in
/// benches/perf --wildcard (its request rate fell to an eighth; what the breaker kept
/// grew 4-5x over the decisions that followed its first cut, at up to 1.5x the
/// calibrated trap cost). In the first tenth of a second the estimate can pass what the
/// target spent (82-127% of a CPU estimated where the server spent about 50%), which
/// leaves no measure of its own work: then this is the factor.
pub const MOST: f64 = 10.0;

/// The target's CPU over the window the breaker looks at, as fractions of one CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speedup {
    /// What its threads spent (0 when not measured).
    pub cpu: f64,
    /// What the probes attached over the window cost it, by the estimate.
    pub probes: f64,
}

impl Speedup {
    /// The factor the rate of the probes that stay grows by once only `kept` (a fraction
    /// of a CPU at today's rate) is left attached: at least 1, at most `MOST`.
    pub fn factor(&self, kept: f64) -> f64 {
        if self.cpu <= 0.0 {
            return 1.0;
        }
        // Its own work; an estimate above what it spent leaves it a tenth.
        let work = (self.cpu - self.probes).max(self.cpu / 10.0);
        (self.cpu / (work + kept.max(0.0))).clamp(1.0, MOST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_slowed_eightfold_regains_its_speed() {
        // 1.2 CPUs spent, 1.05 of them in probes: its own work is 0.15; freed, it fills
        // the 1.2 again, 8x faster.
        let s = Speedup { cpu: 1.2, probes: 1.05 };
        assert!((s.factor(0.0) - 8.0).abs() < 1e-9, "{}", s.factor(0.0));
        // What is kept takes some of the CPU back.
        assert!(s.factor(0.05) < s.factor(0.0) && s.factor(0.05) > 1.0);
    }

    #[test]
    fn probes_that_cost_little_leave_the_speed_as_it_is() {
        let s = Speedup { cpu: 0.9, probes: 0.0 };
        assert_eq!(s.factor(0.0), 1.0);
        assert_eq!(s.factor(0.1), 1.0);
    }

    #[test]
    fn an_unmeasured_target_or_an_estimate_above_the_measure_is_bounded() {
        assert_eq!(Speedup { cpu: 0.0, probes: 0.9 }.factor(0.0), 1.0);
        // The estimate says more than the target spent: its work is taken as a tenth.
        assert_eq!(Speedup { cpu: 1.0, probes: 2.0 }.factor(0.0), MOST);
    }
}
