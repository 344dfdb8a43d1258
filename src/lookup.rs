//! `dnsluice lookup`: bulk resolution of names read one per line, ZDNS-style,
//! a shortcut for the chain input.lines → lookup.dns → output.json (or a
//! work queue's input.nats → lookup.dns → output.nats).

use crate::flags::{in_flag_terms, parse_table, ModuleFlags};
use crate::intervals::{Interval, RecordFlags, Recorder};
use crate::metrics::{Endpoint, MetricsFlags};
use crate::progress::Position;
use crate::queue::flags::is_nats_url;
use crate::running::{build_from_flags, drive, run_pipeline, Ran, Reporting};
use anyhow::{bail, Context, Result};
use clap::Args;
use dnsluice_core::pipeline::{Drive, Pipeline};
use dnsluice_core::{Registry, StageStats};
use dnsluice_resolver::dns::LookupOptions;
use dnsluice_resolver::LookupSummary;
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

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
    /// The record type or module to look up (its help lists them).
    #[arg(value_name = "TYPE", help = dnsluice_resolver::qtype::argument_help())]
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
    /// The Prometheus endpoint (`--metrics-listen`, `--metrics-linger`).
    #[command(flatten)]
    pub metrics: MetricsFlags,
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

/// Where a lookup's names come from and its records go: files (or
/// standard input and output), or a work queue's streams (`dnsluice
/// queue`), checked together.
struct Ends {
    /// Names from a work stream (`--input nats://...`).
    input_queue: bool,
    /// Records to a results stream (`--output nats://...`).
    output_queue: bool,
}

impl Ends {
    fn of(args: &LookupArgs) -> Result<Ends> {
        let ends = Ends {
            input_queue: is_nats_url(args.input.as_os_str()),
            output_queue: is_nats_url(args.output.as_os_str()),
        };
        if ends.input_queue && !ends.output_queue {
            bail!(
                "with --input nats://..., --output must be a nats:// results stream too: an item is \
                 acknowledged when its result is stored there"
            );
        }
        if ends.input_queue && args.shard.is_some() {
            bail!("--shard splits a file; a nats:// input is shared by its workers already");
        }
        if args.resume && (ends.input_queue || ends.output_queue) {
            bail!("--resume reads an output file; a work queue (nats://) resumes by itself");
        }
        if args.resume && args.output.as_os_str() == "-" {
            bail!("--resume needs --output FILE: the records already written are read from it");
        }
        Ok(ends)
    }

    fn queue(&self) -> bool {
        self.input_queue || self.output_queue
    }
}

/// The stages `args` stand for: input.lines (or input.nats) → lookup.dns →
/// output.json (or output.nats).
fn stages(args: &LookupArgs, ends: &Ends) -> Result<Vec<(&'static str, toml::Table)>> {
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let input = if ends.input_queue {
        ("input.nats", args.queue.input_table(&text(&args.input)))
    } else {
        let mut table = toml::Table::new();
        table.insert("path".into(), text(&args.input).into());
        if let Some(shard) = args.shard {
            table.insert("shard".into(), shard.to_string().into());
        }
        if args.resume {
            table.insert("skip_recorded".into(), text(&args.output).into());
        }
        ("input.lines", table)
    };
    let output = if ends.output_queue {
        ("output.nats", args.queue.output_table(&text(&args.output)))
    } else {
        let mut table = toml::Table::new();
        table.insert("path".into(), text(&args.output).into());
        if args.resume {
            table.insert("append".into(), true.into());
        }
        ("output.json", table)
    };
    Ok(vec![input, ("lookup.dns", args.table()?), output])
}

/// Runs `dnsluice lookup`: the chain of [`stages`], pulled by the driver
/// every command shares ([`crate::running::drive`]). With a work queue's streams
/// it is a queue worker, whose summary is a pipeline run's
/// ([`crate::running::run_pipeline`]); otherwise the summary, `--stats-json`
/// and interval statistics are the lookup's own ([`LookupSummary`], read
/// back from the `lookup.dns` stage's statistics).
pub fn run(registry: &Registry, args: LookupArgs) -> Result<ExitCode> {
    let options = args.options()?;
    let ends = Ends::of(&args)?;
    let pipeline = Pipeline::from_stages("dnsluice lookup", stages(&args, &ends)?);
    if ends.queue() {
        let name = Path::new("the lookup worker");
        let reporting = Reporting {
            stats_path: args.stats_json.as_deref(),
            quiet: args.quiet,
            metrics: &args.metrics,
        };
        return run_pipeline(registry, &pipeline, name, &reporting, &args.record)
            .map_err(in_flag_terms);
    }
    // Said in the flags' terms: `--retry-rcodes: ...`, not the stage's key.
    let config = options.to_config().map_err(|e| match e.into_kind() {
        dnsluice_core::error::ErrorKind::Option { key, message, .. } => {
            crate::flags::flag_error(key.as_deref(), message)
        }
        other => anyhow::anyhow!("{other}"),
    })?;
    if config.nameservers.is_empty() && config.iterative.is_none() {
        eprintln!(
            "dnsluice: warning: no nameservers (none given, none in /etc/resolv.conf): \
             only lines pinned to a nameserver can be resolved"
        );
    } else if !args.lookup.table.contains_key("name_servers")
        && config.iterative.is_none()
        && !args.quiet
    {
        // Said: a scan aimed at the system's resolver (often a local stub)
        // is rarely what was meant.
        eprintln!(
            "dnsluice: no --name-servers: asking those of /etc/resolv.conf ({})",
            options.name_servers.join(", ")
        );
    }
    // Pulled from the output: the driver sees the chain between two
    // records, to the last one (pushed, the names still in flight when the
    // input ends would finish unseen).
    let pipeline = Pipeline {
        drive: Drive::Pull,
        ..pipeline
    };
    let mut chain = build_from_flags(registry, &pipeline)?;
    let opened = chain.stats();
    let recorded = counter(&opened, "input.lines", "recorded_names");
    if args.resume && !args.quiet {
        let cut = counter(&opened, "output.json", "cut_bytes");
        eprintln!(
            "dnsluice: resuming: {recorded} names already in {}{}",
            args.output.display(),
            if cut > 0 {
                format!(" (a last line cut short, {cut} bytes, removed)")
            } else {
                String::new()
            }
        );
    }
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
    let mut recorder = Recorder::new(&args.record, header, lookup_view)?;
    let total = count_names(&args.input, args.shard).map(|n| n.saturating_sub(recorded));
    let endpoint = args.metrics.start(None, args.quiet)?;
    let board = endpoint.as_ref().map(Endpoint::board);
    let Ran {
        stats,
        elapsed,
        result,
        ..
    } = drive(&mut chain, args.quiet, &mut recorder, board, &|stats| {
        let names = counter(stats, MODULE, "names");
        Position {
            done: names,
            total,
            count: names,
            unit: "names",
        }
    });
    if matches!(&result, Err(e) if e.is_broken_pipe()) {
        // The reader of our records went away (`| head`): stop quietly.
        return Ok(ExitCode::SUCCESS);
    }
    for warning in stats.iter().flat_map(|s| s.warning_lines()) {
        eprintln!("dnsluice: warning: {warning}");
    }
    let lookup = stats
        .iter()
        .find(|s| s.module == MODULE)
        .context("the chain has no lookup.dns stage")?;
    let summary = LookupSummary::from_stats(lookup, Duration::from_secs_f64(elapsed));
    if !args.quiet {
        eprint!("{}", summary.to_text());
    }
    let summary_json = summary.to_json();
    if let Some(path) = &args.stats_json {
        std::fs::write(path, &summary_json)
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    let record_result = match recorder {
        Some(recorder) => recorder.finish(stats, serde_json::from_str(&summary_json)?),
        None => Ok(()),
    };
    result?;
    record_result?;
    Ok(ExitCode::SUCCESS)
}

/// The lookup stage's module.
const MODULE: &str = "lookup.dns";

/// Counter `key` of the stage `module` among `stats` (0 when absent).
fn counter(stats: &[StageStats], module: &str, key: &str) -> u64 {
    stats
        .iter()
        .find(|s| s.module == module)
        .and_then(|s| s.counters.get(key).copied())
        .unwrap_or(0)
}

/// Names in the names file at `path`, when it is a regular file: lines
/// of this shard that are not blank or comments (what gets a record),
/// for the progress bar's total.
fn count_names(path: &Path, shard: Option<crate::queue::Shard>) -> Option<u64> {
    if path.as_os_str() == "-" || !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = BufReader::with_capacity(1 << 16, File::open(path).ok()?);
    let mut names = 0;
    for (k, line) in file.split(b'\n').enumerate() {
        let line = line.ok()?;
        if shard.is_some_and(|s| !s.takes(k as u64)) {
            continue;
        }
        // Trimmed as input.lines trims (Unicode white space).
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        names += u64::from(!text.is_empty() && !text.starts_with('#'));
    }
    Some(names)
}

/// A lookup interval: the counters (names, queries, retries, timeouts,
/// steals, connections...) of the interval, its statuses, and per
/// nameserver its queries, failures, timeouts, refusals and latency
/// percentiles, with its rate, queries in flight and round trip at the
/// interval's end.
fn lookup_view(interval: &Interval<'_>) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(s) = interval.diff.iter().find(|s| s.module == MODULE) else {
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
        let lookup = interval.now.iter().find(|s| s.module == MODULE);
        let now = lookup.and_then(|n| n.breakdowns.get(name));
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
