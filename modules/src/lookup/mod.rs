//! Bulk DNS lookups with sticky connections (ZDNS-style).
//!
//! Names come in one per line (`name`, or `name,nameserver` to pin it); each
//! gets exactly one result record, success or failure. The [`board`] holds the
//! work: per-nameserver priority queues plus a global queue, so workers keep
//! their connection to a nameserver yet idle ones steal work. [`worker`]s
//! resolve over UDP, TCP, DoT or DoH with retries; [`engine`] runs them;
//! [`stage`] makes the engine the `lookup.dns` chain stage.

pub mod board;
pub mod engine;
pub mod job;
pub mod qtype;
pub mod record;
pub mod stage;
pub mod stats;
pub mod worker;

pub use board::Scheduler;
pub use engine::{Finished, LookupConfig, LookupEngine};
pub use qtype::LookupType;
pub use stats::LookupSummary;
