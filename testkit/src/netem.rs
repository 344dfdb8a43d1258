//! A test's own network emulator: `dnsluice-netem` (tools/netem, built by
//! `tests/servers/up.sh`) in front of a server, with the latency, loss and
//! rate limit the test asks for, and its counters (by cause, and the
//! kernel's drops on its sockets) read when the test wants them.

use crate::servers::{servers, servers_dir};
use serde_json::Value;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A running emulator; stopped when dropped.
pub struct Netem {
    child: Option<Child>,
    stats: PathBuf,
    log: PathBuf,
    /// Where clients send (UDP and TCP, unless the settings say otherwise).
    pub addr: SocketAddr,
}

impl Netem {
    /// Starts an emulator listening on a free port of `ip` (a loopback
    /// address) and forwarding to `target`, with `settings` (its flags:
    /// `["--delay", "10ms", "--loss", "1%"]`). Waits until it forwards.
    pub fn start(ip: &str, target: SocketAddr, settings: &[&str]) -> Netem {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = servers_dir().join("netem");
        std::fs::create_dir_all(&dir).expect("netem state directory");
        let base = dir.join(format!("{}-{n}", std::process::id()));
        let stats = base.with_extension("json");
        let log = base.with_extension("log");
        let _ = std::fs::remove_file(&stats);
        let addr = free_port(ip);
        // spawns: (dnsluice-netem: built by this workspace, tests/servers/up.sh)
        let child = Command::new(servers().netem)
            .args(settings)
            .arg("--stats")
            .arg(&stats)
            .arg(format!("{addr}={target}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("netem log"))
            .spawn()
            .expect("dnsluice-netem runs (built by tests/servers/up.sh)");
        let netem = Netem {
            child: Some(child),
            stats,
            log,
            addr,
        };
        // It writes its counters every 100 ms once its sockets are bound.
        let started = Instant::now();
        while !netem.stats.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "dnsluice-netem did not start: {}",
                std::fs::read_to_string(&netem.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        netem
    }

    /// The counters so far (at most 100 ms old).
    pub fn stats(&self) -> Value {
        let text = std::fs::read_to_string(&self.stats).expect("netem stats");
        serde_json::from_str(&text).expect("netem stats are JSON")
    }

    /// The counters of its one link, as a number each: `link("up_lost")`.
    pub fn link(stats: &Value, key: &str) -> u64 {
        stats["links"][0][key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key} in {stats}"))
    }

    /// Stops it (SIGTERM) and returns its final counters.
    pub fn stop(mut self) -> Value {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) with a pid we spawned and still own.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let status = child.wait().expect("netem ends");
            assert!(
                status.success(),
                "dnsluice-netem: {status}: {}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        self.stats()
    }
}

impl Drop for Netem {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port of `ip` free for UDP and TCP at the moment.
fn free_port(ip: &str) -> SocketAddr {
    loop {
        let udp = UdpSocket::bind(format!("{ip}:0")).expect("bind a loopback address");
        let addr = udp.local_addr().expect("local address");
        if TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
}
