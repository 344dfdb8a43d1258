//! One capture on one, two and three threads (`threads = N`): the same
//! outcome, lines and statistics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsluice_modules::fuzzing::threads(data));
