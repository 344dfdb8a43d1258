//! # dnsluice-resolver
//!
//! The resolver: bulk DNS lookups with sticky connections (ZDNS-style),
//! an in-flight table for UDP, and iterative resolution from the root. The
//! `lookup.dns` stage of the modules crate and `dnsluice lookup` run it.
//!
//! Names come in one per line (`name`, or `name,nameserver` to pin it); each
//! gets exactly one result record, success or failure. The [`board`] holds the
//! work: per-nameserver priority queues plus a global queue, so workers keep
//! their connection to a nameserver yet idle ones steal work. [`worker`]s
//! take jobs and hand each to [`modules`] (one question, or a ZDNS module's
//! several: NSLOOKUP, MXLOOKUP, AXFR, ...), which asks through [`ask::Ask`]: [`direct`] asks the job's
//! nameserver over UDP, TCP, DoT or DoH with retries, sharing what [`shared`]
//! holds, or [`iterative`] resolves it from the root; [`turns`] holds their queries to `--rate`; [`engine`] runs them; [`dns`] is the `lookup.dns` module (its
//! options, [`dns::LookupOptions`], are also `dnsluice lookup`'s flags).
//! Records are written by [`record`] in dnsluice's or ZDNS's shape
//! ([`format`]), with [`sections`], [`results`] and [`trace`].

#![warn(missing_docs)]

pub mod ask;
pub mod board;
pub mod config;
pub mod direct;
pub mod dns;
pub mod engine;
pub mod format;
pub mod iterative;
pub mod job;
pub mod modules;
pub mod nameserver_list;
pub mod qtype;
pub mod record;
pub mod results;
pub mod sections;
pub mod shared;
pub mod slots;
pub mod stats;
pub mod trace;
pub mod transfer;
pub mod turns;
pub mod worker;

pub use board::Scheduler;
pub use config::LookupConfig;
pub use engine::LookupEngine;
pub use qtype::LookupType;
pub use record::Finished;
pub use stats::LookupSummary;
