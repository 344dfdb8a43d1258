//! Inputs: capture files through mmap (`input.mmpcap`), buffered read
//! (`input.fpcap`, also stdin), and libpcap (`input.pcap`, feature `libpcap`);
//! lines of text (`input.lines`) and work items from NATS JetStream (`input.nats`).

pub mod fpcap;
pub mod lines;
pub mod mmpcap;
pub mod nats;
pub mod pcap;
mod reader;
pub mod shard;

pub use reader::{CaptureReader, RecordSource};
