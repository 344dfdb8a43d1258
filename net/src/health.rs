//! When a connection is taken for dead and when a failed one is tried again:
//! the rules every driver follows, as plain state (no clock of its own, no I/O).

use crate::error::NetError;
use std::io;
use std::time::{Duration, Instant};

/// How long a client whose connect failed fails its queries at once (with
/// that failure) before it tries to connect again: a dead server costs one
/// attempt a second per client, not one per query.
pub const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Queries in a row that time out on a stream, with no answer between them,
/// after which the connection is taken for dead (a black-holed peer).
pub const DEAD_AFTER_TIMEOUTS: u32 = 3;

/// A connect failure: its kind ([`NetError::kind`]) and text.
pub type Failure = (&'static str, String);

/// The last connect failure of one client's connection, and whether it is
/// recent enough to fail a query without trying.
#[derive(Debug, Default)]
pub struct Redial {
    failed: Option<(Instant, &'static str, String)>,
}

impl Redial {
    /// `Err` with the last failure while it is less than [`RECONNECT_AFTER`]
    /// old at `now`; `Ok` when a connect may be tried.
    pub fn check(&self, now: Instant) -> Result<(), Failure> {
        match &self.failed {
            Some((when, kind, text)) if now.duration_since(*when) < RECONNECT_AFTER => {
                Err((kind, text.clone()))
            }
            _ => Ok(()),
        }
    }

    /// A connect at `now` failed with `error`; returns the failure.
    pub fn failed(&mut self, error: &NetError, now: Instant) -> Failure {
        let failure = (error.kind(), error.to_string());
        self.failed = Some((now, failure.0, failure.1.clone()));
        failure
    }

    /// A connect succeeded.
    pub fn connected(&mut self) {
        self.failed = None;
    }
}

/// Timeouts in a row on one stream connection (see [`DEAD_AFTER_TIMEOUTS`]).
#[derive(Debug, Default)]
pub struct Liveness {
    timeouts_in_row: u32,
}

impl Liveness {
    /// An answer came: the peer is alive.
    pub fn answered(&mut self) {
        self.timeouts_in_row = 0;
    }

    /// A query timed out; `true` when the connection is now taken for dead.
    pub fn timed_out(&mut self) -> bool {
        self.timeouts_in_row += 1;
        self.timeouts_in_row >= DEAD_AFTER_TIMEOUTS
    }

    /// Why a connection was taken for dead.
    pub fn reason() -> String {
        format!("{DEAD_AFTER_TIMEOUTS} queries in a row got no answer: the connection looks dead")
    }
}

/// Whether an error from a connected UDP socket leaves it usable: an ICMP
/// error (port unreachable) from an earlier datagram surfaces as
/// `ConnectionRefused` on a later call and concerns no one query; a signal
/// interrupts. Anything else ends the socket.
pub fn udp_error_is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_repeated_for_a_second_then_a_connect_is_tried() {
        let t0 = Instant::now();
        let mut redial = Redial::default();
        assert!(redial.check(t0).is_ok());
        let error = NetError::Timeout;
        assert_eq!(redial.failed(&error, t0), ("timeout", "timeout".into()));
        let just_before = t0 + RECONNECT_AFTER - Duration::from_millis(1);
        assert_eq!(
            redial.check(just_before),
            Err(("timeout", "timeout".into()))
        );
        assert!(redial.check(t0 + RECONNECT_AFTER).is_ok());
        redial.failed(&error, t0);
        redial.connected();
        assert!(redial.check(t0).is_ok());
    }

    #[test]
    fn three_timeouts_in_a_row_but_not_with_an_answer_between() {
        let mut live = Liveness::default();
        assert!(!live.timed_out());
        assert!(!live.timed_out());
        live.answered();
        assert!(!live.timed_out());
        assert!(!live.timed_out());
        assert!(live.timed_out());
        assert!(Liveness::reason().starts_with("3 queries in a row"));
    }

    #[test]
    fn icmp_refusals_keep_a_udp_socket() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert!(udp_error_is_transient(&refused));
        let other = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(!udp_error_is_transient(&other));
    }
}
