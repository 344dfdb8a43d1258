//! What `output.diff` writes: one JSON line per differing query —
//! `qname`, `qtype`, `fields` (the fields that differ) and `answers` (each
//! server's answer as `output.json` shows a message, or `{"error": KIND}`)
//! — and the summary: `queries`, `differing`, `no_answer_from_any` (queries
//! every server failed: they agree, so are not differing), `failed` (server
//! → kind of failure → count), `by_field` (field → count),
//! `unstable`, `most_common` (the differences seen most often: a field and
//! its two values), `field_sets` (the sets of fields that differ together,
//! most often first), `servers` and `skipped` (what was not compared, by
//! why). These keys are a contract for scripts.

use super::compare::Mismatch;
use super::{DiffOptions, Done};

/// How many of the most common differences (and field sets) the summary lists.
const MOST: usize = 20;
use crate::json::response::message;
use dnsluice_core::dns::{mnemonic, name, questions};
use dnsluice_core::{StageError, StageStats};
use dnsluice_json::{push_json_str, Fields};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// The counts, and where the lines and the summary go.
pub(super) struct Report {
    out: Option<(PathBuf, BufWriter<Box<dyn Write>>)>,
    summary: Option<PathBuf>,
    names: Vec<String>,
    line: Vec<u8>,
    pub(super) received: u64,
    pub(super) skipped: u64,
    pub(super) bad_lines: u64,
    pub(super) unmatched_responses: u64,
    pub(super) unanswered_in_capture: u64,
    /// Queries of the capture seen again before their response (retries).
    pub(super) repeated_queries: u64,
    pub(super) unstable: u64,
    queries: u64,
    differing: u64,
    /// Queries no server answered (each failed, or gave no answer).
    no_answer: u64,
    /// Each answer's (as `names`) failed queries, by kind.
    failures: Vec<BTreeMap<String, u64>>,
    by_field: BTreeMap<&'static str, u64>,
    combinations: HashMap<Vec<&'static str>, u64>,
    mismatches: HashMap<Mismatch, u64>,
}

/// The summary file.
#[derive(Serialize)]
struct Summary<'a> {
    queries: u64,
    differing: u64,
    /// Queries that no server answered: they agree, and say nothing.
    no_answer_from_any: u64,
    /// By server, its queries that failed, by kind (`timeout`, ...).
    failed: BTreeMap<&'a str, &'a BTreeMap<String, u64>>,
    by_field: &'a BTreeMap<&'static str, u64>,
    unstable: u64,
    most_common: Vec<CommonMismatch>,
    field_sets: Vec<Common>,
    servers: &'a [String],
    skipped: Skipped,
}

/// What was not compared, by why.
#[derive(Serialize)]
struct Skipped {
    bad_lines: u64,
    not_queries: u64,
    responses_without_query: u64,
    queries_without_response: u64,
    repeated_queries: u64,
}

/// A difference and how often it was seen: `values` are the first
/// answer's and the other's.
#[derive(Serialize)]
struct CommonMismatch {
    field: &'static str,
    values: [String; 2],
    count: u64,
}

#[derive(Serialize)]
struct Common {
    fields: Vec<&'static str>,
    count: u64,
}

impl Report {
    pub(super) fn create(o: &DiffOptions, names: Vec<String>) -> Result<Self, StageError> {
        let out = match &o.path {
            None => None,
            Some(path) => {
                let sink: Box<dyn Write> = if path.as_os_str() == "-" {
                    Box::new(io::stdout())
                } else {
                    Box::new(std::fs::File::create(path).map_err(|e| StageError::io(path, e))?)
                };
                Some((path.clone(), BufWriter::new(sink)))
            }
        };
        Ok(Report {
            out,
            summary: o.summary.clone(),
            names,
            line: Vec::new(),
            received: 0,
            skipped: 0,
            bad_lines: 0,
            unmatched_responses: 0,
            unanswered_in_capture: 0,
            repeated_queries: 0,
            unstable: 0,
            queries: 0,
            differing: 0,
            no_answer: 0,
            failures: Vec::new(),
            by_field: BTreeMap::new(),
            combinations: HashMap::new(),
            mismatches: HashMap::new(),
        })
    }

    /// Counts a compared query, and each answer that failed.
    pub(super) fn count(&mut self, done: &Done) {
        self.queries += 1;
        if self.failures.len() < done.answers.len() {
            self.failures.resize(done.answers.len(), BTreeMap::new());
        }
        let mut answered = false;
        for (answer, failures) in done.answers.iter().zip(&mut self.failures) {
            match answer {
                Ok(_) => answered = true,
                Err(kind) => *failures.entry(kind.clone()).or_insert(0) += 1,
            }
        }
        if !answered {
            self.no_answer += 1;
        }
    }

    /// The servers' names with their failures, those that had any.
    fn failed(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, u64>)> {
        (self.names.iter().map(String::as_str))
            .zip(&self.failures)
            .filter(|(_, failures)| !failures.is_empty())
    }

    /// Counts a differing query and writes its line.
    pub(super) fn write(&mut self, done: &Done, scratch: &mut Vec<u8>) {
        self.differing += 1;
        for f in &done.fields {
            *self.by_field.entry(f).or_insert(0) += 1;
        }
        *self.combinations.entry(done.fields.clone()).or_insert(0) += 1;
        for m in &done.mismatches {
            *self.mismatches.entry(m.clone()).or_insert(0) += 1;
        }
        let Some((_, out)) = &mut self.out else {
            return;
        };
        let line = &mut self.line;
        line.clear();
        let mut f = Fields::new();
        line.push(b'{');
        let question = questions(&done.query).next();
        let qname = question
            .and_then(|q| name::to_string(&done.query, q.name as usize).ok())
            .unwrap_or_default();
        f.string(line, "qname", &qname);
        f.string(
            line,
            "qtype",
            &question
                .map(|q| mnemonic::rtype(q.qtype))
                .unwrap_or_default(),
        );
        f.key(line, "fields");
        line.push(b'[');
        for (i, field) in done.fields.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            push_json_str(field.as_bytes(), line);
        }
        line.push(b']');
        f.key(line, "answers");
        let mut a = Fields::new();
        line.push(b'{');
        for (name, answer) in self.names.iter().zip(&done.answers) {
            a.key(line, name);
            match answer {
                Ok(bytes) => message(bytes, line, scratch),
                Err(kind) => {
                    line.extend_from_slice(b"{\"error\":");
                    push_json_str(kind.as_bytes(), line);
                    line.push(b'}');
                }
            }
        }
        line.extend_from_slice(b"}}\n");
        // A write error shows at the flush in `finish`.
        let _ = out.write_all(line);
    }

    pub(super) fn finish(&mut self) -> Result<(), StageError> {
        if let Some((path, out)) = &mut self.out {
            out.flush().map_err(|e| StageError::io(&*path, e))?;
        }
        let Some(path) = &self.summary else {
            return Ok(());
        };
        let mut common: Vec<Common> = self
            .combinations
            .iter()
            .map(|(fields, count)| Common {
                fields: fields.clone(),
                count: *count,
            })
            .collect();
        common.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.fields.cmp(&b.fields)));
        common.truncate(MOST);
        let mut mismatches: Vec<(&Mismatch, u64)> =
            self.mismatches.iter().map(|(m, n)| (m, *n)).collect();
        mismatches.sort_by(|(x, n), (y, m)| {
            m.cmp(n)
                .then_with(|| (x.field, &x.a, &x.b).cmp(&(y.field, &y.a, &y.b)))
        });
        let most_common = mismatches
            .into_iter()
            .take(MOST)
            .map(|(m, count)| CommonMismatch {
                field: m.field,
                values: [m.a.clone(), m.b.clone()],
                count,
            })
            .collect();
        let summary = Summary {
            queries: self.queries,
            differing: self.differing,
            no_answer_from_any: self.no_answer,
            failed: self.failed().collect(),
            by_field: &self.by_field,
            unstable: self.unstable,
            most_common,
            field_sets: common,
            servers: &self.names,
            skipped: Skipped {
                bad_lines: self.bad_lines,
                not_queries: self.skipped,
                responses_without_query: self.unmatched_responses,
                queries_without_response: self.unanswered_in_capture,
                repeated_queries: self.repeated_queries,
            },
        };
        let text = serde_json::to_string_pretty(&summary).expect("plain data");
        std::fs::write(path, text + "\n").map_err(|e| StageError::io(path, e))
    }

    pub(super) fn stats(&self, module: &str) -> StageStats {
        let mut stats = StageStats::new(module);
        stats.input = self.received;
        stats.output = self.differing;
        stats.add_counter("queries", self.queries);
        stats.add_counter("differing", self.differing);
        stats.add_counter("unstable", self.unstable);
        stats.add_error("no_answer_from_any", self.no_answer);
        for (server, failures) in self.failed() {
            for (kind, n) in failures {
                stats.add_breakdown(&format!("failed {server}"), kind, *n);
            }
        }
        for (field, n) in &self.by_field {
            stats.add_counter(&format!("field.{field}"), *n);
        }
        stats.add_error("not_queries", self.skipped);
        stats.add_error("bad_lines", self.bad_lines);
        stats.add_error("responses_without_query", self.unmatched_responses);
        stats.add_error("queries_without_response", self.unanswered_in_capture);
        stats.add_counter("repeated_queries", self.repeated_queries);
        stats
    }
}
