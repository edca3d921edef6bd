//! The correction of the calibrated trap cost, kind by kind, from what the target really
//! spent: pure arithmetic over intervals of a trace (`trace::measured` cuts them and
//! reads the target's CPU; this decides what they say).
//!
//! In one interval the target spent `extra` CPU above its share before attaching; the
//! kernel measured `run` of it in the probes' eBPF programs; the rest is taken to be
//! their traps, which the estimate puts at `t_k` (the hits on each kind of instruction
//! at its calibrated cost). One interval gives one number, so it corrects one factor
//! common to every kind (`extra - run = c * sum(t_k)`). The kinds are told apart only
//! where the data can tell them: over intervals whose mix of kinds differs (a cut that
//! detached the single-stepped sites and kept the emulated ones), a least-squares fit
//! of one factor per kind, held to the common factor as much as the data are (a ridge
//! toward it): with one mix throughout, every kind gets the common factor exactly.
//!
//! The sums the fit reads decay by `1 - SMOOTHING` at each interval, so that the
//! correction follows the host's load (a trap costs up to twice as much on a busy host)
//! as it goes, over a few seconds, and one noisy interval moves it by a part. The
//! calibration is itself a reading, and weighs as one interval (`PRIOR`) decayed as the
//! others: the first interval alone moves the correction half way, not all the way
//! (an interval is as noisy as consecutive ones differ, 2-21% here, and a lone one
//! read past the bound where the whole trace read 0.88x). Once two consecutive
//! intervals agree, the data alone decide (below).
//! An interval whose common factor is outside `PLAUSIBLE` is set aside, not clamped:
//! the target's own load changed (an idle server whose requests began after the attach
//! spends many times the estimate more; a server at the end of its CPUs spends no more
//! traced than before, its probes taking what its work gave up), and such a measure
//! says nothing of the traps. Nor does an interval in which the target waited for a CPU
//! (its run-queue time) `WAITED` of the time it ran beyond what it waited untraced
//! (`trace::measured` takes that off: a program woken by a ticker every millisecond
//! waited a quarter of its run on an idle VM, its wake-ups' latency) and `HELD` of a
//! CPU (a baseline that read no wait made such wake-ups look held back), whatever its
//! factor: a target the host holds back may do less of its own work while traced (what
//! it spends above its share before is then only a floor: on echo under load it read
//! 0.88 where its CPU per request said 1.5), or catch up on it later, and the host's
//! other work moves the trap's cost as it comes and goes. Setting aside only the low
//! ones (as this once did) kept the high ones alone: on a test program the host held
//! back, with its pace kept, one interval of four was taken and the correction went
//! 7-24% above what the program spent, where the calibrated estimate had been within
//! 5%. Under contention the calibrated estimate (made at the start, under the host's
//! load then) stands. What the fit gives is bounded to `SCALE_RANGE`.
//!
//! Unless consecutive intervals agree: the calibration itself can be off by more than
//! `PLAUSIBLE` allows (made in milliseconds at start-up, on a host whose CPUs' trap cost
//! moves by 1.5x for seconds at a time, `runtime::calibrate`: a fresh-clone CI saw it
//! 2.3x what the program spent, this VM 2.6x and 2.2x), and then every interval was set
//! aside and the estimate stayed wrong for the whole trace. A load that changed by chance
//! gives factors that wander from one interval to the next; a calibration that is off
//! gives about the same one each time. So an interval whose factor is within `AGREE` of the
//! interval just before (measurable and not held back) is taken even outside
//! `PLAUSIBLE`, as far as `AGREED` (a calibration up to 4x too high or 3x too low),
//! and the bounds on the result widen to the factors so agreed: the corrected estimate
//! then converges to what the target spends. The first of the two stays set aside (it
//! was, when it came); a lone implausible one still is, unless it is as near the
//! correction made from agreeing intervals as `PLAUSIBLE` is to 1 (the correction then
//! stands where the calibration stood).

use crate::arch::trap::{ByKind, TrapKind};

/// An estimate under this share of a CPU (percent) is not checked.
pub const MEASURABLE: f64 = 1.0;
/// The bounds of the correction: the calibrated estimate was within these of what
/// targets spent (5-25% high on a test program, a third low on a database server).
pub const SCALE_RANGE: (f64, f64) = (0.67, 1.5);
/// An interval whose common factor falls outside these measured the target's load, not
/// the probes.
pub const PLAUSIBLE: (f64, f64) = (0.5, 2.0);
/// Factors two consecutive intervals must both fall in to be taken when outside
/// `PLAUSIBLE`.
pub const AGREED: (f64, f64) = (0.25, 3.0);
/// Two intervals agree when their factors differ by at most this share of their mean.
/// (Consecutive intervals of tests/go/prod under a steady load, on this VM with other
/// builds running, differed by 2-21%, most by under 10%.)
pub const AGREE: f64 = 0.15;
/// A target whose threads waited for a CPU this much of the time they ran was held back
/// by the host: its own work may have given way to the probes.
pub const WAITED: f64 = 0.25;
/// Nor unless its waits beyond those untraced also came to this share of a CPU over
/// the interval: a program woken every millisecond waits for each wake-up even on an
/// idle host (tests/go/prod under SCHED_FIFO, standing in for one, waited 0.8-1.9% of a
/// CPU traced, 4-5% of its run), which is not the host holding it back, even when a
/// baseline that read no wait makes it a quarter of a small run; a host that held it
/// back (four compilers on this 2-CPU VM) made it wait 7-18% more.
pub const HELD: f64 = 0.03;
/// The weight of the newest interval once several are in (the sums decay by the rest).
pub const SMOOTHING: f64 = 0.3;
/// How strongly the kinds are held to the common factor (1: as strongly as their own
/// data pull them apart).
const RIDGE: f64 = 1.0;
/// The calibration's weight in the fit, in intervals: the first interval taken moves
/// the correction half way from it, and it fades as the others do (a lone 1 s interval
/// on Caddy read 1.5x, at the bound, where the whole trace said 0.88x, and the budget
/// detached `gtrace http` on it: docs/performance.md). Dropped once intervals agree
/// that the calibration is off.
pub const PRIOR: f64 = 1.0;

/// One interval of a trace, in ns: its wall time, what the target spent on a CPU and
/// waited for one, what it spent above its share before attaching, the probes' eBPF
/// time, and their traps by kind at the calibrated cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Interval {
    pub wall_ns: f64,
    pub spent_ns: f64,
    pub waited_ns: f64,
    pub extra_ns: f64,
    pub run_ns: f64,
    pub traps_ns: ByKind,
}

/// What one interval did to the correction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Seen {
    /// Its common factor went into the fit.
    Taken(f64),
    /// The probes cost too little then to be told from the target's noise.
    TooSmall,
    /// Its common factor says the target's load changed (outside `PLAUSIBLE`, and not
    /// agreeing with the interval before's): set aside.
    SetAside(f64),
    /// The target waited for a CPU (`WAITED`) in it: what it spent says as much of the
    /// host's contention as of the probes. Set aside, whatever its factor.
    HeldBack(f64),
}

/// The fit so far: decayed sums over the intervals taken, in shares of a CPU.
#[derive(Clone, Debug, Default)]
pub struct Correction {
    /// Sum of t t' (traps by kind, each interval's vector with itself).
    tt: [[f64; 3]; 3],
    /// Sum of t y (y: what is left of the extra once eBPF time is taken off).
    ty: [f64; 3],
    /// The calibration as an interval of its own (`PRIOR`): the first taken's traps
    /// at factor 1, decayed as the sums are; left out of the fit once intervals agree.
    prior_tt: [[f64; 3]; 3],
    prior_ty: [f64; 3],
    /// Intervals taken and set aside.
    pub taken: u32,
    pub set_aside: u32,
    /// The common factor of the interval before, when it was measurable and the target
    /// was not held back in it.
    last: Option<f64>,
    /// The lowest and highest factor two consecutive intervals agreed on: how far the
    /// bounds on the result widen.
    agreed: Option<(f64, f64)>,
}

fn vector(t: &ByKind) -> [f64; 3] {
    TrapKind::ALL.map(|k| t.of(k))
}

impl Correction {
    /// Takes one interval in (or not: `Seen` says why).
    pub fn observe(&mut self, i: &Interval) -> Seen {
        if i.wall_ns <= 0.0 {
            return Seen::TooSmall;
        }
        let t = vector(&i.traps_ns.map(|ns| ns / i.wall_ns));
        let total: f64 = t.iter().sum();
        let y = (i.extra_ns - i.run_ns) / i.wall_ns;
        if 100.0 * (total + i.run_ns / i.wall_ns) < MEASURABLE || total <= 0.0 {
            return Seen::TooSmall;
        }
        let common = y / total;
        if i.waited_ns >= WAITED * i.spent_ns && i.waited_ns >= HELD * i.wall_ns {
            self.set_aside += 1;
            self.last = None;
            return Seen::HeldBack(common);
        }
        let agrees = self.last.is_some_and(|l| (common - l).abs() <= AGREE * (common + l) / 2.0);
        self.last = Some(common);
        let possible = (AGREED.0..=AGREED.1).contains(&common);
        // Once intervals agreed, plausible is also as near the correction as PLAUSIBLE
        // is to the calibration.
        let near = |c: f64| (PLAUSIBLE.0 * c..=PLAUSIBLE.1 * c).contains(&common);
        let near_agreed = self.agreed.is_some() && self.common().is_some_and(near);
        if agrees && possible {
            let (lo, hi) = self.agreed.unwrap_or((common, common));
            self.agreed = Some((lo.min(common), hi.max(common)));
        } else if !(PLAUSIBLE.0..=PLAUSIBLE.1).contains(&common) && !(near_agreed && possible) {
            self.set_aside += 1;
            return Seen::SetAside(common);
        }
        let first = self.taken == 0;
        let keep = if first { 0.0 } else { 1.0 - SMOOTHING };
        // With the first, the calibration's own reading: its traps at factor 1.
        let prior = if first { PRIOR } else { 0.0 };
        for a in 0..3 {
            for b in 0..3 {
                self.tt[a][b] = keep * self.tt[a][b] + t[a] * t[b];
                self.prior_tt[a][b] = keep * self.prior_tt[a][b] + prior * t[a] * t[b];
            }
            self.ty[a] = keep * self.ty[a] + t[a] * y;
            self.prior_ty[a] = keep * self.prior_ty[a] + prior * t[a] * total;
        }
        self.taken += 1;
        Seen::Taken(common)
    }

    /// The sums the fit reads: the intervals', and the calibration's while no intervals
    /// agreed that it is off.
    fn sums(&self) -> ([[f64; 3]; 3], [f64; 3]) {
        let (mut tt, mut ty) = (self.tt, self.ty);
        if self.agreed.is_none() {
            for a in 0..3 {
                for b in 0..3 {
                    tt[a][b] += self.prior_tt[a][b];
                }
                ty[a] += self.prior_ty[a];
            }
        }
        (tt, ty)
    }

    /// The factor common to every kind: the least-squares fit of `y = c * sum(t)`.
    fn common(&self) -> Option<f64> {
        let (tt, ty) = self.sums();
        let tt: f64 = tt.iter().flatten().sum();
        let ty: f64 = ty.iter().sum();
        (self.taken > 0 && tt > 0.0).then(|| ty / tt)
    }

    /// The factor of each kind's calibrated trap cost, bounded; `None` before an
    /// interval is taken. A kind no interval saw gets the common factor.
    pub fn scales(&self) -> Option<ByKind> {
        let c = self.common()?;
        let (tt, ty) = self.sums();
        // The kinds the data saw; the fit is over them alone.
        let seen: Vec<usize> = (0..3).filter(|k| tt[*k][*k] > 0.0).collect();
        // Minimise sum (y - s.t)^2 + RIDGE * sum_k tt_kk (s_k - c)^2:
        // (TT + RIDGE D) s = ty + RIDGE D c.
        let mut a: Vec<Vec<f64>> = seen
            .iter()
            .map(|r| {
                let mut row: Vec<f64> = seen.iter().map(|col| tt[*r][*col]).collect();
                let at = seen.iter().position(|k| k == r).unwrap_or(0);
                row[at] += RIDGE * tt[*r][*r];
                row.push(ty[*r] + RIDGE * tt[*r][*r] * c);
                row
            })
            .collect();
        let fitted = solve(&mut a).unwrap_or_else(|| vec![c; seen.len()]);
        let (lo, hi) = self.bounds();
        let bounded = |s: f64| s.clamp(lo, hi);
        let mut out = ByKind::all(bounded(c));
        for (k, s) in seen.iter().zip(fitted) {
            let kind = TrapKind::ALL[*k];
            out.add(kind, bounded(s) - out.of(kind));
        }
        Some(out)
    }

    /// The common factor, bounded (what `--stats` says in one number).
    pub fn common_scale(&self) -> Option<f64> {
        let (lo, hi) = self.bounds();
        self.common().map(|c| c.clamp(lo, hi))
    }

    /// `SCALE_RANGE`, widened to the factors consecutive intervals agreed on.
    fn bounds(&self) -> (f64, f64) {
        let (lo, hi) = self.agreed.unwrap_or(SCALE_RANGE);
        (lo.min(SCALE_RANGE.0), hi.max(SCALE_RANGE.1))
    }
}

/// Solves the augmented system `a` (n rows of n + 1) by Gaussian elimination with
/// partial pivoting; `None` when it is singular.
fn solve(a: &mut [Vec<f64>]) -> Option<Vec<f64>> {
    let n = a.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|x, y| a[*x][col].abs().total_cmp(&a[*y][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            for k in col..=n {
                a[row][k] -= f * a[col][k];
            }
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let rest: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][n] - rest) / a[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval of one second: `step` and `push` ns of traps at the calibrated cost,
    /// 5% of a CPU in eBPF, and the target spent `extra` above its share before.
    fn second(step: f64, push: f64, extra: f64) -> Interval {
        Interval {
            wall_ns: 1e9,
            spent_ns: 0.5e9,
            waited_ns: 0.0,
            extra_ns: extra,
            run_ns: 0.05e9,
            traps_ns: ByKind { step, push, branch: 0.0 },
        }
    }

    #[test]
    fn one_mix_corrects_every_kind_by_the_common_factor() {
        let mut c = Correction::default();
        assert_eq!(c.scales(), None);
        // Traps 30% of a CPU (20 step, 10 push), eBPF 5%; the target spent 41% more:
        // the traps cost 36%, 1.2x the estimate.
        assert!(matches!(c.observe(&second(0.2e9, 0.1e9, 0.41e9)), Seen::Taken(f) if (f - 1.2).abs() < 1e-9));
        // The first interval weighs as much as the calibration (PRIOR): half way.
        let s = c.scales().unwrap();
        for k in [s.step, s.push, s.branch] {
            assert!((k - 1.1).abs() < 1e-9, "{s:?}");
        }
        // As readings stay at 1.2, the calibration fades: traps and eBPF time at the
        // correction equal the extra.
        for _ in 0..40 {
            c.observe(&second(0.2e9, 0.1e9, 0.41e9));
        }
        let s = c.scales().unwrap();
        for k in [s.step, s.push, s.branch] {
            assert!((k - 1.2).abs() < 1e-6, "{s:?}");
        }
        assert!((0.2e9 * s.step + 0.1e9 * s.push + 0.05e9 - 0.41e9).abs() < 1e3);
    }

    #[test]
    fn smoothing_moves_a_part_of_the_way_to_a_new_reading() {
        let mut c = Correction::default();
        c.observe(&second(0.2e9, 0.1e9, 0.35e9)); // 1.0
        c.observe(&second(0.2e9, 0.1e9, 0.41e9)); // 1.2
        let s = c.common_scale().unwrap();
        // The sums decay by 0.7, the calibration's (1.0) with them:
        // (0.7 * 1.0 + 0.7 * 1.0 + 1.2) / 2.4.
        assert!((s - (0.7 + 0.7 + 1.2) / 2.4).abs() < 1e-9, "{s}");
        // Readings that stay at 1.2 draw it there.
        for _ in 0..20 {
            c.observe(&second(0.2e9, 0.1e9, 0.41e9));
        }
        assert!((c.common_scale().unwrap() - 1.2).abs() < 1e-3);
    }

    #[test]
    fn mixes_that_differ_tell_the_kinds_apart() {
        // Single-steps really cost 1.4x the calibration, pushes 0.9x: two mixes (before
        // and after a cut of most single-stepped sites).
        let truth = |step: f64, push: f64| second(step, push, 1.4 * step + 0.9 * push + 0.05e9);
        let mut c = Correction::default();
        for _ in 0..3 {
            c.observe(&truth(0.3e9, 0.05e9));
            c.observe(&truth(0.02e9, 0.2e9));
        }
        let s = c.scales().unwrap();
        // The ridge holds them toward the common factor: apart, in the right order, each
        // nearer its truth than the common factor is.
        let common = c.common_scale().unwrap();
        assert!(s.step > common && s.push < common, "{s:?}, common {common}");
        assert!((s.step - 1.4).abs() < (common - 1.4).abs(), "{s:?}");
        assert!((s.push - 0.9).abs() < (common - 0.9).abs(), "{s:?}");
        // A kind never seen gets the common factor.
        assert_eq!(s.branch, common);
    }

    #[test]
    fn a_changed_load_is_set_aside_and_the_result_bounded() {
        let mut c = Correction::default();
        // An idle server whose requests began after the attach: 10x the estimate more.
        assert!(matches!(c.observe(&second(0.2e9, 0.1e9, 3.0e9)), Seen::SetAside(_)));
        // A server at the end of its CPUs: no more spent traced than before.
        assert!(matches!(c.observe(&second(0.2e9, 0.1e9, 0.0)), Seen::SetAside(_)));
        assert_eq!(c.scales(), None, "nothing taken: no correction");
        assert_eq!(c.set_aside, 2);
        // 1.8x is plausible: the first reading is taken half way (1.4).
        let at = |f: f64| second(0.2e9, 0.1e9, f * 0.3e9 + 0.05e9);
        c.observe(&at(1.8));
        assert!((c.common_scale().unwrap() - 1.4).abs() < 1e-9);
        // Readings that do not agree with the one before (1.4, 1.9) draw it past the
        // bound: 1.5.
        for f in [1.4, 1.9] {
            c.observe(&at(f));
        }
        assert_eq!(c.scales(), Some(ByKind::all(SCALE_RANGE.1)));
    }

    #[test]
    fn the_calibration_weighs_as_one_interval_until_intervals_agree() {
        let at = |f: f64| second(0.2e9, 0.1e9, f * 0.3e9 + 0.05e9);
        // A lone first interval reading 1.9 (the Caddy trace of docs/performance.md read
        // past the bound in its first second): taken half way, under the bound.
        let mut c = Correction::default();
        c.observe(&at(1.9));
        assert!((c.common_scale().unwrap() - 1.45).abs() < 1e-9);
        // One that agrees with it: the calibration is off, and the data alone decide
        // ((0.7 * 1.9 + 1.8) / 1.7 = 1.84, within the bound widened to the factor they
        // agreed on: 1.8).
        c.observe(&at(1.8));
        assert!((c.common_scale().unwrap() - 1.8).abs() < 1e-9);
    }

    #[test]
    fn a_target_held_back_by_the_host_is_set_aside_either_way() {
        let mut c = Correction::default();
        // It waited for a CPU half as long as it ran: 0.9x may be a floor, 1.2x the
        // host's contention; neither is taken (taking only one side biases the fit).
        let held = |extra: f64| Interval { waited_ns: 0.25e9, ..second(0.2e9, 0.1e9, extra) };
        assert!(matches!(c.observe(&held(0.32e9)), Seen::HeldBack(_)));
        assert!(matches!(c.observe(&held(0.41e9)), Seen::HeldBack(_)));
        assert_eq!((c.scales(), c.set_aside), (None, 2));
        // Waiting a little (a tenth of its run) is not being held back.
        let mut c = Correction::default();
        let waited = Interval { waited_ns: 0.05e9, ..second(0.2e9, 0.1e9, 0.32e9) };
        assert!(matches!(c.observe(&waited), Seen::Taken(_)));
    }

    #[test]
    fn a_wake_ups_latency_is_not_being_held_back() {
        // An idle host: the baseline read no wait (0 untraced), and traced the target
        // waited 15 ms in a second, 30% of its 50 ms run: over WAITED as a part of its
        // run, but 1.5% of a CPU, under HELD. Taken.
        let mut c = Correction::default();
        let woken = Interval { spent_ns: 0.05e9, waited_ns: 0.015e9, ..second(0.02e9, 0.01e9, 0.085e9) };
        assert!(matches!(c.observe(&woken), Seen::Taken(f) if (f - 35.0 / 30.0).abs() < 1e-9), "{c:?}");
        // 0.3 ms of wait with none before: taken whatever the run.
        let tiny = Interval { spent_ns: 1e6, waited_ns: 0.3e6, ..second(0.02e9, 0.01e9, 0.085e9) };
        assert!(matches!(c.observe(&tiny), Seen::Taken(_)));
        // The same part of a larger run, 90 ms of a second (9% of a CPU): held back.
        let held = Interval { spent_ns: 0.3e9, waited_ns: 0.09e9, ..second(0.02e9, 0.01e9, 0.085e9) };
        assert!(matches!(c.observe(&held), Seen::HeldBack(_)));
        assert_eq!((c.taken, c.set_aside), (2, 1));
    }

    #[test]
    fn too_little_to_tell_is_not_taken() {
        let mut c = Correction::default();
        // 0.5% of a CPU in all: under MEASURABLE.
        let small =
            Interval { wall_ns: 1e9, extra_ns: 9e6, run_ns: 1e6, traps_ns: ByKind::all(1.3e6), ..Interval::default() };
        assert_eq!(c.observe(&small), Seen::TooSmall);
        assert_eq!(c.observe(&Interval::default()), Seen::TooSmall);
        assert_eq!((c.taken, c.set_aside, c.scales()), (0, 0, None));
    }

    #[test]
    fn consecutive_intervals_that_agree_correct_a_calibration_far_off() {
        // The calibration 2.5x what the traps really cost: every interval reads 0.4 (and
        // a little noise), under PLAUSIBLE.
        let off = |f: f64| second(0.2e9, 0.1e9, f * 0.3e9 + 0.05e9);
        let mut c = Correction::default();
        assert!(matches!(c.observe(&off(0.40)), Seen::SetAside(_)), "the first alone is set aside");
        assert_eq!(c.scales(), None);
        assert!(matches!(c.observe(&off(0.42)), Seen::Taken(f) if (f - 0.42).abs() < 1e-9));
        for f in [0.39, 0.41, 0.40, 0.40] {
            assert!(matches!(c.observe(&off(f)), Seen::Taken(_)));
        }
        let s = c.common_scale().unwrap();
        assert!((s - 0.40).abs() < 0.01, "the bound widened to what they agreed on: {s}");
        assert_eq!((c.taken, c.set_aside), (5, 1));
        // From then on one that does not agree with the one before, but is as near the
        // correction as PLAUSIBLE is to 1, is taken (noise around the corrected cost).
        assert!(matches!(c.observe(&off(0.31)), Seen::Taken(_)));
        // Not past AGREED.
        assert!(matches!(c.observe(&off(0.21)), Seen::SetAside(_)));
        // A calibration half what the traps cost: 2.0 and 2.1, past SCALE_RANGE.
        let mut c = Correction::default();
        c.observe(&off(2.0));
        c.observe(&off(2.1));
        let s = c.common_scale().unwrap();
        assert!((s - (0.7 * 2.0 + 2.1) / 1.7).abs() < 1e-9, "{s}");
    }

    #[test]
    fn intervals_that_wander_or_go_past_agreed_are_still_set_aside() {
        let off = |f: f64| second(0.2e9, 0.1e9, f * 0.3e9 + 0.05e9);
        let mut c = Correction::default();
        // A load that changes by chance: implausible factors that differ.
        for f in [0.40, 0.30, 0.45, 2.5, 4.0, 0.2, 0.2, 0.1] {
            assert!(matches!(c.observe(&off(f)), Seen::SetAside(_)), "{f}");
        }
        // Agreeing beyond AGREED (a server idle before attaching, busy since): set aside.
        for f in [5.0, 5.1, 5.0] {
            assert!(matches!(c.observe(&off(f)), Seen::SetAside(_)), "{f}");
        }
        assert_eq!((c.taken, c.scales()), (0, None));
        // Plausible ones are taken, and without agreement the bounds stay SCALE_RANGE.
        for f in [1.9, 1.4, 1.9] {
            c.observe(&off(f));
        }
        assert_eq!(c.common_scale(), Some(SCALE_RANGE.1));
        // An interval held back in between breaks the run: the next implausible one has
        // nothing to agree with.
        let mut c = Correction::default();
        c.observe(&off(0.4));
        c.observe(&Interval { waited_ns: 0.25e9, ..off(0.4) });
        assert!(matches!(c.observe(&off(0.4)), Seen::SetAside(_)));
        assert!(matches!(c.observe(&off(0.41)), Seen::Taken(_)));
    }

    #[test]
    fn solves_a_small_system() {
        let mut a = vec![vec![2.0, 1.0, 5.0], vec![1.0, 3.0, 10.0]];
        let x = solve(&mut a).unwrap();
        assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 3.0).abs() < 1e-12, "{x:?}");
        assert_eq!(solve(&mut [vec![0.0, 1.0]]), None);
    }
}
