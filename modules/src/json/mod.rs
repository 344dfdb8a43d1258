//! JSON encoding, shared by `output.json`, the lookup records and the DNS
//! clients' responses: written by hand into reused buffers, because the hot
//! path writes one line per DNS message and may not allocate per message.
//!
//! - [`fields`]: `"key":value` pairs and escaped strings;
//! - [`object`]: a packet or a DNS message (`output.json`'s line);
//! - [`dns`]: the `dns` object of a message (header, sections, EDNS, errors);
//! - [`response`]: a client's response (query, answer or error, latency);
//! - [`rdata`]: RDATA as structured fields, ZDNS's names (lookup records).

pub mod dns;
pub mod fields;
pub mod object;
pub mod rdata;
pub mod response;

pub use fields::{push_json_str, Fields};
pub use object::write_object;
pub use response::write_response;
