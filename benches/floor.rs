//! The floor under `dns-parse` (see `benches/vs-dnsjit.sh`): the same work
//! as `configs/dns-null.toml` (walk the pcap records of a memory map, parse
//! the layers, check each DNS message whole, count qtypes) written as one
//! loop over core's parsers, with no chain, no objects and no counters
//! beyond the qtypes. What a whole process of this takes, beside the chain
//! and dnsjit on the same file, says how much of the chain's time is the
//! chain itself.
//!
//!     cargo bench --bench floor -- bench-data/big.pcap
//!
//! (classic little-endian Ethernet pcap only: it is a measurement, not a reader).

use dnsluice::core::dns::scan;
use dnsluice::core::wire::{parse_layers_into, Layers, Transport};
use dnsluice::core::LinkType;
use dnsluice::modules::input::mmpcap::{prefetch, READ_AHEAD};
use std::time::Instant;

fn main() {
    let Some(path) = std::env::args().skip(1).find(|a| !a.starts_with("--")) else {
        eprintln!("usage: cargo bench --bench floor -- FILE.pcap");
        std::process::exit(2);
    };
    let started = Instant::now();
    let file = std::fs::File::open(&path).expect("open the capture");
    // SAFETY: the file is only read; a capture changed while mapped gives
    // wrong counts, not unsoundness we rely on.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map the capture");
    let word = |at: usize| u32::from_le_bytes(map[at..at + 4].try_into().unwrap());
    assert_eq!(word(0), 0xa1b2_c3d4, "classic little-endian pcap only");
    let mut at = 24;
    let mut layers = Layers::default();
    let mut qtypes = vec![0u64; 65536];
    let (mut packets, mut messages) = (0u64, 0u64);
    while at + 16 <= map.len() {
        let caplen = word(at + 8) as usize;
        let len = word(at + 12);
        let Some(data) = map.get(at + 16..at + 16 + caplen) else {
            break;
        };
        prefetch(&map, at + READ_AHEAD);
        let _ = parse_layers_into(LinkType::EN10MB, data, len, &mut layers);
        if layers.transport == Transport::Udp && (layers.sport == 53 || layers.dport == 53) {
            let start = layers.payload_offset as usize;
            let payload = &data[start..start + layers.payload_len as usize];
            if let Some(q) = scan(payload, false).question {
                qtypes[usize::from(q.qtype)] += 1;
            }
            messages += 1;
        }
        packets += 1;
        at += 16 + caplen;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{packets} packets, {messages} DNS messages ({} A) in {seconds:.3} s: {:.1} M messages/s",
        qtypes[1],
        messages as f64 / seconds / 1e6
    );
}
