//! `dnsluice queue put|get|status`: work shared by many machines through
//! NATS JetStream (docs/queue.md), and the workers: `dnsluice lookup
//! --input nats://...` (`crate::lookup`) and `dnsluice run PIPELINE
//! --work nats://...` ([`worker::pipeline`]). `--shard I/N` (`dnsluice_modules::input::shard`)
//! splits work by hand, without a broker; [`merge`] adds up the summaries
//! of many runs.

pub mod flags;
pub mod get;
pub mod merge;
pub mod parallel;
pub mod put;
pub mod set_outputs;
pub mod status;
pub mod worker;

use anyhow::Result;
use clap::{Args, Subcommand};
use std::process::ExitCode;

pub use dnsluice_modules::input::shard::Shard;
pub use flags::{NatsFlags, WorkerFlags};

/// `dnsluice queue`.
#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  \
    nats-server -js -sd /var/lib/nats &\n  \
    dnsluice queue put nats://127.0.0.1:4222/names names.txt\n  \
    dnsluice lookup A --name-servers 127.0.0.1:53 --input nats://127.0.0.1:4222/names --output nats://127.0.0.1:4222/results\n  \
    dnsluice queue get nats://127.0.0.1:4222/results --expect 100000 --output results.jsonl\n  \
    dnsluice queue status nats://127.0.0.1:4222/names")]
pub struct QueueArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: QueueCommand,
}

/// The queue subcommands.
#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Publish the lines of a file (or file paths, with --files) as work items.
    Put(put::PutArgs),
    /// Write every result of a results stream once.
    Get(get::GetArgs),
    /// Show a stream's messages and each consumer's pending, in-flight,
    /// redelivered and acknowledged items.
    Status(status::StatusArgs),
}

/// Runs `dnsluice queue`.
pub fn run(args: QueueArgs) -> Result<ExitCode> {
    match args.command {
        QueueCommand::Put(args) => put::run(&args),
        QueueCommand::Get(args) => get::run(&args),
        QueueCommand::Status(args) => status::run(&args),
    }
}
