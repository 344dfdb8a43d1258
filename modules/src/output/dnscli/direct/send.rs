//! The sending side, on the chain's thread: pick the link, connect when it
//! has no connection (blocking, with the connect timeout), put the query in
//! the link's table and write it (one `send` or `write` per query, or held
//! for a batch).

use super::link::Done;
use super::link::{Link, LinkState, Pending};
use super::shared::Core;
use dnsluice_core::sync::lock;
use dnsluice_net::health::Failure;
use dnsluice_net::poll_driver::{Conn, Dialer};
use dnsluice_net::{DnsTransport, NetCounters, NetError};
use mio::Token;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

/// How long a query waits before it looks again for a free id of its link.
const ID_WAIT: Duration = Duration::from_millis(1);

/// Beyond twice the timeout, how long a query waits for a free id before it
/// fails (the ids come back within a timeout and a sweep, unless the
/// receiver is gone).
const ID_WAIT_MORE: Duration = Duration::from_secs(1);

impl Core {
    /// Waits while the window is full (then until it is down to its low
    /// water), sending retries meanwhile. A window that may grow doubles
    /// instead, once it is three quarters full (before the sender has to
    /// wait: a paced sender that waits falls behind and then sends its
    /// backlog in one burst), unless queries timed out since it last grew
    /// (the server, not the window, is then the limit).
    pub fn wait_for_room(&self) {
        if self.window.may_grow() && self.window.count() * 4 >= self.window.max() * 3 {
            let timeouts = lock(&self.tally).timeouts();
            if self.grown_at_timeouts.swap(timeouts, Ordering::Relaxed) == timeouts {
                self.window.grow();
            }
        }
        if !self.window.is_full() {
            return;
        }
        if !self.window.may_grow() {
            self.window.grow(); // counts the time it was found full at its cap
        }
        // The held queries go out before we wait for their answers.
        self.send_all_held();
        let low = self.window.low_water();
        self.window.wait_until(
            |inflight| inflight <= low && lock(&self.retries).is_empty(),
            Duration::from_millis(100),
            || self.run_retries(),
        );
    }

    /// Waits until nothing is in flight and nothing is left to retry.
    pub fn wait_for_all(&self) {
        self.send_all_held();
        self.window.wait_until(
            |inflight| inflight == 0 && lock(&self.retries).is_empty(),
            Duration::from_millis(20),
            || self.run_retries(),
        );
    }

    /// Sends the queries of truncated UDP answers again over TCP.
    pub fn run_retries(&self) {
        let retries = std::mem::take(&mut *lock(&self.retries));
        for pending in retries {
            let link = self.main_link(pending.client) + 1;
            self.send(link, pending);
        }
    }

    /// Writes `pending` on link `index`, connecting first if needed; a failure
    /// is counted at once. A query that is already in flight (a retry) keeps
    /// its place in the window.
    pub fn send(&self, index: usize, mut pending: Pending) {
        let link = &self.links[index];
        let retry = pending.retried;
        let mut state = lock(&link.state);
        let dials = state.conn.is_none()
            && link.transport.is_stream()
            && state.redial.check(Instant::now()).is_ok();
        if dials {
            // A connect over TCP or TLS blocks (up to the connect timeout):
            // the queries the other links hold for a batch go out first, or
            // they would wait it out and time out unsent.
            drop(state);
            self.send_all_held();
            state = lock(&link.state);
        }
        if let Err(failure) = self.ensure_connected(index, link.transport, &mut state) {
            drop(state);
            let done = Done::failed(pending, failure, link.transport);
            self.finish_all(vec![done], usize::from(retry));
            return;
        }
        if !retry {
            self.window.enter();
        }
        let batch = self.plan.send_batch;
        // A retry goes at once: its query has waited already.
        let hold = batch > 1 && !retry;
        // Every id of the link in flight (65,535: a window that grew past
        // that, one source's queries on one client): the query waits for
        // one to come back, answered or timed out (within a timeout and a
        // sweep), rather than fail; what is held for a batch goes out first.
        let waiting_since = Instant::now();
        let id = loop {
            if !retry {
                pending.started = Instant::now();
            }
            let deadline = Instant::now() + self.plan.timeout;
            match state.inflight.insert(pending, Some(deadline)) {
                Ok(id) => break id,
                Err((_, back))
                    if waiting_since.elapsed() < 2 * self.plan.timeout + ID_WAIT_MORE =>
                {
                    pending = back;
                    drop(state);
                    self.send_all_held();
                    std::thread::sleep(ID_WAIT);
                    state = lock(&link.state);
                }
                Err((full, back)) => {
                    drop(state);
                    let failure = ("bad_query", format!("bad query: {full}"));
                    let done = Done::failed(back, failure, link.transport);
                    self.finish_all(vec![done], 1);
                    return;
                }
            }
        };
        let st = &mut *state;
        let Some(query) = st.inflight.get(id).map(|p| p.query.as_slice()) else {
            return;
        };
        let written = match st.conn.as_mut() {
            Some(Conn::Udp(udp)) if hold => {
                udp.hold(id, query);
                Ok(())
            }
            Some(Conn::Udp(udp)) => udp.send(id, query),
            Some(Conn::Stream(stream)) => stream.write_query(id, query, hold),
            None => Err(io::Error::new(io::ErrorKind::NotConnected, "not connected")),
        };
        match written {
            Ok(()) => {
                NetCounters::bump(&self.counters.queries_sent);
                st.held += usize::from(hold);
                if st.held >= batch {
                    if let Err(e) = st.send_held() {
                        self.fail_link(link, state, e, None);
                    }
                }
            }
            Err(e) => {
                let pending = st.inflight.remove(id);
                self.fail_link(link, state, e, pending);
            }
        }
    }

    /// A write on `link` failed with `e`: closes it, failing what waits on
    /// it (and `pending`, the query that was being written, if any).
    fn fail_link(
        &self,
        link: &Link,
        mut state: MutexGuard<'_, LinkState>,
        e: io::Error,
        pending: Option<Pending>,
    ) {
        let reason = format!("write failed: {e}");
        let mut failed = state.close(link.transport, &reason, &self.counters);
        drop(state);
        if let Some(pending) = pending {
            let failure = ("send", NetError::Send(e).to_string());
            failed.push(Done::failed(pending, failure, link.transport));
        }
        let n = failed.len();
        self.finish_all(failed, n);
    }

    /// Sends every link's held queries (before waiting, and at the end).
    pub fn send_all_held(&self) {
        if self.plan.send_batch <= 1 {
            return;
        }
        for link in &self.links {
            let mut state = lock(&link.state);
            if let Err(e) = state.send_held() {
                self.fail_link(link, state, e, None);
            }
        }
    }

    /// Opens the link's socket or connection if it has none (unless a connect
    /// failed a moment ago: see [`dnsluice_net::health::RECONNECT_AFTER`]).
    fn ensure_connected(
        &self,
        index: usize,
        transport: DnsTransport,
        state: &mut LinkState,
    ) -> Result<(), Failure> {
        if state.conn.is_some() {
            return Ok(());
        }
        state.redial.check(Instant::now())?;
        let endpoint = match transport {
            DnsTransport::Tcp => &self.tcp_endpoint,
            _ => &self.plan.endpoint,
        };
        let dialer = Dialer {
            registry: &self.registry,
            connect_timeout: self.plan.connect_timeout,
            tls: self.tls.as_ref().map(|(client, name)| (client, name)),
            counters: &self.counters,
        };
        match dialer.connect(endpoint, Token(index)) {
            Ok(conn) => {
                state.conn = Some(conn);
                state.redial.connected();
                Ok(())
            }
            Err(e) => Err(state.redial.failed(&e, Instant::now())),
        }
    }
}
