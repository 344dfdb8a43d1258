//! The timeout sweep, run by the receiver every tick: each link keeps its
//! deadlines in sending order (every query has the same timeout), so a sweep
//! looks only at the front of each link's queue.

use super::link::Done;
use super::shared::Core;
use dnsluice_core::sync::lock;
use dnsluice_net::NetError;
use std::time::{Duration, Instant};

/// How often timeouts are swept: a twentieth of the timeout, between 1 and
/// 50 ms (so a timeout fires at most that much late).
pub(super) fn tick(timeout: Duration) -> Duration {
    (timeout / 20).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// Times out the queries whose deadline has passed.
pub(super) fn sweep(core: &Core, done: &mut Vec<Done>) {
    if core.window.count() == 0 {
        return;
    }
    let now = Instant::now();
    for link in &core.links {
        let mut state = lock(&link.state);
        while let Some(pending) = state.inflight.expired(now) {
            let failure = ("timeout", NetError::Timeout.to_string());
            done.push(Done::failed(pending, failure, link.transport));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tick;
    use std::time::Duration;

    #[test]
    fn ticks_are_a_twentieth_of_the_timeout_within_1_and_50_ms() {
        let ms = Duration::from_millis;
        assert_eq!(tick(ms(600)), ms(30));
        assert_eq!(tick(ms(5)), ms(1));
        assert_eq!(tick(ms(5000)), ms(50));
    }
}
