//! What the outputs of a file set (`run --files A B ...`) may write. Each
//! file's run builds its chain anew, so an output that writes a file would
//! start it again for every file of the set, and only the last file's
//! records would stay while the summary counted them all (2 × 1,163 lines
//! counted, 1,163 on disk). JSON lines go on: the runs after the first
//! append to the file ([`continue_file`]). Files of other formats (a pcap,
//! Parquet or dnstap file, a diff's summary) have one header or footer and
//! cannot be continued by another run: they are refused, with what to do
//! instead ([`check`]).

use anyhow::{bail, Result};
use dnsluice_core::pipeline::Pipeline;

/// How the next run can go on with what a run wrote.
#[derive(Clone, Copy)]
enum Continues {
    /// JSON lines that the next run appends (`output.json`'s `append`).
    Appended,
    /// JSON lines to standard output go on; a file would start again.
    OnStandardOutput,
    /// One whole file per run: only `/dev/null` goes on.
    Never,
}

/// The options by which each module writes, and how a later run goes on.
const WRITTEN: [(&str, &str, Continues); 7] = [
    ("output.json", "path", Continues::Appended),
    ("output.diff", "path", Continues::OnStandardOutput),
    ("output.diff", "summary", Continues::Never),
    ("output.dnscli", "responses", Continues::OnStandardOutput),
    ("output.pcap", "path", Continues::Never),
    ("output.parquet", "path", Continues::Never),
    ("output.dnstap", "path", Continues::Never),
];

/// Where `module` writes by `key` in `pipeline`'s stage `index` (`-` for
/// standard output when the key is not given and the module's default
/// is standard output; `None` when it writes nothing there).
fn written<'p>(pipeline: &'p Pipeline, index: usize, key: &str) -> Option<&'p str> {
    let stage = &pipeline.stages[index];
    match stage.options.get(key) {
        Some(value) => value.as_str(),
        None if stage.module == "output.json" && key == "path" => Some("-"),
        None => None,
    }
}

/// Refuses the outputs of `pipeline` whose file a later file's run would
/// start again; `files` is how many files the set runs.
pub fn check(pipeline: &Pipeline, files: usize) -> Result<()> {
    for (index, stage) in pipeline.stages.iter().enumerate() {
        for (module, key, continues) in WRITTEN {
            if stage.module != module {
                continue;
            }
            let Some(path) = written(pipeline, index, key) else {
                continue;
            };
            let goes_on = match continues {
                Continues::Appended => true,
                Continues::OnStandardOutput => matches!(path, "-" | "/dev/null"),
                Continues::Never => path == "/dev/null",
            };
            if !goes_on {
                bail!(
                    "--files: {module}'s {key} ({path}) would be written anew for each of the \
                     {files} files (each file's run starts its own), leaving only the last \
                     file's: run the files one at a time, each to a {key} of its own, or \
                     write JSON lines (output.json appends them)"
                );
            }
        }
    }
    Ok(())
}

/// Sets `append = true` on `run`'s JSON outputs to a file, for a run that
/// follows another of the set (the first one writes the file anew, or
/// appends as the user said).
pub fn continue_file(run: &mut Pipeline) -> Result<()> {
    let appended: Vec<usize> = (0..run.stages.len())
        .filter(|&index| {
            run.stages[index].module == "output.json"
                && !matches!(written(run, index, "path"), Some("-" | "/dev/null") | None)
        })
        .collect();
    for index in appended {
        run.set(&format!("{index}.append=true"))?;
    }
    Ok(())
}
