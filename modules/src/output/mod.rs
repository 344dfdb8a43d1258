//! Outputs: the last stage of a chain.

pub mod json;
pub mod null;
pub mod pcap;
