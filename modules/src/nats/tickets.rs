//! Tickets: how a work item's acknowledgement travels from `input.nats`,
//! which took the item, to `output.nats`, which stores its result.
//!
//! The input files each item it takes under a ticket number and hands the
//! item's line down the chain with that number as the line's `number`;
//! `lookup.dns` gives the record it makes of a line the line's number, so
//! the record reaches `output.nats` carrying the ticket. The output
//! publishes the record with the ticket's result id and, once the server
//! has confirmed storing it (the publish ack), settles the ticket: the item
//! is acknowledged on the input's own connection. Until then the input
//! keeps the item alive with in-progress acks, so only a dead worker's
//! items are redelivered.
//!
//! Ticket numbers start at [`TICKET_BASE`] (2^48), above any line or frame
//! number a file input gives, so an output tells a ticket from a plain
//! record number; they are unique in the process.

use async_nats::{Client, Subject};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The first ticket number.
pub const TICKET_BASE: u64 = 1 << 48;

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

#[derive(Default)]
struct Held {
    tickets: HashMap<u64, Ticket>,
    per_owner: HashMap<u64, usize>,
    failures: HashMap<u64, String>,
}

impl Held {
    fn remove(&mut self, number: u64) -> Option<Ticket> {
        let ticket = self.tickets.remove(&number)?;
        if let Some(n) = self.per_owner.get_mut(&ticket.owner) {
            *n -= 1;
        }
        Some(ticket)
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
    table().held.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new owner id, one per input stage.
pub fn new_owner() -> u64 {
    table().owners.fetch_add(1, Ordering::Relaxed)
}

/// Whether `number` is a ticket number (else a plain line or record number).
pub fn is_ticket(number: u64) -> bool {
    number >= TICKET_BASE
}

/// Files `ticket`; its number.
pub fn issue(ticket: Ticket) -> u64 {
    let number = table().next.fetch_add(1, Ordering::Relaxed);
    let mut held = held();
    *held.per_owner.entry(ticket.owner).or_default() += 1;
    held.tickets.insert(number, ticket);
    number
}

/// The result id of ticket `number`, if it is held.
pub fn result_id(number: u64) -> Option<String> {
    held().tickets.get(&number).map(|t| t.result_id.clone())
}

/// Takes ticket `number` out of the table (to acknowledge it).
pub fn settle(number: u64) -> Option<Ticket> {
    held().remove(number)
}

/// How many tickets `owner` holds.
pub fn held_by(owner: u64) -> usize {
    held().per_owner.get(&owner).copied().unwrap_or(0)
}

/// Copies of `owner`'s tickets untouched for `older_than`, marked touched now
/// (the caller sends each an in-progress ack).
pub fn due_for_keep_alive(owner: u64, older_than: Duration) -> Vec<Ticket> {
    let now = Instant::now();
    held()
        .tickets
        .values_mut()
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

/// Drops every ticket of `owner` without acknowledging (its items will be
/// redelivered); how many there were.
pub fn forget(owner: u64) -> usize {
    let mut held = held();
    held.tickets.retain(|_, t| t.owner != owner);
    held.per_owner.remove(&owner).unwrap_or(0)
}

/// Records that ticket `number`'s result could not be stored: its owner
/// (the input) stops with `why` at its next turn. The ticket is dropped
/// unacknowledged, so the item is redelivered.
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
