//! `input.nats`: work items from a JetStream work-queue stream, through a
//! durable pull consumer that every worker naming the same consumer
//! shares. Each item (a line: `name` or `name,nameserver`, or a file path)
//! is handed on as a line whose `number` is a ticket
//! ([`crate::nats::tickets`]); it is acknowledged only when `output.nats`
//! has stored the result made of it. Meanwhile the input keeps it alive
//! with in-progress acks, so only a dead worker's items are redelivered
//! (after `ack_wait`).
//!
//! While it waits for items and still holds some, the input hands on an
//! empty line now and then: no work, but a turn for the stages after it to
//! pass on what they finished (`lookup.dns` forwards finished records on
//! every line it is given). It ends when no item came for `idle_exit`, it
//! holds none, and the consumer has nothing pending or unacknowledged (so
//! the last worker waits for a dead worker's items to come back after
//! `ack_wait`), unless `follow` is set. An item delivered `max_deliver`
//! times is not tried again: it becomes an `ERROR` record.

use crate::nats::connect::Link;
use crate::nats::streams::{self, WorkConsumer};
use crate::nats::{runtime, tickets, NatsAddress, NatsAuthOptions};
use async_nats::jetstream::consumer::pull;
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Producer, StageError, StageStats, Text, TextKind};
use dnsluice_options::Options;
use futures_util::StreamExt;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const MODULE: &str = "input.nats";

/// How long the input waits for an item before handing on an empty line
/// (when it holds items).
const TURN_EVERY: Duration = Duration::from_millis(20);

/// Options of `input.nats`.
#[derive(Debug, Clone, Options)]
pub struct NatsInputOptions {
    /// The work stream: nats://HOST:PORT/STREAM (tls://... for TLS; several
    /// servers separated by commas).
    pub url: String,
    /// The durable consumer; every worker naming it shares the work.
    #[option(default = "workers".to_string())]
    pub consumer: String,
    /// Items asked for in one pull request.
    #[option(default = 256, range = 1..=10_000)]
    pub batch: usize,
    /// How long an item may go unacknowledged (the worker dead) before the
    /// broker hands it to another worker. Set when the consumer is made.
    #[option(default = Duration::from_secs(30), range = Duration::from_secs(1)..=Duration::from_secs(86_400))]
    pub ack_wait: Duration,
    /// Deliveries of one item at most; the last one is answered with an
    /// ERROR record instead of being tried again. Set when the consumer is made.
    #[option(default = 5, range = 2..=1000)]
    pub max_deliver: i64,
    /// Unacknowledged items across all workers of the consumer at most.
    /// Set when the consumer is made.
    #[option(default = 20_000, range = 1..=1_000_000)]
    pub max_ack_pending: i64,
    /// Items this worker holds at most (it pulls no more until some are stored).
    #[option(default = 4096, range = 1..=1_000_000)]
    pub max_held: usize,
    /// End when no item came for this long, none is held, and the
    /// consumer has nothing pending or unacknowledged (by any worker).
    #[option(default = Duration::from_secs(5), range = Duration::from_millis(10)..=Duration::from_secs(86_400))]
    pub idle_exit: Duration,
    /// Never end: wait for more work (creates the stream if it is missing).
    #[option(default)]
    pub follow: bool,
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
    messages: Option<pull::Stream>,
    owner: u64,
    ready: VecDeque<Taken>,
    current: String,
    last_item: Instant,
    last_keep_alive: Instant,
    last_idle_check: Option<Instant>,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    items: u64,
    produced: u64,
    redelivered: u64,
    given_up: u64,
    blank: u64,
    keep_alives: u64,
    pull_errors: u64,
}

impl NatsInput {
    /// Connects, finds the stream and joins (or makes) the consumer.
    pub fn open(options: &NatsInputOptions) -> Result<NatsInput, StageError> {
        let fail = |e: String| StageError::config(MODULE, e);
        let address = NatsAddress::parse_stream(&options.url).map_err(fail)?;
        let (link, consumer) = runtime::block_on(async {
            let link = crate::nats::connect(&address, &options.auth).await?;
            let js = link.jetstream();
            let stream = if options.follow {
                let config =
                    streams::work_stream(address.stream(), streams::DEFAULT_DEDUP_WINDOW, 1);
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
            Ok::<_, String>((link, consumer))
        })
        .map_err(fail)?;
        let now = Instant::now();
        Ok(NatsInput {
            options: options.clone(),
            link,
            consumer,
            messages: None,
            owner: tickets::new_owner(),
            ready: VecDeque::new(),
            current: String::new(),
            last_item: now,
            last_keep_alive: now,
            last_idle_check: None,
            counts: Counts::default(),
        })
    }

    /// Waits up to [`TURN_EVERY`] for items and files what came under tickets.
    fn take_some(&mut self) -> Result<(), StageError> {
        let room = self
            .options
            .max_held
            .saturating_sub(tickets::held_by(self.owner));
        if room == 0 {
            std::thread::sleep(TURN_EVERY);
            return Ok(());
        }
        let batch = self.options.batch;
        let consumer = &self.consumer;
        let messages = &mut self.messages;
        let mut got = Vec::new();
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
            while got.len() < room {
                let next = if wait {
                    match tokio::time::timeout(TURN_EVERY, stream.next()).await {
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
                    Some(Ok(message)) => got.push(message),
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

    /// Files one delivered item under a ticket and queues what to hand on.
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
        let text = String::from_utf8_lossy(&message.payload).trim().to_string();
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
        if text.is_empty() || text.starts_with('#') {
            // No work: done at once.
            self.counts.blank += 1;
            runtime::block_on(async {
                let _ = ticket.ack().await;
            });
            return;
        }
        let number = tickets::issue(ticket);
        if delivered >= self.options.max_deliver {
            self.counts.given_up += 1;
            self.ready.push_back(Taken {
                ticket: number,
                text: given_up_record(&text, delivered),
                record: true,
            });
        } else {
            self.ready.push_back(Taken {
                ticket: number,
                text,
                record: false,
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

    /// Sends in-progress acks for items held a third of `ack_wait`.
    fn keep_alive(&mut self) {
        let every = self.options.ack_wait / 3;
        if self.last_keep_alive.elapsed() < every.min(Duration::from_secs(1)) {
            return;
        }
        self.last_keep_alive = Instant::now();
        let due = tickets::due_for_keep_alive(self.owner, every);
        self.counts.keep_alives += due.len() as u64;
        runtime::block_on(async {
            for ticket in &due {
                let _ = ticket.keep_alive().await;
            }
        });
    }

    fn lost_connection(&self, why: String) -> StageError {
        let held = tickets::held_by(self.owner);
        StageError::other(
            MODULE,
            format!(
                "{why}; {held} work items in flight were not acknowledged: the broker hands them \
                 to other workers after ack_wait ({:.0?})",
                self.options.ack_wait
            ),
        )
    }
}

/// The record of an item that reached `max_deliver` without a stored result.
fn given_up_record(line: &str, delivered: i64) -> String {
    let name = line.split(',').next().unwrap_or(line).trim();
    let mut out = Vec::new();
    let mut f = crate::json::Fields::new();
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
            self.link
                .check_alive()
                .map_err(|why| self.lost_connection(why))?;
            self.keep_alive();
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
        s.add_counter("redelivered", self.counts.redelivered);
        s.add_counter("blank_items", self.counts.blank);
        s.add_counter("keep_alives", self.counts.keep_alives);
        s.add_error("given_up_max_deliver", self.counts.given_up);
        s.add_error("pull_errors", self.counts.pull_errors);
        out.push(s);
    }
}

impl Drop for NatsInput {
    fn drop(&mut self) {
        // Items still held were never stored: forgotten unacknowledged, so
        // the broker redelivers them. Acks already sent leave before we go.
        tickets::forget(self.owner);
        let client = self.link.client.clone();
        runtime::block_on(async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), client.flush()).await;
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
