//! NATS JetStream, shared by `input.nats` and `output.nats` (and the
//! `dnsluice queue` commands): where a stream is ([`address`]), how to reach
//! it safely ([`connect`]: TLS, credentials from files or the environment),
//! the streams' and consumers' settings ([`streams`]), how results
//! payloads are compressed ([`encoding`]), the runtime every
//! connection runs on ([`runtime`]), and the tickets that carry a work
//! item's acknowledgement from the input that took it to the output that
//! stored its result ([`tickets`]).
//!
//! The at-least-once rule: a work item is acknowledged only after the record
//! made of it is stored in the results stream (its publish ack came back).
//! A worker that dies holds its items unacknowledged, and the server hands
//! them to another worker after `ack_wait`; the result a redelivered item
//! gets twice is dropped by the server (the results' message id is the work
//! item's stream and sequence) and, as a second guard, by `queue get`.
//! docs/queue.md explains it in full.

pub mod address;
pub mod connect;
pub mod encoding;
pub mod runtime;
pub mod streams;
pub mod tickets;

pub use address::NatsAddress;
pub use connect::{connect, NatsAuthOptions};
pub use tickets::{Ticket, TICKET_BASE};
