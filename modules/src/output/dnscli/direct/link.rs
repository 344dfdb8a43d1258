//! One client's link (its UDP socket or TCP/TLS connection, or the TCP
//! connection it retries truncated answers on) and the queries on it.

use dnsluice_net::health::{Failure, Redial};
use dnsluice_net::poll_driver::Conn;
use dnsluice_net::protocol::inflight::{Asked, InFlight};
use dnsluice_net::protocol::question::first_question;
use dnsluice_net::{DnsTransport, NetCounters, NetError};
use std::io;
use std::sync::Mutex;
use std::time::Instant;

/// A query handed to the engine, until it ends.
pub(super) struct Pending {
    /// The simulated client that sends it.
    pub client: u32,
    /// The query as given (original id).
    pub query: Vec<u8>,
    /// When it was first written (a retry keeps the first attempt's time).
    pub started: Instant,
    /// When it was taken up, in ns since the Unix epoch.
    pub sent_ns: i64,
    /// Sent again over TCP after a truncated UDP answer: it holds its place
    /// in the window already.
    pub retried: bool,
}

impl Asked for Pending {
    fn question(&self) -> Option<&[u8]> {
        first_question(&self.query)
    }
}

/// A link: its transport and its state, locked by whichever thread uses it.
pub(super) struct Link {
    pub transport: DnsTransport,
    pub state: Mutex<LinkState>,
}

impl Link {
    pub fn new(transport: DnsTransport) -> Self {
        Link {
            transport,
            state: Mutex::new(LinkState::default()),
        }
    }
}

/// The link's connection and the queries on it.
#[derive(Default)]
pub(super) struct LinkState {
    pub conn: Option<Conn>,
    /// The last connect failure, repeated for a while instead of redialling.
    pub redial: Redial,
    /// The queries written, by wire id, with their deadlines.
    pub inflight: InFlight<Pending>,
    /// Queries written but held, not sent yet (see `Plan::send_batch`);
    /// they are in `inflight`.
    pub held: usize,
}

impl LinkState {
    /// Sends the held queries.
    pub fn send_held(&mut self) -> io::Result<()> {
        if self.held == 0 {
            return Ok(());
        }
        self.held = 0;
        match &mut self.conn {
            Some(Conn::Udp(udp)) => udp.send_held(),
            Some(Conn::Stream(stream)) => stream.send_held(),
            None => Ok(()),
        }
    }

    /// Marks the connection gone (counting it closed, if there was one) and
    /// fails every query on it.
    pub fn close(
        &mut self,
        transport: DnsTransport,
        reason: &str,
        counters: &NetCounters,
    ) -> Vec<Done> {
        if self.conn.take().is_some() {
            NetCounters::bump(&counters.connections_closed);
        }
        self.held = 0;
        let message = NetError::Closed(reason.to_string()).to_string();
        self.inflight
            .drain()
            .map(|pending| Done::failed(pending, ("closed", message.clone()), transport))
            .collect()
    }
}

/// What became of a query, before it is counted.
pub(super) struct Done {
    pub pending: Pending,
    /// The answer (kept only when outcomes are), or the failure.
    pub result: Result<Option<Vec<u8>>, Failure>,
    /// An answer's full RCODE and latency (taken as it was read), for the tally.
    pub answered: Option<Answered>,
    pub transport: DnsTransport,
}

/// What the tally counts of an answer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Answered {
    /// The RCODE, extended by the answer's OPT record (BADVERS, BADCOOKIE).
    pub rcode: u16,
    /// From the query's send to the answer's read.
    pub latency: std::time::Duration,
}

impl Done {
    pub fn failed(pending: Pending, failure: Failure, transport: DnsTransport) -> Self {
        Done {
            pending,
            result: Err(failure),
            answered: None,
            transport,
        }
    }
}
