//! Inputs: capture files through mmap (`input.mmpcap`), buffered read
//! (`input.fpcap`, also stdin), and libpcap (`input.pcap`, feature `libpcap`).

pub mod fpcap;
#[cfg(feature = "libpcap")]
pub mod libpcap;
pub mod lines;
pub mod mmpcap;
mod reader;

pub use reader::{CaptureReader, RecordSource};
