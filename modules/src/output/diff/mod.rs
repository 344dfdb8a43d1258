//! `output.diff`: sends every query to two or more servers and compares
//! their answers field by field ([`compare`]), as knot-resolver's respdiff
//! does before a migration or an upgrade; `dnsluice diff` is its command.
//!
//! The queries are a capture's (after `filter.dns`; responses are left
//! out) or names, one `name` or `name TYPE` a line (`input.lines`). Each
//! query goes to every server through the replay client (`output.dnscli`'s
//! engines: any transport); once all have answered (or failed), the answers
//! are compared with the first server's, and a query where any differs is
//! written as one JSON line ([`report`]). With `reask`, the differing
//! queries are asked again that many times at the end, and a query whose
//! answer from any one server changed between asks is unstable: counted,
//! not reported. With `recorded`, the capture's own responses are the first
//! "server" (named `capture`), compared with the live servers' answers to
//! the same queries.
//!
//! Its statistics hold each server's answer latencies as a histogram
//! (`latency_us SERVER`, from a query's first write to that server's
//! answer; the first asks only, not `reask`'s), which the metrics endpoint
//! serves as `dnsluice_diff_latency_seconds{server}`.

pub mod compare;
mod report;
mod waiting;

use crate::clients::query_bytes;
use crate::output::dnscli::outcome::Outcome;
use crate::output::dnscli::{DnsCli, DnsCliOptions};
use compare::{Answer, Mismatch};
use dnsluice_core::dns::{mnemonic, questions};
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use dnsluice_net::protocol::query::{build, QueryOptions};
use dnsluice_net::{ClientOptions, Latency};
use dnsluice_options::Options;
use report::Report;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

const MODULE: &str = "output.diff";

/// The histogram of a server's answer latencies (microseconds) is named
/// this and the server (`latency_us 127.0.0.1:53`), as a lookup's per
/// nameserver.
pub const LATENCY_PREFIX: &str = "latency_us ";

/// The name the capture's recorded answers go by.
pub const CAPTURE: &str = "capture";

/// Options of `output.diff`.
#[derive(Debug, Clone, Options)]
pub struct DiffOptions {
    /// The servers to compare (at least two, or one with `recorded`):
    /// `IP:PORT`, or for https a URL.
    #[option(flag_alias = "server")]
    pub servers: Vec<String>,
    /// Transport, timeout, TCP fallback, DoH method and certificates.
    #[option(flatten)]
    pub client: ClientOptions,
    /// Queries outstanding at most, per server.
    #[option(default = 100, range = 1..=10_000)]
    pub inflight: u32,
    /// Ask each differing query again this many times at the end; one whose
    /// answer from a server changes between asks is unstable and dropped.
    #[option(default = 0, range = 0..=10)]
    pub reask: u32,
    /// Compare the capture's recorded responses with the servers' answers.
    #[option(default = false)]
    pub recorded: bool,
    /// The EDNS UDP size of queries made from names (0: no EDNS).
    #[option(default = 1232, range = 0..=65535)]
    pub edns_udp_size: u32,
    /// Set RD in queries made from names.
    #[option(default = true)]
    pub recursion_desired: bool,
    /// Write each differing query as a JSON line here (`-`: standard output).
    #[option(flag_alias = "output")]
    pub path: Option<PathBuf>,
    /// Write the summary (queries, differing, by field) as JSON here.
    pub summary: Option<PathBuf>,
}

/// A query asked of every server, waiting for their answers.
struct Pending {
    query: Vec<u8>,
    answers: Vec<Option<Result<Vec<u8>, String>>>,
    left: usize,
}

/// A query whose answers are all in.
pub(crate) struct Done {
    pub(crate) query: Vec<u8>,
    pub(crate) answers: Vec<Result<Vec<u8>, String>>,
    pub(crate) fields: Vec<&'static str>,
    /// How the answers differ (for the summary's most common differences).
    pub(crate) mismatches: Vec<Mismatch>,
}

/// Compares servers' answers; see the module docs.
pub struct Diff {
    options: DiffOptions,
    clients: Vec<DnsCli>,
    /// The answers' names: the servers, after `capture` when recorded.
    names: Vec<String>,
    /// Answers before the clients' (the recorded one): 0 or 1.
    preset: usize,
    pending: HashMap<u16, Pending>,
    free: Vec<u16>,
    ready: VecDeque<Outcome>,
    recorded: waiting::WaitingQueries,
    held: Vec<Done>,
    report: Report,
    query_options: QueryOptions,
    scratch: Vec<u8>,
    /// Each server's answer latencies (one per client, as `names` after
    /// the preset): from the query's first write to its answer.
    latency: Vec<Latency>,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        MODULE,
        "send every query to two or more servers and report the answers that differ, field by field (respdiff)",
        |o: DiffOptions| Ok(Box::new(Diff::new(o)?)),
    )
}

/// The replay client's options for one server.
fn client_options(o: &DiffOptions, server: &str) -> DnsCliOptions {
    DnsCliOptions {
        server: server.to_string(),
        client: o.client.clone(),
        clients: 1,
        inflight: o.inflight,
        grow_inflight: false,
        connect_timeout: Duration::from_secs(5),
        https_threads: 1,
        send_batch: 1,
    }
}

fn clients_for(o: &DiffOptions) -> Result<Vec<DnsCli>, StageError> {
    o.servers
        .iter()
        .map(|s| Ok(DnsCli::new(&client_options(o, s), None)?.keep_outcomes()))
        .collect()
}

impl Diff {
    /// Starts a client per server.
    pub fn new(options: DiffOptions) -> Result<Self, StageError> {
        let wanted = if options.recorded { 1 } else { 2 };
        if options.servers.len() < wanted {
            return Err(StageError::option(
                MODULE,
                Some("servers"),
                format!(
                    "needs at least {wanted} servers to compare (got {})",
                    options.servers.len()
                ),
            ));
        }
        let preset = usize::from(options.recorded);
        let mut names: Vec<String> = options.servers.clone();
        if options.recorded {
            names.insert(0, CAPTURE.to_string());
        }
        let report = Report::create(&options, names.clone())?;
        let edns = u16::try_from(options.edns_udp_size).ok().filter(|s| *s > 0);
        Ok(Diff {
            latency: vec![Latency::default(); options.servers.len()],
            clients: clients_for(&options)?,
            names,
            preset,
            pending: HashMap::new(),
            free: (0..=u16::MAX).rev().collect(),
            ready: VecDeque::new(),
            recorded: waiting::WaitingQueries::default(),
            held: Vec::new(),
            report,
            query_options: QueryOptions {
                recursion_desired: options.recursion_desired,
                edns_udp_size: edns,
                dnssec_ok: false,
            },
            scratch: Vec::new(),
            options,
        })
    }

    /// Sends `query` to every server, with `recorded` as the first answer.
    fn ask(&mut self, query: &[u8], recorded: Option<Vec<u8>>) -> Result<(), StageError> {
        let slot = loop {
            if let Some(slot) = self.free.pop() {
                break slot;
            }
            // Every id is waiting for an answer: collect some first.
            self.collect();
            std::thread::sleep(Duration::from_micros(200));
        };
        let mut sent = query.to_vec();
        sent[..2].copy_from_slice(&slot.to_be_bytes());
        let mut answers = vec![None; self.names.len()];
        if let Some(r) = recorded {
            answers[0] = Some(Ok(r));
        }
        self.pending.insert(
            slot,
            Pending {
                query: query.to_vec(),
                answers,
                left: self.clients.len(),
            },
        );
        for cli in &mut self.clients {
            cli.submit(0, &sent)?;
        }
        self.collect();
        Ok(())
    }

    /// Takes the answers that are in; a query with all its answers is compared.
    fn collect(&mut self) {
        for i in 0..self.clients.len() {
            self.clients[i].take_ready(&mut self.ready);
            while let Some(outcome) = self.ready.pop_front() {
                let slot = u16::from_be_bytes([outcome.query[0], outcome.query[1]]);
                let Some(p) = self.pending.get_mut(&slot) else {
                    continue;
                };
                let mut answer = outcome.result.map_err(|(kind, _)| kind.to_string());
                if let Ok(a) = &mut answer {
                    // The answer carries our id: give it the query's back.
                    a[..2].copy_from_slice(&p.query[..2]);
                    self.latency[i].record(outcome.latency);
                }
                p.answers[self.preset + i] = Some(answer);
                p.left -= 1;
                if p.left == 0 {
                    let p = self.pending.remove(&slot).expect("present");
                    self.free.push(slot);
                    self.compared(p);
                }
            }
        }
    }

    fn compared(&mut self, p: Pending) {
        let answers: Vec<Result<Vec<u8>, String>> = p
            .answers
            .into_iter()
            .map(|a| a.unwrap_or(Err("none".into())))
            .collect();
        let (fields, mismatches) = differing_fields(&answers);
        let done = Done {
            query: p.query,
            answers,
            fields,
            mismatches,
        };
        self.report.count(&done);
        if done.fields.is_empty() {
            return;
        }
        if self.options.reask > 0 {
            self.held.push(done);
        } else {
            self.report.write(&done, &mut self.scratch);
        }
    }

    /// The capture's query or recorded response in `obj`.
    fn take_recorded(&mut self, obj: &Object<'_>) -> Result<(), StageError> {
        let Object::Dns(m) = obj else {
            self.report.skipped += 1;
            return Ok(());
        };
        let p = m.packet.get();
        let (Some(id), Some(q)) = (m.bytes.get(..2), questions(m.bytes).next()) else {
            self.report.skipped += 1;
            return Ok(());
        };
        let id = u16::from_be_bytes([id[0], id[1]]);
        let question = m.bytes[q.name as usize..q.qtype_at as usize + 4].to_ascii_lowercase();
        let (from, to) = ((p.src(), m.flow.sport), (p.dst(), m.flow.dport));
        let ts_ns = p.meta.ts_ns;
        if m.bytes[2] & 0x80 == 0 {
            let key = (from, to, id, question);
            self.recorded.query(key, m.bytes.to_vec(), ts_ns);
            return Ok(());
        }
        let key = (to, from, id, question);
        match self.recorded.response(&key, ts_ns) {
            Some(query) => self.ask(&query, Some(m.bytes.to_vec())),
            None => {
                self.report.unmatched_responses += 1;
                Ok(())
            }
        }
    }

    /// The query for a line `name` or `name TYPE`.
    fn line_query(&mut self, line: &str) -> Option<Vec<u8>> {
        let mut words = line.split_whitespace();
        let name = words.next()?;
        let qtype = match words.next() {
            Some(t) => mnemonic::rtype_from_str(&t.to_ascii_uppercase())?,
            None => 1,
        };
        if words.next().is_some() {
            return None;
        }
        let mut out = Vec::new();
        build(0, name, qtype, &self.query_options, &mut out).ok()?;
        Some(out)
    }

    /// Asks the differing queries again; drops those whose answers moved.
    fn reask(&mut self) -> Result<(), StageError> {
        let mut held = std::mem::take(&mut self.held);
        for _ in 0..self.options.reask {
            for chunk in held.chunks_mut(u16::MAX as usize) {
                // A fresh client per server (the first ones have finished).
                let mut clients = clients_for(&self.options)?;
                for (i, done) in chunk.iter().enumerate() {
                    let mut sent = done.query.clone();
                    sent[..2].copy_from_slice(&(i as u16).to_be_bytes());
                    for cli in &mut clients {
                        cli.submit(0, &sent)?;
                    }
                }
                for (c, cli) in clients.iter_mut().enumerate() {
                    cli.finish_client()?;
                    cli.take_ready(&mut self.ready);
                    for outcome in self.ready.drain(..) {
                        let i =
                            usize::from(u16::from_be_bytes([outcome.query[0], outcome.query[1]]));
                        let Some(done) = chunk.get_mut(i) else {
                            continue;
                        };
                        let again = outcome.result.map_err(|(kind, _)| kind.to_string());
                        let before = as_answer(&done.answers[self.preset + c]);
                        if !compare::differences(before, as_answer(&again)).is_empty() {
                            done.fields.clear(); // unstable
                        }
                    }
                }
            }
        }
        for done in held {
            if done.fields.is_empty() {
                self.report.unstable += 1;
                continue;
            }
            self.report.write(&done, &mut self.scratch);
        }
        Ok(())
    }
}

fn as_answer(a: &Result<Vec<u8>, String>) -> Answer<'_> {
    match a {
        Ok(bytes) => Ok(bytes),
        Err(kind) => Err(kind),
    }
}

/// The fields in which any answer differs from the first, and how (the
/// first answer against each other one, each mismatch once).
fn differing_fields(answers: &[Result<Vec<u8>, String>]) -> (Vec<&'static str>, Vec<Mismatch>) {
    let mut fields: Vec<&'static str> = Vec::new();
    let mut how: Vec<Mismatch> = Vec::new();
    for other in &answers[1..] {
        for m in compare::mismatches(as_answer(&answers[0]), as_answer(other)) {
            if !fields.contains(&m.field) {
                fields.push(m.field);
            }
            if !how.contains(&m) {
                how.push(m);
            }
        }
    }
    fields.sort_by_key(|f| compare::FIELDS.iter().position(|x| x == f));
    (fields, how)
}

impl Receiver for Diff {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.report.received += 1;
        if self.options.recorded {
            return self.take_recorded(obj);
        }
        if let Object::Text(t) = obj {
            return match self.line_query(t.text) {
                Some(query) => self.ask(&query, None),
                None => {
                    self.report.bad_lines += 1;
                    Ok(())
                }
            };
        }
        match query_bytes(obj) {
            Some(query) => {
                let query = query.to_vec();
                self.ask(&query, None)
            }
            None => {
                self.report.skipped += 1;
                Ok(())
            }
        }
    }

    fn finish(&mut self) -> Result<(), StageError> {
        for i in 0..self.clients.len() {
            self.clients[i].finish_client()?;
            self.collect();
        }
        self.recorded.finish();
        self.report.unanswered_in_capture = self.recorded.unanswered;
        self.report.repeated_queries = self.recorded.repeated;
        if !self.held.is_empty() {
            self.reask()?;
        }
        self.report.finish()
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = self.report.stats(MODULE);
        for (server, latency) in self.options.servers.iter().zip(&self.latency) {
            stats.histograms.insert(
                format!("{LATENCY_PREFIX}{server}"),
                latency.buckets().collect(),
            );
        }
        out.push(stats);
    }
}
