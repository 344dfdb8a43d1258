//! `dnsluice queue get`: every result of a results stream once. The broker
//! already drops a result published twice with the same id within its
//! de-duplication window; `get` drops any that came later by id too (a
//! second guard), stops at `--expect N` results or after `--idle-exit`
//! without a new one (or, started before any worker, without the stream
//! appearing), and says how many it got. `--merge` adds up the
//! summaries of `dnsluice run --work` workers into one (see [`super::merge`]).
//! On a terminal it shows a progress bar: results so far, and their share
//! of `--expect`.

use super::merge::Merged;
use super::put::parse_duration;
use super::NatsFlags;
use crate::progress::{Position, Progress, REFRESH};
use anyhow::{bail, Context, Result};
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::stream::ConsumerErrorKind;
use clap::Args;
use dnsluice_modules::nats::encoding;
use dnsluice_modules::nats::streams::{self, MSG_ID};
use dnsluice_modules::nats::{connect, runtime, NatsAddress};
use futures_util::StreamExt;
use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Flags of `dnsluice queue get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// The results stream: nats://HOST:PORT/STREAM.
    pub url: String,
    /// Stop once this many distinct results (records) are read; fail if the stream
    /// runs dry (see --idle-exit) with fewer.
    #[arg(long, value_name = "N")]
    pub expect: Option<u64>,
    /// Where the results go, one per line; `-` is standard output.
    #[arg(long, short, default_value = "-", value_name = "FILE")]
    pub output: PathBuf,
    /// Stop when no new result came for this long (a bare number is seconds).
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub idle_exit: String,
    /// The results are `dnsluice run --work` summaries: write one summary
    /// adding them up instead (the summary of one run over all the files).
    #[arg(long)]
    pub merge: bool,
    /// How to reach the broker.
    #[command(flatten)]
    pub nats: NatsFlags,
}

/// What a read found.
struct Read {
    distinct: u64,
    duplicates: u64,
}

/// Runs `dnsluice queue get`.
pub fn run(args: &GetArgs) -> Result<ExitCode> {
    let address = NatsAddress::parse_stream(&args.url).map_err(anyhow::Error::msg)?;
    let auth = args.nats.auth()?;
    let idle = parse_duration(&args.idle_exit)?;
    let mut out: Box<dyn Write> = if args.output.as_os_str() == "-" {
        Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
    } else {
        let file = std::fs::File::create(&args.output)
            .with_context(|| format!("cannot create {}", args.output.display()))?;
        Box::new(std::io::BufWriter::with_capacity(1 << 16, file))
    };
    let mut merged = Merged::default();
    let mut write_error = None;
    let mut sink = |payload: &[u8]| {
        if write_error.is_some() {
            return;
        }
        let result = if args.merge {
            serde_json::from_slice(payload)
                .map_err(|e| e.to_string())
                .and_then(|record| merged.add_record(&record))
                .map_err(|e| anyhow::anyhow!("a result is no worker summary: {e}"))
        } else {
            out.write_all(payload)
                .and_then(|()| out.write_all(b"\n"))
                .with_context(|| format!("cannot write {}", args.output.display()))
        };
        if let Err(e) = result {
            write_error = Some(e);
        }
    };
    // A bar on a terminal: results so far, and the share of --expect.
    let mut progress = Progress::new(true);
    let mut last_drawn = Instant::now();
    let mut counted = 0u64;
    let mut sink_and_show = |record: &[u8]| {
        sink(record);
        counted += 1;
        if progress.enabled() && last_drawn.elapsed() >= REFRESH {
            last_drawn = Instant::now();
            progress.update(&Position {
                done: counted,
                total: args.expect,
                count: counted,
                unit: "results",
            });
        }
    };
    let read = runtime::block_on(read_all(
        &address,
        &auth,
        args.expect,
        idle,
        &mut sink_and_show,
    ));
    progress.finish();
    let read = read.map_err(anyhow::Error::msg)?;
    if let Some(e) = write_error {
        return Err(e);
    }
    if args.merge {
        out.write_all(merged.to_json().as_bytes())?;
        for (item, why) in merged.failed() {
            eprintln!("dnsluice: warning: {item} failed: {why}");
        }
    }
    out.flush()
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!(
        "dnsluice: got {} results from {address}{}",
        read.distinct,
        if read.duplicates > 0 {
            format!(" ({} duplicates dropped)", read.duplicates)
        } else {
            String::new()
        }
    );
    if let Some(expected) = args.expect {
        if read.distinct < expected {
            bail!(
                "got {} of the {expected} results expected (no new one for {:.0?})",
                read.distinct,
                idle
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads the stream from its start through a consumer of its own (no acks:
/// the results stay for the next reader).
async fn read_all(
    address: &NatsAddress,
    auth: &dnsluice_modules::nats::NatsAuthOptions,
    expect: Option<u64>,
    idle: Duration,
    sink: &mut dyn FnMut(&[u8]),
) -> Result<Read, String> {
    let link = connect(address, auth).await?;
    let js = link.jetstream();
    // Started before the workers: the results stream may not exist yet.
    let stream = streams::stream_appearing(&js, address.stream(), idle)
        .await
        .map_err(|e| format!("{address}: {e}"))?;
    let config = pull::Config {
        ack_policy: AckPolicy::None,
        deliver_policy: DeliverPolicy::All,
        inactive_threshold: Duration::from_secs(60),
        ..Default::default()
    };
    // In a cluster that lost a server the reader may be placed on it, or
    // the cluster may still be electing leaders: the request times out.
    // Timeouts are asked again for as long as the reader waits for results
    // (at least a minute: a loaded cluster can take that long to settle);
    // other errors (a refusal) up to five times.
    let patience = idle.max(Duration::from_secs(60));
    let asking = std::time::Instant::now();
    let mut tries = 0;
    let consumer = loop {
        match stream.create_consumer(config.clone()).await {
            Ok(consumer) => break consumer,
            Err(e) => {
                tries += 1;
                let timed_out = e.kind() == ConsumerErrorKind::TimedOut;
                if (timed_out && asking.elapsed() >= patience) || (!timed_out && tries >= 5) {
                    return Err(format!("{address}: cannot read the stream: {e}"));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let mut seen = HashSet::new();
    let mut read = Read {
        distinct: 0,
        duplicates: 0,
    };
    let mut messages = None;
    while expect.is_none_or(|n| read.distinct < n) {
        if messages.is_none() {
            messages = consumer
                .stream()
                .max_messages_per_batch(1024)
                .heartbeat(Duration::from_secs(5))
                .messages()
                .await
                .ok();
        }
        let Some(stream) = messages.as_mut() else {
            link.check_alive()?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let message = match tokio::time::timeout(idle, stream.next()).await {
            // Nothing new for --idle-exit while the broker is gone is no end
            // of the stream: what was read may not be all there is.
            Err(_) if !link.is_up() => {
                return Err(format!(
                    "{address}: lost the connection to the broker, and no result came for \
                     {idle:.0?}: got {} results, maybe not all",
                    read.distinct
                ));
            }
            Err(_) => break,
            Ok(Some(Ok(message))) => message,
            Ok(_) => {
                // A lost connection or a missed heartbeat: pull again.
                link.check_alive()?;
                messages = None;
                continue;
            }
        };
        let id = message
            .headers
            .as_ref()
            .and_then(|h| h.get(MSG_ID))
            .map(|v| v.as_str().to_string());
        // A message holds the records of one work item, one per line,
        // maybe compressed.
        let payload =
            encoding::decode(message.headers.as_ref(), &message.payload).map_err(|e| {
                let sequence = message.info().map(|i| i.stream_sequence).unwrap_or(0);
                format!("{address}: message {sequence}: {e}")
            })?;
        let records = payload.split(|&b| b == b'\n').filter(|r| !r.is_empty());
        if let Some(id) = id {
            if !seen.insert(id) {
                read.duplicates += records.count() as u64;
                continue;
            }
        }
        for record in records {
            read.distinct += 1;
            sink(record);
        }
    }
    Ok(read)
}
