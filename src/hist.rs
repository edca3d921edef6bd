//! The buckets of `hist()`: 16 logarithmic sub-buckets inside each power of two (the
//! buckets of an OTLP exponential histogram at scale 4, a Prometheus native histogram
//! of schema 4), the power-of-two rows printed from them, and percentiles read from them.
//!
//! Bucket 0 holds every value <= 0; bucket `1 + 16 p + j` (p in 0..63, j in 0..16) holds
//! the values x with 2^(p + j/16) <= x < 2^(p + (j+1)/16). The eBPF side (lower/agg.rs)
//! finds p as the top bit of x and j by comparing x shifted to the top of 64 bits with
//! `THRESHOLDS`; `index` here is the same computation, for tests and for reference.

/// Sub-buckets per power of two, as a power of two: the OTLP scale, the native schema.
pub const SCALE: u32 = 4;
/// Sub-buckets per power of two.
pub const SUB: usize = 1 << SCALE;
/// Powers of two a positive int64 spans (2^0 ..= 2^62).
pub const OCTAVES: usize = 63;
/// Buckets of a `hist()`: the one for values <= 0, then 16 per power of two.
pub const BUCKETS: usize = 1 + OCTAVES * SUB;
/// Rows printed: the one for values <= 0, then one per power of two ([1, 2), [2, 4), ...).
pub const ROWS: usize = 1 + OCTAVES;

/// The percentiles printed under every histogram, in thousandths (p50 ... p99.9).
pub const PERCENTILES: [(u32, &str); 4] = [(500, "p50"), (900, "p90"), (990, "p99"), (999, "p99.9")];

/// `THRESHOLDS[j]` (j in 1..16): 2^63 * 2^(j/16), rounded and made odd. A value whose top
/// bit is p, shifted left by 63 - p (its low bit is then 0, so it never equals one), is in
/// sub-bucket j when it is at least `THRESHOLDS[j]` and below `THRESHOLDS[j + 1]`.
/// `THRESHOLDS[0]` is 2^63 itself (every shifted value is at least that).
pub fn thresholds() -> [u64; SUB] {
    let mut t = [0u64; SUB];
    for (j, slot) in t.iter_mut().enumerate() {
        *slot = if j == 0 { 1 << 63 } else { (2f64.powf(j as f64 / SUB as f64) * 2f64.powi(63)) as u64 | 1 };
    }
    t
}

/// The bucket of `x`, as the eBPF side computes it.
pub fn index(x: i64) -> usize {
    if x <= 0 {
        return 0;
    }
    let p = 63 - x.leading_zeros() as usize;
    let shifted = (x as u64) << (63 - p);
    let j = thresholds().iter().rposition(|t| shifted >= *t).unwrap_or(0);
    1 + SUB * p + j
}

/// The bounds of bucket `i >= 1` as numbers: [2^(p + j/16), 2^(p + (j+1)/16)).
pub fn bounds(i: usize) -> (f64, f64) {
    let n = (i.max(1) - 1) as f64;
    (2f64.powf(n / SUB as f64), 2f64.powf((n + 1.0) / SUB as f64))
}

/// The printed row of bucket `i`: 0 for values <= 0, k for [2^(k-1), 2^k).
pub fn row(i: usize) -> usize {
    if i == 0 {
        0
    } else {
        1 + (i - 1) / SUB
    }
}

/// A `hist()`'s value: its buckets, the sum of its values, and its exact extremes.
#[derive(Clone, Debug, PartialEq)]
pub struct Fine {
    pub counts: Vec<u64>,
    /// The smallest and largest value (None when nothing was counted).
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl Fine {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The counts of the printed rows (sums of each power of two's sub-buckets).
    pub fn rows(&self) -> Vec<u64> {
        let mut rows = vec![0u64; ROWS];
        for (i, c) in self.counts.iter().enumerate() {
            rows[row(i).min(ROWS - 1)] += c;
        }
        rows
    }

    /// The `thousandths` percentile by nearest rank (the value at rank ceil(q n) of the
    /// values sorted, as most tools define it): the exact min or max at the first or last
    /// rank, else estimated from its bucket: the one integer
    /// the bucket holds when it holds one, else the bucket's geometric middle (within
    /// 2.2% of any value in it), kept between the exact min and max.
    pub fn percentile(&self, thousandths: u32) -> Option<i64> {
        let (min, max) = (self.min?, self.max?);
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((u128::from(n) * u128::from(thousandths)).div_ceil(1000) as u64).max(1);
        // The first and the last rank are the exact extremes.
        if rank == n {
            return Some(max);
        }
        if rank == 1 {
            return Some(min);
        }
        let mut seen = 0u64;
        let i = self.counts.iter().position(|c| {
            seen += c;
            seen >= rank
        })?;
        Some(estimate(i).clamp(min, max))
    }
}

/// The value a percentile that falls in bucket `i` is given (before clamping to the
/// extremes): 0 for the bucket of values <= 0.
fn estimate(i: usize) -> i64 {
    if i == 0 {
        return 0;
    }
    let (lo, hi) = bounds(i);
    let (first, last) = (lo.ceil(), hi.ceil() - 1.0);
    if first >= last {
        return first as i64;
    }
    let middle = (lo * hi).sqrt().round();
    if middle >= i64::MAX as f64 {
        i64::MAX
    } else {
        middle as i64
    }
}

/// The positive buckets as an OTLP exponential histogram's at `SCALE`: the index of the
/// first (OTLP's bucket k holds (base^k, base^(k+1)]; ours with lower bound base^k, moved
/// by `shift` buckets where the unit changes), and the counts from there to the last
/// that is not empty. Empty when all are.
pub fn exponential(counts: &[u64], shift: i32) -> (i32, Vec<u64>) {
    let first = counts.iter().enumerate().skip(1).find(|(_, c)| **c != 0).map(|(i, _)| i);
    let last = counts.iter().rposition(|c| *c != 0).filter(|l| *l >= 1);
    match (first, last) {
        (Some(f), Some(l)) => (f as i32 - 1 + shift, counts[f..=l].to_vec()),
        _ => (0, Vec::new()),
    }
}

/// Buckets to move a histogram of nanoseconds by to make it one of seconds: 16 log2(1e-9)
/// is -478.35, not a whole number of buckets, so each goes to the bucket of seconds that
/// holds its geometric middle (and 65% of its width).
pub fn seconds_shift() -> i32 {
    (0.5 + SUB as f64 * 1e-9f64.log2()).floor() as i32
}

/// Exponential buckets (`exponential`'s offset and counts) as a Prometheus native
/// histogram's of schema `SCALE`, whose bucket i holds (base^(i-1), base^i]: spans of
/// consecutive non-empty buckets as (offset from the end of the previous span, or the
/// first's index; length), and each count as the difference from the one before it.
pub fn native(offset: i32, counts: &[u64]) -> (Vec<(i32, u32)>, Vec<i64>) {
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut deltas = Vec::new();
    let (mut end, mut previous) = (0i32, 0i64);
    for (k, c) in counts.iter().enumerate().filter(|(_, c)| **c != 0) {
        let i = offset + k as i32 + 1;
        match spans.last_mut() {
            Some(last) if i == end => last.1 += 1,
            Some(_) => spans.push((i - end, 1)),
            None => spans.push((i, 1)),
        }
        end = i + 1;
        deltas.push(*c as i64 - previous);
        previous = *c as i64;
    }
    (spans, deltas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_power_of_two_starts_a_row_and_its_first_sub_bucket() {
        assert_eq!((index(0), index(-5), index(i64::MIN)), (0, 0, 0));
        for p in 0..63 {
            let x = 1i64 << p;
            assert_eq!(index(x), 1 + SUB * p, "2^{p}");
            assert_eq!(row(index(x)), p + 1);
            assert_eq!(row(index(x - 1)), p, "2^{p} - 1");
        }
        assert_eq!(index(i64::MAX), BUCKETS - 1);
        assert_eq!(row(BUCKETS - 1), ROWS - 1);
    }

    #[test]
    fn every_value_lies_within_its_bucket_bounds() {
        let mut x = 1i64;
        while x < 1 << 52 {
            let i = index(x);
            let (lo, hi) = bounds(i);
            assert!(lo <= x as f64 * (1.0 + 1e-12) && (x as f64) < hi * (1.0 + 1e-12), "{x} in {i}: [{lo}, {hi})");
            x = x + 1 + x / 7;
        }
        // The sub-buckets of one power of two split it at 2^(j/16): 1024 * 2^(1/16) = 1069.3.
        assert_eq!(index(1069), 1 + SUB * 10);
        assert_eq!(index(1070), 2 + SUB * 10);
    }

    #[test]
    fn small_integers_each_have_a_bucket_of_their_own() {
        // Up to 16 a bucket is narrower than 1 (16 * (1 - 2^(-1/16)) = 0.68).
        let indexes: Vec<usize> = (1..=17).map(index).collect();
        let mut unique = indexes.clone();
        unique.dedup();
        assert_eq!(indexes, unique);
        for x in 1..=17 {
            assert_eq!(estimate(index(x)), x);
        }
    }

    fn fine_of(values: &[i64]) -> Fine {
        let mut counts = vec![0; BUCKETS];
        for v in values {
            counts[index(*v)] += 1;
        }
        Fine { counts, min: values.iter().min().copied(), max: values.iter().max().copied() }
    }

    fn exact(sorted: &[i64], thousandths: u32) -> i64 {
        let rank = (sorted.len() as u64 * thousandths as u64).div_ceil(1000).max(1);
        sorted[rank as usize - 1]
    }

    #[test]
    fn percentiles_are_within_three_percent() {
        // A spread of magnitudes, with a deterministic scramble of values.
        let mut values: Vec<i64> = (1..5000i64).map(|i| (i * i * 7919) % 50_000_000 + i).collect();
        let f = fine_of(&values);
        values.sort();
        for (q, name) in PERCENTILES {
            let (got, want) = (f.percentile(q).unwrap(), exact(&values, q));
            let err = (got - want).abs() as f64 / want as f64;
            assert!(err < 0.023, "{name}: {got} vs {want} ({err})");
        }
        assert_eq!(f.percentile(1000), values.last().copied());
        assert_eq!(f.rows().iter().sum::<u64>(), values.len() as u64);
    }

    #[test]
    fn percentiles_of_nothing_and_of_one_value() {
        assert_eq!(fine_of(&[]).percentile(500), None);
        assert_eq!(fine_of(&[123_456_789]).percentile(990), Some(123_456_789));
        assert_eq!(fine_of(&[-7, -3]).percentile(500), Some(-7));
        assert_eq!(fine_of(&[-7, -3, -1]).percentile(500), Some(-1));
        // With fewer than 100 values p99 is the last rank: the max itself.
        let f = fine_of(&(1..=50).map(|i| i * 1_000_003).collect::<Vec<_>>());
        assert_eq!((f.percentile(990), f.percentile(20)), (Some(50_000_150), Some(1_000_003)));
    }

    #[test]
    fn the_exponential_form_starts_at_the_first_bucket_with_values() {
        let f = fine_of(&[0, 1, 1, 2, 4, 4, 4]);
        // 1 is bucket 1 (OTLP index 0), 2 is 17 (index 16), 4 is 33 (index 32).
        let (offset, counts) = exponential(&f.counts, 0);
        assert_eq!(offset, 0);
        assert_eq!(counts.len(), 33);
        assert_eq!((counts[0], counts[16], counts[32]), (2, 1, 3));
        assert_eq!(counts.iter().sum::<u64>(), 6);
        assert_eq!(exponential(&fine_of(&[0, -1]).counts, 0), (0, Vec::new()));
        let (offset, counts) = exponential(&fine_of(&[1_000_000]).counts, 0);
        assert_eq!((offset, counts), (index(1_000_000) as i32 - 1, vec![1]));
        // OTLP's bucket k at scale 4 is (2^(k/16), 2^((k+1)/16)]: 10^6 lies there.
        let k = offset as f64;
        assert!(2f64.powf(k / 16.0) < 1e6 && 1e6 <= 2f64.powf((k + 1.0) / 16.0));
    }

    #[test]
    fn nanoseconds_move_to_the_bucket_of_seconds_holding_most_of_them() {
        assert_eq!(seconds_shift(), -478);
        for ns in [1_000i64, 1_500_000, 4_190_000, 999_999_999, 3_000_000_000] {
            let (k, _) = exponential(&fine_of(&[ns]).counts, seconds_shift());
            let s = ns as f64 / 1e9;
            let (lo, hi) = (2f64.powf(k as f64 / 16.0), 2f64.powf((k + 1) as f64 / 16.0));
            // Its own bucket or the one above (35% of a bucket of nanoseconds is in the
            // bucket of seconds below the one that holds its middle).
            assert!(lo / 2f64.powf(1.0 / 16.0) < s && s <= hi, "{ns}ns in bucket {k}: ({lo}, {hi}]");
        }
    }

    #[test]
    fn the_native_form_is_spans_and_deltas() {
        let f = fine_of(&[1, 1, 2, 4, 4, 4, 5]);
        let (offset, counts) = exponential(&f.counts, 0);
        let (spans, deltas) = native(offset, &counts);
        // Buckets 1 (two), 17 (one), 33 (three), 38 (one: 5 is 2^(2 + 5.2/16)).
        assert_eq!(index(5), 38);
        assert_eq!(spans, vec![(1, 1), (15, 1), (15, 1), (4, 1)]);
        assert_eq!(deltas, vec![2, -1, 2, -2]);
        let (offset, counts) = exponential(&fine_of(&[16, 17]).counts, 0);
        assert_eq!(native(offset, &counts), (vec![(index(16) as i32, 2)], vec![1, 0]));
    }
}
