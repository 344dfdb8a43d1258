//! Latency percentiles (HDR histogram, microsecond resolution, 3 significant digits).

use std::time::Duration;

/// Highest latency tracked: a minute; slower values are clamped to it.
const MAX_MICROS: u64 = 60_000_000;

/// A latency distribution.
#[derive(Clone, Debug)]
pub struct Latency {
    histogram: hdrhistogram::Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            // 1 µs .. 60 s at 3 significant digits: a few tens of KiB.
            histogram: hdrhistogram::Histogram::new_with_bounds(1, MAX_MICROS, 3)
                .expect("constant histogram bounds are valid"),
        }
    }
}

/// The percentiles every report shows, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// Records one latency.
    pub fn record(&mut self, latency: Duration) {
        let micros = (latency.as_micros() as u64).clamp(1, MAX_MICROS);
        // In bounds by the clamp, so this cannot fail.
        let _ = self.histogram.record(micros);
    }

    /// The recorded latencies by bucket, lowest first: `(highest
    /// microsecond value of the bucket, count)`.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.histogram
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The percentile `q` (0.0–100.0) in milliseconds; 0 when empty.
    pub fn percentile_ms(&self, q: f64) -> f64 {
        if self.histogram.is_empty() {
            return 0.0;
        }
        self.histogram.value_at_percentile(q) as f64 / 1000.0
    }

    /// p50, p90, p99, p99.9 and max, in milliseconds.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            p50: self.percentile_ms(50.0),
            p90: self.percentile_ms(90.0),
            p99: self.percentile_ms(99.0),
            p999: self.percentile_ms(99.9),
            max: if self.histogram.is_empty() {
                0.0
            } else {
                self.histogram.max() as f64 / 1000.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut latency = Latency::default();
        // 1 ms .. 1000 ms, one each: the p-th percentile is p*10 ms.
        for ms in 1..=1000u64 {
            latency.record(Duration::from_millis(ms));
        }
        let p = latency.percentiles();
        // Three significant digits: a value's bucket is within 0.1 % of it, and
        // the percentile may land in the neighbouring bucket: within 0.2 %.
        for (got, want) in [
            (p.p50, 500.0),
            (p.p90, 900.0),
            (p.p99, 990.0),
            (p.p999, 999.0),
            (p.max, 1000.0),
        ] {
            assert!((got - want).abs() <= want * 0.002, "{got} vs {want}");
        }
        latency.record(Duration::from_secs(120));
        assert_eq!(latency.count(), 1001);
        // Two minutes is clamped to the one-minute ceiling.
        let max = latency.percentiles().max;
        assert!((max - 60_000.0).abs() <= 60.0, "{max}");
    }

    #[test]
    fn buckets_hold_every_value_once() {
        let mut latency = Latency::default();
        for us in [5u64, 5, 1500, 1501, 90_000] {
            latency.record(Duration::from_micros(us));
        }
        let buckets: Vec<(u64, u64)> = latency.buckets().collect();
        // Below 2048 µs a bucket is one microsecond wide; 90 ms is in a 64 µs one.
        assert_eq!(buckets, vec![(5, 2), (1500, 1), (1501, 1), (90_047, 1)]);
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(Latency::default().percentiles(), Percentiles::default());
    }
}
