//! `filter.timing`: paces a chain. Keeps the capture's pace (`speed = 1`),
//! multiplies it (`speed = 2` is twice as fast), holds a fixed rate
//! (`rate = QPS`), or lets everything through at once (`fast = true`).
//!
//! Every object has a due time: the first passes at once; later ones at the
//! first's wall time plus their capture-time distance divided by `speed`, or
//! plus `index / rate`. An early object waits (sleeps of at least a
//! millisecond, so a high rate goes out in small bursts whose average is
//! exact). A late one passes at once: drift is measured (`late`,
//! `max_drift_us`) and reported as a warning, never fatal.

use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Map, Object, StageError, StageStats};
use dnsluice_options::Options;
use std::time::{Duration, Instant};

const MODULE: &str = "filter.timing";

/// An object this much past its due time counts as late.
const LATE_AFTER: Duration = Duration::from_millis(1);

/// Shortest sleep: shorter waits are gathered into later ones.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// Options of `filter.timing`: at most one of `speed`, `rate` and `fast`
/// (none keeps the capture's pace).
#[derive(Debug, Clone, Default, Options)]
pub struct TimingOptions {
    /// Multiply the capture's pace (1.0 keeps it, 2.0 is twice as fast).
    pub speed: Option<f64>,
    /// A fixed rate instead, in objects per second.
    pub rate: Option<f64>,
    /// No pacing: as fast as possible.
    #[option(default)]
    pub fast: bool,
    /// Warn at the end when an object was this late.
    #[option(default = Duration::from_millis(100))]
    pub warn_drift: Duration,
}

/// How objects are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// The capture's timestamps divided by this factor.
    Capture(f64),
    /// This many objects per second.
    Rate(f64),
    /// No waiting.
    Fast,
}

/// The pacing filter; see the module docs.
#[derive(Debug)]
pub struct Timing {
    pace: Pace,
    start: Option<(Instant, i64)>,
    count: u64,
    late: u64,
    max_drift: Duration,
    slept: Duration,
    warn_drift: Duration,
}

impl Timing {
    /// A filter pacing objects by `pace`.
    pub fn new(pace: Pace, warn_drift: Duration) -> Self {
        Timing {
            pace,
            start: None,
            count: 0,
            late: 0,
            max_drift: Duration::ZERO,
            slept: Duration::ZERO,
            warn_drift,
        }
    }

    /// From options.
    pub fn from_options(o: &TimingOptions) -> Result<Self, StageError> {
        let given =
            usize::from(o.speed.is_some()) + usize::from(o.rate.is_some()) + usize::from(o.fast);
        if given > 1 {
            return Err(StageError::config(
                MODULE,
                "give one of `speed`, `rate` and `fast`",
            ));
        }
        let positive = |key: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(StageError::option(
                    MODULE,
                    Some(key),
                    "must be a number above 0",
                ))
            }
        };
        let pace = match (o.speed, o.rate, o.fast) {
            (_, _, true) => Pace::Fast,
            (_, Some(rate), _) => Pace::Rate(positive("rate", rate)?),
            (Some(speed), _, _) => Pace::Capture(positive("speed", speed)?),
            _ => Pace::Capture(1.0),
        };
        Ok(Timing::new(pace, o.warn_drift))
    }

    /// When the object with capture time `ts_ns` is due, counted from the first.
    fn due(&mut self, ts_ns: Option<i64>) -> Option<Instant> {
        if matches!(self.pace, Pace::Capture(_)) && ts_ns.is_none() {
            // No time to keep (a dnstap message without one): due at once,
            // and not the start either (from 0, the next would be due
            // decades later).
            return None;
        }
        let (t0, ts0) = *self
            .start
            .get_or_insert_with(|| (Instant::now(), ts_ns.unwrap_or(0)));
        let offset_s = match self.pace {
            Pace::Fast => return None,
            // Capture time may step backwards: such an object is due at once.
            Pace::Capture(speed) => (ts_ns? - ts0).max(0) as f64 / 1e9 / speed,
            Pace::Rate(rate) => self.count as f64 / rate,
        };
        // Past a century the schedule is meaningless; do not overflow.
        Some(t0 + Duration::from_secs_f64(offset_s.min(3.0e9)))
    }
}

/// The longest sleep between two looks at whether the run was stopped.
const STOP_LOOK: Duration = Duration::from_millis(100);

/// Sleeps `wait`, or less when a stop is asked for meanwhile (SIGINT,
/// SIGTERM: the driver then ends the run at the next object, not when a
/// query due in an hour is); how long it slept.
fn sleep_unless_stopped(wait: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() || dnsluice_core::stop::requested().is_some() {
            return started.elapsed();
        }
        std::thread::sleep(left.min(STOP_LOOK));
    }
}

impl Map for Timing {
    fn map(&mut self, obj: &mut Object<'_>) {
        let ts = obj.packet().and_then(|p| p.meta.ts_ns);
        if let Some(due) = self.due(ts) {
            let now = Instant::now();
            if due > now {
                let wait = due - now;
                if wait >= MIN_SLEEP {
                    self.slept += sleep_unless_stopped(wait);
                }
            } else {
                let drift = now - due;
                if drift > LATE_AFTER {
                    self.late += 1;
                }
                self.max_drift = self.max_drift.max(drift);
            }
        }
        self.count += 1;
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new(MODULE);
        stats.add_counter("late", self.late);
        stats.add_counter("max_drift_us", self.max_drift.as_micros() as u64);
        stats.add_counter("slept_ms", self.slept.as_millis() as u64);
        if self.pace != Pace::Fast && self.max_drift >= self.warn_drift {
            stats.warnings.push(format!(
                "{MODULE}: fell behind the schedule by up to {:.1} ms ({} objects more than 1 ms late): the chain cannot keep this pace",
                self.max_drift.as_secs_f64() * 1000.0,
                self.late
            ));
        }
        stats
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::map(
        MODULE,
        "pace objects: the capture's timing, a multiple of it, a fixed rate, or as fast as possible",
        |o: TimingOptions| Timing::from_options(&o),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::{CaptureMeta, LinkType, Packet};

    fn packet(ts_ns: i64) -> Packet<'static> {
        Packet::new(
            &[],
            CaptureMeta {
                frame: 1,
                ts_ns: Some(ts_ns),
                len: 0,
                link: LinkType::RAW,
            },
        )
    }

    fn run(timing: &mut Timing, timestamps: &[i64]) -> Duration {
        let started = Instant::now();
        for ts in timestamps {
            timing.map(&mut Object::Packet(packet(*ts)));
        }
        started.elapsed()
    }

    #[test]
    fn capture_pace_is_kept_and_multiplied() {
        // 0 .. 200 ms of capture time.
        let ts: Vec<i64> = (0..=20).map(|i| 1_000_000_000 + i * 10_000_000).collect();
        let took = run(
            &mut Timing::new(Pace::Capture(1.0), Duration::from_secs(1)),
            &ts,
        );
        assert!(
            took >= Duration::from_millis(195) && took < Duration::from_millis(400),
            "{took:?}"
        );
        let took = run(
            &mut Timing::new(Pace::Capture(4.0), Duration::from_secs(1)),
            &ts,
        );
        assert!(
            took >= Duration::from_millis(48) && took < Duration::from_millis(150),
            "{took:?}"
        );
        let took = run(&mut Timing::new(Pace::Fast, Duration::from_secs(1)), &ts);
        assert!(took < Duration::from_millis(20), "{took:?}");
    }

    #[test]
    fn an_object_without_a_time_is_due_at_once_and_starts_nothing() {
        let mut timing = Timing::new(Pace::Capture(1.0), Duration::from_secs(1));
        assert_eq!(timing.due(None), None);
        let first = timing.due(Some(1_700_000_000_000_000_000)).unwrap();
        let next = timing.due(Some(1_700_000_000_100_000_000)).unwrap();
        assert_eq!(next - first, Duration::from_millis(100));
        assert_eq!(timing.due(None), None);
    }

    #[test]
    fn a_fixed_rate_ignores_capture_time() {
        // 301 objects at 1000/s: the last is due 300 ms after the first.
        let ts = vec![0i64; 301];
        let took = run(
            &mut Timing::new(Pace::Rate(1000.0), Duration::from_secs(1)),
            &ts,
        );
        assert!(
            took >= Duration::from_millis(295) && took < Duration::from_millis(500),
            "{took:?}"
        );
    }

    #[test]
    fn drift_is_counted_and_warned_not_fatal() {
        let mut timing = Timing::new(Pace::Rate(1_000_000.0), Duration::from_millis(5));
        timing.map(&mut Object::Packet(packet(0)));
        std::thread::sleep(Duration::from_millis(20));
        timing.map(&mut Object::Packet(packet(0)));
        let stats = timing.stats();
        assert_eq!(stats.counters["late"], 1);
        assert!(stats.counters["max_drift_us"] >= 19_000);
        assert!(
            stats.warnings[0].contains("fell behind"),
            "{:?}",
            stats.warnings
        );
    }

    #[test]
    fn options_exclude_each_other() {
        let o = TimingOptions {
            speed: Some(2.0),
            fast: true,
            ..Default::default()
        };
        assert!(Timing::from_options(&o).is_err());
        let o = TimingOptions {
            rate: Some(-1.0),
            ..Default::default()
        };
        assert!(Timing::from_options(&o).is_err());
    }
}
