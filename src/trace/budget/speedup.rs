//! How much faster the target will run once a cut frees it: what the breaker weighs the
//! probes it keeps by, so that one decision leaves them under the budget at the speed the
//! target regains, not at the speed the probes held it to.
//!
//! A server under load that a wide wildcard slows down (Caddy answered 8x slower) runs
//! faster once the costliest probes go, and the probes that stay are hit as much more
//! often: judged at the slowed rate, they passed the budget again a few windows later,
//! and the breaker cut again and again for seconds (benches/perf --wildcard: 3-7
//! decisions over 0.8-1.5 s after a first cut at 0.1-0.2 s). Over the window the breaker looks
//! at, the target spent `cpu` (its threads' own accounting), of which the probes
//! `probes` (until the target's CPU has corrected the estimate, `UNDER` times it: a
//! wide wildcard's ran low by up to that); the rest is its own work. Freed, its work is taken to fill the CPU
//! it has been using, with the probes kept: a busy server's does (its load waits on it).
//! A target whose load is fixed (it had idle time while traced) does not speed up, and
//! for it the cut is deeper than needed: the budget holds, with fewer probes left. The
//! share of a CPU the target had before attaching would bound it, but is no guide on a
//! loaded host: taken while gtrace itself compiles and attaches, it read 13% where the
//! server untraced used about 50% (benches/perf --wildcard, load average 19 on 2 CPUs).

/// The most a cut is taken to speed the target up by. Echo in benches/perf --wildcard
/// fell to an eighth of its request rate; Caddy under `wrk` on a loaded host (load
/// average 11-17 on 2 CPUs) further: the units a first cut kept there were hit 1,059,
/// 377 and 86 times a second in the first window and 14,000, 9,200 and 8,900 times once
/// freed, 13x, 24x and 103x (docs/performance.md, "One decision on a loaded host"; in
/// the last, the target spent 18% of a CPU in the first window and 55% later: the host
/// held it back too). When the estimate, weighed `UNDER`, takes about all the target
/// spent, its own work cannot be told, nor how much faster it runs freed: then this is
/// the factor, and a cut keeps only what costs it a few hundredths of a percent.
pub const MOST: f64 = 100.0;

/// How far below what the probes cost the target their estimate may be until the
/// target's CPU has corrected it (half a second after the attach; a first cut comes
/// before). On Caddy at load 11-13 a wide wildcard's first window was estimated at 36%
/// and 38% of a CPU where the target spent 75% and 61%, of which its own work (its CPU
/// a request once freed, times the requests it answered meanwhile) was about 6% and 3%:
/// the probes cost it 2.0x and 1.5x the estimate. The traps weighed at the most the
/// correction may make them (1.5x) left a third of its CPU as its own work, and the
/// factor at 3.2 where it ran 14x faster.
pub const UNDER: f64 = 2.0;

/// The target's CPU over the window the breaker looks at, as fractions of one CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speedup {
    /// What its threads spent (0 when not measured).
    pub cpu: f64,
    /// Its share of a CPU before the probes were attached (0 when not measured).
    pub before: f64,
    /// What the probes attached over the window cost it, by the estimate.
    pub probes: f64,
}

impl Speedup {
    /// Over a window in which the target spent `cpu` and the probes were estimated at
    /// `now` (at the trap cost as corrected so far) and `high` (their traps weighed at the
    /// most the correction may make them): until the correction has measured the traps
    /// (`corrected` false), the probes are taken to have cost the target `UNDER` times
    /// their estimate, or `high` where that is more.
    pub fn of(cpu: f64, before: f64, now: f64, high: f64, corrected: bool) -> Speedup {
        let probes = if corrected { now } else { high.max(UNDER * now) };
        Speedup { cpu, before, probes }
    }

    /// The factor the rate of the probes that stay grows by once only `kept` (a fraction
    /// of a CPU at today's rate) is left attached: at least 1, at most `MOST`.
    pub fn factor(&self, kept: f64) -> f64 {
        if self.cpu <= 0.0 {
            return 1.0;
        }
        // Its own work; an estimate above what it spent leaves it the least. Freed, it
        // fills the CPU it spent, or what it had before the attach if more: a window in
        // which the host held it back as well says less (Caddy at load 12-20 spent 6.7%
        // of a CPU in a first window, 34% a second later).
        let work = (self.cpu - self.probes).max(self.cpu / MOST);
        (self.cpu.max(self.before) / (work + kept.max(0.0))).clamp(1.0, MOST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_slowed_eightfold_regains_its_speed() {
        // 1.2 CPUs spent, 1.05 of them in probes (as corrected): its own work is 0.15;
        // freed, it fills the 1.2 again, 8x faster.
        let s = Speedup { cpu: 1.2, before: 0.0, probes: 1.05 };
        assert!((s.factor(0.0) - 8.0).abs() < 1e-9, "{}", s.factor(0.0));
        // What is kept takes some of the CPU back.
        assert!(s.factor(0.05) < s.factor(0.0) && s.factor(0.05) > 1.0);
    }

    #[test]
    fn probes_that_cost_little_leave_the_speed_as_it_is() {
        let s = Speedup { cpu: 0.9, before: 0.0, probes: 0.0 };
        assert_eq!(s.factor(0.0), 1.0);
        assert_eq!(s.factor(0.1), 1.0);
    }

    #[test]
    fn an_unmeasured_target_or_an_estimate_above_the_measure_is_bounded() {
        assert_eq!(Speedup { cpu: 0.0, before: 0.0, probes: 0.9 }.factor(0.0), 1.0);
        // The estimate says more than the target spent: its work is the least.
        assert_eq!(Speedup { cpu: 1.0, before: 0.0, probes: 2.0 }.factor(0.0), MOST);
    }

    #[test]
    fn an_uncorrected_estimate_is_taken_to_run_low() {
        // Caddy's first window at load 11-13: it spent 75.5% of a CPU, the wildcard was
        // estimated at 35.6% (52.1% with its traps weighed 1.5x); the two units the cut
        // kept, 0.35% at that rate, were hit 14x as often once freed.
        let (cpu, now, high, kept) = (0.755, 0.3555, 0.521, 0.0035);
        let before = Speedup { cpu, before: 0.0, probes: high }.factor(kept);
        assert!((before - 3.17).abs() < 0.01, "{before}");
        let s = Speedup::of(cpu, 0.0, now, high, false);
        assert!(s.factor(kept) > 14.0 && s.factor(kept) < 17.0, "{}", s.factor(kept));
        // Another: 60.6% spent, 38% estimated; the one unit kept was hit 24x as often.
        let s = Speedup::of(0.606, 0.0, 0.38, 0.564, false);
        assert!(s.factor(0.0015) > 24.0, "{}", s.factor(0.0015));
        // A window the host held back as well (load 16.5): 17.7% spent, 8.8% estimated;
        // the one unit kept, 0.034% at 86 hits a second, was hit 103x as often once
        // freed: weighed at the factor, it passes 2% x 0.8 and goes with the rest.
        let s = Speedup::of(0.177, 0.0, 0.0885, 0.177, false);
        assert!(0.034 * s.factor(0.00034) > 1.6, "{}", s.factor(0.00034));
        // Once corrected, the estimate is taken as it is: a server with spare CPU (90%
        // spent, 5% in probes) hardly speeds up.
        let s = Speedup::of(0.9, 0.3, 0.05, 0.05, true);
        assert!((s.factor(0.0) - 0.9 / 0.85).abs() < 1e-9);
        // Uncorrected, the same: its own work at 80% of a CPU, not less.
        let s = Speedup::of(0.9, 0.0, 0.05, 0.075, false);
        assert!((s.factor(0.0) - 0.9 / 0.8).abs() < 1e-9);
    }

    #[test]
    fn a_window_the_host_held_back_is_weighed_at_the_share_before_the_attach() {
        // Caddy at load 12-20: 6.7% of a CPU in the first window, the wildcard 2.1% by
        // the estimate (4.2% weighed high): weighed at that CPU, what stays could grow
        // 2x; it spent 34% a second later, and a second decision came. With a share of
        // 30% before the attach, it is taken to fill that.
        let held = Speedup::of(0.067, 0.0, 0.021, 0.042, false);
        assert!((held.factor(0.0) - 0.067 / 0.025).abs() < 1e-9);
        let s = Speedup::of(0.067, 0.30, 0.021, 0.042, false);
        assert!((s.factor(0.0) - 0.30 / 0.025).abs() < 1e-9);
        // A share before under what it spends changes nothing.
        assert_eq!(
            Speedup::of(0.9, 0.3, 0.05, 0.05, true).factor(0.0),
            Speedup::of(0.9, 0.0, 0.05, 0.05, true).factor(0.0)
        );
    }
}
