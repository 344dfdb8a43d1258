//! The addresses of the servers `tests/servers/up.sh` runs, read from the
//! `servers.env` file it writes.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::env_file::EnvFile;

/// Where `tests/servers/up.sh` runs the test servers (see `servers.env` there).
///
/// Fast nameservers answer from knot directly (UDP/TCP) or through dnsdist
/// (DoT/DoH); the slow ones are the network emulator on 127.0.0.2 in front of them.
#[derive(Clone, Debug)]
pub struct Servers {
    /// The state directory (configs, zones, certificates, logs).
    pub dir: PathBuf,
    /// knot, UDP and TCP (`KNOT`).
    pub knot: SocketAddr,
    /// dnsdist's plain DNS listener in front of knot, UDP and TCP (`DNSDIST`).
    pub dnsdist: SocketAddr,
    /// dnsdist's DNS-over-TLS listener (`DOT`).
    pub dot: SocketAddr,
    /// dnsdist's DNS-over-HTTPS URL, HTTP/2 (`DOH`).
    pub doh: String,
    /// The slow nameserver for UDP and TCP: the network emulator in front of knot (`SLOW`).
    pub slow: SocketAddr,
    /// The slow DoT nameserver: the network emulator in front of [`Servers::dot`] (`SLOW_DOT`).
    pub slow_dot: SocketAddr,
    /// The slow DoH URL: the network emulator in front of [`Servers::doh`] (`SLOW_DOH`).
    pub slow_doh: String,
    /// The delay the emulator adds in each direction (`SLOW_DELAY_MS`).
    pub slow_delay: Duration,
    /// The network emulator's program, for tests that run their own (`NETEM`).
    pub netem: PathBuf,
    /// Every fast UDP/TCP nameserver, [`Servers::knot`] first (`FAST_DNS`).
    pub fast_dns: Vec<SocketAddr>,
    /// Every fast DoT nameserver, [`Servers::dot`] first (`FAST_DOT`).
    pub fast_dot: Vec<SocketAddr>,
    /// Every fast DoH URL, [`Servers::doh`] first (`FAST_DOH`).
    pub fast_doh: Vec<String>,
    /// The CA certificate (PEM) that signed the servers' certificate (`CA_FILE`).
    pub ca_file: PathBuf,
    /// The servers' certificate (PEM) (`CERT_FILE`).
    pub cert_file: PathBuf,
    /// The servers' private key (PEM) (`KEY_FILE`).
    pub key_file: PathBuf,
    /// The name in the servers' certificate (`TLS_NAME`).
    pub tls_name: String,
    /// The zone with the numbered names, `lookup.test.` (`ZONE`).
    pub zone: String,
    /// How many numbered names `n0` .. `n{N-1}` the zone has (`ZONE_NAMES`).
    pub zone_names: u32,
    /// The reverse zone with PTR records for `n0` .. `n255` (`REVERSE_ZONE`).
    pub reverse_zone: String,
    /// nats-server with JetStream, plain (`NATS`).
    pub nats: SocketAddr,
    /// nats-server with JetStream, TLS only ([`Servers::ca_file`]), with a
    /// user and password (`NATS_TLS`).
    pub nats_tls: SocketAddr,
    /// The user [`Servers::nats_tls`] takes (`NATS_USER`).
    pub nats_user: String,
    /// The file holding that user's password (`NATS_PASSWORD_FILE`).
    pub nats_password_file: PathBuf,
}

/// The directory of the test servers' state: `$DNSLUICE_SERVERS_DIR`, or
/// `<workspace>/target/test-servers`.
pub fn servers_dir() -> PathBuf {
    match std::env::var_os("DNSLUICE_SERVERS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("testkit is inside the workspace")
            .join("target/test-servers"),
    }
}

/// Reads `servers.env` from [`servers_dir()`].
///
/// # Panics
///
/// When the file is missing (the servers are not running: tests that need
/// them must fail, not skip) or a key is missing or malformed.
pub fn servers() -> Servers {
    let dir = servers_dir();
    let path = dir.join("servers.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "test servers are not running: run `bash tests/servers/up.sh` ({}: {e})",
            path.display()
        )
    });
    parse(&text, dir).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The A record of `n<index>.lookup.test.`: `10.a.b.c` with
/// `index = a * 65536 + b * 256 + c` (the rule of `tests/servers/gen_zone.py`).
pub fn lookup_address(index: u32) -> Ipv4Addr {
    let [_, a, b, c] = index.to_be_bytes();
    Ipv4Addr::new(10, a, b, c)
}

fn parse(text: &str, dir: PathBuf) -> Result<Servers, String> {
    let env = EnvFile::parse(text);
    Ok(Servers {
        dir,
        knot: env.addr("KNOT")?,
        dnsdist: env.addr("DNSDIST")?,
        dot: env.addr("DOT")?,
        doh: env.value("DOH")?,
        slow: env.addr("SLOW")?,
        slow_dot: env.addr("SLOW_DOT")?,
        slow_doh: env.value("SLOW_DOH")?,
        slow_delay: Duration::from_millis(env.number("SLOW_DELAY_MS")?.into()),
        netem: env.path("NETEM")?,
        fast_dns: env.addrs("FAST_DNS")?,
        fast_dot: env.addrs("FAST_DOT")?,
        fast_doh: env.list("FAST_DOH")?,
        ca_file: env.path("CA_FILE")?,
        cert_file: env.path("CERT_FILE")?,
        key_file: env.path("KEY_FILE")?,
        tls_name: env.value("TLS_NAME")?,
        zone: env.value("ZONE")?,
        zone_names: env.number("ZONE_NAMES")?,
        reverse_zone: env.value("REVERSE_ZONE")?,
        nats: env.addr("NATS")?,
        nats_tls: env.addr("NATS_TLS")?,
        nats_user: env.value("NATS_USER")?,
        nats_password_file: env.path("NATS_PASSWORD_FILE")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_rule_matches_the_generator() {
        assert_eq!(lookup_address(0), Ipv4Addr::new(10, 0, 0, 0));
        assert_eq!(lookup_address(12345), Ipv4Addr::new(10, 0, 48, 57));
        assert_eq!(lookup_address(99999), Ipv4Addr::new(10, 1, 134, 159));
    }

    #[test]
    fn parses_and_names_a_missing_key() {
        let text = "# c\nKNOT=127.0.0.1:1\nDNSDIST=127.0.0.1:2\nDOT=127.0.0.1:3\nDOH=https://x/\n\
            SLOW=127.0.0.2:1\nSLOW_DOT=127.0.0.2:3\nSLOW_DOH=https://y/\nSLOW_DELAY_MS=20\nNETEM=/netem\n\
            FAST_DNS=127.0.0.1:1,127.0.0.3:1\nFAST_DOT=127.0.0.1:3\nFAST_DOH=https://x/\n\
            CA_FILE=/ca\nCERT_FILE=/c\nKEY_FILE=/k\nTLS_NAME=dns.test\nZONE=lookup.test.\n\
            ZONE_NAMES=100000\nREVERSE_ZONE=0.0.10.in-addr.arpa.\nNATS=127.0.0.1:4\n\
            NATS_TLS=127.0.0.1:5\nNATS_USER=u\nNATS_PASSWORD_FILE=/p\n";
        let s = parse(text, PathBuf::from("/s")).unwrap();
        assert_eq!(s.fast_dns.len(), 2);
        assert_eq!(s.slow_delay, Duration::from_millis(20));
        let err = parse(&text.replace("KNOT=", "X="), PathBuf::new()).unwrap_err();
        assert_eq!(err, "no KNOT");
    }
}
