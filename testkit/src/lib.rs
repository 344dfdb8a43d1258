//! Test helpers for dnsluice's network code.
//!
//! - [`servers()`]: where the real servers started by `tests/servers/up.sh`
//!   (knot, dnsdist with DoT and DoH, a slow delay proxy) listen.
//! - [`FaultServer`]: an in-process DNS server (UDP, TCP, TLS, DoH) whose
//!   answer to each query is chosen by the first label of the query name
//!   (`ok`, `nx`, `drop`, `late300`, `reset`, ...), for client fault tests.
//! - [`TestCert`]: a throwaway CA and a server certificate it signs.
//! - [`wire`]: just enough DNS message bytes to build queries and read answers.

#![warn(missing_docs)]

mod cert;
mod fault;
mod servers;
pub mod wire;

pub use cert::TestCert;
pub use fault::{Behaviour, FaultKind, FaultServer};
pub use servers::{lookup_address, servers, servers_dir, Servers};
