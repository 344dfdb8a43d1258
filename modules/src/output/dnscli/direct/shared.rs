//! What the sending and the receiving thread share, and the counting of
//! what became of each query.

use super::link::{Done, Link, Pending};
use super::window::Window;
use super::Plan;
use crate::output::dnscli::outcome::Outcome;
use crate::output::dnscli::tally::Tally;
use dnsluice_core::sync::lock;
use dnsluice_net::tls::{Alpn, TlsClient};
use dnsluice_net::{DnsTransport, Endpoint, NetCounters, NetError};
use mio::{Poll, Token, Waker};
use rustls::pki_types::ServerName;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The receiver's own token (its waker); links use their index.
pub(super) const WAKER: Token = Token(usize::MAX);

/// What both threads share.
pub(super) struct Core {
    pub plan: Plan,
    pub tcp_endpoint: Endpoint,
    /// The TLS client and the name to verify, for TLS.
    pub tls: Option<(TlsClient, ServerName<'static>)>,
    /// Per client: the main link, then (with TCP retries) its TCP link.
    pub links: Vec<Link>,
    pub registry: mio::Registry,
    pub waker: Waker,
    pub window: Window,
    /// Finish once nothing is in flight.
    pub stop: AtomicBool,
    /// Queue outcomes (answers and errors) for the chain's thread.
    pub keep: AtomicBool,
    /// Finish now (the stage is dropped without finishing).
    pub abort: AtomicBool,
    pub sent: AtomicU64,
    /// The timeouts when the window last grew (or was found full).
    pub grown_at_timeouts: AtomicU64,
    pub tally: Mutex<Tally>,
    pub outcomes: Mutex<Vec<Outcome>>,
    /// Truncated UDP answers whose queries the sender retries over TCP.
    pub retries: Mutex<Vec<Pending>>,
    pub counters: Arc<NetCounters>,
}

/// Now, in nanoseconds since the Unix epoch (0 if the clock is before it).
pub(super) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

fn epoll_error(e: std::io::Error) -> NetError {
    NetError::TlsSetup(format!("epoll: {e}"))
}

impl Core {
    /// The shared state for `plan`, and the poll set the receiver waits on.
    pub fn new(plan: Plan, counters: Arc<NetCounters>) -> Result<(Core, Poll), NetError> {
        let transport = plan.endpoint.transport;
        let tls = if transport == DnsTransport::Tls {
            let client = TlsClient::new(&plan.tls, Alpn::Dot)?;
            let name = client.server_name(&plan.endpoint)?;
            Some((client, name))
        } else {
            None
        };
        let poll = Poll::new().map_err(epoll_error)?;
        let registry = poll.registry().try_clone().map_err(epoll_error)?;
        let waker = Waker::new(&registry, WAKER).map_err(epoll_error)?;
        let retry_links = transport == DnsTransport::Udp && plan.tcp_retry;
        let mut links = Vec::new();
        for _ in 0..plan.clients {
            links.push(Link::new(transport));
            if retry_links {
                links.push(Link::new(DnsTransport::Tcp));
            }
        }
        let tcp_endpoint = Endpoint {
            transport: DnsTransport::Tcp,
            ..plan.endpoint.clone()
        };
        let core = Core {
            window: Window::new(plan.inflight.0, plan.inflight.1),
            keep: AtomicBool::new(plan.keep_outcomes),
            plan,
            tcp_endpoint,
            tls,
            links,
            registry,
            waker,
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            grown_at_timeouts: AtomicU64::new(0),
            tally: Mutex::new(Tally::new()),
            outcomes: Mutex::new(Vec::new()),
            retries: Mutex::new(Vec::new()),
            counters,
        };
        Ok((core, poll))
    }

    pub fn keep(&self) -> bool {
        self.keep.load(Ordering::Relaxed)
    }

    fn links_per_client(&self) -> usize {
        if self.links.len() > self.plan.clients as usize {
            2
        } else {
            1
        }
    }

    /// The index of `client`'s main link (its TCP retry link is the next).
    pub fn main_link(&self, client: u32) -> usize {
        (client % self.plan.clients) as usize * self.links_per_client()
    }

    /// Counts every query in `done`, queues their outcomes (when kept), and
    /// lets `released` queries out of the window.
    pub fn finish_all(&self, done: Vec<Done>, released: usize) {
        if !done.is_empty() {
            let mut outcomes = Vec::new();
            {
                let mut tally = lock(&self.tally);
                for d in done {
                    let latency = d
                        .answered
                        .map_or_else(|| d.pending.started.elapsed(), |a| a.latency);
                    match (&d.result, d.answered) {
                        (Ok(_), Some(answered)) => tally.answered(answered.rcode, latency),
                        (Ok(_), None) => tally.answered(0, latency),
                        (Err((kind, message)), _) => tally.failed(kind, message),
                    }
                    if self.keep() {
                        outcomes.push(Outcome {
                            client: d.pending.client,
                            query: d.pending.query,
                            result: d.result.map(Option::unwrap_or_default),
                            latency,
                            sent_ns: d.pending.sent_ns,
                            transport: d.transport,
                        });
                    }
                }
            }
            if !outcomes.is_empty() {
                lock(&self.outcomes).append(&mut outcomes);
            }
        }
        self.window.release(released);
    }
}
