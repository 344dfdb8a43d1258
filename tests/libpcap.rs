//! `input.pcap` (cargo feature `libpcap`): files, BPF filters, clear errors.
#![cfg(feature = "libpcap")]

use serde_json::Value;
use testkit::corpus::{corpus_dir, truth};
use testkit::{run_pipeline, temp_path};

fn stats_of(text: &str) -> (Value, String, bool) {
    let stats = temp_path("stats.json");
    let out = run_pipeline(text, &["--stats-json", &stats.display().to_string()]);
    let value = std::fs::read_to_string(&stats)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null);
    (
        value,
        String::from_utf8_lossy(&out.stderr).to_string(),
        out.status.success(),
    )
}

#[test]
fn bpf_filter_selects_what_tshark_counts() {
    let file = "live_mini_en10mb.pcap";
    let text = format!(
        "[[stage]]\nmodule = \"input.pcap\"\npath = \"{}\"\nfilter = \"tcp\"\n[[stage]]\nmodule = \"output.null\"\n",
        corpus_dir().join(file).display()
    );
    let (stats, err, ok) = stats_of(&text);
    assert!(ok, "{err}");
    assert_eq!(
        stats["stages"][0]["out"],
        truth(file)["counts"]["tcp_frames"],
        "{stats}"
    );
}

#[test]
fn a_bad_filter_names_the_option() {
    let text = format!(
        "[[stage]]\nmodule = \"input.pcap\"\npath = \"{}\"\nfilter = \"udp prot 53\"\n[[stage]]\nmodule = \"output.null\"\n",
        corpus_dir().join("vlan_qinq.pcap").display()
    );
    let (_, err, ok) = stats_of(&text);
    assert!(!ok);
    assert!(err.contains(":4: key `filter`"), "{err}");
}

#[test]
fn path_or_interface_exactly_one() {
    let (_, err, ok) =
        stats_of("[[stage]]\nmodule = \"input.pcap\"\n[[stage]]\nmodule = \"output.null\"\n");
    assert!(!ok && err.contains("exactly one of `path`"), "{err}");
}

#[test]
fn files_libpcap_rejects_give_a_clear_error() {
    // The multi-link-type pcapng: libpcap refuses it (corpus README); the native readers read it.
    let text = format!(
        "[[stage]]\nmodule = \"input.pcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.null\"\n",
        corpus_dir().join("pcapng_multi_if.pcapng").display()
    );
    let (_, err, ok) = stats_of(&text);
    assert!(!ok, "{err}");
    assert!(
        err.contains("input.pcap") && err.contains("pcapng_multi_if.pcapng"),
        "{err}"
    );
}

#[test]
fn count_stops_early() {
    let text = format!(
        "[[stage]]\nmodule = \"input.pcap\"\npath = \"{}\"\ncount = 7\n[[stage]]\nmodule = \"output.null\"\n",
        corpus_dir().join("live_mini_en10mb.pcap").display()
    );
    let (stats, err, ok) = stats_of(&text);
    assert!(ok, "{err}");
    assert_eq!(stats["stages"][1]["in"], 7);
}

#[test]
fn live_capture_on_loopback_sees_what_we_send() {
    // Needs CAP_NET_RAW (CI runs as root). Traffic stays on 127.0.0.1.
    let json = temp_path("live.jsonl");
    let text = format!(
        "[[stage]]\nmodule = \"input.pcap\"\ninterface = \"lo\"\nfilter = \"udp and dst port 45353 and host 127.0.0.1\"\ncount = 3\n\
         [[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
        json.display()
    );
    let file = temp_path("live.toml");
    std::fs::write(&file, text).unwrap();
    // Other traffic on `lo` while the capture starts: what reaches libpcap's
    // ring before its filter is set is filtered out by libpcap itself, so a
    // read can give no packet ("timeout expired"), which must be waited
    // through, not end the capture (it did, now and then, under CI's load).
    let noise_on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let noise = {
        let on = noise_on.clone();
        std::thread::spawn(move || {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            while on.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..100 {
                    let _ = socket.send_to(b"other traffic", "127.0.0.1:45354");
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut child = testkit::dnsluice()
        .args(["run", &file.display().to_string(), "-q"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        socket
            .send_to(b"dnsluice live test", "127.0.0.1:45353")
            .unwrap();
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "live capture did not stop after 3 packets"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    noise_on.store(false, std::sync::atomic::Ordering::Relaxed);
    noise.join().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let rows: Vec<Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert_eq!(
            (row["dst"].as_str(), row["dport"].as_u64()),
            (Some("127.0.0.1"), Some(45353)),
            "{row}"
        );
        assert_eq!(row["payload_len"], 18);
    }
}

#[test]
fn a_live_capture_stops_on_sigint_while_the_interface_is_quiet() {
    // No count: only the signal ends the capture, and it comes after a
    // second in which nothing matches the filter (the wait for a packet
    // must not hold the stop up). What was captured is written.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    let json = temp_path("live_stop.jsonl");
    let file = temp_path("live_stop.toml");
    std::fs::write(
        &file,
        format!(
            "[[stage]]\nmodule = \"input.pcap\"\ninterface = \"lo\"\nfilter = \"udp and dst port {port} and host 127.0.0.1\"\n\
             [[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
            json.display()
        ),
    )
    .unwrap();
    let intervals = temp_path("live_stop_intervals.jsonl");
    let mut child = testkit::dnsluice()
        .args(["run", &file.display().to_string(), "-q"])
        .args(["--stats-interval", "200ms", "--stats-jsonl"])
        .arg(&intervals)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..15 {
        socket
            .send_to(b"before the stop", ("127.0.0.1", port))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "ended before the signal"
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let signalled = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if signalled.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            panic!("a quiet live capture did not stop on SIGINT within 10 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{err}");
    let rows: Vec<Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!((1..=15).contains(&rows.len()), "{} rows", rows.len());
    for row in rows {
        assert_eq!(row["dport"].as_u64(), Some(u64::from(port)), "{row}");
        assert_eq!(row["payload_len"], 15);
    }
    // The interval lines went on through the quiet second (the watcher is
    // looked at while the capture waits): 200 ms lines with no packet in
    // them, after the last that had one.
    let lines: Vec<Value> = std::fs::read_to_string(&intervals)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["type"] == "interval")
        .collect();
    let last_busy = lines
        .iter()
        .rposition(|l| l["stages"][0]["in"] != 0)
        .expect("an interval with packets");
    let quiet_after = lines.len() - 1 - last_busy;
    assert!(quiet_after >= 3, "{quiet_after} quiet intervals: {lines:?}");
}

/// A DNS query (RD set, class IN) for `name` with `id` and `qtype`.
fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    q
}

#[test]
fn capture_lua_prints_the_dns_queries_sent_on_loopback() {
    // examples/lua/capture.lua on `lo`, on a port of our own (a bound socket,
    // so nothing answers with ICMP), until it has seen 3 packets. We send a
    // round of three queries over and over until it stops: the three it saw
    // are consecutive sends, each printed as dump.lua prints a message.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let sport = socket.local_addr().unwrap().port();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lua/capture.lua");
    let mut child = testkit::dnsluice()
        .arg("script")
        .arg(&example)
        .args(["lo", "3", &port.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sent = [
        (1u16, "a.capture.test", 1u16, "A"),
        (2, "bb.capture.test", 28, "AAAA"),
        (3, "ccc.capture.test", 15, "MX"),
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = 'outer: loop {
        for (id, name, qtype, _) in sent {
            socket
                .send_to(&query(id, name, qtype), ("127.0.0.1", port))
                .unwrap();
            if let Some(status) = child.try_wait().unwrap() {
                break 'outer status;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "capture.lua did not stop after 3 packets"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut out = String::new();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let block = |(id, name, _, qtype): (u16, &str, u16, &str)| {
        format!(
            "udp 127.0.0.1:{sport} -> 127.0.0.1:{port}\n  id {id} query opcode QUERY rcode NOERROR flags [rd]\n  qd 1 an 0 ns 0 ar 0\n  question: {name}. IN {qtype}\n"
        )
    };
    // Whichever query it saw first, the next two follow in the order sent.
    let first = out
        .lines()
        .nth(1)
        .and_then(|l| l.split(' ').nth(3))
        .and_then(|id| id.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no message printed:\n{out}\n{err}"));
    let want: String = (0..3).map(|i| block(sent[(first - 1 + i) % 3])).collect();
    assert_eq!(out, want);
}

/// A live capture that cannot keep up (stopped while 20,000 packets of a
/// kilobyte come, with a 256 KiB kernel buffer) says what the kernel
/// matched and dropped (its own counts, as tcpdump prints them: on `lo`
/// each packet twice), and a warning says so. The kernel's counts were
/// never asked for.
#[test]
fn a_live_capture_reports_what_the_kernel_dropped() {
    const FLOOD: u64 = 20_000;
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    let (stats, intervals, file) = (
        temp_path("drops.json"),
        temp_path("drops_intervals.jsonl"),
        temp_path("drops.toml"),
    );
    std::fs::write(
        &file,
        format!(
            "[[stage]]\nmodule = \"input.pcap\"\ninterface = \"lo\"\nfilter = \"udp and dst port {port} and host 127.0.0.1\"\nbuffer_kib = 256\n\
             [[stage]]\nmodule = \"output.null\"\n"
        ),
    )
    .unwrap();
    let mut child = testkit::dnsluice()
        .args(["run", &file.display().to_string(), "-q", "--stats-json"])
        .arg(&stats)
        .args(["--stats-interval", "100ms", "--stats-jsonl"])
        .arg(&intervals)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until the capture has read a packet: it is open.
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut early = 0u64;
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&intervals)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|l| l["stages"][0]["in"].as_u64() > Some(0))
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "no packet read"
        );
        socket.send_to(b"up?", ("127.0.0.1", port)).unwrap();
        early += 1;
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = child.id() as i32;
    // SAFETY: signals to our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let payload = [0u8; 1000];
    for _ in 0..FLOOD {
        socket.send_to(&payload, ("127.0.0.1", port)).unwrap();
    }
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = testkit::wait_within(&mut child, std::time::Duration::from_secs(20))
        .expect("the capture did not stop");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{err}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let input = &summary["stages"][0];
    let read = input["in"].as_u64().unwrap();
    let dropped = input["errors"]["dropped_by_kernel"].as_u64().unwrap_or(0);
    let received = input["counters"]["received_by_filter"]
        .as_u64()
        .unwrap_or(0);
    // On `lo` the kernel sees each packet twice, sent and received (libpcap
    // skips the sent copy after the ring): its counts are of both.
    let sent = FLOOD + early;
    assert!(
        (2 * FLOOD..=2 * sent).contains(&received),
        "the kernel matched {received}, {sent} sent: {input}"
    );
    assert!(dropped > FLOOD && dropped <= received, "{input}");
    assert!(read <= sent - dropped / 2 + 1, "{input}");
    assert!(
        err.contains(&format!("lo: the kernel dropped {dropped} packets")),
        "{err}"
    );
}
