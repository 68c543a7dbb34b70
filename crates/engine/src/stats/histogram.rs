//! Log-linear latency histogram (HDR-style) with a documented error bound.
//!
//! Values are nanoseconds. Values below 128 get their own bucket; above that every power of two
//! is split into 64 buckets, so a bucket's width is at most 1/64 of its lower bound and its
//! midpoint is within 1/128 (0.79%) of any value in it. The scheme is shared with
//! `python/tilemark/hist.py` and documented in `docs/engine-boundary.md`.
//!
//! Storage grows to the highest bucket seen, so memory is bounded by the largest latency
//! (at most `MAX_INDEX` counters), never by run length.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

const SUB_BUCKET_BITS: u32 = 6;
const SUB_BUCKETS: u64 = 1 << SUB_BUCKET_BITS;
/// Values above this are clamped (2^42 ns is about 73 minutes).
pub const MAX_VALUE_NS: u64 = 1 << 42;
/// Index of the bucket that holds `MAX_VALUE_NS`.
pub const MAX_INDEX: usize = bucket_index(MAX_VALUE_NS);

/// Bucket index of a value.
#[inline]
pub const fn bucket_index(value: u64) -> usize {
    let v = if value > MAX_VALUE_NS {
        MAX_VALUE_NS
    } else {
        value
    };
    if v < 2 * SUB_BUCKETS {
        return v as usize;
    }
    let shift = 63 - v.leading_zeros() - SUB_BUCKET_BITS;
    (SUB_BUCKETS * shift as u64 + (v >> shift)) as usize
}

/// `[lower, upper)` value range of bucket `idx`.
#[inline]
pub const fn bucket_bounds(idx: usize) -> (u64, u64) {
    let idx = idx as u64;
    if idx < 2 * SUB_BUCKETS {
        return (idx, idx + 1);
    }
    let shift = idx / SUB_BUCKETS - 1;
    let lower = (idx - SUB_BUCKETS * shift) << shift;
    (lower, lower + (1 << shift))
}

/// The value a bucket reports: its midpoint (exact below 128 ns).
#[inline]
pub fn bucket_value(idx: usize) -> f64 {
    let (lo, hi) = bucket_bounds(idx);
    if hi - lo == 1 {
        lo as f64
    } else {
        (lo + hi) as f64 / 2.0
    }
}

/// A mergeable latency histogram.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u64,
    min: u64,
    max: u64,
}

impl Histogram {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Sum of the exact recorded values (ns); the mean is exact, not bucketed.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    pub fn min(&self) -> u64 {
        self.min
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    // Always inlined: it is on every IO's path (twice for an open-loop IO).
    #[inline(always)]
    pub fn record(&mut self, value: u64) {
        let idx = bucket_index(value);
        if idx >= self.counts.len() {
            // Grow with headroom so a slowly rising latency does not reallocate every time.
            let new_len = (idx + 1).max(self.counts.len() * 5 / 4).min(MAX_INDEX + 1);
            self.counts.resize(new_len, 0);
        }
        self.counts[idx] += 1;
        if self.n == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.n += 1;
        self.sum = self.sum.saturating_add(value);
    }

    /// Add every count of `other` into `self`.
    pub fn merge(&mut self, other: &Histogram) {
        if other.n == 0 {
            return;
        }
        // Only the buckets between its least and largest value can be set: a stream's
        // interval holds a few values over a few hundred buckets of mostly zeros, and the
        // engine merges 10,000 streams' histograms an interval (Totals, frame aggregates).
        let (lo, hi) = other.span();
        if hi >= self.counts.len() {
            self.counts.resize(hi + 1, 0);
        }
        for (mine, theirs) in self.counts[lo..=hi].iter_mut().zip(&other.counts[lo..=hi]) {
            *mine += *theirs;
        }
        if self.n == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.n += other.n;
        self.sum = self.sum.saturating_add(other.sum);
    }

    /// Value at percentile `p` (0..=100): the bucket holding the ceil(p% * n)-th value.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        if p >= 100.0 {
            return Some(self.max as f64);
        }
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (idx, c) in self.buckets() {
            seen += c;
            if seen >= rank {
                return Some(bucket_value(idx).clamp(self.min as f64, self.max as f64));
            }
        }
        Some(self.max as f64)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    /// Non-empty buckets as (index, count), increasing index.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let (lo, counts) = match self.n {
            0 => (0, &[][..]),
            _ => {
                let (lo, hi) = self.span();
                (lo, &self.counts[lo..=hi])
            }
        };
        counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(move |(i, &c)| (lo + i, c))
    }

    /// The buckets of the least and the largest value recorded (n > 0): no other bucket
    /// outside them holds a count.
    fn span(&self) -> (usize, usize) {
        let last = self.counts.len() - 1;
        (
            bucket_index(self.min).min(last),
            bucket_index(self.max).min(last),
        )
    }

    /// Buckets the counters span (up to the highest one seen, plus headroom).
    pub fn bucket_len(&self) -> usize {
        self.counts.len()
    }

    /// Make room for `len` buckets at once (at most `MAX_INDEX + 1`), so that merging many
    /// histograms into this one does not grow it one step per merge.
    pub fn reserve_buckets(&mut self, len: usize) {
        let len = len.min(MAX_INDEX + 1);
        if self.counts.len() < len {
            self.counts.resize(len, 0);
        }
    }

    /// Empty again, keeping the counters' memory: only the buckets between the least and the
    /// largest value recorded can be set, so only those are zeroed (an interval's histogram
    /// is reused for the next one without allocating; worker.rs `emit`).
    pub fn clear(&mut self) {
        if self.n > 0 {
            let (lo, hi) = self.span();
            self.counts[lo..=hi].fill(0);
        }
        self.n = 0;
        self.sum = 0;
        self.min = 0;
        self.max = 0;
    }

    /// Bytes held by the counters (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.counts.capacity() * std::mem::size_of::<u64>()
    }
}

/// Equal when they hold the same values: counters' headroom (zeros past the last bucket set,
/// or kept by `clear`) does not count.
impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        (self.n, self.sum, self.min, self.max) == (other.n, other.sum, other.min, other.max)
            && self.buckets().eq(other.buckets())
    }
}

impl Eq for Histogram {}

struct Buckets<'a>(&'a Histogram);

impl Serialize for Buckets<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for (i, c) in self.0.buckets() {
            seq.serialize_element(&[i as u64, c])?;
        }
        seq.end()
    }
}

impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("n", &self.n)?;
        m.serialize_entry("sum", &self.sum)?;
        m.serialize_entry("min", &self.min)?;
        m.serialize_entry("max", &self.max)?;
        m.serialize_entry("b", &Buckets(self))?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn buckets_are_contiguous_and_monotonic() {
        let mut expected_lower = 0;
        for idx in 0..=MAX_INDEX {
            let (lo, hi) = bucket_bounds(idx);
            assert_eq!(lo, expected_lower, "gap before bucket {idx}");
            assert!(hi > lo);
            assert_eq!(bucket_index(lo), idx);
            assert_eq!(bucket_index(hi - 1), idx);
            expected_lower = hi;
        }
    }

    #[test]
    fn relative_error_is_at_most_one_128th_from_1us_to_60s() {
        let mut rng = Rng::new(7);
        for _ in 0..200_000 {
            // log-uniform over 1 us .. 60 s
            let exp = 3.0 + rng.next_f64() * (60e9f64.log10() - 3.0);
            let v = 10f64.powf(exp) as u64;
            let reported = bucket_value(bucket_index(v));
            let err = (reported - v as f64).abs() / v as f64;
            assert!(
                err <= 1.0 / 128.0 + 1e-12,
                "value {v} reported {reported} err {err}"
            );
        }
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut rng = Rng::new(3);
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for i in 0..50_000 {
            let v = 1_000 + rng.below(50_000_000);
            all.record(v);
            if i % 3 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert_eq!(a.sum(), all.sum());
        assert_eq!(a.min(), all.min());
        assert_eq!(a.max(), all.max());
        assert_eq!(
            a.buckets().collect::<Vec<_>>(),
            all.buckets().collect::<Vec<_>>()
        );
    }

    #[test]
    fn percentiles_within_one_percent_of_exact() {
        let mut rng = Rng::new(11);
        let mut values: Vec<u64> = (0..100_000)
            .map(|_| 10_000 + rng.below(10_000_000))
            .collect();
        let mut h = Histogram::new();
        values.iter().for_each(|&v| h.record(v));
        values.sort_unstable();
        for p in [50.0, 90.0, 99.0, 99.9, 99.99] {
            let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
            let exact = values[rank - 1] as f64;
            let got = h.percentile(p).unwrap();
            assert!(
                (got - exact).abs() / exact <= 0.01,
                "p{p}: {got} vs {exact}"
            );
        }
        assert_eq!(h.percentile(100.0), Some(*values.last().unwrap() as f64));
    }

    #[test]
    fn huge_values_are_clamped_not_lost() {
        let mut h = Histogram::new();
        h.record(u64::MAX / 2);
        assert_eq!(h.count(), 1);
        assert!(h.heap_bytes() <= (MAX_INDEX + 1) * 8);
    }

    #[test]
    fn cleared_it_equals_a_new_one_and_counts_again_from_zero() {
        let mut h = Histogram::new();
        for v in [700, 3_000, 45_000, 2_000_000] {
            h.record(v);
        }
        let len = h.bucket_len();
        h.clear();
        assert_eq!(h, Histogram::new());
        assert_eq!(h.bucket_len(), len, "its memory is kept");
        assert!(h.buckets().next().is_none() && h.percentile(50.0).is_none());
        h.record(1_000);
        let mut fresh = Histogram::new();
        fresh.record(1_000);
        assert_eq!(h, fresh);
        assert_eq!(h.percentile(99.0), fresh.percentile(99.0));
        assert_eq!(
            (h.min(), h.max(), h.count(), h.sum()),
            (1_000, 1_000, 1, 1_000)
        );
    }

    #[test]
    fn serializes_sparse_buckets() {
        let mut h = Histogram::new();
        h.record(5);
        h.record(5);
        h.record(1000);
        let j = serde_json::to_value(&h).unwrap();
        assert_eq!(j["n"], 3);
        assert_eq!(j["b"], serde_json::json!([[5, 2], [bucket_index(1000), 1]]));
    }
}
