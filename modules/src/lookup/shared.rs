//! What a lookup run's workers share: the configuration, the board of
//! work, the connection setups and counters, and the channel their finished
//! records go back on.

use super::board::Board;
use super::config::LookupConfig;
use super::record::{Finished, Outcome};
use super::stats::RunCounters;
use dnsluice_net::{ClientSetup, NetCounters, NetError, Transport};
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
    pub run: RunCounters,
    results: mpsc::Sender<Finished>,
}

impl Shared {
    /// Sets up the connections and the board for `config`; records go to
    /// `results`. Fails on TLS setup problems (a CA file that does not load).
    pub fn new(config: LookupConfig, results: mpsc::Sender<Finished>) -> Result<Shared, NetError> {
        let net = Arc::new(NetCounters::default());
        let setup = ClientSetup::new(
            config.transport,
            &config.tls,
            config.timeout,
            config.doh_method,
            net.clone(),
        )?;
        let tcp_setup = ClientSetup::new(
            Transport::Tcp,
            &config.tls,
            config.timeout,
            config.doh_method,
            net.clone(),
        )?;
        let threads = config.threads.max(1);
        let inflight = config.inflight.max(1);
        // Each nameserver's queue holds what a pool of workers can have in flight, twice.
        let queue_capacity =
            (2 * threads * inflight / config.nameservers.len().max(1)).clamp(2, 4096);
        let board = Board::new(
            config.scheduler,
            &config.nameservers,
            threads,
            queue_capacity,
        );
        Ok(Shared {
            config,
            board,
            setup,
            tcp_setup,
            net,
            run: RunCounters::default(),
            results,
        })
    }

    /// The setup for connections over `transport`.
    pub fn setup_for(&self, transport: Transport) -> &ClientSetup {
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
        let _ = self
            .results
            .send(Finished::new(index, name, outcome, &self.config.style));
    }
}
