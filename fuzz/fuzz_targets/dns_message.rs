//! The DNS message checker and decoders on arbitrary bytes: `scan` (both with
//! and without the capture-cut flag), the question and record iterators, name
//! and RDATA printing, and the whole JSON line of a message. None may panic or
//! loop; the summary must agree with what the iterators find.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsluice_modules::fuzzing::dns_message(data));
