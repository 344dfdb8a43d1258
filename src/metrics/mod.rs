//! `--metrics-listen ADDR`: a Prometheus endpoint (`/metrics`, the text
//! exposition format) serving every stage's statistics while a command
//! runs (`run`, `replay`, `lookup`, `diff`, the queue's workers; in a
//! pipeline file, the key `metrics_listen`).
//!
//! [`board`] holds the latest snapshot (the driver publishes it, a scrape
//! reads it), [`render`] writes it in Prometheus' format (with the
//! process's own time and memory, [`process`]), [`server`] is the
//! HTTP server on its own thread. The address is bound only where the user
//! says; `--metrics-linger` keeps the endpoint up after the run until a
//! scrape has taken the final values.

pub mod board;
pub mod process;
pub mod render;
pub mod server;

use anyhow::{Context, Result};
use board::Board;
use clap::Args;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// The metrics flags of `run`, `replay`, `lookup` and `diff`.
#[derive(Args, Debug, Clone, Default)]
pub struct MetricsFlags {
    /// Serve Prometheus metrics (every stage's counters, gauges, latency
    /// histograms) at http://ADDR/metrics while the command runs, e.g.
    /// 127.0.0.1:9108. Bound only there.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// With --metrics-listen: after the run, keep serving until a scrape has
    /// taken the final values, at most DURATION (give it at least the
    /// scrape interval); SIGINT or SIGTERM ends the wait (exit code the
    /// run's own), and a run a signal stopped does not wait.
    #[arg(long, value_name = "DURATION", default_value = "0s",
          value_parser = parse_linger)]
    pub metrics_linger: Duration,
}

/// Reads `--metrics-linger`: a duration with a unit, at most a day (an
/// absurd one overflowed the clock).
fn parse_linger(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if d > Duration::from_secs(86_400) {
        return Err("at most 1 day".into());
    }
    Ok(d)
}

impl MetricsFlags {
    /// The endpoint, serving from now, when `--metrics-listen` (or else
    /// `pipeline_key`, a pipeline's `metrics_listen`) asks for one. Says
    /// where on stderr unless `quiet`.
    pub fn start(&self, pipeline_key: Option<SocketAddr>, quiet: bool) -> Result<Option<Endpoint>> {
        match self.metrics_listen.or(pipeline_key) {
            Some(addr) => Endpoint::start(addr, self.metrics_linger, quiet).map(Some),
            None => Ok(None),
        }
    }
}

/// A running endpoint. Dropping it says the values are final and waits
/// (at most the linger) for a scrape to take them.
pub struct Endpoint {
    board: Arc<Board>,
    linger: Duration,
    addr: SocketAddr,
}

impl Endpoint {
    /// Binds `addr` and serves from a thread of its own.
    pub fn start(addr: SocketAddr, linger: Duration, quiet: bool) -> Result<Endpoint> {
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("--metrics-listen: cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let board = Arc::new(Board::default());
        server::spawn(listener, board.clone()).context("cannot start the metrics thread")?;
        if !quiet {
            eprintln!("dnsluice: metrics at http://{addr}/metrics");
        }
        Ok(Endpoint {
            board,
            linger,
            addr,
        })
    }

    /// What the driver publishes to.
    pub fn board(&self) -> &Board {
        &self.board
    }

    /// The address bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.board.finish();
        if !self.linger.is_zero() && dnsluice_core::stop::signal().is_none() {
            // The run is over: a signal now ends the wait, not the run,
            // whose exit code stays its own (0 for one that finished).
            self.board
                .wait_final_scrape(self.linger, &|| dnsluice_core::stop::signal().is_some());
            dnsluice_core::stop::forget_signal();
        }
    }
}
