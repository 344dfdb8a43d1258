//! # dnsluice-modules
//!
//! The built-in stages, one file (or folder) each:
//!
//! | module | role | file |
//! |---|---|---|
//! | `input.mmpcap` | input | [`input::mmpcap`] |
//! | `input.fpcap` | input | [`input::fpcap`] |
//! | `input.pcap` | input (reads with the feature `libpcap`) | [`input::pcap`] |
//! | `input.lines` | input | [`input::lines`] |
//! | `input.nats` | input | [`input::nats`] |
//! | `input.dnstap` | input | [`input::dnstap`] |
//! | `filter.layer` | filter | [`filter::layer`] |
//! | `filter.dns` | filter | [`filter::dns`] |
//! | `filter.select` | filter | [`filter::select`] |
//! | `lookup.dns` | filter | [`dnsluice_resolver::dns`] (the resolver's crate) |
//! | `filter.timing` | filter | [`filter::timing`] |
//! | `filter.split` | filter | [`filter::split`] |
//! | `output.null` | output | [`output::null`] |
//! | `output.json` | output | [`output::json`] |
//! | `output.pcap` | output | [`output::pcap`] |
//! | `output.parquet` | output | [`output::parquet`] |
//! | `output.dnstap` | output | [`output::dnstap`] |
//! | `output.diff` | output | [`output::diff`] |
//! | `output.dnscli` | output | [`output::dnscli`] |
//! | `filter.dnscli` | filter | [`output::dnscli::chain`] |
//! | `output.udpcli` | output | [`output::udpcli`] |
//! | `output.nats` | output | [`output::nats`] |
//!
//! [`registry`] returns a registry holding all of them.

#![warn(missing_docs)]

pub mod clients;
pub mod cpu;
pub mod filter;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
pub mod input;
pub mod json;
pub mod nats;
pub mod output;
pub mod synth;

use dnsluice_core::Registry;

/// Adds every built-in module to `registry`.
pub fn register_builtin(registry: &mut Registry) {
    registry
        .add(input::mmpcap::entry())
        .add(input::fpcap::entry())
        .add(input::lines::entry())
        .add(input::dnstap::entry())
        .add(filter::layer::entry())
        .add(filter::dns::entry())
        .add(filter::select::entry())
        .add(dnsluice_resolver::dns::entry())
        .add(filter::timing::entry())
        .add(filter::top::entry())
        .add(output::null::entry())
        .add(output::json::entry())
        .add(output::pcap::entry())
        .add(output::parquet::entry())
        .add(output::dnstap::entry())
        .add(output::diff::entry())
        .add(output::dnscli::entry())
        .add(output::dnscli::chain::entry())
        .add(filter::split::entry())
        .add(output::udpcli::entry())
        .add(input::pcap::entry())
        .add(input::nats::entry())
        .add(output::nats::entry());
}

/// A registry with every built-in module.
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    register_builtin(&mut registry);
    registry
}
