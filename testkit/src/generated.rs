//! Captures written by the benches' generators (`benches/gen-pcap.py`,
//! `benches/gen-tcp-pcap.py`), for tests that need more packets than the
//! corpus has: what a generator writes is fixed by its arguments (and its
//! seed), and it is its own record of it (one query a record, and so on).

use crate::run_ok;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the generator `benches/{script}` with `args`, writing `capture`.
pub fn generate(script: &str, args: &[&str], capture: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit is inside the workspace")
        .join("benches")
        .join(script);
    run_ok(
        // spawns: python3 (the benches' capture generators)
        Command::new("python3")
            .arg(script)
            .args(args)
            .arg("--out")
            .arg(capture),
    );
}

/// `dir/udp-COUNT.pcap`: `count` UDP DNS queries, one a record, from
/// `benches/gen-pcap.py` with its defaults.
pub fn udp_queries(dir: &Path, count: u32) -> PathBuf {
    let capture = dir.join(format!("udp-{count}.pcap"));
    generate("gen-pcap.py", &["--count", &count.to_string()], &capture);
    capture
}
