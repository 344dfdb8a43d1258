//! `dnsluice replay` to a server across an emulated network (tools/netem,
//! 25 ms each way, in front of knot; loopback only): a paced replay keeps
//! its pace with the default flags, its in-flight window growing to what
//! the pace needs (rate × round trip), and every query is answered.

use std::time::Instant;
use testkit::replay::{replay, write_capture, zone_queries};
use testkit::temp_path;
use testkit::Netem;

/// 10,000 queries at 5,000/s through 50 ms of round trip: 250 in flight are
/// needed, where the old fixed window of 100 allowed 2,000/s. The pace is
/// kept within 2 %, every query answered, and the window says how far it grew.
#[test]
fn a_paced_replay_keeps_its_pace_across_a_network() {
    let servers = testkit::servers();
    let netem = Netem::start(
        "127.0.0.24",
        servers.knot,
        &["--udp-only", "--delay", "25ms"],
    );
    let capture = temp_path("wan.pcap");
    let count = 10_000;
    write_capture(&capture, &zone_queries(count, 50));
    let started = Instant::now();
    let (stats, stderr) = replay(
        &capture,
        &["--server", &netem.addr.to_string(), "--rate", "5000", "-q"],
    );
    let took = started.elapsed();
    let net = netem.stop();
    // The emulator's counts (and the kernel's drops on its sockets) say
    // where a lost query went.
    assert_eq!(stats["sent"], count, "{stats}\nemulator: {net}");
    assert_eq!(stats["answered"], count, "{stats}\nemulator: {net}");
    assert_eq!(stats["timeouts"], 0, "{stats}\nemulator: {net}");
    assert_eq!(Netem::link(&net, "down_forwarded"), count as u64, "{net}");
    // The pace: the queries went out over (elapsed - one round trip).
    let p50_s = stats["latency_ms"]["p50"].as_f64().unwrap() / 1000.0;
    assert!(p50_s >= 0.050, "{stats}");
    let sending = stats["elapsed_s"].as_f64().unwrap() - p50_s;
    let pace = count as f64 / sending;
    assert!(
        (pace - 5000.0).abs() <= 0.02 * 5000.0,
        "{pace:.0} queries/s, asked 5000 ({took:?}): {stats}"
    );
    assert!(!stderr.contains("cannot keep this pace"), "{stderr}");
    let window = stats["inflight_window"].as_u64().unwrap();
    assert!((250..=1600).contains(&window), "window {window}: {stats}");
}

/// A fixed `--inflight` that is too small for the pace holds it back, and
/// the summary says which cap bound and what to raise.
#[test]
fn a_window_too_small_for_the_pace_says_so() {
    let servers = testkit::servers();
    let netem = Netem::start(
        "127.0.0.25",
        servers.knot,
        &["--udp-only", "--delay", "25ms"],
    );
    let capture = temp_path("wan-small.pcap");
    write_capture(&capture, &zone_queries(2_000, 10));
    let (stats, stderr) = replay(
        &capture,
        &[
            "--server",
            &netem.addr.to_string(),
            "--rate",
            "5000",
            "--inflight",
            "50",
        ],
    );
    assert_eq!(stats["answered"], 2_000, "{stats}");
    assert!(
        stderr.contains("cannot keep this pace")
            && stderr.contains(
                "held back by the in-flight window: it was full at its cap of 50 queries"
            )
            && stderr.contains("raise --inflight"),
        "{stderr}"
    );
    // 50 in flight over 50 ms: about 1,000 queries a second, not 5,000.
    assert!(stats["elapsed_s"].as_f64().unwrap() > 1.5, "{stats}");
}
