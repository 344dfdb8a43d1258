//! # dnsluice-json
//!
//! The JSON building blocks that the stages (`output.json`, the DNS
//! clients' responses) and the resolver's lookup records share, written by
//! hand into reused buffers, because the hot paths write one line per DNS
//! message or name and may not allocate for it:
//!
//! - [`append`]: short pieces appended without a call to `memcpy`;
//! - [`fields`]: `"key":value` pairs and escaped strings;
//! - [`rdata`]: RDATA as structured fields, ZDNS's names (lookup records).
//!
//! The lines themselves (a packet, a message, a response) are written in
//! the modules crate (`dnsluice_modules::json`); the lookup records in the
//! resolver's (`dnsluice_resolver::record`).

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod append;
pub mod fields;
pub mod rdata;

pub use append::{push_padded, push_short, push_u64};
pub use fields::{push_bool, push_ip, push_json_ip, push_json_str, push_json_text, Fields};
