//! Running pipelines written in the test: a pipeline file under the target
//! directory, run with `dnsluice run`, its JSON lines and statistics read back.

use serde_json::Value;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::{assert_ok, dnsluice, output_within, temp_path};

/// How long a pipeline of a test may run: far longer than any takes, so
/// that one still running has hung (threads waiting on each other).
const PIPELINE_LIMIT: Duration = Duration::from_secs(300);

/// Writes `text` as a pipeline file and runs `dnsluice run` on it with
/// `args`; a run still going after [`PIPELINE_LIMIT`] is killed and fails
/// the test.
pub fn run_pipeline(text: &str, args: &[&str]) -> Output {
    let file = temp_path("pipeline.toml");
    std::fs::write(&file, text).unwrap();
    let out = output_within(dnsluice().arg("run").arg(&file).args(args), PIPELINE_LIMIT);
    let _ = std::fs::remove_file(&file);
    out
}

/// Runs the input module `input` on `capture`, then `stages` (TOML
/// `[[stage]]` tables), then output.json, with the command line `args`; the
/// JSON lines written (none when the run wrote none) and the process output.
pub fn json_run(input: &str, capture: &Path, stages: &str, args: &[&str]) -> (Vec<Value>, Output) {
    let json = temp_path("out.jsonl");
    let text = format!(
        "[[stage]]\nmodule = \"{input}\"\npath = \"{}\"\n{stages}[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
        capture.display(),
        json.display()
    );
    let out = run_pipeline(&text, args);
    let rows = std::fs::read_to_string(&json)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect();
    let _ = std::fs::remove_file(&json);
    (rows, out)
}

/// Runs input → filter.layer → output.json on `capture`; the JSON lines and the process output.
pub fn layer_json(input: &str, capture: &Path) -> (Vec<Value>, Output) {
    json_run(
        input,
        capture,
        "[[stage]]\nmodule = \"filter.layer\"\n",
        &["--quiet"],
    )
}

/// Runs input → filter.layer → filter.dns → output.json; the JSON lines and
/// the stats, asserting that the run succeeds.
pub fn dns_json(input: &str, capture: &Path) -> (Vec<Value>, Value) {
    let (rows, stats, out) = dns_run(input, capture);
    assert_ok(&out, format_args!("{input} {}", capture.display()));
    (rows, stats)
}

/// [`dns_json`] for a run that may fail: the JSON lines written, the stats
/// (`Null` when none were written) and the process output.
pub fn dns_run(input: &str, capture: &Path) -> (Vec<Value>, Value, Output) {
    let stats = temp_path("stats.json");
    let (rows, out) = json_run(
        input,
        capture,
        "[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n",
        &["-q", "--stats-json", &stats.display().to_string()],
    );
    let stats = std::fs::read_to_string(&stats)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(Value::Null);
    (rows, stats, out)
}
