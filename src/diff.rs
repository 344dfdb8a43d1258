//! `dnsluice diff`: compare servers' answers to a capture's queries or a
//! names file, a shortcut for the pipeline (`--print-pipeline` shows it)
//! input.mmpcap → filter.layer → filter.dns → output.diff, or input.lines
//! → output.diff for a names file (told apart by the file's first bytes: a
//! capture, plain or compressed, or text).
//!
//! `dnsluice diff INPUT --server A --server B [--transport T] [--output
//! DIFFS.jsonl] [--summary SUMMARY.json]` is a contract: DIFFS has one line
//! per differing query (`qname`, `qtype`, `fields`, `answers`), SUMMARY has
//! `queries`, `differing` and `by_field` (see `output.diff`).

use crate::flags::ModuleFlags;
use crate::metrics::{Endpoint, MetricsFlags};
use crate::report::print_summary;
use crate::running::{build_from_flags, drive, print_pipeline, Ran};
use crate::watch::input_position;
use anyhow::{Context, Result};
use clap::Args;
use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::registry::Registry;
use dnsluice_modules::format::compression::Compression;
use dnsluice_modules::format::CaptureFormat;
use dnsluice_modules::output::diff::DiffOptions;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The flags of `dnsluice diff`: the input and every option of
/// `output.diff` (`--server` for each server, `--transport`, `--output`,
/// `--summary`, `--reask`, `--recorded`, ...).
#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  \
    dnsluice diff queries.pcap --server 127.0.0.1:53 --server 127.0.0.2:53 --output diffs.jsonl --summary summary.json\n  \
    dnsluice diff names.txt --server 127.0.0.1:53 --server 127.0.0.2:853 --transport tls --ca-file ca.pem\n  \
    dnsluice diff traffic.pcap.zst --recorded --server 127.0.0.1:53 --reask 2")]
pub struct DiffArgs {
    /// A capture (pcap or pcapng, plain or compressed) whose queries are
    /// asked, or a names file: `name` or `name TYPE` per line.
    pub input: PathBuf,
    /// The options of `output.diff`.
    #[command(flatten)]
    pub diff: ModuleFlags<DiffOptions>,
    /// Print the equivalent pipeline (TOML) and exit.
    #[arg(long)]
    pub print_pipeline: bool,
    /// No summary and no progress bar on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// The Prometheus endpoint (`--metrics-listen`, `--metrics-linger`).
    #[command(flatten)]
    pub metrics: MetricsFlags,
}

/// Whether `path` starts like a capture file (or a compressed one).
fn is_capture(path: &Path) -> Result<bool> {
    let mut head = [0u8; 32];
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let n = file
        .read(&mut head)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let head = &head[..n];
    Ok(Compression::detect(head) != Compression::None || CaptureFormat::detect(head).is_ok())
}

/// The pipeline `args` stand for.
fn pipeline(args: &DiffArgs) -> Result<Pipeline> {
    let _: DiffOptions = args.diff.parse()?;
    let mut input = toml::Table::new();
    input.insert("path".into(), args.input.display().to_string().into());
    let mut stages = if is_capture(&args.input)? {
        vec![
            ("input.mmpcap", input),
            ("filter.layer", toml::Table::new()),
            ("filter.dns", toml::Table::new()),
        ]
    } else {
        vec![("input.lines", input)]
    };
    let mut diff = args.diff.table.clone();
    if !diff.contains_key("path") {
        diff.insert("path".into(), "-".into());
    }
    stages.push(("output.diff", diff));
    Ok(Pipeline::from_stages("dnsluice diff", stages))
}

/// Runs `dnsluice diff`.
pub fn diff(registry: &Registry, args: &DiffArgs) -> Result<ExitCode> {
    let pipeline = pipeline(args)?;
    if args.print_pipeline {
        return print_pipeline(&pipeline);
    }
    let mut chain = build_from_flags(registry, &pipeline)?;
    let endpoint = args.metrics.start(None, args.quiet)?;
    let board = endpoint.as_ref().map(Endpoint::board);
    let Ran {
        stats,
        elapsed,
        result,
        ..
    } = drive(&mut chain, args.quiet, &mut None, board, &|stats| {
        let diff = stats.iter().find(|s| s.module == "output.diff");
        let queries = diff.and_then(|d| d.counters.get("queries").copied());
        input_position(stats, queries.unwrap_or(0), "queries")
    });
    for warning in stats.iter().flat_map(|s| s.warning_lines()) {
        eprintln!("dnsluice: warning: {warning}");
    }
    if !args.quiet {
        if let Some(d) = stats.iter().find(|s| s.module == "output.diff") {
            let c = |k: &str| d.counters.get(k).copied().unwrap_or(0);
            let fields: Vec<String> = d
                .counters
                .iter()
                .filter_map(|(k, v)| Some(format!("{}={v}", k.strip_prefix("field.")?)))
                .collect();
            eprintln!(
                "diff: {} queries, {} differing ({}), {} unstable, {} answered by no server",
                c("queries"),
                c("differing"),
                fields.join(" "),
                c("unstable"),
                d.errors.get("no_answer_from_any").copied().unwrap_or(0)
            );
        }
        print_summary(&stats, elapsed);
    }
    result?;
    Ok(ExitCode::SUCCESS)
}
