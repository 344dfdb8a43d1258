//! Inputs: capture files through mmap (`input.mmpcap`), buffered read
//! (`input.fpcap`, also stdin), and libpcap (`input.pcap`, feature `libpcap`).

pub mod fpcap;
pub mod lines;
pub mod mmpcap;
pub mod pcap;
mod reader;

pub use reader::{CaptureReader, RecordSource};
