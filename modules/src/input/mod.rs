//! Inputs: capture files through mmap (`input.mmpcap`), buffered read
//! (`input.fpcap`, also stdin), and libpcap (`input.pcap`, feature `libpcap`);
//! the two native ones read compressed captures too ([`decompress`]).

pub mod decompress;
pub mod dnstap;
pub mod fpcap;
pub mod lines;
pub mod mmpcap;
pub mod pcap;
mod reader;

pub use reader::{CaptureReader, RecordSource};
