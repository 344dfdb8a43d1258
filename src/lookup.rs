//! `dnsluice lookup`: bulk resolution of names read one per line, ZDNS-style.

use crate::flags::{parse_table, ModuleFlags};
use crate::intervals::{Interval, RecordFlags, Recorder};
use crate::progress::{Position, Progress, REFRESH};
use crate::ticker::Ticker;
use anyhow::{bail, Context, Result};
use clap::Args;
use dnsluice_core::StageStats;
use dnsluice_resolver::dns::LookupOptions;
use dnsluice_resolver::{Finished, LookupEngine, LookupSummary};
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

/// The flags of `dnsluice lookup`: the record type, the input and output,
/// and every option of `lookup.dns` (see `dnsluice modules`).
#[derive(Args, Debug)]
#[command(
    after_long_help = "Input: one name per line, or `name,nameserver` to pin a line to a \
nameserver. Output: exactly one JSON record per input name (ZDNS's shape: name, class, status, \
timestamp, data.answers/authorities/additionals/protocol/resolver, plus nameserver, attempts, \
duration_ms and error), in completion order.\n\n\
Every flag but --input, --output, --stats-json, --quiet and the interval and report flags is an option of the lookup.dns module \
(--name-servers is its key name_servers), so a pipeline takes the same settings.\n\n\
Examples:\n  \
  dnsluice lookup A --name-servers 127.0.0.1:53 --input names.txt\n  \
  dnsluice lookup MX --name-servers 9.9.9.9 --transport tls --input - < names.txt\n  \
  dnsluice lookup ALOOKUP --name-servers https://127.0.0.1:8443/dns-query --transport https --ca-file ca.pem"
)]
pub struct LookupArgs {
    /// Record type: A, AAAA, NS, MX, TXT, SOA, PTR, CNAME, SRV, CAA, HTTPS, ANY,
    /// TYPEnnn, or ALOOKUP (A and AAAA, following CNAMEs). Same as --type.
    #[arg(value_name = "TYPE")]
    pub qtype: Option<String>,
    /// The options of `lookup.dns`.
    #[command(flatten)]
    pub lookup: ModuleFlags<LookupOptions>,
    /// Names to look up; `-` is standard input; nats://HOST:PORT/STREAM:
    /// be a worker on a shared work queue (see `dnsluice queue`).
    #[arg(long, default_value = "-", value_name = "FILE")]
    pub input: PathBuf,
    /// Where the records go; `-` is standard output; nats://HOST:PORT/STREAM:
    /// a results stream.
    #[arg(long, default_value = "-", value_name = "FILE")]
    pub output: PathBuf,
    /// Look up only line k (from 0) with k mod N = I, zmap-style: N runs
    /// given 0/N .. N-1/N cover the input exactly once.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::queue::Shard>,
    /// With a nats:// input: how the worker takes work.
    #[command(flatten)]
    pub queue: crate::queue::WorkerFlags,
    /// Go on with a scan that was stopped: skip the names that already have
    /// a record in the --output file (a last line cut short is removed) and
    /// append the others' records. However often a scan is killed and
    /// resumed, each name ends with one record.
    #[arg(long)]
    pub resume: bool,
    /// Also write the counters as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// No summary and no progress bar on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Interval statistics and the HTML report.
    #[command(flatten)]
    pub record: RecordFlags,
}

impl LookupArgs {
    /// The options of the run: the flags given, the positional TYPE, and
    /// for want of `--name-servers` the system's nameservers (not with
    /// `--iterative`, where they would be taken for root servers).
    pub fn options(&self) -> Result<LookupOptions> {
        parse_table(self.table()?)
    }

    /// [`LookupArgs::options`] as `lookup.dns`'s keys.
    pub fn table(&self) -> Result<toml::Table> {
        let mut table = self.lookup.table.clone();
        if let Some(qtype) = &self.qtype {
            if table.contains_key("type") {
                bail!("give the record type once: as TYPE or as --type");
            }
            table.insert("type".into(), toml::Value::String(qtype.clone()));
        }
        // Iterative: without --name-servers the walk starts at the root hints.
        let iterative = table.get("iterative").and_then(toml::Value::as_bool) == Some(true);
        if !table.contains_key("name_servers") && !iterative {
            let system = system_nameservers().into_iter().map(toml::Value::String);
            table.insert("name_servers".into(), toml::Value::Array(system.collect()));
        }
        Ok(table)
    }
}

/// The nameservers in `/etc/resolv.conf`, for when none are given.
fn system_nameservers() -> Vec<String> {
    std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver")).then(|| words.next().map(str::to_string))?
        })
        .collect()
}

fn open_input(path: &Path) -> Result<Box<dyn BufRead>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufReader::new(io::stdin())));
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
}

fn open_output(path: &Path, append: bool) -> Result<Box<dyn Write>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufWriter::new(io::stdout())));
    }
    let file = if append {
        File::options().create(true).append(true).open(path)
    } else {
        File::create(path)
    };
    let file = file.with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(BufWriter::with_capacity(1 << 16, file)))
}

/// Writes records, one per line, remembering the first write error; keeps
/// the records written for the engine to reuse.
struct RecordWriter {
    out: Box<dyn Write>,
    error: Option<io::Error>,
    written: Vec<Finished>,
}

impl RecordWriter {
    fn write(&mut self, done: Finished) {
        if self.error.is_none() {
            let result = self
                .out
                .write_all(done.json.as_bytes())
                .and_then(|()| self.out.write_all(b"\n"));
            if let Err(e) = result {
                self.error = Some(e);
            }
        }
        self.written.push(done);
    }
}

/// Runs `dnsluice lookup`.
pub fn run(args: LookupArgs) -> Result<ExitCode> {
    let options = args.options()?;
    let is_queue = |p: &Path| p.to_string_lossy().starts_with("nats://");
    if args.resume && (is_queue(&args.input) || is_queue(&args.output)) {
        bail!("--resume reads an output file; a work queue (nats://) resumes by itself");
    }
    let work = crate::queue::worker::LookupWork {
        input: &args.input,
        output: &args.output,
        shard: args.shard,
        queue: &args.queue,
        lookup: args.table()?,
        stats_json: args.stats_json.as_deref(),
        quiet: args.quiet,
        record: &args.record,
    };
    if let Some(code) = crate::queue::worker::lookup(work)? {
        return Ok(code);
    }
    let config = options.to_config().map_err(|e| anyhow::anyhow!("{e}"))?;
    if config.nameservers.is_empty() && config.iterative.is_none() {
        eprintln!(
            "dnsluice: warning: no nameservers (none given, none in /etc/resolv.conf): \
             only lines pinned to a nameserver can be resolved"
        );
    }
    let done = if args.resume {
        if args.output.as_os_str() == "-" {
            bail!("--resume needs --output FILE: the records already written are read from it");
        }
        let done = crate::resume::read_done(&args.output)?;
        if !args.quiet {
            eprintln!(
                "dnsluice: resuming: {} names already in {}{}",
                done.names.len(),
                args.output.display(),
                if done.cut > 0 {
                    format!(" (a last line cut short, {} bytes, removed)", done.cut)
                } else {
                    String::new()
                }
            );
        }
        done.names
    } else {
        Default::default()
    };
    let input = open_input(&args.input)?;
    let mut output = RecordWriter {
        out: open_output(&args.output, args.resume)?,
        error: None,
        written: Vec::new(),
    };
    let mut header = Map::new();
    header.insert("command".into(), json!("lookup"));
    header.insert("type".into(), json!(config.qtype.to_string()));
    header.insert(
        "name_servers".into(),
        json!(config
            .nameservers
            .iter()
            .map(|n| n.resolver_name())
            .collect::<Vec<_>>()),
    );
    let recorder = Recorder::new(&args.record, header, lookup_view)?;
    let total = count_names(&args.input).map(|n| n.saturating_sub(done.len() as u64));
    let mut engine = LookupEngine::start(config)?;
    let watched = Arc::new(Mutex::new((Progress::new(!args.quiet), recorder)));
    let ticker = {
        let (progress_on, period) = {
            let w = crate::sync_lock(&watched);
            (w.0.enabled(), w.1.as_ref().map(Recorder::period))
        };
        let probe = engine.probe();
        let watched = watched.clone();
        Ticker::spawn(&[progress_on.then_some(REFRESH), period], move || {
            let summary = probe.summary();
            let mut w = crate::sync_lock(&watched);
            w.0.update(&Position {
                done: summary.names,
                total,
                count: summary.names,
                unit: "names",
            });
            if let Some(recorder) = w.1.as_mut() {
                recorder.observe(lookup_stage(&summary));
            }
        })
    };
    let (mut input, mut line, mut k) = (input, Vec::with_capacity(256), 0u64);
    loop {
        line.clear();
        let read = input
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {}", args.input.display()))?;
        if read == 0 {
            break;
        }
        k += 1;
        let k = k - 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if args.shard.is_some_and(|s| !s.takes(k)) {
            continue;
        }
        if output.error.is_some() {
            // The output is gone (a closed pipe, a full disk): stop resolving.
            break;
        }
        // Valid UTF-8 (nearly every line) is taken as it is, checked fast.
        let text = match std::str::from_utf8(&line) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(&line),
        };
        if !done.is_empty() && done.contains(crate::resume::name_of(&text)) {
            continue;
        }
        engine.submit(&text, &mut |done| output.write(done));
        while let Some(done) = engine.try_result() {
            output.write(done);
        }
        engine.recycle(output.written.drain(..));
    }
    engine.close_input();
    while let Some(done) = engine.next_result() {
        output.write(done);
        engine.recycle(output.written.drain(..));
    }
    drop(ticker);
    let (progress, recorder) = std::mem::replace(
        &mut *crate::sync_lock(&watched),
        (Progress::new(false), None),
    );
    progress.finish();
    let summary = engine.summary();
    engine.shutdown();
    if let Some(e) = output.error.or_else(|| output.out.flush().err()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Ok(ExitCode::SUCCESS);
        }
        bail!("cannot write {}: {e}", args.output.display());
    }
    if !args.quiet {
        eprint!("{}", summary.to_text());
    }
    if let Some(path) = &args.stats_json {
        std::fs::write(path, summary.to_json())
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    if let Some(recorder) = recorder {
        recorder.finish(
            lookup_stage(&summary),
            serde_json::from_str(&summary.to_json())?,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Names in the names file at `path`, when it is a regular file: lines
/// that are not blank or comments (what gets a record), for the progress
/// bar's total.
fn count_names(path: &Path) -> Option<u64> {
    if path.as_os_str() == "-" || !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = BufReader::with_capacity(1 << 16, File::open(path).ok()?);
    let mut names = 0;
    for line in file.split(b'\n') {
        let line = line.ok()?;
        let text = line.trim_ascii();
        names += u64::from(!text.is_empty() && !text.starts_with(b"#"));
    }
    Some(names)
}

/// The lookup's counters as one stage's statistics, for interval differences.
fn lookup_stage(summary: &LookupSummary) -> Vec<StageStats> {
    let mut s = StageStats::new("lookup");
    summary.fill(&mut s);
    vec![s]
}

/// A lookup interval: the counters (names, queries, retries, timeouts,
/// steals, connections...) of the interval, its statuses, and per
/// nameserver its queries, failures, timeouts, refusals and latency
/// percentiles, with its rate, queries in flight and round trip at the
/// interval's end.
fn lookup_view(interval: &Interval<'_>) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(s) = interval.diff.first() else {
        return out;
    };
    for (key, value) in &s.counters {
        if !key.starts_with("status_") {
            out.insert(key.clone(), json!(value));
        }
    }
    let counts = |name: &str| s.breakdowns.get(name).cloned().unwrap_or_default();
    // Gauges (values, not counts) are read at the interval's end.
    let gauges = |name: &str| {
        let now = interval.now.first().and_then(|n| n.breakdowns.get(name));
        now.cloned().unwrap_or_default()
    };
    out.insert("statuses".into(), json!(counts("status")));
    let (queries, failures) = (counts("nameserver_queries"), counts("nameserver_failures"));
    let (timeouts, refusals) = (counts("nameserver_timeouts"), counts("nameserver_refusals"));
    let (rate, in_flight) = (gauges("nameserver_rate"), gauges("nameserver_in_flight"));
    let srtt_us = gauges("nameserver_srtt_us");
    let mut per = Map::new();
    for (name, histogram) in &s.histograms {
        let Some(ns) = name.strip_prefix("latency_us ") else {
            continue;
        };
        let ms = |q: f64| histogram.percentile(q) as f64 / 1000.0;
        let of = |m: &std::collections::BTreeMap<String, u64>| m.get(ns).copied().unwrap_or(0);
        per.insert(
            ns.to_string(),
            json!({
                "queries": of(&queries),
                "failures": of(&failures),
                "timeouts": of(&timeouts),
                "refusals": of(&refusals),
                "rate": of(&rate),
                "in_flight": of(&in_flight),
                "srtt_ms": of(&srtt_us) as f64 / 1000.0,
                "p50_ms": ms(50.0),
                "p99_ms": ms(99.0),
            }),
        );
    }
    out.insert("per_nameserver".into(), Value::Object(per));
    out
}
