//! A window the host held the target back in, weighed at the target's share of a CPU
//! before the attach: what the probes cost it for each ns it ran (its hits per
//! CPU-second, which a starved window still shows) at the CPU it had untraced.
//!
//! The breaker trips once a window holds more than a whole window's allowance (20 ms at
//! 2%), so that a short burst is no trend: a wildcard that costs a server a fifth of a
//! CPU or more trips at the first look, 0.1 s after the attach. On a saturated host
//! (load average 15-17 on 2 CPUs) Caddy got so little CPU over the first 0.1-0.2 s that
//! the probes, most of what it ran, cost less than that, and the decision came at the
//! second or third look, 0.28-0.36 s after the attach (docs/performance.md, "The
//! breaker's first look on a saturated host"). A fair window, the target at its share
//! before, would have shown the same cost for each ns it ran over more ns.
//!
//! Only while the window is not yet whole (the first second after the attach or a cut:
//! a whole window's allowance is what a short one must hold), and only as far as the
//! target could have run: its threads ran or waited on a run queue for a CPU (a target
//! that was idle, not held back, is not weighed up), and up to its share before.

/// The most a held window is weighed up by: a target that ran less than a tenth of its
/// share before in a window ran a few milliseconds, too few to say more.
pub const MOST: f64 = 10.0;

/// The target over a window, as fractions of one CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    /// What its threads spent.
    pub cpu: f64,
    /// How long its threads waited on a run queue for a CPU (summed over them).
    pub waited: f64,
    /// Its share before the probes were attached (0 when not measured).
    pub before: f64,
}

impl Held {
    /// What the probes' cost over the window is weighed by: the CPU the target could
    /// have had (what it ran and waited to, at most its share before) over what it had;
    /// at least 1 (a target that had its share, or more, is weighed as it ran), at most
    /// `MOST`.
    pub fn factor(&self) -> f64 {
        if self.cpu <= 0.0 {
            return 1.0;
        }
        let could = (self.cpu + self.waited.max(0.0)).min(self.before);
        (could / self.cpu).clamp(1.0, MOST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_held_back_is_weighed_at_its_share_before() {
        // 15% of a CPU over the window, its threads waiting 1.2 CPUs' worth for one,
        // 40% before the attach: weighed as at 40%.
        let held = Held { cpu: 0.15, waited: 1.2, before: 0.40 };
        assert!((held.factor() - 0.40 / 0.15).abs() < 1e-9, "{}", held.factor());
        // Only as far as it waited: runnable for 25% of a CPU in all, weighed at that.
        let some = Held { cpu: 0.15, waited: 0.10, before: 0.40 };
        assert!((some.factor() - 0.25 / 0.15).abs() < 1e-9, "{}", some.factor());
        // At most MOST: 1% of a CPU ran says little.
        assert_eq!(Held { cpu: 0.01, waited: 2.0, before: 0.40 }.factor(), MOST);
    }

    #[test]
    fn a_target_idle_or_at_its_share_is_weighed_as_it_ran() {
        // Idle, not held back: it spent less than before, but did not wait to run.
        assert_eq!(Held { cpu: 0.05, waited: 0.0, before: 0.40 }.factor(), 1.0);
        // It had its share or more.
        assert_eq!(Held { cpu: 0.60, waited: 0.5, before: 0.40 }.factor(), 1.0);
        // No share before (a command started traced, -b) or nothing ran.
        assert_eq!(Held { cpu: 0.10, waited: 1.0, before: 0.0 }.factor(), 1.0);
        assert_eq!(Held { cpu: 0.0, waited: 1.0, before: 0.40 }.factor(), 1.0);
    }
}
