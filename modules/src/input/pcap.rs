//! `input.pcap`: reads a capture file or a live interface through libpcap
//! (the `pcap` crate). The capture itself (`capture.rs`) is built only with
//! the cargo feature `libpcap`; without it the module is still registered,
//! documented and its options checked, and building it says how to get it.
//!
//! The native inputs (`input.mmpcap`, `input.fpcap`) are faster and read pcapng
//! files libpcap rejects (several link types, several sections); this one is
//! for live capture and for BPF filters.
//!
//! A live capture runs until `count` packets or a stop (SIGINT, SIGTERM):
//! it reads the interface without blocking and waits on its descriptor in
//! 100 ms turns, so a quiet interface holds up neither the stop nor the
//! interval statistics and progress.

use dnsluice_core::registry::ModuleEntry;
use dnsluice_options::Options;
use std::path::PathBuf;

#[cfg(feature = "libpcap")]
mod capture;
#[cfg(feature = "libpcap")]
pub use capture::LibpcapInput;

const MODULE: &str = "input.pcap";

/// Options of `input.pcap`: exactly one of `path` and `interface`.
#[derive(Debug, Options)]
pub struct PcapOptions {
    /// A capture file to read (pcap, or pcapng with one link type); or use `interface`.
    pub path: Option<PathBuf>,
    /// A network interface to capture from live (e.g. `lo`, `any`).
    pub interface: Option<String>,
    /// A BPF filter expression (tcpdump syntax), e.g. `udp port 53`.
    pub filter: Option<String>,
    /// Bytes captured per packet (live).
    #[option(default = 65535, range = 1..=262_144)]
    pub snaplen: i32,
    /// Promiscuous mode (live).
    #[option(default)]
    pub promisc: bool,
    /// Stop after this many packets (0: no limit).
    #[option(default)]
    pub count: u64,
    /// The kernel's buffer for packets not read yet, in KiB (live; 0:
    /// libpcap's default, 2 MiB on Linux). What overflows it is lost and
    /// counted (`dropped_by_kernel`): give more for a busy interface.
    #[option(default, range = 0..=4_194_304)]
    pub buffer_kib: u32,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::input(
        MODULE,
        "read a capture file or a live interface through libpcap, with BPF filters",
        open,
    )
}

#[cfg(feature = "libpcap")]
fn open(
    options: PcapOptions,
) -> Result<Box<dyn dnsluice_core::Producer>, dnsluice_core::StageError> {
    Ok(Box::new(LibpcapInput::open(options)?))
}

#[cfg(not(feature = "libpcap"))]
fn open(_: PcapOptions) -> Result<Box<dyn dnsluice_core::Producer>, dnsluice_core::StageError> {
    Err(dnsluice_core::StageError::config(
        MODULE,
        "this dnsluice was built without libpcap: rebuild with `--features libpcap` (needs libpcap-dev), or read files with input.mmpcap or input.fpcap",
    ))
}
