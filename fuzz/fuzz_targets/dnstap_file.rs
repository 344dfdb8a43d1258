//! A dnstap Frame Streams file through `input.dnstap`: no panic, no hang,
//! every object a DNS message inside its made-up packet, counters that add up.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsluice_modules::fuzzing::dnstap_file(data));
