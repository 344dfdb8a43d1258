//! TCP stream reassembly and IP defragmentation on arbitrary segment and
//! fragment sequences, with small limits so that eviction, expiry and overflow
//! paths run too. Nothing may panic, and everything emitted must be well formed.
//!
//! Input: a sequence of 6-byte headers, each followed by its payload:
//! `[kind/port][seq or offset: 2 bytes][flags][time step][length]`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dnsluice_modules::fuzzing::reassembly(data));
