//! Outputs: the last stage of a chain.

pub mod diff;
pub mod dnscli;
pub mod dnstap;
pub mod json;
pub mod nats;
pub mod null;
pub mod parquet;
pub mod pcap;
pub mod udpcli;
