//! Adding up the summaries of many runs of one pipeline (one per file) into
//! the summary one run over all the files gives: per stage (matched by
//! position and module) `in`, `out`, every error and counter are summed,
//! warnings collected; `elapsed_s` is the sum of the runs' times.
//!
//! A worker's result record is `{"item": PATH, "status": "OK", "stats":
//! SUMMARY}`, or `{"item"|"name": ..., "status": "ERROR", "error": WHY}` for
//! a file that failed; failed files are listed, not added.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One stage's sums.
#[derive(Debug, Default, Clone, PartialEq)]
struct StageSum {
    module: String,
    input: u64,
    output: u64,
    errors: BTreeMap<String, u64>,
    counters: BTreeMap<String, u64>,
    warnings: Vec<String>,
}

/// The sums so far.
#[derive(Debug, Default)]
pub struct Merged {
    stages: Vec<StageSum>,
    elapsed: f64,
    files: u64,
    failed: Vec<(String, String)>,
}

impl Merged {
    /// Adds one worker result record (see the module docs).
    pub fn add_record(&mut self, record: &Value) -> Result<(), String> {
        let item = record
            .get("item")
            .or_else(|| record.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        match record.get("status").and_then(Value::as_str) {
            Some("OK") => {
                let stats = record
                    .get("stats")
                    .ok_or_else(|| format!("{item}: the record has no stats"))?;
                self.add_summary(stats).map_err(|e| format!("{item}: {e}"))
            }
            _ => {
                let why = record
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no error given");
                self.failed.push((item, why.to_string()));
                Ok(())
            }
        }
    }

    /// Adds one `--stats-json` summary.
    pub fn add_summary(&mut self, summary: &Value) -> Result<(), String> {
        let stages = summary
            .get("stages")
            .and_then(Value::as_array)
            .ok_or("no `stages` list in the summary")?;
        if self.files > 0 && stages.len() != self.stages.len() {
            return Err(format!(
                "{} stages, where the summaries before had {}: not the same pipeline",
                stages.len(),
                self.stages.len()
            ));
        }
        let mut sums = Vec::with_capacity(stages.len());
        for (i, stage) in stages.iter().enumerate() {
            let mut sum = self.stages.get(i).cloned().unwrap_or_default();
            let module = stage.get("module").and_then(Value::as_str).unwrap_or("");
            if self.files > 0 && sum.module != module {
                return Err(format!(
                    "stage {i} is {module}, where the summaries before had {}",
                    sum.module
                ));
            }
            sum.module = module.to_string();
            sum.input += number(stage, "in");
            sum.output += number(stage, "out");
            add_map(&mut sum.errors, stage.get("errors"));
            add_map(&mut sum.counters, stage.get("counters"));
            if let Some(list) = stage.get("warnings").and_then(Value::as_array) {
                sum.warnings
                    .extend(list.iter().filter_map(Value::as_str).map(str::to_string));
            }
            sums.push(sum);
        }
        self.stages = sums;
        self.elapsed += summary
            .get("elapsed_s")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        self.files += 1;
        Ok(())
    }

    /// Files added.
    pub fn files(&self) -> u64 {
        self.files
    }

    /// Files that failed: (item, why).
    pub fn failed(&self) -> &[(String, String)] {
        &self.failed
    }

    /// The merged summary, shaped as `--stats-json` (plus `files` and `failed`).
    pub fn to_json(&self) -> String {
        let stages: Vec<Value> = self
            .stages
            .iter()
            .map(|s| {
                json!({
                    "module": s.module,
                    "in": s.input,
                    "out": s.output,
                    "errors": s.errors,
                    "counters": s.counters,
                    "warnings": s.warnings,
                })
            })
            .collect();
        let failed: Vec<Value> = self
            .failed
            .iter()
            .map(|(item, why)| json!({"item": item, "error": why}))
            .collect();
        let mut text = json!({
            "stages": stages,
            "elapsed_s": self.elapsed,
            "files": self.files,
            "failed": failed,
        })
        .to_string();
        text.push('\n');
        text
    }
}

fn number(stage: &Value, key: &str) -> u64 {
    stage.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn add_map(sum: &mut BTreeMap<String, u64>, map: Option<&Value>) {
    let Some(map) = map.and_then(Value::as_object) else {
        return;
    };
    let map: &Map<String, Value> = map;
    for (key, value) in map {
        *sum.entry(key.clone()).or_default() += value.as_u64().unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(inp: u64, a: u64) -> Value {
        json!({"stages": [
            {"module": "input.mmpcap", "in": inp, "out": inp, "errors": {}, "counters": {"a": a}, "warnings": []},
            {"module": "output.null", "in": inp, "out": 0, "errors": {"e": 1}, "counters": {}, "warnings": ["w"]}
        ], "elapsed_s": 0.5})
    }

    #[test]
    fn sums_stage_by_stage_and_lists_failures() {
        let mut m = Merged::default();
        m.add_record(&json!({"item": "a.pcap", "status": "OK", "stats": summary(3, 1)}))
            .unwrap();
        m.add_record(&json!({"item": "b.pcap", "status": "OK", "stats": summary(4, 2)}))
            .unwrap();
        m.add_record(&json!({"item": "c.pcap", "status": "ERROR", "error": "gone"}))
            .unwrap();
        let v: Value = serde_json::from_str(&m.to_json()).unwrap();
        assert_eq!(v["stages"][0]["in"], 7);
        assert_eq!(v["stages"][0]["counters"]["a"], 3);
        assert_eq!(v["stages"][1]["errors"]["e"], 2);
        assert_eq!(v["stages"][1]["warnings"], json!(["w", "w"]));
        assert_eq!(v["elapsed_s"], 1.0);
        assert_eq!(v["files"], 2);
        assert_eq!(v["failed"][0]["item"], "c.pcap");
    }

    #[test]
    fn refuses_summaries_of_another_pipeline() {
        let mut m = Merged::default();
        m.add_summary(&summary(1, 1)).unwrap();
        let other = json!({"stages": [{"module": "input.fpcap"}, {"module": "output.null"}]});
        assert!(m.add_summary(&other).unwrap_err().contains("input.fpcap"));
        let short = json!({"stages": [{"module": "input.mmpcap"}]});
        assert!(m.add_summary(&short).unwrap_err().contains("1 stages"));
    }
}
