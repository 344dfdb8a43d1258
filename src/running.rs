//! Running one pipeline: build it, run it with a progress line, then the
//! summary on stderr and `--stats-json` (`dnsluice run`, and the workers of
//! `crate::queue::worker`, which run a pipeline per work item).

use crate::report::{print_summary, stats_json, Progress};
use anyhow::{Context, Result};
use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::registry::Registry;
use std::process::ExitCode;
use std::time::Instant;

/// What one run of a pipeline gave.
pub struct Ran {
    /// Every stage's counters.
    pub stats: Vec<dnsluice_core::StageStats>,
    /// Seconds from start to end.
    pub elapsed: f64,
    /// How the run ended.
    pub result: Result<u64, dnsluice_core::StageError>,
}

/// Builds `pipeline` and runs it, with a progress line; its counters.
pub fn run_collecting(registry: &Registry, pipeline: &Pipeline) -> Result<Ran> {
    let mut chain = pipeline.build(registry)?;
    let started = Instant::now();
    let mut progress = Progress::new(started);
    let result = chain.run(Some(&mut |n| progress.update(n)));
    progress.clear();
    Ok(Ran {
        elapsed: started.elapsed().as_secs_f64(),
        stats: chain.stats(),
        result,
    })
}

/// Runs a pipeline that is read already: summary, `--stats-json`, exit code.
pub fn run_pipeline(
    registry: &Registry,
    pipeline: &Pipeline,
    stats_path: Option<&std::path::Path>,
    quiet: bool,
) -> Result<ExitCode> {
    let Ran {
        stats,
        elapsed,
        result,
    } = run_collecting(registry, pipeline)?;
    if matches!(&result, Err(e) if e.is_broken_pipe()) {
        // The reader of our output went away (`| head`): stop quietly, as other tools do.
        return Ok(ExitCode::SUCCESS);
    }
    for warning in stats.iter().flat_map(|s| &s.warnings) {
        eprintln!("dnsluice: warning: {warning}");
    }
    if !quiet {
        print_summary(&stats, elapsed);
    }
    if let Some(path) = stats_path {
        std::fs::write(path, stats_json(&stats, elapsed))
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    result?;
    Ok(ExitCode::SUCCESS)
}
