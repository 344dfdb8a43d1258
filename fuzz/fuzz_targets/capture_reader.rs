//! The pcap/pcapng record walker, differentially: the same bytes read through
//! `input.fpcap`'s buffered stream (whole reads, and a reader that trickles a
//! few bytes per call and is interrupted now and then) and through
//! `input.mmpcap`'s memory map must give the same packets, the same outcome
//! (end or error, with the same message) and the same counters.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsluice_modules::fuzzing::capture_reader(data));
