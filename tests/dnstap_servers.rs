//! dnstap from real emitters on loopback, each started by the test with its
//! own config: knot (`mod-dnstap` to a file), unbound (`dnstap-enable`,
//! client and resolver messages, to our collector's unix socket) and
//! dnsdist (`DnstapLogAction`/`DnstapLogResponseAction` to our collector
//! over TCP), fed a known list of queries from the test's own sockets. The
//! truth is what those sockets sent and received: every query and response
//! must arrive with the right dnstap type, addresses, ports, transport and
//! wire bytes. What we write (`output.dnstap`) must read back, through
//! `dnstap-ldns -r`, exactly as the emitter's own file does.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::daemon::{port, start, wait_answering};
use testkit::{assert_ok, dnsluice, run_ok, run_pipeline, temp_dir, temp_path};

/// The zone the test servers serve: a few names of every answer kind.
const ZONE: &str = "$ORIGIN tap.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 127.0.0.1\nwww A 192.0.2.1\nwww AAAA 2001:db8::1\nmail MX 10 www\ntxt TXT \"dnstap test\"\n";

/// The queries: (name, type), sent over UDP except the last two (TCP).
const QUERIES: [(&str, u16); 6] = [
    ("www.tap.test.", 1),
    ("www.tap.test.", 28),
    ("mail.tap.test.", 15),
    ("txt.tap.test.", 16),
    ("nx.tap.test.", 1),
    ("tap.test.", 6),
];
const TCP_FROM: usize = 4;

/// One exchange as the test's socket saw it.
#[derive(Debug)]
struct Exchange {
    client: SocketAddr,
    tcp: bool,
    query: Vec<u8>,
    answer: Vec<u8>,
}

/// Sends [`QUERIES`] to `server` from fresh sockets; what went each way.
fn ask(server: SocketAddr) -> Vec<Exchange> {
    let mut out = Vec::new();
    for (i, (name, qtype)) in QUERIES.iter().enumerate() {
        let query = testkit::wire::query(0x1000 + i as u16, name, *qtype, Some(1232));
        let (client, answer) = if i < TCP_FROM {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            socket.send_to(&query, server).unwrap();
            let mut buf = vec![0u8; 65535];
            let n = socket.recv(&mut buf).unwrap();
            buf.truncate(n);
            (socket.local_addr().unwrap(), buf)
        } else {
            let mut stream = TcpStream::connect(server).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut framed = (query.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&query);
            stream.write_all(&framed).unwrap();
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).unwrap();
            let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
            stream.read_exact(&mut buf).unwrap();
            (stream.local_addr().unwrap(), buf)
        };
        assert_eq!(&answer[..2], &query[..2], "{name}: answer id");
        out.push(Exchange {
            client,
            tcp: i >= TCP_FROM,
            query,
            answer,
        });
    }
    out
}

/// A message read back from a dnstap file: its JSON line and its wire bytes.
#[derive(Debug)]
struct Tapped {
    json: Value,
    wire: Vec<u8>,
}

impl Tapped {
    fn kind(&self) -> &str {
        self.json["dnstap"]["type"].as_str().unwrap()
    }
    fn src(&self) -> SocketAddr {
        let j = &self.json;
        SocketAddr::new(
            j["src"].as_str().unwrap().parse().unwrap(),
            j["sport"].as_u64().unwrap() as u16,
        )
    }
    fn dst(&self) -> SocketAddr {
        let j = &self.json;
        SocketAddr::new(
            j["dst"].as_str().unwrap().parse().unwrap(),
            j["dport"].as_u64().unwrap() as u16,
        )
    }
    fn transport(&self) -> &str {
        self.json["transport"].as_str().unwrap()
    }
    fn qname(&self) -> &str {
        self.json["dns"]["question"][0]["name"].as_str().unwrap()
    }
}

/// The DNS messages of the packets of a classic pcap file (raw IPv4, as
/// `output.pcap` writes dnstap's made-up packets): after the UDP header,
/// or after the TCP header and the two-byte length.
fn pcap_messages(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let packet = &bytes[at + 16..at + 16 + caplen];
        let ihl = usize::from(packet[0] & 0x0f) * 4;
        let payload = match packet[9] {
            17 => &packet[ihl + 8..],
            6 => &packet[ihl + usize::from(packet[ihl + 12] >> 4) * 4 + 2..],
            p => panic!("protocol {p}"),
        };
        out.push(payload.to_vec());
        at += 16 + caplen;
    }
    out
}

/// Reads our dnstap file `tap` (through input.dnstap) as JSON and as a pcap.
fn read_back(tap: &Path) -> Vec<Tapped> {
    let json = temp_path("tap.jsonl");
    let pcap = temp_path("tap.pcap");
    for output in [
        format!("module = \"output.json\"\npath = \"{}\"", json.display()),
        format!("module = \"output.pcap\"\npath = \"{}\"", pcap.display()),
    ] {
        let text = format!(
            "[[stage]]\nmodule = \"input.dnstap\"\npath = \"{}\"\n[[stage]]\n{output}\n",
            tap.display()
        );
        let out = run_pipeline(&text, &["-q"]);
        assert_ok(&out, "dnsluice run");
    }
    let lines: Vec<Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let wires = pcap_messages(&pcap);
    assert_eq!(lines.len(), wires.len());
    lines
        .into_iter()
        .zip(wires)
        .map(|(json, wire)| Tapped { json, wire })
        .collect()
}

/// Our collector: input.dnstap listening at `listen` (a TOML key and
/// value), ending after one sender's connection, writing `output.dnstap`,
/// and its interval statistics every 20 ms to `tap` + `.jsonl`.
fn collector(listen: &str, tap: &Path) -> Child {
    let text = format!(
        "[[stage]]\nmodule = \"input.dnstap\"\n{listen}\nconnections = 1\nidle_timeout = \"60s\"\n[[stage]]\nmodule = \"output.dnstap\"\npath = \"{}\"\n",
        tap.display()
    );
    let file = temp_path("collector.toml");
    std::fs::write(&file, text).unwrap();
    dnsluice()
        .arg("run")
        .arg(&file)
        .args(["--stats-interval", "20ms", "--stats-jsonl"])
        .arg(intervals(tap))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Where [`collector`] writes its interval statistics.
fn intervals(tap: &Path) -> PathBuf {
    tap.with_extension("jsonl")
}

/// Waits until the collector writing `tap` has taken in more than `count`
/// messages (its input's count, summed over its intervals), asking
/// `server` a question from `pump` every 20 ms meanwhile: an emitter
/// writes in order, so once a message after the first `count` is in, all
/// of those are, and it may be stopped. (The collector writes an interval
/// when messages flow, so the pump also makes the last ones counted.)
/// Fails after 20 s.
fn wait_collected(tap: &Path, count: u64, server: SocketAddr, pump: &UdpSocket) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let query = testkit::wire::query(0x7777, "www.tap.test.", 1, None);
    let mut seen = 0;
    while seen <= count {
        assert!(
            Instant::now() < deadline,
            "the collector took in {seen} of {count} messages"
        );
        pump.send_to(&query, server).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let text = std::fs::read_to_string(intervals(tap)).unwrap_or_default();
        seen = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|v| v["type"] == "interval")
            .filter_map(|v| v["stages"][0]["out"].as_u64())
            .sum();
    }
}

/// The messages of `tapped` that are not the pump's (see [`wait_collected`]).
fn not_pumped<'a>(tapped: &'a [Tapped], pump: &UdpSocket) -> Vec<&'a Tapped> {
    let pump = pump.local_addr().unwrap();
    tapped
        .iter()
        .filter(|t| t.src() != pump && t.dst() != pump)
        .collect()
}

/// Waits until `server` accepts TCP connections (it listens on UDP from
/// the same moment): ready, without a DNS message it would tap.
fn wait_listening(server: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(server).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {server}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `dnstap-ldns -r FILE`'s reading of each message: its type (`CQ`, `RR`,
/// ...), transport, size and question, in the file's order.
fn ldns_messages(tap: &Path) -> Vec<String> {
    dnstap_ldns(tap)
        .lines()
        .map(|line| {
            // `DATE TIME TYPE ADDRESS PROTOCOL SIZEb "QNAME" CLASS QTYPE`
            let f: Vec<&str> = line.split_whitespace().collect();
            assert!(f.len() >= 9, "dnstap-ldns: {line}");
            format!("{} {} {} {} {}", f[2], f[4], f[5], f[6], f[8])
        })
        .collect()
}

/// The same of our reading of the file (input.dnstap as JSON).
fn our_messages(tapped: &[Tapped]) -> Vec<String> {
    tapped
        .iter()
        .map(|t| {
            let kind: String = t.kind().split('_').map(|w| &w[..1]).collect();
            let question = &t.json["dns"]["question"][0];
            format!(
                "{kind} {} {}b \"{}\" {}",
                t.transport().to_ascii_uppercase(),
                t.wire.len(),
                t.qname(),
                question["type"].as_str().unwrap()
            )
        })
        .collect()
}

/// Waits for the collector to end by itself; its stderr.
fn collector_done(mut child: Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            assert!(status.success(), "collector: {err}");
            return err;
        }
        assert!(
            Instant::now() < deadline,
            "the collector did not end after its sender closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every exchange arrives as a query and a response of `kinds`, with the
/// test socket's address and port, the server's, the transport and the bytes.
fn check_client_side(
    tapped: &[Tapped],
    exchanges: &[Exchange],
    server: SocketAddr,
    kinds: (&str, &str),
) {
    for e in exchanges {
        let transport = if e.tcp { "tcp" } else { "udp" };
        let query: Vec<&Tapped> = tapped
            .iter()
            .filter(|t| t.kind() == kinds.0 && t.src() == e.client)
            .collect();
        let seen: Vec<(String, SocketAddr, SocketAddr)> = tapped
            .iter()
            .map(|t| (t.kind().to_string(), t.src(), t.dst()))
            .collect();
        assert_eq!(query.len(), 1, "{} from {}: {seen:?}", kinds.0, e.client);
        let q = query[0];
        assert_eq!((q.dst(), q.transport()), (server, transport));
        assert!(q.wire == e.query, "{}: query bytes", e.client);
        let response: Vec<&Tapped> = tapped
            .iter()
            .filter(|t| t.kind() == kinds.1 && t.dst() == e.client)
            .collect();
        assert_eq!(response.len(), 1, "{} to {}", kinds.1, e.client);
        let r = response[0];
        assert_eq!((r.src(), r.transport()), (server, transport));
        assert!(r.wire == e.answer, "{}: response bytes", e.client);
    }
}

/// `dnstap-ldns -r FILE` (its one-line-per-message form).
fn dnstap_ldns(path: &Path) -> String {
    let out = run_ok(Command::new("dnstap-ldns").arg("-r").arg(path));
    String::from_utf8(out.stdout).unwrap()
}

/// knot serving [`ZONE`] on `port`, with mod-dnstap when `sink` is given.
fn knot(dir: &Path, port: u16, sink: Option<&Path>) -> testkit::daemon::Daemon {
    std::fs::write(dir.join("tap.test.zone"), ZONE).unwrap();
    std::fs::create_dir_all(dir.join("db")).unwrap();
    let d = dir.display();
    let mut conf = format!(
        "server:\n    rundir: \"{d}\"\n    listen: 127.0.0.1@{port}\nlog:\n  - target: stderr\n    any: warning\ndatabase:\n    storage: \"{d}/db\"\n"
    );
    if let Some(sink) = sink {
        conf += &format!("mod-dnstap:\n  - id: tap\n    sink: \"{}\"\n    log-queries: on\n    log-responses: on\n", sink.display());
    }
    conf += &format!("template:\n  - id: default\n    storage: \"{d}\"\n    file: \"%s.zone\"\n");
    if sink.is_some() {
        conf += "    global-module: mod-dnstap/tap\n";
    }
    conf += "zone:\n  - domain: tap.test.\n";
    std::fs::write(dir.join("knot.conf"), conf).unwrap();
    let conf = dir.join("knot.conf").display().to_string();
    let daemon = start("knot", "knotd", &["-c", &conf], dir);
    wait_answering(
        format!("127.0.0.1:{port}").parse().unwrap(),
        "tap.test.",
        dir,
        "knot",
    );
    daemon
}

#[test]
fn knot_mod_dnstap_file() {
    let dir = temp_dir("knot-dnstap");
    let sink = dir.join("knot.tap");
    let server: SocketAddr = format!("127.0.0.1:{}", port(0)).parse().unwrap();
    let knot = knot(&dir, server.port(), Some(&sink));
    let exchanges = ask(server);
    knot.stop();
    let tapped = read_back(&sink);
    check_client_side(&tapped, &exchanges, server, ("AUTH_QUERY", "AUTH_RESPONSE"));
    // Nothing else but the readiness probe(s) before the queries.
    let ours = tapped
        .iter()
        .filter(|t| {
            exchanges
                .iter()
                .any(|e| e.client == t.src() || e.client == t.dst())
        })
        .count();
    assert_eq!(ours, 2 * QUERIES.len());
    // Our copy of knot's file reads, in dnstap-ldns, as knot's own does.
    let copy = dir.join("copy.tap");
    let text = format!("[[stage]]\nmodule = \"input.dnstap\"\npath = \"{}\"\n[[stage]]\nmodule = \"output.dnstap\"\npath = \"{}\"\n", sink.display(), copy.display());
    assert_ok(&run_pipeline(&text, &["-q"]), "dnsluice run");
    let (theirs, ours) = (dnstap_ldns(&sink), dnstap_ldns(&copy));
    assert!(theirs.lines().count() >= 2 * QUERIES.len());
    assert_eq!(ours, theirs);
}

#[test]
fn unbound_client_and_resolver_messages_to_our_unix_socket() {
    let dir = temp_dir("unbound-dnstap");
    let upstream: SocketAddr = format!("127.0.0.1:{}", port(1)).parse().unwrap();
    let server: SocketAddr = format!("127.0.0.1:{}", port(2)).parse().unwrap();
    let _knot = knot(&dir, upstream.port(), None);
    let socket = dir.join("dnstap.sock");
    let tap = dir.join("unbound.tap");
    let collector = collector(&format!("unix = \"{}\"", socket.display()), &tap);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "the collector did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let d = dir.display();
    let conf = format!(
        "server:\n  interface: 127.0.0.1\n  port: {}\n  do-daemonize: no\n  username: \"\"\n  chroot: \"\"\n  directory: \"{d}\"\n  pidfile: \"{d}/unbound.pid\"\n  use-syslog: no\n  logfile: \"\"\n  do-ip6: no\n  access-control: 127.0.0.0/8 allow\n  do-not-query-localhost: no\n  module-config: \"iterator\"\n  qname-minimisation: no\n  num-threads: 1\n  local-zone: \"test.\" nodefault\nremote-control:\n  control-enable: no\nstub-zone:\n  name: \"tap.test.\"\n  stub-addr: 127.0.0.1@{}\ndnstap:\n  dnstap-enable: yes\n  dnstap-socket-path: \"{}\"\n  dnstap-send-identity: yes\n  dnstap-log-client-query-messages: yes\n  dnstap-log-client-response-messages: yes\n  dnstap-log-resolver-query-messages: yes\n  dnstap-log-resolver-response-messages: yes\n",
        server.port(),
        upstream.port(),
        socket.display()
    );
    std::fs::write(dir.join("unbound.conf"), conf).unwrap();
    let conf = dir.join("unbound.conf").display().to_string();
    let unbound = start("unbound", "unbound", &["-d", "-c", &conf], &dir);
    wait_listening(server);
    let exchanges = ask(server);
    // unbound writes its dnstap from a thread of its own, and a SIGTERM
    // drops what it has not written yet: stop it once the collector has
    // every message, a client query and response for each exchange and a
    // resolver query and response for each question (none twice).
    let questions: std::collections::BTreeSet<_> = QUERIES.iter().collect();
    let messages = 2 * QUERIES.len() + 2 * questions.len();
    let pump = UdpSocket::bind("127.0.0.1:0").unwrap();
    wait_collected(&tap, messages as u64, server, &pump);
    unbound.stop();
    let stderr = collector_done(collector);
    let tapped = read_back(&tap);
    assert_eq!(not_pumped(&tapped, &pump).len(), messages, "{stderr}");
    // dnstap-ldns reads the file as we do: type, transport, size, question.
    assert_eq!(ldns_messages(&tap), our_messages(&tapped));
    check_client_side(
        &tapped,
        &exchanges,
        server,
        ("CLIENT_QUERY", "CLIENT_RESPONSE"),
    );
    // (unbound serves `test.` itself unless told not to: the first answer
    // must be knot's address for www, not a local NXDOMAIN.)
    assert_eq!(
        testkit::wire::a_records(&exchanges[0].answer),
        Some(vec!["192.0.2.1".parse().unwrap()])
    );
    // The resolver side: unbound asked knot for every name (the probe's
    // SOA first), from itself to knot's address, and knot answered.
    let resolved = |kind: &str, to_upstream: bool| -> Vec<String> {
        let mut names: Vec<String> = tapped
            .iter()
            .filter(|t| {
                t.kind() == kind
                    && if to_upstream {
                        t.dst() == upstream
                    } else {
                        t.src() == upstream
                    }
            })
            .map(|t| t.qname().to_string())
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let mut want: Vec<String> = QUERIES.iter().map(|(n, _)| n.to_string()).collect();
    want.sort();
    want.dedup();
    assert_eq!(resolved("RESOLVER_QUERY", true), want, "{stderr}");
    assert_eq!(resolved("RESOLVER_RESPONSE", false), want);
}

#[test]
fn dnsdist_dnstap_log_actions_to_our_tcp_collector() {
    let dir = temp_dir("dnsdist-dnstap");
    let backend: SocketAddr = format!("127.0.0.1:{}", port(3)).parse().unwrap();
    let server: SocketAddr = format!("127.0.0.1:{}", port(4)).parse().unwrap();
    let listen: SocketAddr = format!("127.0.0.1:{}", port(5)).parse().unwrap();
    let _knot = knot(&dir, backend.port(), None);
    let tap = dir.join("dnsdist.tap");
    let collector = collector(&format!("tcp = \"{listen}\""), &tap);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(listen).is_err() {
        assert!(Instant::now() < deadline, "the collector did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    // (That probe sent no frame: the collector does not count it as a sender.)
    let conf = format!(
        "setSecurityPollSuffix('')\nsetLocal('{server}')\nnewServer({{address='{backend}'}})\nfstl = newFrameStreamTcpLogger('{listen}')\naddAction(AllRule(), DnstapLogAction('dnsdist', fstl))\naddResponseAction(AllRule(), DnstapLogResponseAction('dnsdist', fstl))\n"
    );
    std::fs::write(dir.join("dnsdist.conf"), conf).unwrap();
    let conf = dir.join("dnsdist.conf").display().to_string();
    let dnsdist = start(
        "dnsdist",
        "dnsdist",
        &["--supervised", "--disable-syslog", "-C", &conf],
        &dir,
    );
    wait_listening(server);
    let exchanges = ask(server);
    // dnsdist's Frame Streams writer flushes once a second (fstrm's
    // default), and a SIGTERM drops what it has not flushed: stop it once
    // the collector has a query and a response for each exchange.
    let pump = UdpSocket::bind("127.0.0.1:0").unwrap();
    wait_collected(&tap, 2 * QUERIES.len() as u64, server, &pump);
    dnsdist.stop();
    let stderr = collector_done(collector);
    let tapped = read_back(&tap);
    assert_eq!(
        not_pumped(&tapped, &pump).len(),
        2 * QUERIES.len(),
        "{stderr}"
    );
    assert_eq!(ldns_messages(&tap), our_messages(&tapped));
    check_client_side(
        &tapped,
        &exchanges,
        server,
        ("CLIENT_QUERY", "CLIENT_RESPONSE"),
    );
}

/// A collector that takes the connection and never answers READY: the
/// run fails with an error saying so within the reply wait (10 s), rather
/// than waiting for ever.
#[test]
fn a_silent_collector_is_an_error_not_a_hang() {
    let dir = temp_dir("dnstap-silent");
    let socket = dir.join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let held = std::thread::spawn(move || {
        let (connection, _) = listener.accept().unwrap();
        // Held open, never read nor answered, until the run has given up.
        std::thread::sleep(Duration::from_secs(20));
        drop(connection);
    });
    let capture = testkit::corpus::corpus_dir().join("live_lo_en10mb.pcap");
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"output.dnstap\"\nunix = \"{}\"\n",
        capture.display(),
        socket.display()
    );
    let started = Instant::now();
    let out = run_pipeline(&text, &["-q"]);
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("answered with nothing within 10 s, not ACCEPT"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(18), "{took:?}");
    drop(held);
}

/// A collector waiting for its emitters (none connects) stopped by SIGTERM
/// ends at once with status 143 (the first signal went unseen until a
/// frame came; a second one killed it, outputs unfinished).
#[test]
fn a_waiting_collector_stopped_by_sigterm_ends_at_once() {
    let dir = temp_dir("dnstap-stop");
    let pipeline = dir.join("collector.toml");
    std::fs::write(
        &pipeline,
        "[[stage]]\nmodule = \"input.dnstap\"\ntcp = \"127.0.0.1:0\"\n[[stage]]\nmodule = \"output.null\"\n",
    )
    .unwrap();
    let started = Instant::now();
    let (status, stderr) = testkit::stopped_by_sigterm(
        dnsluice().arg("run").arg(&pipeline).arg("-q"),
        Duration::from_secs(1),
    );
    let took = started.elapsed();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(took < Duration::from_secs(4), "{took:?}: {stderr}");
}
