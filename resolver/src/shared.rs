//! What a lookup run's workers share: the configuration, the board of
//! work, the connection setups and counters, and the channel their finished
//! records go back on.

use super::board::{Board, Nameserver};
use super::config::LookupConfig;
use super::iterative::Resolver;
use super::record::{Batch, Finished, Outcome};
use super::stats::RunCounters;
use super::turns::{Caps, Turns};
use dnsluice_net::{ClientSetup, DnsTransport, Endpoint, NetCounters, NetError};
use std::sync::mpsc;
use std::sync::Arc;

/// What the workers share.
pub struct Shared {
    /// The configuration.
    pub config: LookupConfig,
    /// The queues.
    pub board: Board,
    /// Connection setup for the configured transport.
    setup: ClientSetup,
    /// Connection setup for TCP (the fallback after TC=1 over UDP).
    tcp_setup: ClientSetup,
    /// Socket counters.
    pub net: Arc<NetCounters>,
    /// Run counters.
    pub run: Arc<RunCounters>,
    /// The iterative resolver, when names are resolved from the root.
    pub iterative: Option<Arc<Resolver>>,
    /// `--rate`, the run's cap.
    turns: Option<Arc<Turns>>,
    results: mpsc::Sender<Batch>,
}

impl Shared {
    /// Sets up the connections and the board for `config`; records go to
    /// `results`, counters to `run` and `net`. Fails on TLS setup problems
    /// (a CA file that does not load).
    pub fn new(
        config: LookupConfig,
        run: Arc<RunCounters>,
        net: Arc<NetCounters>,
        results: mpsc::Sender<Batch>,
    ) -> Result<Shared, NetError> {
        let setup = ClientSetup::new(
            config.transport,
            &config.tls,
            config.timeout,
            config.doh_method,
            net.clone(),
        )?
        .with_local_addrs(&config.local_addrs);
        let tcp_setup = ClientSetup::new(
            DnsTransport::Tcp,
            &config.tls,
            config.timeout,
            config.doh_method,
            net.clone(),
        )?
        .with_local_addrs(&config.local_addrs);
        let threads = config.threads.max(1);
        let inflight = config.inflight.max(1);
        let turns = config.rate.map(|rate| Arc::new(Turns::new(rate)));
        let iterative = match &config.iterative {
            Some(iterative) => Some(Arc::new(
                Resolver::new(
                    iterative.clone(),
                    config.transport,
                    config.timeout,
                    config.retries,
                    config.query,
                    config.tcp_fallback,
                    net.clone(),
                )?
                .with_turns(turns.clone()),
            )),
            None => None,
        };
        // Iterative names all start at the root: one queue, under the first
        // root server's address (connections are the resolver's own).
        let routes = match &config.iterative {
            Some(iterative) => iterative
                .roots
                .servers
                .iter()
                .flat_map(|s| s.addrs.first())
                .take(1)
                .map(|ip| Endpoint {
                    addr: std::net::SocketAddr::new(*ip, iterative.port),
                    transport: config.transport,
                    host: None,
                    path: String::new(),
                })
                .collect(),
            None => config.nameservers.clone(),
        };
        // Each nameserver's queue holds what a pool of workers can have in flight, twice.
        let queue_capacity = (2 * threads * inflight / routes.len().max(1)).clamp(2, 4096);
        let board = Board::new(
            config.scheduler,
            &routes,
            threads,
            queue_capacity,
            config.rate_per_nameserver,
        );
        Ok(Shared {
            config,
            board,
            setup,
            tcp_setup,
            net,
            run,
            iterative,
            turns,
            results,
        })
    }

    /// The caps a query to `ns` is under (`ns`: none for the walks of
    /// `--iterative`, which have only the run's).
    pub fn caps<'a>(&'a self, ns: Option<&'a Nameserver>) -> Caps<'a> {
        Caps {
            run: self.turns.as_deref(),
            nameserver: ns.and_then(|ns| ns.turns.as_ref()),
        }
    }

    /// The setup for connections over `transport`.
    pub fn setup_for(&self, transport: DnsTransport) -> &ClientSetup {
        if transport == self.config.transport {
            &self.setup
        } else {
            &self.tcp_setup
        }
    }

    /// Counts and sends the record of a finished job.
    pub fn finish(&self, index: u64, name: &str, outcome: &Outcome) {
        self.run.finished(&outcome.status);
        // The engine outlives its workers, so the receiver is there.
        let _ = self.results.send(vec![Finished::new(
            index,
            name,
            outcome,
            &self.config.style,
        )]);
    }
}
