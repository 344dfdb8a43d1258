//! One nameserver's round trip, smoothed as TCP smooths it (RFC 6298), and
//! the wait for an answer that follows from it: long enough for a slow
//! answer, short enough that a lost query is asked again soon. Every try
//! has its own query id, so an answer tells which try it answers and every
//! sample is unambiguous (no need for Karn's rule).

use std::time::Duration;

/// The shortest wait for an answer: below it, a server's momentary queue
/// would pass for loss.
pub const MIN_WAIT: Duration = Duration::from_millis(100);
/// The round trip taken before the first answer from a nameserver, for
/// the pacing's rounds (RFC 6298's first wait); the first wait for an
/// answer is the whole `--timeout`.
pub const FIRST_WAIT: Duration = Duration::from_secs(1);

/// A smoothed round trip and its variation.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoundTrip {
    srtt: Option<Duration>,
    rttvar: Duration,
}

impl RoundTrip {
    /// Adds one measured round trip.
    pub fn sample(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// The smoothed round trip; `None` before the first answer.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// How long to wait for the answer to a first try, at most `cap` (the
    /// user's `--timeout`): the smoothed round trip plus four variations,
    /// at least twice the round trip and [`MIN_WAIT`]; all of `cap` before
    /// any answer.
    pub fn wait(&self, cap: Duration) -> Duration {
        let wait = match self.srtt {
            None => cap,
            Some(srtt) => (srtt + 4 * self.rttvar).max(2 * srtt).max(MIN_WAIT),
        };
        wait.min(cap)
    }

    /// The wait for try `try_number` (1 for the first): doubled at every
    /// try after the first, at most `cap`.
    pub fn wait_for_try(&self, try_number: u32, cap: Duration) -> Duration {
        let doublings = try_number.saturating_sub(1).min(16);
        self.wait(cap).saturating_mul(1 << doublings).min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: Duration = Duration::from_secs(2);

    #[test]
    fn the_wait_follows_the_round_trip_and_backs_off() {
        let mut rt = RoundTrip::default();
        assert_eq!(rt.wait(CAP), CAP);
        assert_eq!(
            rt.wait(Duration::from_millis(300)),
            Duration::from_millis(300)
        );
        // A steady 50 ms path: the variation shrinks, the wait tends to
        // twice the round trip, never under the floor.
        for _ in 0..50 {
            rt.sample(Duration::from_millis(50));
        }
        assert_eq!(rt.srtt(), Some(Duration::from_millis(50)));
        assert_eq!(rt.wait(CAP), Duration::from_millis(100));
        assert_eq!(rt.wait_for_try(2, CAP), Duration::from_millis(200));
        assert_eq!(rt.wait_for_try(5, CAP), Duration::from_millis(1600));
        assert_eq!(rt.wait_for_try(6, CAP), CAP);
        // A 300 ms path: 600 ms.
        let mut far = RoundTrip::default();
        for _ in 0..50 {
            far.sample(Duration::from_millis(300));
        }
        assert_eq!(far.wait(CAP), Duration::from_millis(600));
        // A jittery one: the variation counts.
        let mut jittery = RoundTrip::default();
        for i in 0..50 {
            jittery.sample(Duration::from_millis(if i % 2 == 0 { 40 } else { 160 }));
        }
        let wait = jittery.wait(CAP);
        assert!(wait > Duration::from_millis(250), "{wait:?}");
        // Loopback: the floor.
        let mut near = RoundTrip::default();
        near.sample(Duration::from_micros(80));
        assert_eq!(near.wait(CAP), MIN_WAIT);
    }
}
