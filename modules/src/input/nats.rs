//! `input.nats`: work items from a JetStream work-queue stream, through a
//! durable pull consumer that every worker naming the same consumer
//! shares. Each item holds a line (`name` or `name,nameserver`, or a file
//! path) or a batch of lines (`queue put --batch`); each line is handed on
//! with a ticket as its `number` ([`crate::nats::tickets`]), and the item is
//! acknowledged only when `output.nats` has stored the results made of all
//! its lines. Meanwhile a task of the input keeps it alive with
//! in-progress acks, however long the chain is busy, so only a dead
//! worker's items are redelivered (after `ack_wait`).
//!
//! While it waits for items and still holds some, the input hands on an
//! empty line now and then: no work, but a turn for the stages after it to
//! pass on what they finished (`lookup.dns` forwards finished records on
//! every line it is given). It ends when no item came for `idle_exit`, it
//! holds none, and the consumer has nothing pending or unacknowledged (so
//! the last worker waits for a dead worker's items to come back after
//! `ack_wait`), unless `follow` is set. An item delivered `max_deliver`
//! times is not tried again: each of its lines becomes an `ERROR` record.
//!
//! Besides its counters, its statistics hold two gauges: `held_items`, the
//! items taken and not yet acknowledged, and `held_lines`, their lines not
//! yet stored (at most `max_held`); the metrics endpoint serves them as
//! `dnsluice_nats_held_items` and `dnsluice_nats_held_lines`.

use crate::nats::connect::Link;
use crate::nats::streams::{self, WorkConsumer};
use crate::nats::{runtime, tickets, NatsAddress, NatsAuthOptions};
use async_nats::jetstream::consumer::pull;
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Producer, StageError, StageStats, Text, TextKind};
use dnsluice_options::Options;
use futures_util::StreamExt;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODULE: &str = "input.nats";

/// How long the input waits for an item before handing on an empty line
/// (when it holds items).
const TURN_EVERY: Duration = Duration::from_millis(20);

/// How long the input waits for an item, or for room, while the stages
/// after it have records to pass on (it holds items): short, so that
/// finished records reach the output, and their items are acknowledged,
/// without delay.
const BUSY_TURN_EVERY: Duration = Duration::from_millis(1);

/// Items asked for in one pull request at most.
const MAX_ITEMS_PER_PULL: usize = 256;

/// Options of `input.nats`.
#[derive(Debug, Clone, Options)]
pub struct NatsInputOptions {
    /// The work stream: nats://HOST:PORT/STREAM (tls://... for TLS; several
    /// servers separated by commas).
    pub url: String,
    /// The durable consumer; every worker naming it shares the work.
    #[option(default = "workers".to_string())]
    pub consumer: String,
    /// Lines asked for in one pull request: that many items of one line,
    /// or fewer items of several (`queue put --batch`; the lines per item
    /// are read from the stream's first item when the input starts).
    #[option(default = 4096, range = 1..=100_000)]
    pub batch: usize,
    /// How long an item may go unacknowledged (the worker dead) before the
    /// broker hands it to another worker. Set when the consumer is made.
    #[option(default = Duration::from_secs(30), range = Duration::from_secs(1)..=Duration::from_secs(86_400))]
    pub ack_wait: Duration,
    /// Deliveries of one item at most; the last one is answered with an
    /// ERROR record instead of being tried again. Counted by this worker
    /// (the broker's consumer has no limit, so a last delivery lost with
    /// its worker comes again).
    #[option(default = 5, range = 2..=1000)]
    pub max_deliver: i64,
    /// Unacknowledged items across all workers of the consumer at most.
    /// Set when the consumer is made.
    #[option(default = 20_000, range = 1..=1_000_000)]
    pub max_ack_pending: i64,
    /// Lines this worker holds at most, in the items it took (it pulls no
    /// more until some are stored).
    #[option(default = 16_384, range = 1..=1_000_000)]
    pub max_held: usize,
    /// End when no item came for this long, none is held, and the
    /// consumer has nothing pending or unacknowledged (by any worker).
    #[option(default = Duration::from_secs(5), range = Duration::from_millis(10)..=Duration::from_secs(86_400))]
    pub idle_exit: Duration,
    /// Never end: wait for more work (creates the stream if it is missing).
    #[option(default)]
    pub follow: bool,
    /// On how many servers of a JetStream cluster the stream is stored,
    /// when `follow` makes it (3 for a 3-node cluster).
    #[option(default = 1, range = 1..=5)]
    pub replicas: usize,
    /// Credentials and certificates.
    #[option(flatten)]
    pub auth: NatsAuthOptions,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::input(
        MODULE,
        "work items (lines) from a NATS JetStream work queue, acknowledged once their result is stored",
        |o: NatsInputOptions| Ok(Box::new(NatsInput::open(&o)?)),
    )
}

/// An item taken, waiting to be handed on.
struct Taken {
    ticket: u64,
    text: String,
    record: bool,
}

/// The input stage; see the module docs.
pub struct NatsInput {
    options: NatsInputOptions,
    link: Link,
    consumer: async_nats::jetstream::consumer::PullConsumer,
    /// Items asked for in one pull request (`batch` lines' worth).
    items_per_pull: usize,
    messages: Option<pull::Stream>,
    owner: u64,
    /// The task sending in-progress acks for this input's items.
    keeper: tokio::task::JoinHandle<()>,
    /// In-progress acks sent.
    keep_alives: Arc<AtomicU64>,
    ready: VecDeque<Taken>,
    current: String,
    last_item: Instant,
    last_idle_check: Option<Instant>,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    items: u64,
    lines: u64,
    produced: u64,
    redelivered: u64,
    given_up: u64,
    blank: u64,
    pull_errors: u64,
}

impl NatsInput {
    /// Connects, finds the stream and joins (or makes) the consumer.
    pub fn open(options: &NatsInputOptions) -> Result<NatsInput, StageError> {
        let fail = |e: String| StageError::config(MODULE, e);
        let address = NatsAddress::parse_stream(&options.url).map_err(fail)?;
        let (link, consumer, lines_per_item) = runtime::block_on(async {
            let link = crate::nats::connect(&address, &options.auth).await?;
            let js = link.jetstream();
            let stream = if options.follow {
                let config = streams::work_stream(
                    address.stream(),
                    streams::DEFAULT_DEDUP_WINDOW,
                    options.replicas,
                );
                js.get_or_create_stream(config)
                    .await
                    .map_err(|e| format!("{address}: cannot make the stream: {e}"))?
            } else {
                streams::existing_stream(&js, address.stream())
                    .await
                    .map_err(|e| format!("{address}: {e}"))?
            };
            let consumer = WorkConsumer {
                name: options.consumer.clone(),
                ack_wait: options.ack_wait,
                max_deliver: options.max_deliver,
                max_ack_pending: options.max_ack_pending,
            };
            let consumer = stream
                .get_or_create_consumer(&options.consumer, consumer.config())
                .await
                .map_err(|e| {
                    format!(
                        "{address}: cannot join consumer `{}`: {e}",
                        options.consumer
                    )
                })?;
            let lines_per_item = streams::lines_per_item(&stream).await;
            Ok::<_, String>((link, consumer, lines_per_item))
        })
        .map_err(fail)?;
        let now = Instant::now();
        let owner = tickets::new_owner();
        let keep_alives = Arc::new(AtomicU64::new(0));
        let keeper = runtime::get().spawn(keep_alive(owner, options.ack_wait, keep_alives.clone()));
        Ok(NatsInput {
            options: options.clone(),
            link,
            consumer,
            items_per_pull: (options.batch / lines_per_item).clamp(1, MAX_ITEMS_PER_PULL),
            messages: None,
            owner,
            keeper,
            keep_alives,
            ready: VecDeque::new(),
            current: String::new(),
            last_item: now,
            last_idle_check: None,
            counts: Counts::default(),
        })
    }

    /// Waits a while for items (up to [`TURN_EVERY`], or
    /// [`BUSY_TURN_EVERY`] while it holds some) and files what came under
    /// tickets.
    fn take_some(&mut self) -> Result<(), StageError> {
        let held = tickets::held_by(self.owner);
        let room = self.options.max_held.saturating_sub(held);
        if room == 0 {
            std::thread::sleep(BUSY_TURN_EVERY);
            return Ok(());
        }
        let turn = if held > 0 {
            BUSY_TURN_EVERY
        } else {
            TURN_EVERY
        };
        let batch = self.items_per_pull;
        let consumer = &self.consumer;
        let messages = &mut self.messages;
        let mut got = Vec::new();
        let mut lines = 0;
        let mut errors = 0;
        runtime::block_on(async {
            if messages.is_none() {
                match consumer
                    .stream()
                    .max_messages_per_batch(batch)
                    .heartbeat(Duration::from_secs(5))
                    .expires(Duration::from_secs(30))
                    .messages()
                    .await
                {
                    Ok(stream) => *messages = Some(stream),
                    Err(_) => {
                        errors += 1;
                        tokio::time::sleep(TURN_EVERY).await;
                        return;
                    }
                }
            }
            let Some(stream) = messages.as_mut() else {
                return;
            };
            let mut wait = true;
            while lines < room {
                let next = if wait {
                    match tokio::time::timeout(turn, stream.next()).await {
                        Ok(next) => next,
                        Err(_) => break,
                    }
                } else {
                    match futures_util::FutureExt::now_or_never(stream.next()) {
                        Some(next) => next,
                        None => break,
                    }
                };
                wait = false;
                match next {
                    Some(Ok(message)) => {
                        lines += 1 + message.payload.iter().filter(|&&b| b == b'\n').count();
                        got.push(message);
                    }
                    Some(Err(_)) | None => {
                        // A missed heartbeat, a lost connection, a deleted
                        // consumer: start a new pull next time.
                        errors += 1;
                        *messages = None;
                        break;
                    }
                }
            }
        });
        self.counts.pull_errors += errors;
        for message in got {
            self.file(message);
        }
        Ok(())
    }

    /// Files one delivered item under tickets (one per line of it) and
    /// queues its lines to hand on.
    fn file(&mut self, message: async_nats::jetstream::Message) {
        self.counts.items += 1;
        self.last_item = Instant::now();
        let (sequence, delivered) = match message.info() {
            Ok(info) => (info.stream_sequence, info.delivered),
            Err(_) => (0, 1),
        };
        let item_id = message
            .headers
            .as_ref()
            .and_then(|h| h.get(streams::MSG_ID))
            .map(|v| v.as_str().to_string());
        let Some(reply) = message.reply.clone() else {
            return;
        };
        let ticket = tickets::Ticket {
            owner: self.owner,
            client: self.link.client.clone(),
            reply,
            result_id: streams::result_id(self.link.address.stream(), item_id.as_deref(), sequence),
            touched: Instant::now(),
        };
        if delivered > 1 {
            self.counts.redelivered += 1;
        }
        let text = String::from_utf8_lossy(&message.payload);
        let lines: Vec<&str> = streams::item_lines(&text).collect();
        if lines.is_empty() {
            // No work: done at once.
            self.counts.blank += 1;
            runtime::block_on(async {
                let _ = ticket.ack().await;
            });
            return;
        }
        self.counts.lines += lines.len() as u64;
        let first = tickets::issue(ticket, lines.len() as u64);
        let given_up = delivered >= self.options.max_deliver;
        if given_up {
            self.counts.given_up += 1;
        }
        for (k, line) in lines.into_iter().enumerate() {
            let (text, record) = if given_up {
                (given_up_record(line, delivered), true)
            } else {
                (line.to_string(), false)
            };
            self.ready.push_back(Taken {
                ticket: first + k as u64,
                text,
                record,
            });
        }
    }

    /// Whether the consumer has no item pending or unacknowledged (asked at
    /// most once a second).
    fn nothing_left(&mut self) -> bool {
        if self
            .last_idle_check
            .is_some_and(|at| at.elapsed() < Duration::from_secs(1))
        {
            return false;
        }
        self.last_idle_check = Some(Instant::now());
        let consumer = &self.consumer;
        match runtime::block_on(consumer.get_info()) {
            Ok(info) => info.num_pending == 0 && info.num_ack_pending == 0,
            Err(_) => false,
        }
    }

    fn lost_connection(&self, why: String) -> StageError {
        let (items, lines) = (
            tickets::items_held_by(self.owner),
            tickets::held_by(self.owner),
        );
        StageError::other(
            MODULE,
            format!(
                "{why}; {items} work items ({lines} lines) in flight were not acknowledged: the \
                 broker hands them to other workers after ack_wait ({:.0?})",
                self.options.ack_wait
            ),
        )
    }
}

/// Keeps `owner`'s items alive: every third of `ack_wait` (at most a
/// second), an in-progress ack for each item held that long, so the broker
/// redelivers only a dead worker's items, however long the chain is busy.
/// Runs until the input is dropped.
async fn keep_alive(owner: u64, ack_wait: Duration, sent: Arc<AtomicU64>) {
    let every = ack_wait / 3;
    let mut ticks = tokio::time::interval(every.min(Duration::from_secs(1)));
    loop {
        ticks.tick().await;
        let due = tickets::due_for_keep_alive(owner, every);
        sent.fetch_add(due.len() as u64, Ordering::Relaxed);
        for ticket in &due {
            let _ = ticket.keep_alive().await;
        }
    }
}

/// The record of a line of an item that reached `max_deliver` without a stored result.
fn given_up_record(line: &str, delivered: i64) -> String {
    let name = line.split(',').next().unwrap_or(line).trim();
    let mut out = Vec::new();
    let mut f = dnsluice_json::Fields::new();
    out.push(b'{');
    f.string(&mut out, "name", name);
    f.string(&mut out, "status", "ERROR");
    f.string(
        &mut out,
        "error",
        &format!(
            "work item delivered {delivered} times (max_deliver) without a stored result: given up"
        ),
    );
    f.string(&mut out, "item", line);
    out.push(b'}');
    String::from_utf8_lossy(&out).into_owned()
}

impl Producer for NatsInput {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        loop {
            if let Some(taken) = self.ready.pop_front() {
                self.counts.produced += 1;
                self.current = taken.text;
                let kind = if taken.record {
                    TextKind::Record
                } else {
                    TextKind::Line
                };
                return Ok(Some(Object::Text(Text {
                    kind,
                    number: taken.ticket,
                    text: &self.current,
                })));
            }
            if let Some(why) = tickets::failure(self.owner) {
                return Err(self.lost_connection(why));
            }
            // SIGINT/SIGTERM: no more work is taken (the items held are
            // handed back when the input goes), even while none comes.
            if dnsluice_core::stop::requested().is_some() {
                return Ok(None);
            }
            self.link
                .check_alive()
                .map_err(|why| self.lost_connection(why))?;
            self.take_some()?;
            if !self.ready.is_empty() {
                continue;
            }
            if tickets::held_by(self.owner) > 0 {
                // A turn for the stages downstream (see the module docs).
                self.current.clear();
                return Ok(Some(Object::Text(Text {
                    kind: TextKind::Line,
                    number: 0,
                    text: &self.current,
                })));
            }
            if !self.options.follow
                && self.link.is_up()
                && self.last_item.elapsed() >= self.options.idle_exit
                && self.nothing_left()
            {
                return Ok(None);
            }
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut s = StageStats::new(MODULE);
        s.input = self.counts.items;
        s.output = self.counts.produced;
        s.add_counter("lines", self.counts.lines);
        s.add_counter("redelivered", self.counts.redelivered);
        s.add_counter("blank_items", self.counts.blank);
        s.add_counter("keep_alives", self.keep_alives.load(Ordering::Relaxed));
        s.add_error("given_up_max_deliver", self.counts.given_up);
        s.add_error("pull_errors", self.counts.pull_errors);
        // Gauges (what is held now), present even at 0.
        s.counters.insert(
            "held_items".into(),
            tickets::items_held_by(self.owner) as u64,
        );
        s.counters
            .insert("held_lines".into(), tickets::held_by(self.owner) as u64);
        out.push(s);
    }
}

impl Drop for NatsInput {
    fn drop(&mut self) {
        // Items still held were never stored (the run was stopped, or
        // failed): handed back unacknowledged, so the broker redelivers them
        // a second later (tickets::HAND_BACK_DELAY), not after their
        // ack_wait. Acks already sent leave before we go.
        self.keeper.abort();
        let unfinished = tickets::forget(self.owner);
        self.messages = None;
        let client = self.link.client.clone();
        runtime::block_on(async move {
            let handing_back = async {
                for ticket in &unfinished {
                    let _ = ticket.hand_back().await;
                }
                let _ = client.flush().await;
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), handing_back).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_up_record_names_the_item() {
        let r = given_up_record("n5.lookup.test,127.0.0.1", 4);
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        assert_eq!(v["name"], "n5.lookup.test");
        assert_eq!(v["status"], "ERROR");
        assert_eq!(v["item"], "n5.lookup.test,127.0.0.1");
        assert!(v["error"].as_str().unwrap().contains("4 times"));
    }
}
