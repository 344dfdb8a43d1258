//! Inputs: capture files through mmap (`input.mmpcap`), buffered read
//! (`input.fpcap`, also stdin), and libpcap (`input.pcap`, feature `libpcap`);
//! the two native ones read compressed captures too ([`decompress`]); dnstap
//! (`input.dnstap`); lines of text (`input.lines`) and work items from NATS
//! JetStream (`input.nats`).

pub mod decoder_thread;
pub mod decompress;
pub mod dnstap;
pub mod fpcap;
pub mod lines;
mod lz4_frames;
pub mod mmpcap;
pub mod nats;
pub mod pcap;
mod reader;
pub mod recorded;
pub mod shard;
pub mod until_stop;

pub use reader::CaptureReader;
