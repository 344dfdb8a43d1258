//! Servers a test starts itself (knot, nsd, unbound, dnsdist with a
//! config of the test's own), on ports of this checkout's range.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port of this checkout's range (DNSLUICE_SERVERS_PORT_OFFSET apart from
/// other checkouts'), `k` of the ten the tests that start their own servers use
/// (tests/dnstap_servers.rs: 0-5, tests/diff_servers.rs: 6-9).
///
/// The range lies below Linux's ephemeral ports (32768-60999 by default):
/// these servers bind while other tests hold many outgoing sockets, and one of
/// those once took 53567 just before nsd wanted it.
pub fn port(k: u16) -> u16 {
    let offset: u16 = std::env::var("DNSLUICE_SERVERS_PORT_OFFSET")
        .ok()
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    FIRST_PORT + offset + k
}

/// The first of the ten ports `port` hands out (before the offset).
const FIRST_PORT: u16 = 25360;

/// A child process killed (and waited for) when dropped.
pub struct Daemon(Child);

impl Daemon {
    /// Stops it with SIGTERM (so it closes its dnstap stream) and waits.
    pub fn stop(mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program` with `args`, its output in `dir/NAME.log`.
pub fn start(name: &'static str, program: &str, args: &[&str], dir: &Path) -> Daemon {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    // spawns: knotd unbound dnsdist nsd prometheus (the callers' `program`)
    let child = Command::new(program)
        .args(args)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} (installed by .ci/run): {e}"));
    Daemon(child)
}

/// Waits until `server` answers a query for `zone`'s SOA over UDP.
pub fn wait_answering(server: SocketAddr, zone: &str, dir: &Path, name: &str) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        let _ = socket.send_to(&crate::wire::query(1, zone, 6, None), server);
        if socket.recv(&mut buf).is_ok() {
            return;
        }
    }
    let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
    panic!("{name} on {server} did not answer: {log}");
}

#[cfg(test)]
mod tests {
    use super::port;

    /// The kernel's range of ports it hands to sockets bound to port 0.
    fn ephemeral_range() -> (u16, u16) {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
        let mut ends = text.split_whitespace().map(|n| n.parse::<u16>().unwrap());
        (ends.next().unwrap(), ends.next().unwrap())
    }

    /// The ten ports as `port` gives them, with this checkout's offset, and
    /// those `free_port` hands out.
    #[test]
    fn the_servers_ports_lie_outside_the_ephemeral_range() {
        let (low, high) = ephemeral_range();
        let free = crate::queue::FREE_PORTS;
        for (first, last) in [(port(0), port(9)), (free.start, free.end - 1)] {
            assert!(
                last < low || first > high,
                "{first}-{last} inside {low}-{high}"
            );
        }
        assert!(
            port(9) < free.start,
            "the servers' ports among the free ones"
        );
    }
}
