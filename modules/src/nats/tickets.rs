//! Tickets: how a work item's acknowledgement travels from `input.nats`,
//! which took the item, to `output.nats`, which stores its result.
//!
//! A work item is one message of the work stream holding one line or a
//! batch of lines (`queue put --batch`). The input files each item it takes
//! under a run of consecutive ticket numbers, one per line, and hands each
//! line down the chain with its number as the line's `number`; `lookup.dns`
//! gives the record it makes of a line the line's number, so the record
//! reaches `output.nats` carrying its ticket. The output gathers the
//! records of an item's lines ([`item_of`] says how many there are) and
//! publishes them as one message with the item's result id; once the server
//! has confirmed storing it (the publish ack), it settles the item: the item
//! is acknowledged on the input's own connection. Until then the input
//! keeps the item alive with in-progress acks, so only a dead worker's
//! items are redelivered.
//!
//! Ticket numbers start at [`TICKET_BASE`] (2^48), above any line or frame
//! number a file input gives, so an output tells a ticket from a plain
//! record number; they are unique in the process.

use async_nats::{Client, Subject};
use dnsluice_core::sync;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The first ticket number.
pub const TICKET_BASE: u64 = 1 << 48;

/// How long after a worker hands an item back the server redelivers it.
pub const HAND_BACK_DELAY: std::time::Duration = std::time::Duration::from_secs(1);
/// The negative acknowledgement with [`HAND_BACK_DELAY`], in nanoseconds.
const HAND_BACK: &[u8] = br#"-NAK {"delay": 1000000000}"#;

/// What is held for one work item until its result is stored.
pub struct Ticket {
    /// The input that took it (its id from [`new_owner`]).
    pub owner: u64,
    /// The connection it came on; its acknowledgement goes back there.
    pub client: Client,
    /// The item's reply subject (`$JS.ACK...`).
    pub reply: Subject,
    /// The message id its result is published with.
    pub result_id: String,
    /// When it was delivered, or last kept alive.
    pub touched: Instant,
}

impl Ticket {
    /// Acknowledges the item (`+ACK`): it is done and leaves the work queue.
    pub async fn ack(&self) -> Result<(), String> {
        self.send(b"+ACK").await
    }

    /// Hands the item back unfinished (`-NAK`): the server redelivers it
    /// after [`HAND_BACK_DELAY`] instead of its `ack_wait`. (At once, the
    /// server gives it to the pull request this worker opened last, which
    /// nobody reads once the worker is gone.)
    pub async fn hand_back(&self) -> Result<(), String> {
        self.send(HAND_BACK).await
    }

    /// Tells the server the item is still being worked on (`+WPI`), which
    /// restarts its `ack_wait`.
    pub async fn keep_alive(&self) -> Result<(), String> {
        self.send(b"+WPI").await
    }

    async fn send(&self, what: &'static [u8]) -> Result<(), String> {
        self.client
            .publish(self.reply.clone(), bytes::Bytes::from_static(what))
            .await
            .map_err(|e| format!("cannot acknowledge a work item: {e}"))
    }
}

/// A held item: its ticket and how many lines (ticket numbers) it has.
struct HeldItem {
    ticket: Ticket,
    lines: u64,
}

/// One work item as an output sees it: enough to gather its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemOf {
    /// The item's first ticket number: what [`settle`] and [`fail`] take.
    pub first: u64,
    /// How many lines (records) the item has.
    pub lines: u64,
    /// The message id its result is published with.
    pub result_id: String,
}

#[derive(Default)]
struct Held {
    /// By first ticket number.
    items: BTreeMap<u64, HeldItem>,
    /// Lines held, per owner.
    per_owner: HashMap<u64, usize>,
    failures: HashMap<u64, String>,
}

impl Held {
    /// The first number of the item that ticket `number` belongs to.
    fn first_of(&self, number: u64) -> Option<u64> {
        let (&first, item) = self.items.range(..=number).next_back()?;
        (number - first < item.lines).then_some(first)
    }

    fn remove(&mut self, number: u64) -> Option<Ticket> {
        let first = self.first_of(number)?;
        let item = self.items.remove(&first)?;
        if let Some(n) = self.per_owner.get_mut(&item.ticket.owner) {
            *n = n.saturating_sub(item.lines as usize);
        }
        Some(item.ticket)
    }
}

struct Table {
    held: Mutex<Held>,
    next: AtomicU64,
    owners: AtomicU64,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        held: Mutex::new(Held::default()),
        next: AtomicU64::new(TICKET_BASE),
        owners: AtomicU64::new(1),
    })
}

fn held() -> MutexGuard<'static, Held> {
    sync::lock(&table().held)
}

/// A new owner id, one per input stage.
pub fn new_owner() -> u64 {
    table().owners.fetch_add(1, Ordering::Relaxed)
}

/// Whether `number` is a ticket number (else a plain line or record number).
pub fn is_ticket(number: u64) -> bool {
    number >= TICKET_BASE
}

/// Files `ticket` for an item of `lines` lines (at least one); the first
/// of its ticket numbers (the others follow it, one per line).
pub fn issue(ticket: Ticket, lines: u64) -> u64 {
    let lines = lines.max(1);
    let first = table().next.fetch_add(lines, Ordering::Relaxed);
    let mut held = held();
    *held.per_owner.entry(ticket.owner).or_default() += lines as usize;
    held.items.insert(first, HeldItem { ticket, lines });
    first
}

/// The result id of the item ticket `number` belongs to, if it is held.
pub fn result_id(number: u64) -> Option<String> {
    item_of(number).map(|item| item.result_id)
}

/// The item ticket `number` belongs to, if it is held.
pub fn item_of(number: u64) -> Option<ItemOf> {
    let held = held();
    let first = held.first_of(number)?;
    let item = &held.items[&first];
    Some(ItemOf {
        first,
        lines: item.lines,
        result_id: item.ticket.result_id.clone(),
    })
}

/// Takes the item ticket `number` belongs to out of the table (to
/// acknowledge it).
pub fn settle(number: u64) -> Option<Ticket> {
    held().remove(number)
}

/// How many lines `owner`'s held items have.
pub fn held_by(owner: u64) -> usize {
    held().per_owner.get(&owner).copied().unwrap_or(0)
}

/// How many items `owner` holds.
pub fn items_held_by(owner: u64) -> usize {
    held()
        .items
        .values()
        .filter(|item| item.ticket.owner == owner)
        .count()
}

/// Copies of `owner`'s tickets untouched for `older_than`, marked touched now
/// (the caller sends each an in-progress ack).
pub fn due_for_keep_alive(owner: u64, older_than: Duration) -> Vec<Ticket> {
    let now = Instant::now();
    held()
        .items
        .values_mut()
        .map(|item| &mut item.ticket)
        .filter(|t| t.owner == owner && now.duration_since(t.touched) >= older_than)
        .map(|t| {
            t.touched = now;
            Ticket {
                owner,
                client: t.client.clone(),
                reply: t.reply.clone(),
                result_id: String::new(),
                touched: now,
            }
        })
        .collect()
}

/// Takes every item of `owner` out of the table without acknowledging
/// it: their tickets, to hand back ([`Ticket::hand_back`]) or to drop
/// (the broker then redelivers them after their `ack_wait`).
pub fn forget(owner: u64) -> Vec<Ticket> {
    let mut held = held();
    held.per_owner.remove(&owner);
    let items = std::mem::take(&mut held.items);
    let (theirs, others) = items
        .into_iter()
        .partition::<BTreeMap<_, _>, _>(|(_, item)| item.ticket.owner == owner);
    held.items = others;
    theirs.into_values().map(|item| item.ticket).collect()
}

/// Records that the result of the item ticket `number` belongs to could not
/// be stored: its owner (the input) stops with `why` at its next turn. The
/// item is dropped unacknowledged, so it is redelivered.
pub fn fail(number: u64, why: String) {
    let mut held = held();
    if let Some(ticket) = held.remove(number) {
        held.failures.entry(ticket.owner).or_insert(why);
    }
}

/// Why one of `owner`'s results could not be stored, if one could not.
pub fn failure(owner: u64) -> Option<String> {
    held().failures.get(&owner).cloned()
}

#[cfg(test)]
mod tests {
    use super::{HAND_BACK, HAND_BACK_DELAY};

    #[test]
    fn the_hand_back_asks_for_its_delay_in_nanoseconds() {
        let text = std::str::from_utf8(HAND_BACK).unwrap();
        let json = text.strip_prefix("-NAK ").unwrap();
        let delay: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(
            delay["delay"].as_u64(),
            Some(HAND_BACK_DELAY.as_nanos() as u64)
        );
    }
}
