//! Running one pipeline: build it, run it with a progress bar and, when
//! asked, interval statistics and a report ([`drive`], which every command
//! runs its chain with), then the summary on stderr and `--stats-json`
//! (`dnsluice run`, and the workers of `crate::queue::worker`, which run a
//! pipeline per work item).

use crate::cpu_report::CpuReport;
use crate::flags::in_flag_terms;
use crate::intervals::{Interval, RecordFlags, Recorder};
use crate::metrics::board::Board;
use crate::metrics::{Endpoint, MetricsFlags};
use crate::progress::Progress;
use crate::report::{print_summary, stage_value, stats_json};
use crate::watch::{input_position, run_watched, Locate, Watchers};
use anyhow::{Context, Result};
use dnsluice_core::pipeline::{Chain, Pipeline, ThreadPlan};
use dnsluice_core::registry::Registry;
use dnsluice_core::StageStats;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// What one run of a pipeline gave.
pub struct Ran {
    /// Every stage's counters.
    pub stats: Vec<StageStats>,
    /// Seconds from start to end.
    pub elapsed: f64,
    /// How the run ended.
    pub result: Result<u64, dnsluice_core::StageError>,
    /// The threads it ran on, and why.
    pub threads: ThreadPlan,
}

/// Builds `pipeline` and runs it with a progress bar (unless `quiet`),
/// handing `recorder` the intervals; its counters.
fn run_recorded(
    registry: &Registry,
    pipeline: &Pipeline,
    quiet: bool,
    recorder: &mut Option<Recorder>,
    metrics: Option<&Board>,
) -> Result<Ran> {
    let mut chain = pipeline.build(registry)?;
    Ok(drive(&mut chain, quiet, recorder, metrics, &|stats| {
        input_position(stats, stats.first().map_or(0, |s| s.output), "records")
    }))
}

/// Builds a pipeline a command made of its flags: an error names the flag
/// at fault.
pub fn build_from_flags(registry: &Registry, pipeline: &Pipeline) -> Result<Chain> {
    pipeline
        .build(registry)
        .map_err(|e| in_flag_terms(e.into()))
}

/// `--print-pipeline`: prints `pipeline` as a file.
pub fn print_pipeline(pipeline: &Pipeline) -> Result<ExitCode> {
    print!("{}", pipeline.to_toml());
    Ok(ExitCode::SUCCESS)
}

/// Runs a built chain to its end: the one driver of every command (`run`,
/// `lookup`, `replay`, `diff`, the queue's workers). A progress bar (unless
/// `quiet`) shows what `locate` reads of the statistics; `recorder` gets
/// the intervals; `metrics` the snapshots a scrape asks for, and the final
/// statistics.
pub fn drive(
    chain: &mut Chain,
    quiet: bool,
    recorder: &mut Option<Recorder>,
    metrics: Option<&Board>,
    locate: Locate<'_>,
) -> Ran {
    let mut progress = Progress::new(!quiet);
    let started = Instant::now();
    let watchers = Watchers {
        progress: &mut progress,
        recorder,
        metrics,
    };
    let result = run_watched(chain, watchers, locate);
    progress.finish();
    let stats = chain.stats();
    if let Some(board) = metrics {
        board.run_ended(&stats);
    }
    Ran {
        elapsed: started.elapsed().as_secs_f64(),
        stats,
        result,
        threads: chain.threads.clone(),
    }
}

/// Builds `pipeline` and runs it with a progress bar (unless `quiet`),
/// publishing to `metrics` when an endpoint serves; its counters.
pub fn run_collecting(
    registry: &Registry,
    pipeline: &Pipeline,
    quiet: bool,
    metrics: Option<&Board>,
) -> Result<Ran> {
    run_recorded(registry, pipeline, quiet, &mut None, metrics)
}

/// How a run reports: `--stats-json`, `--quiet`, the metrics endpoint.
pub struct Reporting<'a> {
    /// Where `--stats-json` goes.
    pub stats_path: Option<&'a Path>,
    /// No summary and no progress bar.
    pub quiet: bool,
    /// `--metrics-listen`, `--metrics-linger`.
    pub metrics: &'a MetricsFlags,
}

/// Runs a pipeline that is read already (from `file`): interval records and
/// report when `record` asks, the metrics endpoint when `--metrics-listen`
/// (or the pipeline's `metrics_listen`) asks, summary, `--stats-json`, exit code.
pub fn run_pipeline(
    registry: &Registry,
    pipeline: &Pipeline,
    file: &Path,
    reporting: &Reporting<'_>,
    record: &RecordFlags,
) -> Result<ExitCode> {
    let Reporting {
        stats_path,
        quiet,
        metrics,
    } = *reporting;
    let endpoint = metrics.start(pipeline.metrics_listen, quiet)?;
    let mut header = Map::new();
    header.insert("command".into(), json!("run"));
    header.insert("pipeline".into(), json!(file.display().to_string()));
    let mut recorder = Recorder::new(record, header, run_view)?;
    let Ran {
        stats,
        elapsed,
        result,
        threads,
    } = run_recorded(
        registry,
        pipeline,
        quiet,
        &mut recorder,
        endpoint.as_ref().map(Endpoint::board),
    )?;
    let cpu = CpuReport::take();
    let text = cpu.added_to_text(stats_json(&stats, elapsed));
    let record_result = match recorder {
        Some(recorder) => recorder.finish(stats.clone(), serde_json::from_str(&text)?),
        None => Ok(()),
    };
    if matches!(&result, Err(e) if e.is_broken_pipe()) {
        // The reader of our output went away (`| head`): stop quietly, as other tools do.
        return Ok(ExitCode::SUCCESS);
    }
    for warning in stats.iter().flat_map(|s| s.warning_lines()) {
        eprintln!("dnsluice: warning: {warning}");
    }
    if !quiet {
        print_summary(&stats, elapsed);
        eprintln!("  on {threads}");
        eprintln!("  {}", cpu.line());
    }
    if let Some(path) = stats_path {
        std::fs::write(path, &text)
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    result?;
    record_result?;
    Ok(ExitCode::SUCCESS)
}

/// A `run` interval: every stage's counts in it, and the capture times it spans.
fn run_view(interval: &Interval<'_>) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(reading) = interval.diff.iter().find_map(|s: &StageStats| s.reading) {
        out.insert(
            "capture".into(),
            json!({"first_ns": reading.first_ts_ns, "last_ns": reading.last_ts_ns}),
        );
    }
    let stages: Vec<Value> = interval
        .diff
        .iter()
        .map(|s| {
            let mut v = stage_value(s, true);
            if let Some(o) = v.as_object_mut() {
                o.remove("reading");
            }
            v
        })
        .collect();
    out.insert("stages".into(), Value::Array(stages));
    out
}
