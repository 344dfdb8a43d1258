//! The timeout sweep, run by the receiver every tick: each link keeps its
//! deadlines in sending order (every query has the same timeout), so a sweep
//! looks only at the front of each link's queue.

use super::link::Done;
use super::shared::Core;
use dnsluice_net::NetError;
use std::sync::TryLockError;
use std::time::{Duration, Instant};

/// How often timeouts are swept: a twentieth of the timeout, between 1 and
/// 50 ms (so a timeout fires at most that much late).
pub(super) fn tick(timeout: Duration) -> Duration {
    (timeout / 20).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// Times out the queries whose deadline has passed. A link whose lock is
/// held is swept at the next tick: the sender holds it while it connects
/// (up to the connect timeout, a TLS handshake included), and a sweep that
/// waited for it kept the receiver from reading every other link meanwhile
/// (their answers, come in time, were then swept as timeouts).
pub(super) fn sweep(core: &Core, done: &mut Vec<Done>) {
    if core.window.count() == 0 {
        return;
    }
    let now = Instant::now();
    for link in &core.links {
        let mut state = match link.state.try_lock() {
            Ok(state) => state,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => continue,
        };
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
