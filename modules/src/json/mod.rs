//! JSON lines of the stages, on the building blocks of [`dnsluice_json`]
//! (shared with the resolver's lookup records): written by hand into reused
//! buffers, because the hot path writes one line per DNS message and may
//! not allocate per message.
//!
//! - [`object`]: a packet or a DNS message (`output.json`'s line);
//! - [`dns`]: the `dns` object of a message (header, sections, EDNS, errors);
//! - [`response`]: a client's response (query, answer or error, latency).

pub mod dns;
pub mod object;
pub mod response;

pub use dnsluice_json::{push_json_str, Fields};
pub use object::write_object;
pub use response::write_response;
