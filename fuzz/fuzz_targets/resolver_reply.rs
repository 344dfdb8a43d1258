//! An authoritative server's response as the iterative resolver decodes and
//! judges it, for a zone picked by the first byte: no panic, and nothing
//! kept from outside the bailiwick of the zone asked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsluice_modules::fuzzing::resolver_reply(data));
