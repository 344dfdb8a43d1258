//! The one home of dnsluice's test helpers.
//!
//! - [`dnsluice()`], [`run_ok`], [`assert_ok`]: run the dnsluice binary, and
//!   check that a run succeeded (the failure message carries its stderr).
//! - [`temp_path`], [`temp_dir`]: a fresh path (or directory) under the
//!   target directory; tests write nowhere else.
//! - [`pipeline`]: pipelines written in the test, run, their JSON read back.
//! - [`corpus`]: the test captures and what tshark reads in them.
//! - [`generated`]: captures from the benches' generators, as many packets as a test needs.
//! - [`readers`]: tshark, capinfos and tcpdump reading what we write.
//! - [`replay`]: captures of queries built in the test, `dnsluice replay`
//!   with its statistics.
//! - [`daemon`]: knot, unbound, dnsdist, nsd started by a test itself.
//! - [`queue`]: NATS JetStream work streams, brokers and lookup workers.
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

mod behaviour;
mod cert;
pub mod chromium;
pub mod corpus;
pub mod daemon;
pub mod duckdb;
mod env_file;
mod fault;
pub mod generated;
pub mod kdig;
mod netem;
pub mod pipeline;
pub mod prometheus;
pub mod queue;
pub mod readers;
pub mod replay;
pub mod rng;
mod run;
mod servers;
mod sockets;
mod temp;
pub mod wire;
mod world;

pub use cert::TestCert;
pub use fault::{Behaviour, FaultKind, FaultServer};
pub use netem::Netem;
pub use pipeline::run_pipeline;
pub use run::{
    assert_ok, dnsluice, dnsluice_exe, number_before, output_within, run_new_executable_ok, run_ok,
    sigterm_and_wait, stopped_by_sigterm, wait_usage, wait_within, Usage,
};
pub use servers::{lookup_address, servers, servers_dir, Servers};
pub use sockets::sink_socket;
pub use temp::{temp_dir, temp_path};
pub use world::{normalise_data, wan_world, world, Expected, Rr, World};
