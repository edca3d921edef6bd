//! How deep one decision cuts: the costliest units go, one after another, until what
//! stays, weighed high and at the speed the target regains (speedup.rs), is under the
//! mark. What the hits pay after a wake-up (`trace::woken`) is not any one unit's: at
//! most one hit each time a thread of the target is put on a CPU pays it, so the units
//! that stay pay it on `min(their hits, the wake-ups)`, more of their hits the fewer
//! they are. A wildcard's many hits share the wake-ups thinly; the few functions a cut
//! keeps pay it on most of theirs, and the cut weighs them so, at once, rather than a
//! second decision later.

use super::speedup::Speedup;

/// One unit attached over the window, costliest first: its share of a CPU now and with
/// its traps weighed high (percent, without what it pays after wake-ups), and its hits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnitCost {
    pub now: f64,
    pub high: f64,
    pub hits: u64,
}

/// What hits pay after wake-ups over the window: `each_percent` (the calibrated extra,
/// as a share of a CPU over the window for one hit) on at most `slices` hits.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Woken {
    pub each_percent: f64,
    pub slices: u64,
}

impl Woken {
    /// What `hits` hits pay after wake-ups, percent of a CPU (`trace::woken`'s rule, in
    /// a share of a CPU rather than ns).
    pub fn of(&self, hits: u64) -> f64 {
        crate::trace::woken::extra_ns(self.each_percent, hits, self.slices)
    }
}

/// How many of `costs` go until what stays, weighed high at the speed the target
/// regains without the rest, is at most `under`: the count, what stays at its rate now,
/// and what stays weighed high at that speed with the factor.
pub fn cut_until(costs: &[UnitCost], woken: &Woken, under: f64, speedup: &Speedup) -> (usize, f64, (f64, f64)) {
    let mut now: f64 = costs.iter().map(|c| c.now).sum();
    let mut high: f64 = costs.iter().map(|c| c.high).sum();
    let mut hits: u64 = costs.iter().map(|c| c.hits).sum();
    let freed = |high: f64| {
        let g = speedup.factor(high.max(0.0) / 100.0);
        (high.max(0.0) * g, g)
    };
    for (n, c) in costs.iter().enumerate() {
        let stays = high + woken.of(hits);
        if freed(stays).0 <= under {
            return (n, now + woken.of(hits), freed(stays));
        }
        now -= c.now;
        high -= c.high;
        hits -= c.hits;
    }
    (costs.len(), now + woken.of(hits), freed(high + woken.of(hits)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STILL: Speedup = Speedup { cpu: 0.0, before: 0.0, probes: 0.0 };

    fn unit(now: f64, hits: u64) -> UnitCost {
        UnitCost { now, high: now, hits }
    }

    #[test]
    fn without_wake_ups_the_costliest_go_until_the_rest_is_under() {
        let costs = [unit(10.0, 1000), unit(3.0, 1000), unit(1.0, 1000), unit(0.5, 1000)];
        let (n, left, _) = cut_until(&costs, &Woken::default(), 1.6, &STILL);
        assert_eq!(n, 2);
        assert!((left - 1.5).abs() < 1e-9);
    }

    #[test]
    fn the_units_that_stay_pay_for_the_wake_ups_their_hits_can_cover() {
        // A wildcard: 400 units hit 1,000 times each over the window, 0.1% each; the
        // target woke 4,000 times, each first hit after one costing 0.0002% more: 0.8%
        // shared by all. Under 2% x 0.8, the cut keeps units until their own cost and
        // the wake-ups their hits cover fit: the wake-ups are weighed on what stays.
        let costs = vec![unit(0.1, 1000); 400];
        let woken = Woken { each_percent: 0.0002, slices: 4000 };
        let (n, left, _) = cut_until(&costs, &woken, 1.6, &STILL);
        // 8 units left: 0.8% of their own and 0.8% of wake-ups (4,000 of their 8,000
        // hits); 9 would be 0.9% + 0.8%.
        assert_eq!(400 - n, 8);
        assert!((left - 1.6).abs() < 1e-9, "{left}");
        // Counted per hit at the wildcard's share (4,000 of 400,000 hits), the 8 would
        // have carried 0.016% of wake-ups, and 15 units would have stayed.
        let shared = Woken { each_percent: 0.0002 * 4000.0 / 400_000.0, slices: u64::MAX };
        let (m, _, _) = cut_until(&costs, &shared, 1.6, &STILL);
        assert_eq!(400 - m, 15);
    }

    #[test]
    fn what_a_loaded_server_slowed_by_a_wildcard_keeps_is_weighed_at_its_speed_freed() {
        // Caddy's first window under `wrk` at load 11-13: 75.5% of a CPU spent, the
        // wildcard estimated at 35.6% (52.1% weighed high), 6,560 wake-ups a second at
        // 2.0 us more each. Its 86 costliest units (here one of 35.2%) and two hit 1,059
        // times a second between them, 0.13% of their own and 0.21% of wake-ups: weighed
        // 3.2x faster they stayed (1.1%), and 0.6 s later, hit 14x as often, cost 3.6%
        // (a second decision). Weighed with the estimate at `UNDER` they go at once.
        // Hits over the window of 0.112 s.
        let span = 0.112;
        let costs = [unit(35.2, 8300), unit(0.066, 59), unit(0.066, 59)];
        let woken = Woken { each_percent: 100.0 * 2018e-9 / span, slices: (6560.0 * span) as u64 };
        let before = Speedup { cpu: 0.755, before: 0.0, probes: 0.521 };
        let (n, _, (stays, g)) = cut_until(&costs, &woken, 1.6, &before);
        assert_eq!(n, 1);
        assert!((stays - 1.1).abs() < 0.01 && (g - 3.18).abs() < 0.01, "{stays}% at {g}x");
        let (n, left, (stays, g)) = cut_until(&costs, &woken, 1.6, &Speedup::of(0.755, 0.0, 0.3555, 0.521, false));
        assert_eq!(n, 3, "kept {stays}% at {g}x");
        assert!(left.abs() < 1e-9, "{left}");
    }

    #[test]
    fn one_unit_that_costs_the_budget_with_its_wake_ups_goes() {
        // The one function a wildcard's cut kept on Caddy: 8,300 hits a second at 1 us
        // (0.83%), the server woke 4,200 times, each 1.3 us more: 0.55% more, 1.38% in
        // all, over 2% x 0.6 (1.2%).
        let costs = [unit(0.83, 8300)];
        let woken = Woken { each_percent: 1.3e-4, slices: 4200 };
        let (n, left, _) = cut_until(&costs, &woken, 1.2, &STILL);
        assert_eq!(n, 1);
        assert_eq!(left, 0.0);
        // Under 2% x 0.8 (1.6%) it stays, at 1.38%.
        let (n, left, _) = cut_until(&costs, &woken, 1.6, &STILL);
        assert_eq!(n, 0);
        assert!((left - 1.376).abs() < 1e-9, "{left}");
    }
}
