//! The workers (`dnsluice lookup --input nats://... --output nats://...`
//! runs the chain `input.nats → lookup.dns → output.nats`: see
//! `crate::lookup`): `dnsluice run PIPELINE --work URL --results URL` runs the pipeline once
//! per file taken from the work stream and publishes each run's summary
//! ([`pipeline`]); `dnsluice run PIPELINE --files ... [--shard I/N]` runs it
//! over many files without a broker and adds the summaries up ([`files`]).

use super::merge::Merged;
use super::{Shard, WorkerFlags};
use crate::cpu_report::CpuReport;
use crate::flags::flag_error;
use crate::metrics::{Endpoint, MetricsFlags};
use crate::report::{print_summary, stats_json_detailed};
use crate::running::{run_collecting, Ran, Reporting};
use anyhow::{bail, Context, Result};
use dnsluice_core::options::Options;
use dnsluice_core::pipeline::{Pipeline, Threads};
use dnsluice_core::{Object, Producer, Receiver, Registry, Text, TextKind};
use dnsluice_modules::input::nats::{NatsInput, NatsInputOptions};
use dnsluice_modules::nats::tickets;
use dnsluice_modules::output::nats::{NatsOutput, NatsOutputOptions};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where a pipeline worker takes files and puts summaries.
pub struct Queues<'a> {
    /// The work stream.
    pub work: &'a str,
    /// The results stream.
    pub results: &'a str,
    /// How to take work.
    pub flags: &'a WorkerFlags,
}

/// `dnsluice run PIPELINE --work URL --results URL`: one file at a time
/// (an item is a path), each run's summary published as a result record
/// (see [`super::merge`]) before the item is acknowledged. When the
/// pipeline's last stage is `output.nats`, its records carry ids made of the
/// item's, so a file run twice publishes nothing twice.
pub fn pipeline(
    registry: &Registry,
    file: &Path,
    overrides: &[String],
    queues: &Queues<'_>,
    quiet: bool,
    metrics: &MetricsFlags,
) -> Result<ExitCode> {
    let mut base = Pipeline::read(file)?;
    for assignment in overrides {
        base.set(assignment)?;
    }
    // One endpoint for the worker's life: each file's counters add up.
    let endpoint = metrics.start(base.metrics_listen, quiet)?;
    let board = endpoint.as_ref().map(Endpoint::board);
    let mut input_table = queues.flags.input_table(queues.work);
    // A file is a long item: take one at a time, so the others go to idle workers.
    input_table.insert("batch".into(), 1.into());
    input_table.insert("max_held".into(), 1.into());
    let mut input = NatsInput::open(
        &NatsInputOptions::from_table(input_table)
            .map_err(|e| flag_error(e.key.as_deref(), e.message))?,
    )?;
    let mut output = NatsOutput::open(
        &NatsOutputOptions::from_table(queues.flags.output_table(queues.results))
            .map_err(|e| flag_error(e.key.as_deref(), e.message))?,
    )?;
    let last = base.stages.len().saturating_sub(1);
    let records_to_nats = base
        .stages
        .last()
        .is_some_and(|s| s.module == "output.nats");
    let (mut done, mut failed) = (0u64, 0u64);
    loop {
        let (ticket, item, given_up) = match input.produce()? {
            None => break,
            Some(Object::Text(t)) if t.text.is_empty() => continue,
            Some(Object::Text(t)) => (t.number, t.text.to_string(), t.kind == TextKind::Record),
            Some(_) => continue,
        };
        let record = if given_up {
            failed += 1;
            item
        } else {
            let mut run = base.clone();
            run.set(&format!("0.path={item}"))?;
            if records_to_nats {
                let prefix = tickets::result_id(ticket).unwrap_or_default();
                run.set(&format!("{last}.id_prefix={prefix}/"))?;
            }
            let ran = run_collecting(registry, &run, true, board);
            if dnsluice_core::stop::requested().is_some() {
                // Stopped (SIGINT, SIGTERM): the run's summary is not the
                // whole file's. Neither published nor acknowledged: the input
                // hands the item back, and another worker runs it whole.
                if !quiet {
                    eprintln!(
                        "dnsluice: {item}: stopped before the end; handed back to the work queue"
                    );
                }
                break;
            }
            let record = summary_record(&item, ran);
            if record["status"] == "OK" {
                done += 1;
            } else {
                failed += 1;
            }
            if !quiet {
                eprintln!(
                    "dnsluice: {item}: {}",
                    record["status"].as_str().unwrap_or("")
                );
            }
            record.to_string()
        };
        output.receive(&mut Object::Text(Text {
            kind: TextKind::Record,
            number: ticket,
            text: &record,
        }))?;
    }
    output.finish()?;
    if !quiet {
        let mut stats = Vec::new();
        input.stats(&mut stats);
        output.stats(&mut stats);
        eprintln!("dnsluice: {done} files done, {failed} failed");
        print_summary(&stats, 0.0);
    }
    Ok(ExitCode::SUCCESS)
}

/// The result record of one file's run.
fn summary_record(item: &str, ran: Result<Ran>) -> Value {
    match ran {
        Ok(Ran {
            stats,
            elapsed,
            result: Ok(_),
            ..
        }) => {
            // With each stage's detail, so that `queue get --merge` adds
            // breakdowns, histograms and top lists, not their summaries.
            let summary = stats_json_detailed(&stats, elapsed);
            json!({"item": item, "status": "OK", "stats": summary})
        }
        Ok(Ran { result: Err(e), .. }) => {
            json!({"item": item, "status": "ERROR", "error": e.to_string()})
        }
        Err(e) => json!({"item": item, "status": "ERROR", "error": format!("{e:#}")}),
    }
}

/// The files of `dnsluice run PIPELINE --files A B ...`, and how they run.
pub struct FileSet<'a> {
    /// The files.
    pub files: &'a [PathBuf],
    /// `--shard I/N`: only file k (from 0) with `k mod N = I`.
    pub shard: Option<Shard>,
    /// `--jobs N`: runs at once ([`super::parallel`]).
    pub jobs: usize,
}

/// `dnsluice run PIPELINE --files A B ... [--shard I/N] [--jobs N]`: the
/// pipeline once per file of the set, one summary adding up the runs in
/// file order. A file that fails stops the run, naming it.
pub fn files(
    registry: &Registry,
    file: &Path,
    overrides: &[String],
    set: &FileSet<'_>,
    reporting: &Reporting<'_>,
) -> Result<ExitCode> {
    let (stats_path, quiet) = (reporting.stats_path, reporting.quiet);
    let mut base = Pipeline::read(file)?;
    for assignment in overrides {
        base.set(assignment)?;
    }
    if set.jobs > 1 {
        super::parallel::check_outputs(&base, set.jobs)?;
        // The jobs use the cores already.
        if base.threads == Threads::Auto {
            base.threads = Threads::Count(1);
        }
    }
    let endpoint = reporting.metrics.start(base.metrics_listen, quiet)?;
    if endpoint.is_some() && set.jobs > 1 {
        bail!("--metrics-listen serves one run at a time: give --jobs 1 (the default) with it");
    }
    let board = endpoint.as_ref().map(Endpoint::board);
    let taken: Vec<&PathBuf> = (set.files.iter().enumerate())
        .filter(|(k, _)| set.shard.is_none_or(|s| s.takes(*k as u64)))
        .map(|(_, path)| path)
        .collect();
    if taken.len() > 1 {
        super::set_outputs::check(&base, taken.len())?;
    }
    let mut runs = Vec::new();
    for path in taken {
        let mut run = base.clone();
        run.set(&format!("0.path={}", path.display()))?;
        if !runs.is_empty() {
            super::set_outputs::continue_file(&mut run)?;
        }
        runs.push((path.clone(), run));
    }
    let started = std::time::Instant::now();
    let ran = if set.jobs > 1 {
        super::parallel::run_all(registry, &runs, set.jobs)
    } else {
        super::parallel::run_in_turn(registry, &runs, quiet, board)
    };
    let ran = match ran {
        Ok(ran) => ran,
        // The reader of our output went away (`| head`): stop quietly, as one run does.
        Err(e) if super::parallel::is_broken_pipe(&e) => return Ok(ExitCode::SUCCESS),
        Err(e) => return Err(e),
    };
    let mut merged = Merged::default();
    for ran in &ran {
        merged
            .add_run(ran.stats.clone(), ran.elapsed)
            .map_err(anyhow::Error::msg)?;
    }
    // The rates are of the set's wall time (with --jobs N its runs overlap).
    merged.took(started.elapsed().as_secs_f64());
    let cpu = CpuReport::take();
    let text = cpu.added_to_text(merged.to_json());
    let summary: Value = serde_json::from_str(&text)?;
    // Warnings name their file (a capture cut off); printed even with -q, as one run's are.
    for ran in &ran {
        for warning in ran.stats.iter().flat_map(|s| s.warning_lines()) {
            eprintln!("dnsluice: warning: {warning}");
        }
    }
    if !quiet {
        match dnsluice_core::stop::signal() {
            Some(_) => eprintln!(
                "dnsluice: {} of {} files (stopped by a signal: {})",
                merged.files(),
                runs.len(),
                match set.jobs {
                    0 | 1 => "the last one in part".to_string(),
                    jobs => format!("the last ones, up to {jobs} going on at once, in part"),
                }
            ),
            None => eprintln!("dnsluice: {} files", merged.files()),
        }
        print_summary(
            merged.stages(),
            summary["elapsed_s"].as_f64().unwrap_or(0.0),
        );
        eprintln!("  {}", cpu.line());
    }
    if let Some(path) = stats_path {
        std::fs::write(path, text)
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
