//! The bodies of the fuzz targets in `fuzz/` (each target is one line that
//! calls its function here) and of the test that replays what they found
//! (`tests/fuzz_regressions.rs`), so both run the same invariants, with one
//! copy of each. Every function panics when an invariant does not hold.
//!
//! | target | function | input |
//! |---|---|---|
//! | `capture_reader` | [`capture_reader`] | a capture file |
//! | `layers` | [`layers`] | link selector, wire length, packet |
//! | `dns_message` | [`dns_message`] | a DNS message |
//! | `reassembly` | [`reassembly`] | segment and fragment headers with payloads |
//! | `dnstap_file` | [`dnstap_file`] | a dnstap Frame Streams file |
//! | `resolver_reply` | [`resolver_reply`] | a selector byte, then an authoritative server's response |
//! | `threads` | [`threads`] | a capture file |

mod capture;
mod dns;
mod dnstap;
mod layers;
mod reassembly;
mod resolver;
mod threads;

pub use capture::capture_reader;
pub use dns::dns_message;
pub use dnstap::dnstap_file;
pub use layers::{check_layers, layers};
pub use reassembly::reassembly;
pub use resolver::resolver_reply;
pub use threads::{same_statistics, threads};
