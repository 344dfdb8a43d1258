//! Adding up the summaries of many runs of one pipeline (one per file) into
//! the summary one run over all the files gives: per stage (matched by
//! position and module) as threads' statistics merge
//! ([`StageStats::absorb`]): counts and errors add up, breakdowns and
//! histograms too (so the counters listing a breakdown's most frequent keys
//! and a histogram's percentiles are computed again from the sums, not
//! added), top lists merge with their error bounds, largest values stay the
//! largest, and gauges (what was held as a run ended) are the last run's
//! ([`StageStats::absorb_later`]); warnings are kept once each;
//! `elapsed_s` is the sum of the runs' times, unless the set's wall time
//! is known ([`Merged::took`]: `run --files`, whose runs may go on at once),
//! which it then is, the sum being `runs_elapsed_s`.
//!
//! A worker's result record is `{"item": PATH, "status": "OK", "stats":
//! SUMMARY}`, its summary with each stage's detail
//! ([`crate::report::stats_json_detailed`]), or `{"item"|"name": ...,
//! "status": "ERROR", "error": WHY}` for a file that failed; failed files are
//! listed, not added. A summary without the detail (a plain `--stats-json`)
//! is added as well as it can be: its listed and percentile counters add up.

use crate::report::{stage_from_value, stage_value};
use dnsluice_core::StageStats;
use serde_json::{json, Value};

/// The sums so far.
#[derive(Debug, Default)]
pub struct Merged {
    stages: Vec<StageStats>,
    elapsed: f64,
    /// The whole set's wall time, when known.
    wall: Option<f64>,
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

    /// Adds one `--stats-json` summary (with or without each stage's detail).
    pub fn add_summary(&mut self, summary: &Value) -> Result<(), String> {
        let stages = summary
            .get("stages")
            .and_then(Value::as_array)
            .ok_or("no `stages` list in the summary")?;
        let elapsed = summary
            .get("elapsed_s")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        self.add_run(stages.iter().map(stage_from_value).collect(), elapsed)
    }

    /// Adds one run's statistics, stage by stage.
    pub fn add_run(&mut self, stages: Vec<StageStats>, elapsed: f64) -> Result<(), String> {
        if self.files > 0 {
            if stages.len() != self.stages.len() {
                return Err(format!(
                    "{} stages, where the summaries before had {}: not the same pipeline",
                    stages.len(),
                    self.stages.len()
                ));
            }
            if let Some((i, (s, mine))) = stages
                .iter()
                .zip(&self.stages)
                .enumerate()
                .find(|(_, (s, mine))| s.module != mine.module)
            {
                return Err(format!(
                    "stage {i} is {}, where the summaries before had {}",
                    s.module, mine.module
                ));
            }
            for (mine, stage) in self.stages.iter_mut().zip(stages) {
                mine.absorb_later(stage);
            }
        } else {
            self.stages = stages;
        }
        self.elapsed += elapsed;
        self.files += 1;
        Ok(())
    }

    /// Says the set took `seconds` of wall time in all (its runs went on
    /// at once, or one after another with time between them).
    pub fn took(&mut self, seconds: f64) {
        self.wall = Some(seconds);
    }

    /// Files added.
    pub fn files(&self) -> u64 {
        self.files
    }

    /// Files that failed: (item, why).
    pub fn failed(&self) -> &[(String, String)] {
        &self.failed
    }

    /// The merged statistics, stage by stage.
    pub fn stages(&self) -> &[StageStats] {
        &self.stages
    }

    /// The merged summary, shaped as `--stats-json` (plus `files` and `failed`).
    pub fn to_json(&self) -> String {
        let stages: Vec<Value> = self.stages.iter().map(|s| stage_value(s, false)).collect();
        let failed: Vec<Value> = self
            .failed
            .iter()
            .map(|(item, why)| json!({"item": item, "error": why}))
            .collect();
        let mut summary = json!({
            "stages": stages,
            "elapsed_s": self.wall.unwrap_or(self.elapsed),
            "files": self.files,
            "failed": failed,
        });
        if self.wall.is_some() {
            summary["runs_elapsed_s"] = json!(self.elapsed);
        }
        let mut text = summary.to_string();
        text.push('\n');
        text
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
        assert_eq!(v["stages"][1]["warnings"], json!(["w"]));
        assert_eq!(v["elapsed_s"], 1.0);
        assert_eq!(v["files"], 2);
        assert_eq!(v["failed"][0]["item"], "c.pcap");
    }

    /// Two runs' statistics of one stage merge as one run's would be: the
    /// percentile counters from the summed histogram, the listed breakdown
    /// from the summed breakdown, the largest value the largest, a gauge
    /// the last run's; and they do so after a trip through a result
    /// record's JSON too.
    #[test]
    fn runs_merge_their_detail_not_their_summaries() {
        let run = |latencies: &[(u64, u64)], qtypes: &[(&str, u64)], held: u64, drift: u64| {
            let mut s = StageStats::new("output.dnscli");
            let h = s.histograms.entry("latency_us".into()).or_default();
            for &(bucket, n) in latencies {
                h.add(bucket, n);
            }
            s.counters.insert("latency_us.p50".into(), 0);
            for &(key, n) in qtypes {
                s.add_breakdown("qtype", key, n);
            }
            s.list_top("qtype", 1);
            s.counters.insert("held_items".into(), held);
            s.counters.insert("max_drift_us".into(), drift);
            s
        };
        // p50 of each run alone: 100 and 100; of both: 900 (6 of 10 above).
        let mut first = run(&[(100, 3), (900, 1)], &[("A", 5), ("MX", 1)], 7, 40);
        let second = run(&[(100, 1), (900, 5)], &[("AAAA", 4), ("MX", 3)], 2, 30);
        // A gauge only the first run has: 0 as the second ended (left out).
        first.counters.insert("inflight_cap".into(), 100);
        let check = |m: &Merged| {
            let c = &m.stages()[0].counters;
            // (A bucket's highest value: under 1 % above 900.)
            assert!((900..910).contains(&c["latency_us.p50"]), "{c:?}");
            // MX: 1 + 3; A: 5; AAAA: 4: A is the most frequent, alone listed.
            assert_eq!(c.get("qtype A"), Some(&5));
            assert_eq!(c.get("qtype AAAA"), None);
            assert_eq!(c["held_items"], 2);
            assert_eq!(c.get("inflight_cap"), None);
            assert_eq!(c["max_drift_us"], 40);
        };
        let mut direct = Merged::default();
        direct.add_run(vec![first.clone()], 1.0).unwrap();
        direct.add_run(vec![second.clone()], 1.0).unwrap();
        check(&direct);
        let mut through_json = Merged::default();
        for stats in [first, second] {
            let summary = crate::report::stats_json_detailed(&[stats], 1.0);
            through_json.add_summary(&summary).unwrap();
        }
        check(&through_json);
    }

    /// Percentiles merged from result records are those of the runs'
    /// own buckets (3 significant digits: 1,500 is a bucket of its own,
    /// 90,047 the top of 90,000's), not of buckets coarsened for a report
    /// (they gave 1,503 and 90,111).
    #[test]
    fn merged_percentiles_keep_the_runs_resolution() {
        let run = |latencies: &[(u64, u64)]| {
            let mut s = StageStats::new("output.dnscli");
            let h = s.histograms.entry("latency_us".into()).or_default();
            for &(bucket, n) in latencies {
                h.add(bucket, n);
            }
            s.counters.insert("latency_us.p50".into(), 0);
            s.counters.insert("latency_us.max".into(), 0);
            s
        };
        let mut merged = Merged::default();
        for stats in [run(&[(1500, 3)]), run(&[(1500, 2), (90_047, 1)])] {
            let summary = crate::report::stats_json_detailed(&[stats], 1.0);
            merged.add_summary(&summary).unwrap();
        }
        let c = &merged.stages()[0].counters;
        assert_eq!(c["latency_us.p50"], 1500, "{c:?}");
        assert_eq!(c["latency_us.max"], 90_047, "{c:?}");
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
