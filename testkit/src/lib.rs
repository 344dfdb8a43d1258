//! Test helpers for dnsluice's network code.
//!
//! - [`servers()`]: where the real servers started by `tests/servers/up.sh`
//!   (knot, dnsdist with DoT and DoH, a slow nameserver behind the network emulator) listen.
//! - [`FaultServer`]: an in-process DNS server (UDP, TCP, TLS, DoH) whose
//!   answer to each query is chosen by the first label of the query name
//!   (`ok`, `nx`, `drop`, `late300`, `reset`, ...), for client fault tests.
//! - [`TestCert`]: a throwaway CA and a server certificate it signs.
//! - [`wire`]: just enough DNS message bytes to build queries and read answers.
//! - [`world()`]: the simulated internet of `tests/world` (root, TLDs,
//!   thousands of zones, edge cases, unbound as the truth) and its
//!   generator's record of the truth ([`World::expected`]).
//! - [`kdig`]: runs kdig for many questions at once and reads its answers.
//! - [`Netem`]: a test's own network emulator (latency, loss, rate limits)
//!   in front of a server, and its counters.
//! - [`chromium`]: headless Chromium over the DevTools protocol: open a page,
//!   see its requests and console errors, evaluate in it, take a screenshot.

#![warn(missing_docs)]

mod cert;
pub mod chromium;
mod env_file;
mod fault;
pub mod kdig;
mod netem;
mod servers;
mod sockets;
pub mod wire;
mod world;

pub use cert::TestCert;
pub use fault::{Behaviour, FaultKind, FaultServer};
pub use netem::Netem;
pub use servers::{lookup_address, servers, servers_dir, Servers};
pub use sockets::sink_socket;
pub use world::{normalise_data, wan_world, world, Expected, Rr, World};
