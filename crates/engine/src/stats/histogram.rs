//! Log-linear latency histogram (HDR-style) with a documented error bound.
//!
//! Values are nanoseconds. Values below 128 get their own bucket; above that every power of two
//! is split into 64 buckets, so a bucket's width is at most 1/64 of its lower bound and its
//! midpoint is within 1/128 (0.79%) of any value in it. The scheme is shared with
//! `python/tilemark/hist.py` and documented in `docs/engine-boundary.md`.
//!
//! Storage grows to the highest bucket seen, so memory is bounded by the largest latency
//! (at most `MAX_INDEX` counters), never by run length.
//!
//! A histogram with few distinct buckets keeps them inline, (index, count) in index order, and
//! takes the counters only when a bucket past `SMALL` is hit. An interval of a 5 IOPS stream
//! holds 5 values spread over ~1,000 buckets (300 ns to 3 ms); with 10,000 streams every
//! interval's frame reads, serializes, merges and clears 20,000 such histograms, and as
//! counters each of those was a cache miss per value in 8 KiB of its own (issue 25: half of
//! `poll_frames`, 30-40 ms an interval, on the front end's CPU). Inline, a stream's interval
//! statistics lie in a few cache lines.
//!
//! With counters, a bitmap beside them marks the buckets that hold a count, so reading,
//! merging and clearing cost the occupied buckets, not the range between the least and the
//! largest value.

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

/// Distinct buckets a histogram holds inline before it takes counters.
const SMALL: usize = 12;

/// A mergeable latency histogram.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    /// While `dense` is false: the occupied buckets, `small[..small_len]`, increasing index,
    /// and `counts` is all zeros (its memory kept from an earlier dense phase, for reuse).
    small: [(u16, u32); SMALL],
    small_len: u8,
    dense: bool,
    counts: Vec<u64>,
    /// Bit `i % 64` of word `i / 64` is set when `counts[i] > 0` (and only then).
    occupied: Vec<u64>,
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
        self.add_count(bucket_index(value), 1);
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
        // Only its occupied buckets: a stream's interval holds a few values over a few
        // hundred buckets of mostly zeros, and the engine merges 10,000 streams' histograms an
        // interval (Totals, frame aggregates).
        if other.dense {
            let (_, hi) = other.span();
            self.make_dense(hi + 1);
            for (idx, c) in other.buckets() {
                self.counts[idx] += c;
            }
            let (wlo, whi) = other.span_words();
            for (mine, theirs) in self.occupied[wlo..=whi]
                .iter_mut()
                .zip(&other.occupied[wlo..=whi])
            {
                *mine |= *theirs;
            }
        } else {
            for &(idx, c) in &other.small[..other.small_len as usize] {
                self.add_count(idx as usize, c as u64);
            }
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

    /// Non-empty buckets as (index, count), increasing index: the occupied bits of the words
    /// between the least and the largest value.
    pub fn buckets(&self) -> Buckets<'_> {
        if !self.dense {
            return Buckets {
                small: self.small[..self.small_len as usize].iter(),
                counts: &[],
                words: [].iter(),
                base: 0,
                bits: SetBits(0),
            };
        }
        let (wlo, words) = match self.n {
            0 => (0, &[][..]),
            _ => {
                let (wlo, whi) = self.span_words();
                (wlo, &self.occupied[wlo..=whi])
            }
        };
        Buckets {
            small: [].iter(),
            counts: &self.counts,
            words: words.iter(),
            // The first word is loaded by `next`: `base` is where the word before it began.
            base: (wlo * 64).wrapping_sub(64),
            bits: SetBits(0),
        }
    }

    /// Add `c` to bucket `idx`: inline while the histogram has at most SMALL distinct
    /// buckets (kept in index order), in the counters from the first bucket past them.
    #[inline(always)]
    fn add_count(&mut self, idx: usize, c: u64) {
        if !self.dense {
            let len = self.small_len as usize;
            let mut at = 0;
            while at < len && (self.small[at].0 as usize) < idx {
                at += 1;
            }
            if at < len && self.small[at].0 as usize == idx {
                if let Some(sum) = self.small[at].1.checked_add(c as u32) {
                    if c <= u32::MAX as u64 {
                        self.small[at].1 = sum;
                        return;
                    }
                }
            } else if len < SMALL && c <= u32::MAX as u64 {
                self.small.copy_within(at..len, at + 1);
                self.small[at] = (idx as u16, c as u32);
                self.small_len += 1;
                return;
            }
            self.make_dense(idx + 1);
        }
        if idx >= self.counts.len() {
            // Grow with headroom so a slowly rising latency does not reallocate every time.
            self.resize((idx + 1).max(self.counts.len() * 5 / 4).min(MAX_INDEX + 1));
        }
        self.counts[idx] += c;
        self.occupied[idx / 64] |= 1 << (idx % 64);
    }

    /// Move the inline buckets into the counters (at least `len` of them); a no-op when dense.
    #[cold]
    fn make_dense(&mut self, len: usize) {
        // The inline buckets are in index order: the last is the highest.
        let highest = match self.small_len {
            0 => 0,
            n => self.small[n as usize - 1].0 as usize + 1,
        };
        let need = highest.max(len).min(MAX_INDEX + 1);
        if self.counts.len() < need {
            self.resize(need.max(self.counts.len() * 5 / 4).min(MAX_INDEX + 1));
        }
        if self.dense {
            return;
        }
        for &(idx, c) in &self.small[..self.small_len as usize] {
            let idx = idx as usize;
            self.counts[idx] += c as u64;
            self.occupied[idx / 64] |= 1 << (idx % 64);
        }
        self.small_len = 0;
        self.dense = true;
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

    /// The occupancy words of `span` (n > 0).
    fn span_words(&self) -> (usize, usize) {
        let (lo, hi) = self.span();
        (lo / 64, hi / 64)
    }

    /// Counters for `len` buckets (and their occupancy words); never shrinks.
    fn resize(&mut self, len: usize) {
        self.counts.resize(len, 0);
        self.occupied.resize(len.div_ceil(64), 0);
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
            self.resize(len);
        }
        // Counters are for many distinct values: the histogram merging many others uses them
        // from the start, not after its first SMALL buckets.
        self.make_dense(0);
    }

    /// Empty again, keeping the counters' memory: only the occupied buckets are zeroed (an
    /// interval's histogram is reused for the next one without allocating; worker.rs `emit`).
    pub fn clear(&mut self) {
        if self.n > 0 && self.dense {
            let (wlo, whi) = self.span_words();
            for w in wlo..=whi {
                for b in SetBits(self.occupied[w]) {
                    self.counts[w * 64 + b] = 0;
                }
                self.occupied[w] = 0;
            }
        }
        self.dense = false;
        self.small_len = 0;
        self.n = 0;
        self.sum = 0;
        self.min = 0;
        self.max = 0;
    }

    /// Bytes held by the counters (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        (self.counts.capacity() + self.occupied.capacity()) * std::mem::size_of::<u64>()
    }
}

/// A histogram's occupied buckets as (index, count), increasing index (`Histogram::buckets`).
pub struct Buckets<'a> {
    small: std::slice::Iter<'a, (u16, u32)>,
    counts: &'a [u64],
    words: std::slice::Iter<'a, u64>,
    /// Bucket index of bit 0 of the word `bits` came from.
    base: usize,
    bits: SetBits,
}

impl Iterator for Buckets<'_> {
    type Item = (usize, u64);

    #[inline]
    fn next(&mut self) -> Option<(usize, u64)> {
        if let Some(&(idx, c)) = self.small.next() {
            return Some((idx as usize, c as u64));
        }
        loop {
            if let Some(b) = self.bits.next() {
                let idx = self.base + b;
                return Some((idx, self.counts[idx]));
            }
            self.bits = SetBits(*self.words.next()?);
            self.base = self.base.wrapping_add(64);
        }
    }
}

/// The positions of the set bits of a word, lowest first.
struct SetBits(u64);

impl Iterator for SetBits {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
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

struct BucketsJson<'a>(&'a Histogram);

impl Serialize for BucketsJson<'_> {
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
        m.serialize_entry("b", &BucketsJson(self))?;
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

    /// The histogram's buckets, checked against its representation: inline ones in order
    /// with zeroed counters, or counters whose occupancy bits are set exactly where they count.
    fn checked_buckets(h: &Histogram) -> Vec<(usize, u64)> {
        let bits_match = h.counts.iter().enumerate().all(|(i, &c)| {
            let bit = h
                .occupied
                .get(i / 64)
                .is_some_and(|w| w & (1 << (i % 64)) != 0);
            bit == (c > 0)
        });
        assert!(bits_match, "occupancy bits and counters disagree");
        let got: Vec<(usize, u64)> = h.buckets().collect();
        if h.dense {
            let from_counts: Vec<(usize, u64)> = h
                .counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (i, c))
                .collect();
            assert_eq!(got, from_counts);
        } else {
            assert!(
                h.counts.iter().all(|&c| c == 0),
                "inline, with counters set"
            );
            assert!(got.windows(2).all(|w| w[0].0 < w[1].0) && got.len() <= SMALL);
        }
        got
    }

    fn reference(values: &[u64]) -> Vec<(usize, u64)> {
        let mut m = std::collections::BTreeMap::new();
        for &v in values {
            *m.entry(bucket_index(v)).or_insert(0u64) += 1;
        }
        m.into_iter().collect()
    }

    #[test]
    fn inline_and_counted_buckets_agree_through_records_merges_and_clears() {
        let mut rng = Rng::new(29);
        let mut h = Histogram::new();
        let mut values: Vec<u64> = Vec::new();
        let (mut inline_seen, mut dense_seen) = (false, false);
        for round in 0..400 {
            let mut other = Histogram::new();
            // Sparse intervals (a few values over a wide range) and dense ones.
            let count = if round % 3 == 0 {
                200
            } else {
                1 + rng.below(6)
            };
            let mut mine = Vec::new();
            for _ in 0..count {
                let v = match rng.below(4) {
                    0 => rng.below(128),
                    1 => 300 + rng.below(5_000),
                    2 => 100_000 + rng.below(3_000_000),
                    _ => 1 << (20 + rng.below(24)),
                };
                other.record(v);
                mine.push(v);
            }
            assert_eq!(checked_buckets(&other), reference(&mine));
            inline_seen |= !other.dense;
            dense_seen |= other.dense;
            h.merge(&other);
            values.extend(mine);
            assert_eq!(checked_buckets(&h), reference(&values));
            if round % 50 == 49 {
                h.clear();
                values.clear();
                assert!(checked_buckets(&h).is_empty() && !h.dense);
                assert!(h.occupied.iter().all(|&w| w == 0));
            }
        }
        assert!(inline_seen && dense_seen);
        // One bucket counted past u32 stays exact.
        let mut big = Histogram::new();
        let mut one = Histogram::new();
        one.record(1_000);
        for _ in 0..3 {
            let mut step = one.clone();
            step.add_count(bucket_index(1_000), u32::MAX as u64);
            big.merge(&step);
        }
        assert_eq!(
            checked_buckets(&big),
            vec![(bucket_index(1_000), 3 * (u32::MAX as u64 + 1))]
        );
    }

    #[test]
    fn huge_values_are_clamped_not_lost() {
        let mut h = Histogram::new();
        h.record(u64::MAX / 2);
        assert_eq!(h.count(), 1);
        let words = (MAX_INDEX + 1).div_ceil(64);
        assert!(h.heap_bytes() <= (MAX_INDEX + 1 + words) * 8);
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
