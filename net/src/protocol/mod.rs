//! The DNS client's wire logic, sans I/O: plain structs and functions on byte
//! buffers, no sockets, no runtime, no clock of their own. Every driver (the
//! tokio one in [`crate::tokio_driver`], the epoll one in
//! [`crate::poll_driver`], and any to come) uses these, so framing, ids and
//! matching are written and tested once.
//!
//! - [`query`]: builds a query (header, name in wire form, question, EDNS).
//! - [`question`]: does a response repeat a query's question; ids in messages.
//! - [`ids`]: unpredictable wire ids, unique among those in flight.
//! - [`inflight`]: the queries in flight on one connection: id allocation,
//!   matching answers by id and question, deadlines in sending order.
//! - [`frame`]: the two-byte length prefix on streams, across split reads.
//! - [`transfer`]: a zone transfer's messages, and when it is whole.

pub mod frame;
pub mod ids;
pub mod inflight;
pub mod query;
pub mod question;
pub mod transfer;
