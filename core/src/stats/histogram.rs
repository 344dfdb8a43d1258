//! A distribution kept as HDR-style buckets: sparse, additive, and small
//! enough to copy once a second.

use std::collections::BTreeMap;

/// Counts of values by bucket. A bucket is named by the highest value it
/// holds (an HDR histogram's "highest equivalent value"), so two histograms
/// of the same resolution add and subtract bucket by bucket, and one of a
/// finer resolution is made coarser with [`Histogram::coarsened`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    buckets: BTreeMap<u64, u64>,
}

/// The percentiles a report shows, with their names in counters
/// (`latency_us.p50`, ...): `(suffix, percentile)`; `max` is the largest value.
pub const PERCENTILES: [(&str, f64); 4] =
    [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9)];

impl Histogram {
    /// Adds `count` values in the bucket whose highest value is `bucket`.
    pub fn add(&mut self, bucket: u64, count: u64) {
        if count > 0 {
            *self.buckets.entry(bucket).or_default() += count;
        }
    }

    /// The non-empty buckets, lowest first: `(highest value, count)`.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.buckets.iter().map(|(b, n)| (*b, *n))
    }

    /// How many values it holds.
    pub fn count(&self) -> u64 {
        self.buckets.values().sum()
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The largest bucket with a value (0 when empty).
    pub fn max(&self) -> u64 {
        self.buckets.keys().next_back().copied().unwrap_or(0)
    }

    /// The value at percentile `q` (0–100): the highest value of the first
    /// bucket at which at least `q` % of the values are counted, as an HDR
    /// histogram answers it (0 when empty).
    pub fn percentile(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let wanted = ((q / 100.0 * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (bucket, n) in &self.buckets {
            seen += n;
            if seen >= wanted {
                return *bucket;
            }
        }
        self.max()
    }

    /// Adds every bucket of `other`.
    pub fn absorb(&mut self, other: &Histogram) {
        for (bucket, n) in other.buckets() {
            self.add(bucket, n);
        }
    }

    /// What was added since `earlier` (an earlier state of the same
    /// histogram): bucket by bucket, never below zero.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let mut out = Histogram::default();
        for (bucket, n) in self.buckets() {
            let before = earlier.buckets.get(&bucket).copied().unwrap_or(0);
            out.add(bucket, n.saturating_sub(before));
        }
        out
    }

    /// The same values in buckets of `bits` significant bits (each bucket at
    /// most 2^-(bits-1) of its values wide: 8 bits, under 1 %), for files
    /// and reports that need no finer resolution.
    pub fn coarsened(&self, bits: u32) -> Histogram {
        let mut out = Histogram::default();
        for (bucket, n) in self.buckets() {
            out.add(coarse_bucket(bucket, bits), n);
        }
        out
    }
}

/// A histogram of `(highest value, count)` buckets (zero counts left
/// out; a bucket given twice adds up). From buckets in ascending order, as
/// [`Histogram::buckets`] and an HDR histogram's iterators give them, the
/// map is built in one pass rather than bucket by bucket: that is what a
/// snapshot of a replay's latencies (thousands of buckets) costs, up to
/// ten times a second while a metrics endpoint is scraped.
impl FromIterator<(u64, u64)> for Histogram {
    fn from_iter<I: IntoIterator<Item = (u64, u64)>>(iter: I) -> Self {
        let buckets: Vec<(u64, u64)> = iter.into_iter().filter(|(_, n)| *n > 0).collect();
        if buckets.windows(2).all(|w| w[0].0 < w[1].0) {
            return Histogram {
                buckets: buckets.into_iter().collect(),
            };
        }
        let mut out = Histogram::default();
        for (bucket, n) in buckets {
            out.add(bucket, n);
        }
        out
    }
}

/// The highest value of the `bits`-significant-bit bucket that holds `value`.
pub fn coarse_bucket(value: u64, bits: u32) -> u64 {
    let width = 64 - value.leading_zeros();
    if width <= bits {
        return value;
    }
    let shift = width - bits;
    ((value >> shift) << shift) | ((1u64 << shift) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collected_buckets_are_the_added_ones() {
        let mut added = Histogram::default();
        for (b, n) in [(3, 1), (7, 0), (9, 2), (3, 4)] {
            added.add(b, n);
        }
        let sorted: Histogram = [(3, 5), (7, 0), (9, 2)].into_iter().collect();
        let repeated: Histogram = [(9, 2), (3, 1), (3, 4)].into_iter().collect();
        assert_eq!(sorted, added);
        assert_eq!(repeated, added);
    }

    #[test]
    fn percentiles_count_from_the_lowest_bucket() {
        let mut h = Histogram::default();
        // 1..=100, one each.
        for v in 1..=100 {
            h.add(v, 1);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.percentile(50.0), 50);
        assert_eq!(h.percentile(90.0), 90);
        assert_eq!(h.percentile(99.0), 99);
        assert_eq!(h.percentile(99.9), 100);
        assert_eq!(h.percentile(0.0), 1);
        assert_eq!(h.max(), 100);
        assert_eq!(Histogram::default().percentile(50.0), 0);
    }

    #[test]
    fn since_and_absorb_undo_each_other() {
        let mut early = Histogram::default();
        early.add(10, 3);
        early.add(20, 1);
        let mut late = early.clone();
        late.add(20, 4);
        late.add(30, 2);
        let interval = late.since(&early);
        assert_eq!(
            interval.buckets().collect::<Vec<_>>(),
            vec![(20, 4), (30, 2)]
        );
        let mut sum = early.clone();
        sum.absorb(&interval);
        assert_eq!(sum, late);
    }

    #[test]
    fn coarse_buckets_keep_the_top_bits() {
        assert_eq!(coarse_bucket(200, 8), 200);
        assert_eq!(coarse_bucket(255, 8), 255);
        // 256..=257 share a bucket at 8 bits: 0b1_0000_000x.
        assert_eq!(coarse_bucket(256, 8), 257);
        assert_eq!(coarse_bucket(257, 8), 257);
        assert_eq!(coarse_bucket(258, 8), 259);
        // 1_000_000 = 0b1111_0100_0010_0100_0000: the top 8 bits, the rest ones.
        assert_eq!(coarse_bucket(1_000_000, 8), 0b1111_0100_1111_1111_1111);
        let mut h = Histogram::default();
        h.add(256, 1);
        h.add(257, 2);
        assert_eq!(h.coarsened(8).buckets().collect::<Vec<_>>(), vec![(257, 3)]);
    }
}
