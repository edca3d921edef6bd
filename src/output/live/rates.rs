//! Rates per second for the live view: what each counted thing (a map entry's count or
//! sum, a probe's hits or cost) amounted to at the previous redraw, and how fast it grew
//! since. A thing first seen counts from zero at the previous redraw (at the start, the
//! moment the view opened, when the probes were attached).

use std::collections::HashMap;
use std::time::Instant;

/// The amounts seen at the last redraw, by (what, which): (`@calls`, key text),
/// (`probe`, program name).
pub struct Rates {
    before: HashMap<(String, String), f64>,
    now: HashMap<(String, String), f64>,
    since: Instant,
    seconds: f64,
}

impl Rates {
    pub fn new(start: Instant) -> Rates {
        Rates { before: HashMap::new(), now: HashMap::new(), since: start, seconds: 0.0 }
    }

    /// Starts a redraw at `at`: the amounts given from now on are compared with those of
    /// the previous redraw.
    pub fn tick(&mut self, at: Instant) {
        self.before = std::mem::take(&mut self.now);
        self.seconds = at.saturating_duration_since(self.since).as_secs_f64();
        self.since = at;
    }

    /// Records `amount` of (what, which) and returns its growth per second since the
    /// previous redraw (None before the first interval has passed). A thing that
    /// shrank (a map cleared by `clear()`) grew from zero.
    pub fn per_second(&mut self, what: &str, which: &str, amount: f64) -> Option<f64> {
        let key = (what.to_string(), which.to_string());
        let before = self.before.get(&key).copied().unwrap_or(0.0);
        self.now.insert(key, amount);
        if self.seconds <= 0.0 {
            return None;
        }
        let grown = if amount >= before { amount - before } else { amount };
        Some(grown / self.seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_rate_is_the_growth_since_the_previous_redraw() {
        let t0 = Instant::now();
        let mut r = Rates::new(t0);
        r.tick(t0 + Duration::from_secs(2));
        // First seen: grew from zero over the 2 s since the start.
        assert_eq!(r.per_second("@calls", "", 10.0), Some(5.0));
        r.tick(t0 + Duration::from_secs(3));
        assert_eq!(r.per_second("@calls", "", 40.0), Some(30.0));
        r.tick(t0 + Duration::from_millis(3500));
        // Cleared, then counted 4 again.
        assert_eq!(r.per_second("@calls", "", 4.0), Some(8.0));
        // Not given at the last redraw: from zero.
        assert_eq!(r.per_second("@other", "k", 1.0), Some(2.0));
    }

    #[test]
    fn no_rate_before_time_has_passed() {
        let t0 = Instant::now();
        let mut r = Rates::new(t0);
        r.tick(t0);
        assert_eq!(r.per_second("@calls", "", 10.0), None);
    }
}
