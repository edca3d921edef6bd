//! What a duty cycle measures of the probes' cost for free: each period's attached part
//! against the detached parts on each side of it, a few hundred milliseconds apart on
//! the same process under the same host load. The difference of the target's CPU rate
//! (its threads' schedstat, read at each look of the budget), less the probes' eBPF
//! time (measured by the kernel), is what their traps and their hits after wake-ups
//! really cost it while attached; the estimate of those (the calibrated traps and
//! `trace::woken`'s term) is corrected by the ratio, over the periods so far.
//!
//! Why: under load the correction from the share before attaching (`trace::correction`)
//! sets aside the intervals in which the target waited for a CPU, so the calibrated
//! estimate stood uncorrected exactly where a duty cycle runs; and on a server whose
//! requests arrive alone (each waking a thread), the estimate read 2-4x below the
//! server's own CPU (docs/performance.md, "dutycpu"). Pairs of parts need no baseline:
//! the host's load is the same in both halves, and a drift that is linear over three
//! parts falls out of `on - (before + after) / 2`.
//!
//! Pure arithmetic over the looks: `trace::measured` feeds it a look and the cycle's
//! phase (from the budget's clock) at each look.

use std::time::{Duration, Instant};

/// Time left out after the probes come back (the first hits of a new link).
pub const AFTER_ON: Duration = Duration::from_millis(20);
/// Time left out after they are parked: their links are released on a thread of their
/// own, each close waiting for the kernel's grace period (tens of ms on a busy host).
pub const AFTER_OFF: Duration = Duration::from_millis(60);
/// The least clean time in a part for it to count.
pub const LEAST_PART: Duration = Duration::from_millis(80);
/// Each period's weight in the sums decays by this at the next one: about the last
/// seven periods (seconds) count, the host's load moving the trap's cost slowly; one
/// period alone moves by more than the effect (its parts are 100-500 ms of a loaded
/// host), so many are needed.
pub const KEEP: f64 = 0.85;
/// The estimate itself weighs as this much attached time at factor 1, decayed as the
/// periods are: the first periods move the factor part of the way.
pub const PRIOR_NS: f64 = 0.5e9;
/// The bounds of the factor.
pub const RANGE: (f64, f64) = (0.5, 6.0);
/// Periods needed before the factor is used.
pub const LEAST_PERIODS: u32 = 3;

/// One look: when, the target's CPU time and times put on a CPU so far, and the probes'
/// traps at the calibrated cost, eBPF time and hits so far (in the target).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Look {
    pub at: Instant,
    pub cpu_ns: u64,
    pub slices: u64,
    pub traps_ns: f64,
    pub run_ns: f64,
    pub hits: u64,
}

/// The cycle's phase at a look: attached or not, since when, and (detached) when the
/// probes are due back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    pub on: bool,
    pub since: Instant,
    pub back: Option<Instant>,
}

impl Phase {
    /// Whether the time from `a` to `b`, all in this phase, is clean: past the margin
    /// after its change, and (detached) before the probes are due back.
    fn clean(&self, a: Instant, b: Instant) -> bool {
        match self.on {
            true => a >= self.since + AFTER_ON,
            false => a >= self.since + AFTER_OFF && self.back.is_none_or(|back| b <= back),
        }
    }
}

/// The clean time of one part and what it held.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Part {
    wall_ns: f64,
    cpu_ns: f64,
    traps_ns: f64,
    run_ns: f64,
    hits: u64,
    slices: u64,
}

impl Part {
    fn add(&mut self, a: &Look, b: &Look) {
        self.wall_ns += b.at.saturating_duration_since(a.at).as_nanos() as f64;
        self.cpu_ns += b.cpu_ns.saturating_sub(a.cpu_ns) as f64;
        self.traps_ns += b.traps_ns - a.traps_ns;
        self.run_ns += b.run_ns - a.run_ns;
        self.hits += b.hits.saturating_sub(a.hits);
        self.slices += b.slices.saturating_sub(a.slices);
    }

    fn rate(&self) -> f64 {
        self.cpu_ns / self.wall_ns
    }

    fn counts(&self) -> bool {
        self.wall_ns >= LEAST_PART.as_nanos() as f64
    }
}

/// One period's pair: the attached part's extra CPU rate over its neighbours', the
/// estimate's rate beyond eBPF and the eBPF rate, as fractions of a CPU; with the
/// attached part's clean time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    pub measured: f64,
    pub estimated: f64,
    pub ebpf: f64,
    pub wall_ns: f64,
}

/// The running measure.
#[derive(Clone, Debug, Default)]
pub struct Paired {
    last: Option<(Look, Option<Phase>)>,
    /// The part being read: its phase's start, whether attached, and its clean time.
    current: Option<(Instant, bool, Part)>,
    /// The last detached part, and the attached part after it.
    off_before: Option<Part>,
    on: Option<Part>,
    /// Decayed sums over the periods (ns of CPU over clean attached time): measured
    /// beyond eBPF, estimated beyond eBPF, measured with eBPF; and that time.
    measured: f64,
    estimated: f64,
    whole: f64,
    wall: f64,
    /// The estimate beyond eBPF and the eBPF time over the same, without the prior.
    estimated_data: f64,
    ebpf: f64,
    pub periods: u32,
}

impl Paired {
    /// One look with the cycle's phase then (None: no cycle running); `woken_ns` is
    /// what a hit pays after its thread woke (`trace::woken`). Returns the pair a
    /// period completed, if any.
    pub fn look(&mut self, look: Look, phase: Option<Phase>, woken_ns: f64) -> Option<Pair> {
        let (prev, prev_phase) = self.last.replace((look, phase))?;
        let (Some(p), Some(q)) = (prev_phase, phase) else {
            // No cycle (or it just began or ended): nothing pairs across.
            self.reset();
            return None;
        };
        if p.since != q.since || p.on != q.on {
            // The interval holds a change: left out, and the part before it ends.
            return self.close(woken_ns);
        }
        let mut pair = None;
        if self.current.is_none_or(|c| c.0 != q.since) {
            pair = self.close(woken_ns);
            self.current = Some((q.since, q.on, Part::default()));
        }
        if let Some(c) = self.current.as_mut().filter(|_| q.clean(prev.at, look.at)) {
            c.2.add(&prev, &look);
        }
        pair
    }

    /// The part read so far ends: an attached one waits for the detached one after it;
    /// a detached one after an attached one, itself after a detached one, completes a
    /// period.
    fn close(&mut self, woken_ns: f64) -> Option<Pair> {
        let (_, on, part) = self.current.take()?;
        let part = part.counts().then_some(part);
        if on {
            self.on = part;
            return None;
        }
        let before = std::mem::replace(&mut self.off_before, part);
        let (Some(on), Some(before), Some(after)) = (self.on.take(), before, part) else { return None };
        let woken = woken_ns * on.hits.min(on.slices) as f64;
        let pair = Pair {
            measured: on.rate() - (before.rate() + after.rate()) / 2.0,
            estimated: (on.traps_ns + woken) / on.wall_ns,
            ebpf: on.run_ns / on.wall_ns,
            wall_ns: on.wall_ns,
        };
        self.take(&pair);
        Some(pair)
    }

    fn take(&mut self, p: &Pair) {
        if self.periods == 0 {
            // The estimate's own reading, as `PRIOR_NS` of attached time at factor 1,
            // decayed as the periods are.
            self.measured = p.estimated * PRIOR_NS;
            self.estimated = p.estimated * PRIOR_NS;
        }
        self.measured = KEEP * self.measured + (p.measured - p.ebpf) * p.wall_ns;
        self.estimated = KEEP * self.estimated + p.estimated * p.wall_ns;
        self.whole = KEEP * self.whole + p.measured * p.wall_ns;
        self.wall = KEEP * self.wall + p.wall_ns;
        self.estimated_data = KEEP * self.estimated_data + p.estimated * p.wall_ns;
        self.ebpf = KEEP * self.ebpf + p.ebpf * p.wall_ns;
        self.periods += 1;
    }

    fn reset(&mut self) {
        self.current = None;
        self.off_before = None;
        self.on = None;
    }

    /// The factor on the estimate beyond eBPF (traps and wake-ups), once enough periods
    /// were paired: the measured over the estimated (with the prior, `PRIOR_NS`).
    pub fn factor(&self) -> Option<f64> {
        if self.periods < LEAST_PERIODS || self.estimated <= 0.0 {
            return None;
        }
        Some((self.measured / self.estimated).clamp(RANGE.0, RANGE.1))
    }

    /// The probes' measured cost while attached (eBPF included), a fraction of a CPU,
    /// over the periods so far (decayed as the factor's sums).
    pub fn measured_on(&self) -> Option<f64> {
        (self.periods > 0 && self.wall > 0.0).then(|| self.whole / self.wall)
    }

    /// What `--stats` says of it.
    pub fn measure(&self) -> Option<crate::output::measured::DutyMeasure> {
        Some(crate::output::measured::DutyMeasure {
            periods: self.periods,
            measured_percent: 100.0 * self.measured_on()?,
            estimated_percent: 100.0 * self.estimated_on()?,
            factor: self.factor(),
        })
    }

    /// What the estimate said of the same time (eBPF included, uncorrected), a
    /// fraction of a CPU.
    pub fn estimated_on(&self) -> Option<f64> {
        (self.periods > 0 && self.wall > 0.0).then(|| (self.estimated_data + self.ebpf) / self.wall)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cycle attached `f` of each second from `t0`, looked at every 100 ms for
    /// `seconds`: the target spends `base` of a CPU and `extra` more while attached, of
    /// which `ebpf` in eBPF; the estimate puts the traps at `traps` of a CPU while
    /// attached (1,000 hits a second, as many wake-ups).
    fn cycle(f: f64, seconds: u32, (base, extra, ebpf, traps): (f64, f64, f64, f64)) -> (Paired, Vec<Pair>) {
        let t0 = Instant::now();
        let mut paired = Paired::default();
        let mut look = Look { at: t0, cpu_ns: 0, slices: 0, traps_ns: 0.0, run_ns: 0.0, hits: 0 };
        let mut pairs = Vec::new();
        // Every 10 ms of simulated time, a look every 100 ms (a little late, as the loop's).
        for tick in 1..=(seconds * 100) {
            let at = t0 + Duration::from_millis(10 * tick as u64);
            let phase_of = |t: Instant| {
                let s = t.duration_since(t0).as_secs_f64();
                let start = t0 + Duration::from_secs(s.floor() as u64);
                match s.fract() < f {
                    true => Phase { on: true, since: start, back: None },
                    false => Phase {
                        on: false,
                        since: start + Duration::from_secs_f64(f),
                        back: Some(start + Duration::from_secs(1)),
                    },
                }
            };
            let on = phase_of(at).on;
            look.cpu_ns += (1e7 * (base + if on { extra } else { 0.0 })) as u64;
            if on {
                look.traps_ns += 1e7 * traps;
                look.run_ns += 1e7 * ebpf;
                look.hits += 10;
                look.slices += 10;
            }
            if tick % 10 == 3 {
                look.at = at;
                pairs.extend(paired.look(look, Some(phase_of(at)), 0.0));
            }
        }
        (paired, pairs)
    }

    #[test]
    fn each_period_pairs_its_attached_part_with_the_detached_ones_around_it() {
        // 6% of a CPU more while attached, 1% of it eBPF; the traps estimated at 2%:
        // beyond eBPF the target pays 5% for 2% estimated, 2.5x.
        let (paired, pairs) = cycle(0.5, 12, (0.30, 0.06, 0.01, 0.02));
        assert!(pairs.len() >= 9, "{pairs:?}");
        for p in &pairs {
            assert!((p.measured - 0.06).abs() < 1e-9 && (p.estimated - 0.02).abs() < 1e-9, "{p:?}");
            assert!((p.ebpf - 0.01).abs() < 1e-9, "{p:?}");
        }
        // The prior (factor 1) fades: near 2.5 after a dozen periods.
        let f = paired.factor().unwrap();
        assert!(f > 2.3 && f < 2.5, "{f}");
        assert!((paired.measured_on().unwrap() - 0.06).abs() < 1e-9);
        assert!((paired.estimated_on().unwrap() - 0.03).abs() < 1e-9);
    }

    #[test]
    fn a_short_attached_part_still_pairs_and_too_few_periods_say_nothing() {
        let (paired, pairs) = cycle(0.25, 12, (0.30, 0.06, 0.01, 0.02));
        assert!(pairs.len() >= 9, "{pairs:?}");
        let (few, pairs) = cycle(0.5, 3, (0.30, 0.06, 0.01, 0.02));
        assert!(pairs.len() < LEAST_PERIODS as usize && few.factor().is_none(), "{pairs:?}");
        assert!(paired.factor().is_some());
    }

    #[test]
    fn no_cycle_no_pairs_and_the_factor_is_bounded() {
        let mut p = Paired::default();
        let look = |ms: u64, cpu: u64| Look {
            at: Instant::now() + Duration::from_millis(ms),
            cpu_ns: cpu,
            slices: 0,
            traps_ns: 0.0,
            run_ns: 0.0,
            hits: 0,
        };
        for i in 0..50 {
            assert_eq!(p.look(look(100 * i, 1_000_000 * i), None, 0.0), None);
        }
        assert_eq!((p.periods, p.factor()), (0, None));
        // A target that spends 50% of a CPU more while attached for traps put at 1%.
        let (far, _) = cycle(0.5, 12, (0.30, 0.50, 0.0, 0.01));
        assert_eq!(far.factor(), Some(RANGE.1));
    }
}
