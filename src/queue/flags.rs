//! The NATS flags the queue commands and the workers share. Their values
//! become the keys of `input.nats` / `output.nats` (so the defaults, ranges
//! and errors are the modules'); they are declared here rather than made
//! with `ModuleFlags` because `lookup` has a `--ca-file` of its own (for
//! DNS-over-TLS): the broker's is `--nats-ca-file`. Secrets never come as
//! flags: `--nats-creds FILE`, `--nats-nkey-file FILE`, or $NATS_USER and
//! $NATS_PASSWORD.

use anyhow::Result;
use clap::Args;
use dnsluice_core::options::Options;
use dnsluice_modules::nats::NatsAuthOptions;
use std::path::PathBuf;

/// How to reach the broker.
#[derive(Args, Debug, Clone, Default)]
pub struct NatsFlags {
    /// The broker's NATS credentials file (.creds: user JWT and nkey seed).
    #[arg(long, value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// A file holding the nkey seed to log in with.
    #[arg(long, value_name = "FILE")]
    pub nats_nkey_file: Option<PathBuf>,
    /// Trust the CA certificates in this PEM file for the broker (TLS).
    #[arg(long, value_name = "FILE")]
    pub nats_ca_file: Option<PathBuf>,
    /// Do not verify the broker's certificate (test brokers only).
    #[arg(long)]
    pub nats_insecure: bool,
    /// How long the broker may stay unreachable, or a results stream keep
    /// refusing records, before a worker gives up with an error (a bare
    /// number is seconds; default 60s). What it held goes to other workers.
    #[arg(long, value_name = "DURATION")]
    pub nats_reconnect_for: Option<String>,
}

/// A duration flag's text as a module key's: a bare number is seconds.
fn duration_value(text: &str) -> toml::Value {
    let text = text.trim();
    if text.parse::<f64>().is_ok() {
        format!("{text}s").into()
    } else {
        text.into()
    }
}

impl NatsFlags {
    /// The values given, as the modules' keys.
    pub fn table(&self) -> toml::Table {
        let mut table = toml::Table::new();
        let path = |p: &PathBuf| toml::Value::String(p.display().to_string());
        if let Some(p) = &self.nats_creds {
            table.insert("creds".into(), path(p));
        }
        if let Some(p) = &self.nats_nkey_file {
            table.insert("nkey_file".into(), path(p));
        }
        if let Some(p) = &self.nats_ca_file {
            table.insert("ca_file".into(), path(p));
        }
        if self.nats_insecure {
            table.insert("insecure".into(), toml::Value::Boolean(true));
        }
        if let Some(d) = &self.nats_reconnect_for {
            table.insert("reconnect_for".into(), duration_value(d));
        }
        table
    }

    /// The credentials and certificates, for the queue commands.
    pub fn auth(&self) -> Result<NatsAuthOptions> {
        NatsAuthOptions::from_table(self.table()).map_err(|e| anyhow::anyhow!("{}", e.message))
    }
}

/// How a worker takes work (`lookup --input nats://`, `run --work`).
#[derive(Args, Debug, Clone, Default)]
pub struct WorkerFlags {
    /// With a nats:// input: stop when no work came for this long and
    /// nothing is in flight (a bare number is seconds; input.nats's
    /// default: 5s).
    #[arg(long, value_name = "DURATION")]
    pub idle_exit: Option<String>,
    /// With a nats:// input: never stop, wait for more work.
    #[arg(long)]
    pub follow: bool,
    /// With a nats:// input: the consumer the workers share (default workers).
    #[arg(long, value_name = "NAME")]
    pub consumer: Option<String>,
    /// With a nats:// input: how long a dead worker's items wait before
    /// going to others (set when the consumer is made; default 30s).
    #[arg(long, value_name = "DURATION")]
    pub ack_wait: Option<String>,
    /// With a nats:// input: deliveries of an item at most, the last one
    /// answered with an ERROR record (counted by each worker; default 5).
    #[arg(long, value_name = "N")]
    pub max_deliver: Option<i64>,
    /// With a nats:// input: lines this worker holds at most, in the items
    /// it took (default 16384); smaller shares a short queue more evenly.
    #[arg(long, value_name = "LINES")]
    pub max_held: Option<usize>,
    /// On how many servers of a JetStream cluster the results stream (and,
    /// with --follow, the work stream) is stored, when this worker makes it
    /// (default 1).
    #[arg(long, value_name = "N")]
    pub replicas: Option<usize>,
    /// With a nats:// output: how results messages of 1 KiB and more are
    /// compressed: zstd (the default; `queue get` decodes it) or none.
    #[arg(long, value_name = "zstd|none")]
    pub results_compression: Option<String>,
    /// How to reach the broker.
    #[command(flatten)]
    pub nats: NatsFlags,
}

impl WorkerFlags {
    /// `input.nats`'s keys for these flags and `url`.
    pub fn input_table(&self, url: &str) -> toml::Table {
        let mut table = self.nats.table();
        table.insert("url".into(), url.into());
        if let Some(d) = &self.idle_exit {
            table.insert("idle_exit".into(), duration_value(d));
        }
        if self.follow {
            table.insert("follow".into(), true.into());
        }
        if let Some(c) = &self.consumer {
            table.insert("consumer".into(), c.as_str().into());
        }
        if let Some(d) = &self.ack_wait {
            table.insert("ack_wait".into(), duration_value(d));
        }
        if let Some(n) = self.max_deliver {
            table.insert("max_deliver".into(), n.into());
        }
        if let Some(n) = self.max_held {
            table.insert("max_held".into(), (n as i64).into());
        }
        if let (true, Some(n)) = (self.follow, self.replicas) {
            table.insert("replicas".into(), (n as i64).into());
        }
        table
    }

    /// `output.nats`'s keys for these flags and `url`.
    pub fn output_table(&self, url: &str) -> toml::Table {
        let mut table = self.nats.table();
        table.insert("url".into(), url.into());
        if let Some(n) = self.replicas {
            table.insert("replicas".into(), (n as i64).into());
        }
        if let Some(c) = &self.results_compression {
            table.insert("compression".into(), c.as_str().into());
        }
        table
    }
}

/// Whether `text` is a NATS address rather than a file.
pub fn is_nats_url(text: &std::ffi::OsStr) -> bool {
    let text = text.to_string_lossy();
    text.starts_with("nats://") || text.starts_with("tls://")
}
