//! `dnsluice replay`: send a capture's queries to a server, a shortcut for the
//! equivalent pipeline (`--print-pipeline` shows it):
//! input.mmpcap → filter.layer → filter.dns → [filter.timing] → output.dnscli
//! (or output.udpcli with `--no-responses`).
//!
//! At the end it prints what happened, and `--stats-json` writes one JSON
//! object whose keys `sent`, `answered`, `timeouts`, `errors`,
//! `connections_opened`, `tls_handshakes`, `rcodes`, `latency_ms` (`p50`,
//! `p90`, `p99`, `p999`, `max`) and `elapsed_s` are a contract.

use crate::report::{print_summary, stats_json, Progress};
use anyhow::{bail, Context, Result};
use clap::Args;
use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::registry::Registry;
use dnsluice_core::StageStats;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Options of `dnsluice replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The capture (pcap or pcapng) whose DNS queries are sent.
    pub capture: PathBuf,
    /// The server: ADDR:PORT, or https://HOST:PORT/PATH with --transport https.
    #[arg(long)]
    pub server: String,
    /// udp, tcp, tls (DNS-over-TLS) or https (DNS-over-HTTPS).
    #[arg(long, default_value = "udp")]
    pub transport: String,
    /// Fire and forget over UDP (output.udpcli): no answers, no timing of them.
    #[arg(long)]
    pub no_responses: bool,
    /// Send at this many queries per second.
    #[arg(long, value_name = "QPS", group = "pace")]
    pub rate: Option<f64>,
    /// Keep the capture's pace multiplied by X (2 = twice as fast).
    #[arg(long, value_name = "X", group = "pace")]
    pub speed: Option<f64>,
    /// Keep the capture's pace (same as --speed 1).
    #[arg(long, group = "pace")]
    pub keep_timing: bool,
    /// Simulated clients: the capture's sources spread over N sockets/connections.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub clients: u32,
    /// Queries outstanding at most.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub inflight: u32,
    /// Per-query timeout in milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub timeout: u64,
    /// Certificates (tls, https).
    #[command(flatten)]
    pub tls: crate::tls_args::TlsArgs,
    /// post or get (https).
    #[arg(long, default_value = "post")]
    pub method: String,
    /// Client threads for https (udp, tcp and tls send from the chain's thread and receive on one more).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub threads: u32,
    /// Write every query's outcome (answer or error, latency) as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    pub responses: Option<PathBuf>,
    /// Write the statistics as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// Print the equivalent pipeline (TOML) and exit.
    #[arg(long)]
    pub print_pipeline: bool,
    /// No summary on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// A TOML string (TOML basic strings escape like JSON).
fn quoted(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// The pipeline `args` stand for.
pub fn pipeline_text(args: &ReplayArgs) -> String {
    let mut t = String::new();
    let mut stage = |module: &str, options: &[(&str, String)]| {
        let _ = writeln!(t, "[[stage]]\nmodule = \"{module}\"");
        for (key, value) in options {
            let _ = writeln!(t, "{key} = {value}");
        }
        t.push('\n');
    };
    stage(
        "input.mmpcap",
        &[("path", quoted(&args.capture.display().to_string()))],
    );
    stage("filter.layer", &[]);
    stage("filter.dns", &[]);
    let pace = if let Some(rate) = args.rate {
        Some(("rate", format!("{rate:?}")))
    } else if let Some(speed) = args.speed {
        Some(("speed", format!("{speed:?}")))
    } else if args.keep_timing {
        Some(("speed", "1.0".to_string()))
    } else {
        None
    };
    let paced = pace.is_some();
    if let Some((key, value)) = pace {
        stage("filter.timing", &[(key, value)]);
    }
    let server = ("server", quoted(&args.server));
    let clients = ("clients", args.clients.to_string());
    if args.no_responses {
        if paced {
            // A paced query is sent when it comes, not with the next batch.
            stage("output.udpcli", &[server, clients, ("batch", "1".into())]);
        } else {
            stage("output.udpcli", &[server, clients]);
        }
        return t;
    }
    let mut options = vec![
        server,
        ("transport", quoted(&args.transport)),
        clients,
        ("inflight", args.inflight.to_string()),
        ("timeout_ms", args.timeout.to_string()),
    ];
    if !paced && args.transport != "https" {
        // As fast as possible, queries go out 16 at a time (one sendmmsg,
        // one write, one TLS record).
        options.push(("send_batch", "16".to_string()));
    }
    if let Some(ca) = &args.tls.ca_file {
        options.push(("ca_file", quoted(&ca.display().to_string())));
    }
    if args.tls.insecure {
        options.push(("insecure", "true".to_string()));
    }
    if let Some(name) = &args.tls.tls_name {
        options.push(("tls_name", quoted(name)));
    }
    if args.method != "post" {
        options.push(("method", quoted(&args.method)));
    }
    if args.threads != 1 {
        options.push(("threads", args.threads.to_string()));
    }
    if let Some(path) = &args.responses {
        options.push(("responses", quoted(&path.display().to_string())));
    }
    stage("output.dnscli", &options);
    t
}

/// Runs `dnsluice replay`.
pub fn replay(registry: &Registry, args: &ReplayArgs) -> Result<ExitCode> {
    if args.no_responses && args.transport != "udp" {
        bail!(
            "--no-responses sends over UDP only (got --transport {})",
            args.transport
        );
    }
    let text = pipeline_text(args);
    if args.print_pipeline {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let pipeline = Pipeline::parse("dnsluice replay", &text)?;
    let mut chain = pipeline.build(registry)?;
    let started = Instant::now();
    let mut progress = Progress::new(started);
    let result = chain.run(Some(&mut |n| progress.update(n)));
    progress.clear();
    let elapsed = started.elapsed().as_secs_f64();
    let stats = chain.stats();
    for warning in stats.iter().flat_map(|s| &s.warnings) {
        eprintln!("dnsluice: warning: {warning}");
    }
    let summary = replay_stats(&stats, elapsed);
    if !args.quiet {
        print_replay(&summary, args);
        print_summary(&stats, elapsed);
    }
    if let Some(path) = &args.stats_json {
        let mut object = summary.clone();
        let stages: Value = serde_json::from_str(&stats_json(&stats, elapsed))?;
        object["stages"] = stages["stages"].clone();
        object["server"] = json!(args.server);
        object["transport"] = json!(if args.no_responses {
            "udp"
        } else {
            &args.transport
        });
        object["clients"] = json!(args.clients);
        object["inflight"] = json!(args.inflight);
        std::fs::write(path, format!("{object}\n"))
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

/// The client stage's statistics as the replay's JSON object (the contract keys
/// and a few more).
pub fn replay_stats(stats: &[StageStats], elapsed: f64) -> Value {
    let client = stats
        .iter()
        .find(|s| s.module == "output.dnscli" || s.module == "output.udpcli");
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
    })
}

fn print_replay(s: &Value, args: &ReplayArgs) {
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let elapsed = s["elapsed_s"].as_f64().unwrap_or(0.0);
    let transport = if args.no_responses {
        "udp (fire and forget)"
    } else {
        &args.transport
    };
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
        "  {transport} to {}, {} clients: {} connections opened, {} TLS handshakes",
        args.server,
        args.clients,
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
