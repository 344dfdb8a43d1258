//! `dnsluice run PIPELINE --files ... --jobs N`: the runs of a file set, up
//! to N at once, each on a thread of its own with a chain of its own (a
//! file's run is what it would be alone), their counters handed back in
//! file order so the summary that adds them up is the same whatever order
//! they end in. Why threads, not processes: every run builds its chain
//! from the one registry, and a run's counters come back as values.

use crate::metrics::board::Board;
use crate::running::{run_collecting, Ran};
use anyhow::{bail, Result};
use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::{Registry, StageError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs each `(file, pipeline)`, up to `jobs` at once; every run's
/// counters in the order given, or the first failure, naming its file
/// (runs not started yet are not started then, nor after a stop: SIGINT,
/// SIGTERM; the runs going on are stopped, [`dnsluice_core::stop::abandon`]).
pub fn run_all(registry: &Registry, runs: &[(PathBuf, Pipeline)], jobs: usize) -> Result<Vec<Ran>> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let done: Mutex<Vec<Option<Result<Ran>>>> = Mutex::new(runs.iter().map(|_| None).collect());
    let mut start_failed = None;
    let at_once = jobs.clamp(1, runs.len().max(1));
    // Compressed inputs decode on their jobs' threads when the jobs fill the cores.
    let _sharing = dnsluice_modules::input::decoder_thread::RunsAtOnce::set(at_once);
    std::thread::scope(|scope| {
        for _ in 0..at_once {
            let job = dnsluice_core::thread::named("job");
            let started = job.spawn_scoped(scope, || {
                let _cpu = dnsluice_modules::cpu::note_at_end();
                while !failed.load(Ordering::Relaxed) && !stopped() {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some((file, pipeline)) = runs.get(k) else {
                        break;
                    };
                    // Asked again: a stop that came meanwhile starts no run.
                    if stopped() {
                        break;
                    }
                    let ran = run_one(registry, file, pipeline, true, None);
                    if ran.is_err() {
                        // The others' work would be thrown away: they stop now.
                        failed.store(true, Ordering::Relaxed);
                        dnsluice_core::stop::abandon();
                    }
                    dnsluice_core::sync::lock(&done)[k] = Some(ran);
                }
            });
            if let Err(e) = started {
                failed.store(true, Ordering::Relaxed);
                start_failed = Some(e);
                break;
            }
        }
    });
    if let Some(e) = start_failed {
        bail!("cannot start a thread for the runs: {e}");
    }
    let done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut all = Vec::with_capacity(done.len());
    for ran in done {
        match ran {
            Some(ran) => all.push(ran?),
            // Not started: an earlier file failed (its error came first).
            None => continue,
        }
    }
    Ok(all)
}

/// Runs each `(file, pipeline)` in turn: every run's counters, or the
/// first failure, naming its file. After a stop (SIGINT, SIGTERM), the
/// files not started yet are not started: the run a signal cut short is
/// the last.
pub fn run_in_turn(
    registry: &Registry,
    runs: &[(PathBuf, Pipeline)],
    quiet: bool,
    metrics: Option<&Board>,
) -> Result<Vec<Ran>> {
    runs.iter()
        .take_while(|_| !stopped())
        .map(|(file, pipeline)| run_one(registry, file, pipeline, quiet, metrics))
        .collect()
}

/// Whether a signal asked to stop (then no further file is started).
fn stopped() -> bool {
    dnsluice_core::stop::requested().is_some()
}

/// Whether a run failed because the reader of its output went away (a
/// closed pipe: `dnsluice run ... | head`).
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<StageError>()
        .is_some_and(StageError::is_broken_pipe)
}

/// Runs `pipeline` over `file` (a progress bar unless `quiet`, publishing
/// to `metrics` when an endpoint serves): its counters, or its failure
/// naming the file.
pub fn run_one(
    registry: &Registry,
    file: &Path,
    pipeline: &Pipeline,
    quiet: bool,
    metrics: Option<&Board>,
) -> Result<Ran> {
    let ran = run_collecting(registry, pipeline, quiet, metrics)?;
    match ran.result {
        Ok(_) => Ok(ran),
        Err(e) => Err(anyhow::Error::new(e).context(file.display().to_string())),
    }
}

/// With `jobs` runs at once, their outputs must not share a file: the last
/// stage may write nothing (`output.null`) or JSON lines (whole lines
/// interleave) to standard output or `/dev/null`.
pub fn check_outputs(pipeline: &Pipeline, jobs: usize) -> Result<()> {
    let Some(last) = pipeline.stages.last() else {
        return Ok(());
    };
    let path = last.options.get("path").and_then(|v| v.as_str());
    match (last.module.as_str(), path) {
        ("output.null", _) | ("output.json", None | Some("-" | "/dev/null")) => Ok(()),
        (module, _) => bail!(
            "--jobs {jobs}: the runs would write {module}'s output at once; \
             with several jobs the last stage must be output.null, or output.json to \
             standard output or /dev/null (or give --jobs 1)"
        ),
    }
}
