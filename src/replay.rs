//! `dnsluice replay`: send a capture's queries to a server, a shortcut for the
//! equivalent pipeline (`--print-pipeline` shows it):
//! input.mmpcap → filter.layer → filter.dns → [filter.select (queries) → filter.timing]
//! → output.dnscli
//! (or output.udpcli with `--no-responses`).
//!
//! At the end it prints what happened, and `--stats-json` writes one JSON
//! object whose keys `sent`, `answered`, `timeouts`, `errors`,
//! `connections_opened`, `tls_handshakes`, `rcodes`, `latency_ms` (`p50`,
//! `p90`, `p99`, `p999`, `max`) and `elapsed_s` are a contract.

use crate::flags::{flag_name, ModuleFlags};
use crate::intervals::{Interval, RecordFlags, Recorder};
use crate::metrics::{Endpoint, MetricsFlags};
use crate::report::{histogram_value, print_summary, stats_json};
use crate::running::{build_from_flags, drive, print_pipeline, Ran};
use crate::watch::input_position;
use anyhow::{bail, Context, Result};
use clap::Args;
use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::registry::Registry;
use dnsluice_core::StageStats;
use dnsluice_modules::filter::timing::TimingOptions;
use dnsluice_modules::output::dnscli::tally::keys;
use dnsluice_modules::output::dnscli::DnsCliOutputOptions;
use dnsluice_net::DnsTransport;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `dnsluice replay`: the capture, how it is read and paced, and
/// every option of `output.dnscli` (`--server`, `--transport`, `--timeout`,
/// ...) and of `filter.timing` (`--speed`, `--rate`) as flags.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The capture (pcap or pcapng; `-` is standard input) whose DNS queries are sent.
    pub capture: PathBuf,
    /// The input module that reads the capture (default: input.mmpcap, or
    /// input.fpcap for standard input). Any input module works.
    #[arg(long, value_name = "MODULE")]
    pub input_module: Option<String>,
    /// The options of `output.dnscli`.
    #[command(flatten)]
    pub client: ModuleFlags<DnsCliOutputOptions>,
    /// The options of `filter.timing`.
    #[command(flatten)]
    pub timing: ModuleFlags<TimingOptions>,
    /// Keep the capture's pace (same as --speed 1).
    #[arg(long, conflicts_with_all = ["speed", "rate", "fast"])]
    pub keep_timing: bool,
    /// Fire and forget over UDP (output.udpcli): no answers, no timing of them.
    #[arg(long)]
    pub no_responses: bool,
    /// Write the statistics as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// Print the equivalent pipeline (TOML) and exit.
    #[arg(long)]
    pub print_pipeline: bool,
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

/// The client keys `output.udpcli` shares with `output.dnscli`; any other
/// client flag means nothing with `--no-responses`.
const FIRE_AND_FORGET_KEYS: &[&str] = &["server", "clients"];

/// A replay made into stages: (module, options) in order.
pub struct ReplayPlan {
    /// The stages.
    pub stages: Vec<(String, toml::Table)>,
    /// The client's options as parsed (for the summary).
    pub client: DnsCliOutputOptions,
}

impl ReplayPlan {
    /// The pipeline `args` stand for; errors name the flag.
    pub fn new(args: &ReplayArgs) -> Result<ReplayPlan> {
        let client: DnsCliOutputOptions = args.client.parse()?;
        let _: TimingOptions = args.timing.parse()?;
        let input_module = match &args.input_module {
            Some(name) => name.clone(),
            None if args.capture.as_os_str() == "-" => "input.fpcap".to_string(),
            None => "input.mmpcap".to_string(),
        };
        let mut input = toml::Table::new();
        input.insert("path".into(), args.capture.display().to_string().into());
        let mut stages = vec![
            (input_module, input),
            ("filter.layer".to_string(), toml::Table::new()),
            ("filter.dns".to_string(), toml::Table::new()),
        ];
        let mut timing = args.timing.table.clone();
        if args.keep_timing {
            timing.insert("speed".into(), toml::Value::Float(1.0));
        }
        let paced = !timing.is_empty() && timing.get("fast") != Some(&toml::Value::Boolean(true));
        // Queries are batched only when they come as fast as a file is
        // read: from a pipe, a socket or a live capture a query waits for
        // the next ones, which may come seconds later (its timeout ran
        // while it waited unsent).
        let from_a_file = std::fs::metadata(&args.capture).is_ok_and(|m| m.is_file());
        if !timing.is_empty() {
            // The pace is the queries' (a capture's responses, dropped by
            // the client anyway, halved a --rate's queries a second).
            let mut queries = toml::Table::new();
            queries.insert("qr".into(), "query".into());
            stages.push(("filter.select".to_string(), queries));
            stages.push(("filter.timing".to_string(), timing));
        }
        let mut output = args.client.table.clone();
        if args.no_responses {
            if client.cli.client.transport != DnsTransport::Udp {
                bail!(
                    "--no-responses sends over UDP only (got --transport {})",
                    client.cli.client.transport
                );
            }
            if let Some(key) = output
                .keys()
                .find(|k| !FIRE_AND_FORGET_KEYS.contains(&k.as_str()) && *k != "transport")
            {
                bail!(
                    "--{} means nothing with --no-responses (fire and forget takes --server and --clients)",
                    flag_name(key)
                );
            }
            output.remove("transport");
            if paced || !from_a_file {
                // A paced query is sent when it comes, not with the next batch.
                output.insert("batch".into(), toml::Value::Integer(1));
            }
            stages.push(("output.udpcli".to_string(), output));
        } else {
            if paced && !output.contains_key("inflight") {
                // A pace of R/s to a server T away needs R × T in flight.
                output.insert("grow_inflight".into(), toml::Value::Boolean(true));
            }
            if !paced
                && from_a_file
                && client.cli.client.transport != DnsTransport::Https
                && !output.contains_key("send_batch")
            {
                // As fast as possible, queries go out 16 at a time (one
                // sendmmsg, one write, one TLS record).
                output.insert("send_batch".into(), toml::Value::Integer(16));
            }
            stages.push(("output.dnscli".to_string(), output));
        }
        Ok(ReplayPlan { stages, client })
    }

    /// The stages as a pipeline.
    pub fn pipeline(&self) -> Pipeline {
        Pipeline::from_stages("dnsluice replay", self.stages.iter().cloned())
    }
}

/// Runs `dnsluice replay`.
pub fn replay(registry: &Registry, args: &ReplayArgs) -> Result<ExitCode> {
    let plan = ReplayPlan::new(args)?;
    let pipeline = plan.pipeline();
    if args.print_pipeline {
        return print_pipeline(&pipeline);
    }
    let mut chain = build_from_flags(registry, &pipeline)?;
    let cli = &plan.client.cli;
    let transport = if args.no_responses {
        "udp".to_string()
    } else {
        cli.client.transport.to_string()
    };
    let mut header = Map::new();
    header.insert("command".into(), json!("replay"));
    header.insert("capture".into(), json!(args.capture.display().to_string()));
    header.insert("server".into(), json!(cli.server));
    header.insert("transport".into(), json!(transport));
    header.insert("clients".into(), json!(cli.clients));
    let mut recorder = Recorder::new(&args.record, header, replay_view)?;
    let endpoint = args.metrics.start(None, args.quiet)?;
    let board = endpoint.as_ref().map(Endpoint::board);
    let Ran {
        stats,
        elapsed,
        result,
        ..
    } = drive(&mut chain, args.quiet, &mut recorder, board, &|stats| {
        let sent = client_stage(stats).and_then(|c| c.counters.get(keys::SENT).copied());
        input_position(stats, sent.unwrap_or(0), "queries sent")
    });
    for warning in stats.iter().flat_map(|s| s.warning_lines()) {
        eprintln!("dnsluice: warning: {warning}");
    }
    if let Some(hint) = dnsluice_modules::output::dnscli::window_hint(&stats) {
        eprintln!("dnsluice: warning: {hint}");
    }
    let summary = replay_stats(&stats, elapsed);
    let shown_transport = if args.no_responses {
        "udp (fire and forget)".to_string()
    } else {
        transport.clone()
    };
    if !args.quiet {
        print_replay(&summary, &shown_transport, &cli.server, cli.clients);
        print_summary(&stats, elapsed);
    }
    let mut object = summary.clone();
    let stages: Value = serde_json::from_str(&stats_json(&stats, elapsed))?;
    object["stages"] = stages["stages"].clone();
    object["server"] = json!(cli.server);
    object["transport"] = json!(transport);
    object["clients"] = json!(cli.clients);
    object["inflight"] = json!(cli.inflight);
    if let Some(path) = &args.stats_json {
        std::fs::write(path, format!("{object}\n"))
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    let record_result = match recorder {
        Some(recorder) => recorder.finish(stats, object),
        None => Ok(()),
    };
    result?;
    record_result?;
    Ok(ExitCode::SUCCESS)
}

/// The client stage (output.dnscli or output.udpcli) among `stats`.
fn client_stage(stats: &[StageStats]) -> Option<&StageStats> {
    stats
        .iter()
        .find(|s| s.module == "output.dnscli" || s.module == "output.udpcli")
}

/// The keys of a replay's interval line: what [`replay_stats`] gives of the
/// interval (sent, answered, timeouts, errors, rcodes, latency_ms...), the
/// connections open at its end and its latency histogram (`latency_us`:
/// `[[highest µs of the bucket, answers], ...]`).
fn replay_view(interval: &Interval<'_>) -> Map<String, Value> {
    let all = replay_stats(interval.diff, interval.seconds);
    let mut out = Map::new();
    for key in [
        "sent",
        "answered",
        "timeouts",
        "errors",
        "rcodes",
        "latency_ms",
        "connections_opened",
        "tls_handshakes",
        "connect_failures",
        "unmatched_responses",
        "tcp_retries",
        "errors_by_kind",
    ] {
        out.insert(key.into(), all[key].clone());
    }
    let now = client_stage(interval.now);
    let count = |key: &str| now.and_then(|c| c.counters.get(key).copied()).unwrap_or(0);
    out.insert(
        "connections_active".into(),
        json!(count(keys::CONNECTIONS_OPENED).saturating_sub(count(keys::CONNECTIONS_CLOSED))),
    );
    if let Some(h) = client_stage(interval.diff).and_then(|c| c.histograms.get(keys::LATENCY)) {
        out.insert("latency_us".into(), histogram_value(h));
    }
    out
}

/// The client stage's statistics as the replay's JSON object (the contract keys
/// and a few more).
pub fn replay_stats(stats: &[StageStats], elapsed: f64) -> Value {
    let client = client_stage(stats);
    let empty = StageStats::default();
    let client = client.unwrap_or(&empty);
    let c = |key: &str| client.counters.get(key).copied().unwrap_or(0);
    let mut rcodes = Map::new();
    let mut latency = Map::new();
    for name in ["p50", "p90", "p99", "p999", "max"] {
        latency.insert(name.to_string(), json!(0.0));
    }
    for (key, value) in &client.counters {
        if let Some(rcode) = key.strip_prefix("rcode.") {
            rcodes.insert(rcode.to_string(), json!(value));
        } else if let Some(name) = key.strip_prefix("latency_us.") {
            latency.insert(name.to_string(), json!(*value as f64 / 1000.0));
        }
    }
    let answered = c("answered");
    json!({
        "sent": c("sent"),
        "answered": answered,
        "timeouts": c("timeouts"),
        "errors": c("errors"),
        "connections_opened": c("connections_opened"),
        "tls_handshakes": c("tls_handshakes"),
        "rcodes": rcodes,
        "latency_ms": latency,
        "elapsed_s": elapsed,
        "qps": if elapsed > 0.0 { answered as f64 / elapsed } else { 0.0 },
        "sent_per_s": if elapsed > 0.0 { c("sent") as f64 / elapsed } else { 0.0 },
        "answered_per_s": client.series.get("answered_per_s").cloned().unwrap_or_default(),
        "errors_by_kind": client.errors,
        "connect_failures": c("connect_failures"),
        "unmatched_responses": c("unmatched_responses"),
        "tcp_retries": c("tcp_retries"),
        "send_errors": c("send_errors"),
        "inflight_window": c("inflight_window"),
    })
}

fn print_replay(s: &Value, transport: &str, server: &str, clients: u32) {
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let elapsed = s["elapsed_s"].as_f64().unwrap_or(0.0);
    eprintln!(
        "replay: {} sent, {} answered, {} timed out, {} errors in {:.3} s ({:.0} sent/s, {:.0} answered/s)",
        n("sent"),
        n("answered"),
        n("timeouts"),
        n("errors"),
        elapsed,
        s["sent_per_s"].as_f64().unwrap_or(0.0),
        s["qps"].as_f64().unwrap_or(0.0),
    );
    eprintln!(
        "  {transport} to {server}, {clients} clients: {} connections opened, {} TLS handshakes",
        n("connections_opened"),
        n("tls_handshakes")
    );
    if let Some(rcodes) = s["rcodes"].as_object().filter(|r| !r.is_empty()) {
        let list: Vec<String> = rcodes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        eprintln!("  rcodes: {}", list.join(" "));
    }
    if n("answered") > 0 {
        let l = &s["latency_ms"];
        let ms = |k: &str| l[k].as_f64().unwrap_or(0.0);
        eprintln!(
            "  latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
            ms("p50"),
            ms("p90"),
            ms("p99"),
            ms("p999"),
            ms("max")
        );
    }
}
