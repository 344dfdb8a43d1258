//! `dnsluice queue put`: the lines of a file, `--batch` lines to an item
//! (or, with `--files`, file paths, one to an item), become work items of a
//! work-queue stream, made if missing. Each item's message id is its
//! position and a digest of its text (`L12-…`, `F3-…`), so running the
//! same put again after a crash adds nothing twice (within the stream's
//! de-duplication window).

use super::NatsFlags;
use anyhow::{bail, Context, Result};
use clap::Args;
use dnsluice_modules::nats::streams::{self, MSG_ID};
use dnsluice_modules::nats::{connect, runtime, NatsAddress};
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `dnsluice queue put`.
#[derive(Args, Debug)]
pub struct PutArgs {
    /// The work stream: nats://HOST:PORT/STREAM (tls:// for TLS).
    pub url: String,
    /// A file of work items, one per line (`-`: standard input). Blank
    /// lines and lines starting with `#` are skipped.
    #[arg(required_unless_present = "files", conflicts_with = "files")]
    pub file: Option<PathBuf>,
    /// Put these files' paths (made absolute) as the items instead, for
    /// `dnsluice run PIPELINE --work URL` (compressed captures too).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// How long the broker remembers item ids, when this put makes the
    /// stream (a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub dedup_window: String,
    /// Lines per work item (one message of the stream). A worker takes,
    /// and the broker stores, acknowledges and redelivers, an item as a
    /// whole; its results come back as one message. 1 makes every line an
    /// item of its own, at a broker cost per line (docs/queue.md). Putting
    /// a file again after a crash adds nothing twice only with the same
    /// --batch.
    #[arg(long, default_value_t = 1000, value_name = "LINES",
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub batch: u64,
    /// Publishes awaiting the broker's ack at most.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub window: usize,
    /// On how many servers of a JetStream cluster the stream is stored,
    /// when this put makes it (3 for a 3-node cluster).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub replicas: usize,
    /// How to reach the broker.
    #[command(flatten)]
    pub nats: NatsFlags,
}

/// Runs `dnsluice queue put`.
pub fn run(args: &PutArgs) -> Result<ExitCode> {
    let address = NatsAddress::parse_stream(&args.url).map_err(anyhow::Error::msg)?;
    let items = items(args)?;
    let auth = args.nats.auth()?;
    let window = parse_duration(&args.dedup_window)?;
    let (stored, lines, duplicates) = runtime::block_on(async {
        let link = connect(&address, &auth).await?;
        let js = link.jetstream();
        js.get_or_create_stream(streams::work_stream(
            address.stream(),
            window,
            args.replicas,
        ))
        .await
        .map_err(|e| format!("{address}: cannot make the stream: {e}"))?;
        let mut pending = FuturesUnordered::new();
        let (mut stored, mut lines, mut duplicates) = (0u64, 0u64, 0u64);
        let mut settle = |done: Result<(bool, u64), String>| -> Result<(), String> {
            match done? {
                (true, _) => duplicates += 1,
                (false, n) => {
                    stored += 1;
                    lines += n;
                }
            }
            Ok(())
        };
        for item in items {
            let (id, text) = item.map_err(|e| format!("{e:#}"))?;
            while pending.len() >= args.window.max(1) {
                if let Some(done) = pending.next().await {
                    settle(done)?;
                }
            }
            let line_count = 1 + text.bytes().filter(|&b| b == b'\n').count() as u64;
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(MSG_ID, id.as_str());
            let ack = js
                .publish_with_headers(address.stream().to_string(), headers, text.into())
                .await
                .map_err(|e| format!("{address}: cannot publish: {e}"))?;
            let address = &address;
            pending.push(async move {
                ack.await
                    .map(|a| (a.duplicate, line_count))
                    .map_err(|e| format!("{address}: an item was not stored: {e}"))
            });
        }
        while let Some(done) = pending.next().await {
            settle(done)?;
        }
        Ok::<_, String>((stored, lines, duplicates))
    })
    .map_err(anyhow::Error::msg)?;
    eprintln!(
        "dnsluice: put {}{stored} items to {address}{}",
        if lines != stored {
            format!("{lines} lines in ")
        } else {
            String::new()
        },
        if duplicates > 0 {
            format!(" ({duplicates} more were there already)")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The items to put, with their ids, read as they are published (a file of
/// millions of names is not held in memory).
type Items<'a> = Box<dyn Iterator<Item = Result<(String, String)>> + 'a>;

fn items(args: &PutArgs) -> Result<Items<'_>> {
    if !args.files.is_empty() {
        let paths: Vec<Result<(String, String)>> = args
            .files
            .iter()
            .enumerate()
            .map(|(k, path)| {
                let full = std::fs::canonicalize(path)
                    .with_context(|| format!("cannot find {}", path.display()))?;
                let text = full.to_str().with_context(|| {
                    format!(
                        "{}: a path that is not UTF-8 cannot be an item",
                        full.display()
                    )
                })?;
                Ok((streams::item_id('F', k as u64 + 1, text), text.to_string()))
            })
            .collect();
        // Every path is checked before anything is put.
        let paths = paths.into_iter().collect::<Result<Vec<_>>>()?;
        return Ok(Box::new(paths.into_iter().map(Ok)));
    }
    let path = args.file.as_ref().expect("clap requires FILE or --files");
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        let stdin = dnsluice_modules::input::until_stop::open(path)
            .context("cannot read standard input")?;
        Box::new(std::io::BufReader::with_capacity(1 << 16, stdin.reader))
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Box::new(std::io::BufReader::with_capacity(1 << 16, file))
    };
    let mut reader = reader;
    let mut number = 0u64;
    let lines = std::iter::from_fn(move || loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return None,
            Ok(_) => {
                number += 1;
                // A stop (SIGINT, SIGTERM) that came while the writer was
                // still on the last line: not a whole line, so not put.
                if line.last() != Some(&b'\n') && dnsluice_core::stop::requested().is_some() {
                    eprintln!(
                        "dnsluice: queue put: line {number}, cut short by the stop, is not put"
                    );
                    return None;
                }
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if streams::is_work(text) {
                    return Some(Ok((number, text.to_string())));
                }
            }
            Err(e) => {
                return Some(Err(e).with_context(|| format!("cannot read {}", path.display())))
            }
        }
    });
    Ok(Box::new(Batches {
        lines: Box::new(lines),
        size: args.batch,
    }))
}

/// Lines (with their 1-based numbers in the file) put together into work
/// items of `size` lines; an item's id is its first line's number and a
/// digest of its text.
struct Batches<'a> {
    lines: Box<dyn Iterator<Item = Result<(u64, String)>> + 'a>,
    size: u64,
}

impl Iterator for Batches<'_> {
    type Item = Result<(String, String)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (first, mut text) = match self.lines.next()? {
            Ok(line) => line,
            Err(e) => return Some(Err(e)),
        };
        for _ in 1..self.size {
            match self.lines.next() {
                None => break,
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok((_, line))) => {
                    text.push('\n');
                    text.push_str(&line);
                }
            }
        }
        Some(Ok((streams::item_id('L', first, &text), text)))
    }
}

/// A duration with a unit, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let d = match text.trim().parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
        }
        Ok(_) => bail!("`{text}` is not a duration"),
        Err(_) => humantime_duration(text)?,
    };
    if d > MOST_DURATION {
        bail!("`{text}` is over a year: give at most 365d");
    }
    Ok(d)
}

/// The longest duration a queue flag takes (an absurd one panicked or
/// overflowed the clock).
const MOST_DURATION: Duration = Duration::from_secs(365 * 86_400);

fn humantime_duration(text: &str) -> Result<Duration> {
    use dnsluice_core::options::OptionValue;
    Duration::from_toml(toml::Value::String(text.to_string())).map_err(anyhow::Error::msg)
}
