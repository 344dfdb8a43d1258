//! Command-line parsing and the subcommands.

use crate::intervals::RecordFlags;
use crate::metrics::MetricsFlags;
use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::registry::Registry;
use std::path::PathBuf;
use std::process::ExitCode;

/// dnsluice: a modular DNS dataflow engine. Capture, parse, replay and resolve DNS
/// by composing stages (input → filters → output) into chains declared in TOML.
#[derive(Parser, Debug)]
#[command(name = "dnsluice", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a pipeline declared in a TOML file.
    ///
    /// A pipeline is an ordered list of [[stage]] tables: an input, any number
    /// of filters, an output. See `dnsluice modules` for every module and its
    /// options. At the end a per-stage summary is printed on stderr.
    #[command(after_long_help = "Examples:\n  \
        dnsluice run configs/dump.toml --set 0.path=capture.pcap        every DNS message as JSON\n  \
        dnsluice run configs/qtype-stats.toml --set 0.path=capture.pcap --stats-json stats.json\n  \
        dnsluice run configs/report.toml --set 0.path=capture.pcap --report report.html\n  \
        tcpdump -i eth0 -w - port 53 | dnsluice run configs/dump.toml --set 0.module=input.fpcap --set 0.path=-\n  \
        dnsluice run configs/qtype-stats.toml --files day1/*.pcap --shard 0/4      every 4th file, one summary\n  \
        dnsluice run configs/qtype-stats.toml --files day1/*.pcap.zst --jobs 16    16 files at once, one summary\n  \
        dnsluice run configs/qtype-stats.toml --work nats://broker:4222/captures --results nats://broker:4222/stats")]
    Run {
        /// The pipeline file.
        pipeline: PathBuf,
        /// Override an option: INDEX.KEY=VALUE, e.g. `--set 0.path=big.pcap`
        /// or `--set 0.module=input.fpcap`. May be repeated.
        #[arg(long = "set", value_name = "INDEX.KEY=VALUE")]
        set: Vec<String>,
        /// Also write the summary as one JSON object to FILE.
        #[arg(long, value_name = "FILE")]
        stats_json: Option<PathBuf>,
        /// No summary and no progress bar on stderr (warnings are still printed).
        #[arg(long, short)]
        quiet: bool,
        /// Threads for the stages after the input, each over its own part of
        /// the input: `auto` (the default: the machine's cores when every
        /// stage can run in copies and the input is a file, else 1; the
        /// summary says which and why) or a number. Overrides the
        /// pipeline's `threads` key. TCP streams and fragments stay on one
        /// thread (spread by address pair); output.json's lines come out in
        /// input order, as one thread writes them.
        #[arg(long, value_name = "N|auto")]
        threads: Option<dnsluice_core::pipeline::Threads>,
        /// With several threads: write output.json's lines as each batch
        /// is done instead of in input order (the same lines, faster).
        #[arg(long)]
        unordered: bool,
        /// Many files: run the pipeline once per file (its first stage's
        /// `path` set to each) and print one summary adding them up.
        #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with = "work")]
        files: Vec<PathBuf>,
        /// With --files: only file k (from 0) with k mod N = I.
        #[arg(long, value_name = "I/N", requires = "files")]
        shard: Option<crate::queue::Shard>,
        /// With --files: run up to N files at once, each on a thread with a
        /// chain of its own; the summary adds them up in file order, as one
        /// at a time would. The runs must not share an output file: the last
        /// stage is output.null, or output.json to standard output or
        /// /dev/null. Compressed files decode on their job's thread when
        /// the machine has fewer than two cores a job.
        #[arg(long, value_name = "N", default_value_t = 1, requires = "files",
              value_parser = clap::value_parser!(u16).range(1..=1024))]
        jobs: u16,
        /// Be a worker: take files from this work stream (put there with
        /// `dnsluice queue put URL --files ...`), run the pipeline on each,
        /// and publish each run's summary to --results.
        #[arg(long, value_name = "nats://HOST:PORT/STREAM", requires = "results")]
        work: Option<String>,
        /// With --work: the stream the summaries go to (`queue get URL --merge` adds them up).
        #[arg(long, value_name = "nats://HOST:PORT/STREAM", requires = "work")]
        results: Option<String>,
        /// With --work: how the worker takes work.
        #[command(flatten)]
        worker: Box<crate::queue::WorkerFlags>,
        /// Interval statistics and the HTML report.
        #[command(flatten)]
        record: RecordFlags,
        /// The Prometheus endpoint.
        #[command(flatten)]
        metrics: MetricsFlags,
    },
    /// Make an HTML report (charts and tables) from --stats-jsonl files of
    /// one command; several files share the charts.
    Report(crate::html::ReportArgs),
    /// List every module with its options and defaults.
    Modules {
        /// Print the reference as Markdown (what docs/modules.md holds).
        #[arg(long)]
        markdown: bool,
    },
    /// Resolve many names (one per line) with sticky connections, ZDNS-style.
    ///
    /// Every input name yields exactly one JSON record, success or failure.
    Lookup(Box<crate::lookup::LookupArgs>),
    /// Replay a capture's queries against a server (udp, tcp, tls, https) and time the answers.
    #[command(after_long_help = "Examples:\n  \
        dnsluice replay queries.pcap --server 127.0.0.1:53 --clients 50\n  \
        dnsluice replay queries.pcap --server 127.0.0.1:853 --transport tls --ca-file ca.pem --tls-name dns.test\n  \
        dnsluice replay queries.pcap --server 127.0.0.1:53 --no-responses --rate 100000\n  \
        dnsluice replay queries.pcap --server 127.0.0.1:53 --print-pipeline > replay.toml")]
    Replay(crate::replay::ReplayArgs),
    /// Share work among many machines through NATS JetStream: put, get, status.
    ///
    /// Workers are `dnsluice lookup ... --input nats://... --output nats://...`
    /// and `dnsluice run PIPELINE --work nats://... --results nats://...`;
    /// see docs/queue.md.
    Queue(crate::queue::QueueArgs),
    /// Send queries (a capture's, or names) to two or more servers and report the answers that differ.
    ///
    /// Compares field by field as respdiff does (rcode, flags, question,
    /// answer, authority and additional as sets, EDNS): one JSON line per
    /// differing query (`--output`, default standard output), and a
    /// summary (`--summary`).
    Diff(crate::diff::DiffArgs),
    /// Run a Lua script: `arg[0]` is the script, `arg[1]`... the arguments.
    ///
    /// Every module is reachable from Lua (`require("dnsluice.input.mmpcap")`);
    /// see docs/lua.md. Works as a shebang:
    /// `#!/usr/bin/env -S dnsluice script`.
    Script {
        /// The Lua file.
        file: PathBuf,
        /// Arguments for the script.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Parses the command line and runs it with `registry` and `filter.lua`
/// (added here, so every binary built on this has it, and its scripts reach
/// every module of `registry`); the process exit code.
pub fn main(mut registry: Registry) -> ExitCode {
    dnsluice_lua::register(&mut registry);
    let cli = Cli::parse();
    crate::signals::install();
    match execute(cli, &registry) {
        Ok(code) => crate::signals::exit_code().unwrap_or(code),
        Err(e) => {
            eprintln!("dnsluice: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn execute(cli: Cli, registry: &Registry) -> Result<ExitCode> {
    match cli.command {
        Command::Modules { markdown } => {
            if markdown {
                print!("{}", crate::reference::markdown(registry));
            } else {
                print!("{}", crate::reference::text(registry));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Script { file, args } => {
            dnsluice_lua::run_script(registry, &file, &args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            pipeline,
            mut set,
            stats_json: stats_path,
            quiet,
            threads,
            unordered,
            files,
            shard,
            jobs,
            work,
            results,
            worker,
            record,
            metrics,
        } => {
            let stats_path = stats_path.as_deref();
            set.extend(threads.map(|n| format!("threads={n}")));
            if unordered {
                set.push("ordered=false".into());
            }
            let several = if work.is_some() { "--work" } else { "--files" };
            if let Some(flag) = record
                .first_given()
                .filter(|_| work.is_some() || !files.is_empty())
            {
                bail!(
                    "{flag} records one run over time; {several} makes a run of each file: \
                     give --stats-json for the summary of them all, or run a file alone"
                );
            }
            match (work, results) {
                (Some(work), Some(results)) => {
                    let queue = crate::queue::worker::Queues {
                        work: &work,
                        results: &results,
                        flags: &worker,
                    };
                    crate::queue::worker::pipeline(
                        registry, &pipeline, &set, &queue, quiet, &metrics,
                    )
                }
                _ if !files.is_empty() => {
                    let file_set = crate::queue::worker::FileSet {
                        files: &files,
                        shard,
                        jobs: usize::from(jobs),
                    };
                    let reporting = crate::running::Reporting {
                        stats_path,
                        quiet,
                        metrics: &metrics,
                    };
                    crate::queue::worker::files(registry, &pipeline, &set, &file_set, &reporting)
                }
                _ => {
                    let reporting = crate::running::Reporting {
                        stats_path,
                        quiet,
                        metrics: &metrics,
                    };
                    run(registry, &pipeline, &set, &reporting, &record)
                }
            }
        }
        Command::Report(args) => crate::html::report_command(&args),
        Command::Lookup(args) => crate::lookup::run(registry, *args),
        Command::Replay(args) => crate::replay::replay(registry, &args),
        Command::Queue(args) => crate::queue::run(args),
        Command::Diff(args) => crate::diff::diff(registry, &args),
    }
}

/// Runs the pipeline in `file` after applying the `--set` overrides.
pub fn run(
    registry: &Registry,
    file: &std::path::Path,
    overrides: &[String],
    reporting: &crate::running::Reporting<'_>,
    record: &RecordFlags,
) -> Result<ExitCode> {
    let mut pipeline = Pipeline::read(file)?;
    for assignment in overrides {
        pipeline.set(assignment)?;
    }
    crate::running::run_pipeline(registry, &pipeline, file, reporting, record)
}
