//! `output.nats`: publishes every record to a JetStream results stream,
//! waiting for the server's publish acks in a window (async publish). The
//! records made of a work item from `input.nats` (their numbers are
//! tickets, [`crate::nats::tickets`]) are gathered until every line of the
//! item has its record, then published as one message (the records one per
//! line) with the item's result id as its `Nats-Msg-Id`; the item is
//! acknowledged once the server has stored it: a redelivered item's second
//! result is dropped by the server's de-duplication. Other records get an
//! id only when `id_prefix` is set (`{id_prefix}{number}`). A publish whose ack does not come (the
//! broker restarting) is sent again with the same id until the connection
//! has been lost for `reconnect_for`, or the server has refused it for
//! that long (the stream deleted).
//!
//! Lines and records are published as their text, other objects as
//! `output.json` writes them. Empty lines (`input.nats`'s turns) are not
//! published. The stream is made when missing (limits retention, file
//! storage, `dedup_window`).

use crate::json::{write_object, write_response};
use crate::nats::connect::Link;
use crate::nats::encoding::{Compression, Encoder, CONTENT_ENCODING, ZSTD};
use crate::nats::streams::{self, MSG_ID};
use crate::nats::{runtime, tickets, NatsAddress, NatsAuthOptions};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::Context;
use bytes::Bytes;
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::sync;
use dnsluice_core::{Object, Receiver, StageError, StageStats};
use dnsluice_options::Options;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const MODULE: &str = "output.nats";

/// Options of `output.nats`.
#[derive(Debug, Clone, Options)]
pub struct NatsOutputOptions {
    /// The results stream: nats://HOST:PORT/STREAM (tls://... for TLS).
    pub url: String,
    /// Publishes awaiting the server's ack at most.
    #[option(default = 1024, range = 1..=100_000)]
    pub window: usize,
    /// For records that are not made of a work item: publish each with the
    /// message id `{id_prefix}{number}` (de-duplicated by the server);
    /// without it they carry no id.
    pub id_prefix: Option<String>,
    /// How long the server remembers message ids, when this stage makes
    /// the stream: longer than ack_wait × max_deliver of the work.
    #[option(default = streams::DEFAULT_DEDUP_WINDOW, range = Duration::from_secs(1)..=Duration::from_secs(30 * 86_400))]
    pub dedup_window: Duration,
    /// On how many servers of a JetStream cluster the stream is stored,
    /// when this stage makes it (3 for a 3-node cluster; 1 on a lone server).
    #[option(default = 1, range = 1..=5)]
    pub replicas: usize,
    /// How messages of 1 KiB and more are compressed (`zstd`: with a
    /// `Content-Encoding: zstd` header, which `queue get` reads; `none`).
    #[option(default)]
    pub compression: Compression,
    /// Credentials and certificates.
    #[option(flatten)]
    pub auth: NatsAuthOptions,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        MODULE,
        "publish records to a NATS JetStream stream (de-duplicated by work item), acking the work items",
        |o: NatsOutputOptions| Ok(Box::new(NatsOutput::open(&o)?)),
    )
}

/// One message on its way: a record, or the records of a work item's lines.
struct Outgoing {
    payload: Bytes,
    /// The payload's `Content-Encoding` (`None`: plain).
    encoding: Option<&'static str>,
    /// For the records of a work item: the line (from 0) of each record of
    /// `payload`, in order (for splitting it, see [`Publisher::split`]);
    /// empty for a single record.
    lines: Vec<u32>,
    id: Option<String>,
    ticket: Option<u64>,
    /// For one of the messages a too large item was split into: the item,
    /// settled when the last of them is stored.
    part_of: Option<Arc<SplitItem>>,
}

/// A work item whose results went out as several messages.
struct SplitItem {
    ticket: u64,
    left: AtomicU64,
}

impl Outgoing {
    /// How many records the payload holds.
    fn records(&self) -> u64 {
        self.lines.len().max(1) as u64
    }
}

/// The records of a work item of several lines, gathered until all are in.
#[derive(Default)]
struct Gathering {
    payload: Vec<u8>,
    /// The line of each record gathered, in the payload's order.
    lines: Vec<u32>,
}

/// What the publishing task counts.
#[derive(Default)]
struct Counts {
    stored: AtomicU64,
    duplicates: AtomicU64,
    republished: AtomicU64,
}

/// The output stage; see the module docs.
pub struct NatsOutput {
    options: NatsOutputOptions,
    link: Link,
    queue: Option<mpsc::Sender<Outgoing>>,
    task: Option<JoinHandle<()>>,
    failed: Arc<Mutex<Option<String>>>,
    counts: Arc<Counts>,
    received: u64,
    objects: u64,
    gathering: HashMap<u64, Gathering>,
    line: Vec<u8>,
    scratch: Vec<u8>,
}

impl NatsOutput {
    /// Connects and makes the stream if it is missing.
    pub fn open(options: &NatsOutputOptions) -> Result<NatsOutput, StageError> {
        let fail = |e: String| StageError::config(MODULE, e);
        let address = NatsAddress::parse_stream(&options.url).map_err(fail)?;
        let link = runtime::block_on(async {
            let link = crate::nats::connect(&address, &options.auth).await?;
            let config =
                streams::results_stream(address.stream(), options.dedup_window, options.replicas);
            link.jetstream()
                .get_or_create_stream(config)
                .await
                .map_err(|e| format!("{address}: cannot make the stream: {e}"))?;
            Ok::<_, String>(link)
        })
        .map_err(fail)?;
        let (queue, incoming) = mpsc::channel(options.window);
        let failed = Arc::new(Mutex::new(None));
        let counts = Arc::new(Counts::default());
        let encoder = Encoder::new(options.compression).map_err(fail)?;
        let publisher = Publisher {
            js: link.jetstream(),
            link: link.clone(),
            subject: address.stream().to_string(),
            window: options.window,
            failed: failed.clone(),
            counts: counts.clone(),
        };
        let task = runtime::get().spawn(publisher.run(incoming, encoder));
        Ok(NatsOutput {
            options: options.clone(),
            link,
            queue: Some(queue),
            task: Some(task),
            failed,
            counts,
            received: 0,
            objects: 0,
            gathering: HashMap::new(),
            line: Vec::new(),
            scratch: Vec::new(),
        })
    }

    fn failure(&self) -> Option<StageError> {
        let failed = sync::lock(&self.failed);
        failed
            .as_ref()
            .map(|why| StageError::other(MODULE, why.clone()))
    }

    /// The message to publish for a record numbered `number`, or `None`
    /// while the records of its work item are still being gathered.
    fn outgoing(&mut self, payload: &[u8], number: u64) -> Option<Outgoing> {
        let one = |id| Outgoing {
            payload: Bytes::copy_from_slice(payload),
            encoding: None,
            lines: Vec::new(),
            id,
            ticket: tickets::is_ticket(number).then_some(number),
            part_of: None,
        };
        if !tickets::is_ticket(number) {
            let id = self
                .options
                .id_prefix
                .as_ref()
                .map(|prefix| format!("{prefix}{number}"));
            return Some(one(id));
        }
        let Some(item) = tickets::item_of(number) else {
            // Its item was given up (the input went): published without an id.
            return Some(one(None));
        };
        if item.lines == 1 {
            return Some(one(Some(item.result_id)));
        }
        let gathering = self.gathering.entry(item.first).or_default();
        if !gathering.lines.is_empty() {
            gathering.payload.push(b'\n');
        }
        gathering.payload.extend_from_slice(payload);
        gathering.lines.push((number - item.first) as u32);
        if (gathering.lines.len() as u64) < item.lines {
            return None;
        }
        let done = self.gathering.remove(&item.first)?;
        Some(Outgoing {
            payload: Bytes::from(done.payload),
            encoding: None,
            lines: done.lines,
            id: Some(item.result_id),
            ticket: Some(item.first),
            part_of: None,
        })
    }
}

impl Receiver for NatsOutput {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        self.received += 1;
        let outgoing = match obj {
            Object::Text(t) if t.text.is_empty() => return Ok(()),
            Object::Text(t) => self.outgoing(t.text.as_bytes(), t.number),
            other => {
                self.objects += 1;
                let mut line = std::mem::take(&mut self.line);
                line.clear();
                match other {
                    Object::Response(r) => write_response(r, &mut line, &mut self.scratch),
                    _ => write_object(other, &mut line, &mut self.scratch),
                }
                let outgoing = self.outgoing(&line, self.objects);
                self.line = line;
                outgoing
            }
        };
        let Some(outgoing) = outgoing else {
            return Ok(());
        };
        let queue = self.queue.as_ref().expect("the queue lives until finish");
        if queue.blocking_send(outgoing).is_err() {
            return Err(self
                .failure()
                .unwrap_or_else(|| StageError::other(MODULE, "the publisher stopped")));
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.queue = None;
        if let Some(task) = self.task.take() {
            let _ = runtime::block_on(task);
        }
        if let Some(e) = self.failure() {
            return Err(e);
        }
        // Bounded: with the broker gone a flush would wait for it forever.
        let client = self.link.client.clone();
        let limit = self.link.reconnect_for();
        match runtime::block_on(async move { tokio::time::timeout(limit, client.flush()).await }) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StageError::other(
                MODULE,
                format!("{}: {e}", self.link.address),
            )),
            Err(_) => Err(StageError::other(
                MODULE,
                format!(
                    "{}: could not flush to the broker for {limit:.0?}",
                    self.link.address
                ),
            )),
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut s = StageStats::new(MODULE);
        s.input = self.received;
        s.output = self.counts.stored.load(Ordering::Relaxed);
        s.add_counter(
            "duplicates_dropped",
            self.counts.duplicates.load(Ordering::Relaxed),
        );
        // A gauge: there at 0 too.
        s.counters
            .insert("unfinished_items".into(), self.gathering.len() as u64);
        s.add_counter(
            "republished",
            self.counts.republished.load(Ordering::Relaxed),
        );
        out.push(s);
    }
}

impl Drop for NatsOutput {
    fn drop(&mut self) {
        // Unfinished (an error upstream): what is queued is still published
        // and acknowledged, then the stage goes.
        self.queue = None;
        if let Some(task) = self.task.take() {
            let _ = runtime::block_on(task);
        }
    }
}

/// The task that publishes, waits for acks and settles tickets.
struct Publisher {
    js: Context,
    link: Link,
    subject: String,
    window: usize,
    failed: Arc<Mutex<Option<String>>>,
    counts: Arc<Counts>,
}

impl Publisher {
    async fn run(self, mut incoming: mpsc::Receiver<Outgoing>, mut encoder: Encoder) {
        let this = Arc::new(self);
        let mut pending = FuturesUnordered::new();
        let mut open = true;
        while open || !pending.is_empty() {
            tokio::select! {
                Some(()) = pending.next(), if !pending.is_empty() => {}
                next = incoming.recv(), if open && pending.len() < this.window => match next {
                    Some(outgoing) => {
                        // Compressed here, on the runtime's thread, beside the chain's.
                        for outgoing in this.split(outgoing, &mut encoder) {
                            pending.push(this.clone().store(outgoing));
                        }
                    }
                    None => open = false,
                },
            }
        }
    }

    /// `outgoing` compressed when that pays, as one message; or, when it
    /// is the records of an item and still more than half the largest
    /// message the broker takes, as one message per record, each with the
    /// item's result id and its line (`…/7`: the same in every delivery of
    /// the item, so the broker's de-duplication still holds).
    fn split(&self, mut outgoing: Outgoing, encoder: &mut Encoder) -> Vec<Outgoing> {
        let packed = encoder.compress(&outgoing.payload);
        let size = packed.as_ref().map_or(outgoing.payload.len(), Vec::len);
        let too_large = size > self.link.client.server_info().max_payload / 2;
        if !too_large || outgoing.lines.len() < 2 {
            if let Some(packed) = packed {
                outgoing.payload = Bytes::from(packed);
                outgoing.encoding = Some(ZSTD);
            }
            return vec![outgoing];
        }
        let records: Vec<&[u8]> = outgoing.payload.split(|&b| b == b'\n').collect();
        let item = outgoing.ticket.map(|ticket| {
            Arc::new(SplitItem {
                ticket,
                left: AtomicU64::new(records.len() as u64),
            })
        });
        records
            .iter()
            .zip(&outgoing.lines)
            .map(|(record, line)| {
                let (payload, encoding) = match encoder.compress(record) {
                    Some(packed) => (Bytes::from(packed), Some(ZSTD)),
                    None => (Bytes::copy_from_slice(record), None),
                };
                Outgoing {
                    payload,
                    encoding,
                    lines: Vec::new(),
                    id: outgoing.id.as_ref().map(|id| format!("{id}/{line}")),
                    ticket: None,
                    part_of: item.clone(),
                }
            })
            .collect()
    }

    /// Publishes `outgoing` until the server confirms it (or the connection
    /// is given up), then settles its ticket (for a part of a split item:
    /// the item's, once its last part is stored).
    async fn store(self: Arc<Self>, outgoing: Outgoing) {
        let mut tries = 0u32;
        let mut failing_since = None;
        loop {
            match self.publish_once(&outgoing).await {
                Ok(duplicate) => {
                    let counter = if duplicate {
                        &self.counts.duplicates
                    } else {
                        &self.counts.stored
                    };
                    counter.fetch_add(outgoing.records(), Ordering::Relaxed);
                    let ticket = match &outgoing.part_of {
                        Some(item) if item.left.fetch_sub(1, Ordering::AcqRel) == 1 => {
                            Some(item.ticket)
                        }
                        Some(_) => None,
                        None => outgoing.ticket,
                    };
                    if let Some(ticket) = ticket.and_then(tickets::settle) {
                        if let Err(e) = ticket.ack().await {
                            // Unacknowledged: redelivered, and its result dropped as a duplicate.
                            let _ = e;
                        }
                    }
                    return;
                }
                Err(why) => {
                    let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                    let given_up = match self.link.check_alive() {
                        Err(lost) => Some(format!("{lost} (a record was not stored: {why})")),
                        // Connected, yet refused all along: the stream is gone
                        // or full, or the cluster lost its quorum.
                        Ok(()) if since.elapsed() >= self.link.reconnect_for() => Some(format!(
                            "{}: the results stream did not store a record for {:.0?} \
                             (deleted, full, or without a leader?): {why}; the work items \
                             without a stored result were not acknowledged: the broker hands \
                             them to other workers after their ack_wait",
                            self.link.address,
                            self.link.reconnect_for()
                        )),
                        Ok(()) => None,
                    };
                    if let Some(why) = given_up {
                        let item = outgoing.part_of.as_ref().map(|item| item.ticket);
                        if let Some(ticket) = outgoing.ticket.or(item) {
                            tickets::fail(ticket, why.clone());
                        }
                        sync::lock(&self.failed).get_or_insert(why);
                        return;
                    }
                    tries += 1;
                    self.counts.republished.fetch_add(1, Ordering::Relaxed);
                    let backoff = Duration::from_millis(100u64 << tries.min(4));
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }

    /// One publish and its ack: whether the server found it a duplicate.
    async fn publish_once(&self, outgoing: &Outgoing) -> Result<bool, String> {
        let mut publish = PublishMessage::build().payload(outgoing.payload.clone());
        if let Some(id) = &outgoing.id {
            publish = publish.header(MSG_ID, id.as_str());
        }
        if let Some(encoding) = outgoing.encoding {
            publish = publish.header(CONTENT_ENCODING, encoding);
        }
        let ack = self
            .js
            .send_publish(self.subject.clone(), publish)
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())?;
        Ok(ack.duplicate)
    }
}
