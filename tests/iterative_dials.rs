//! `lookup --iterative` against an authority whose TCP is dead, as on the
//! internet (a server that answers UDP with TC=1 and drops or refuses
//! TCP): each name still gets one record within its `--name-timeout`, the
//! dial included, and a refused dial is remembered, so the names after it
//! do not dial again. The root here is an in-process fault server whose
//! `tc` names are truncated over UDP (testkit's behaviours).

use serde_json::Value;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::{dnsluice, run_ok, temp_path, FaultKind, FaultServer};

/// Runs `lookup A --iterative` of `names` `tc.nI.example` from the root
/// at `root`; the records and the statistics, and how long it took.
fn lookup(root: SocketAddr, names: usize, args: &[&str]) -> (Vec<Value>, Value, Duration) {
    let input = temp_path("dials-names.txt");
    let text: String = (0..names).map(|i| format!("tc.n{i}.example\n")).collect();
    std::fs::write(&input, text).unwrap();
    let stats = temp_path("dials-stats.json");
    let started = Instant::now();
    let out = run_ok(
        dnsluice()
            .args(["lookup", "A", "--iterative", "-q", "--name-servers"])
            .arg(root.to_string())
            .args(["--authority-port", &root.port().to_string()])
            .arg("--input")
            .arg(&input)
            .arg("--stats-json")
            .arg(&stats)
            .args(args),
    );
    let took = started.elapsed();
    let records = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stats = serde_json::from_str(&std::fs::read_to_string(Path::new(&stats)).unwrap()).unwrap();
    (records, stats, took)
}

/// Each of the `names` names has exactly one record.
fn one_record_each(records: &[Value], names: usize) {
    let mut got: Vec<String> = records
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..names).map(|i| format!("tc.n{i}.example")).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn a_refused_tcp_dial_is_remembered_not_made_again_for_each_name() {
    // UDP only: the same port over TCP refuses the connection.
    let root = FaultServer::start(FaultKind::Udp);
    let (records, stats, _) = lookup(root.addr(), 20, &["--workers", "20"]);
    one_record_each(&records, 20);
    let iterative = &stats["iterative"];
    // Every name's query over TCP failed; at most one dial for each of
    // the server's 4 connection slots was made, the rest were spared.
    assert_eq!(iterative["network_errors"], 20, "{iterative}");
    let spared = iterative["tcp_dials_spared"].as_u64().unwrap();
    assert!((16..=19).contains(&spared), "{iterative}");
}

/// A TCP listener on 127.0.0.1:`port` that never accepts, its queue full:
/// the kernel drops further handshakes, so a dial to it hangs.
fn hanging_listener(port: u16) -> (OwnedFd, Vec<std::net::TcpStream>) {
    // SAFETY: a socket we own from here on; bind and listen on a zeroed,
    // filled-in address of the right size.
    let fd = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let owned = OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        owned
    };
    // A backlog of 0 holds one connection: two fill it for good.
    let target: SocketAddr = ([127, 0, 0, 1], port).into();
    let fill: Vec<std::net::TcpStream> = (0..2)
        .filter_map(|_| {
            std::net::TcpStream::connect_timeout(&target, Duration::from_millis(300)).ok()
        })
        .collect();
    assert!(!fill.is_empty());
    let hangs = std::net::TcpStream::connect_timeout(&target, Duration::from_millis(300));
    assert!(hangs.is_err(), "a dial to the full listener was answered");
    (fd, fill)
}

#[test]
fn a_hanging_tcp_dial_ends_within_the_names_budget() {
    let root = FaultServer::start(FaultKind::Udp);
    let _tcp = hanging_listener(root.addr().port());
    let args = ["--workers", "20", "--timeout", "2s", "--name-timeout", "1s"];
    let (records, _, took) = lookup(root.addr(), 20, &args);
    one_record_each(&records, 20);
    for record in &records {
        let ms = record["duration_ms"].as_f64().unwrap();
        assert!(ms < 1300.0, "past its 1 s budget: {record}");
        assert_ne!(record["status"], "NOERROR", "{record}");
    }
    // Twenty names at once, each within its second (it took 2 s a name,
    // and the names behind a dial waited for it, before).
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Two at a time: the first dials wait out half the --timeout and
    // more, and are remembered; the names after them do not dial (ten
    // rounds of a second, else).
    let args = ["--workers", "2", "--timeout", "1s", "--name-timeout", "1s"];
    let (records, stats, took) = lookup(root.addr(), 20, &args);
    one_record_each(&records, 20);
    let spared = stats["iterative"]["tcp_dials_spared"].as_u64().unwrap();
    assert!(spared >= 14, "{}", stats["iterative"]);
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// An authority that answers one query a connection and then closes it
/// (`okclose`), asked by fifty walks at once over `--transport tcp`: the
/// queries pipelined behind the answered one see the connection close, and
/// are asked again on a new one within their time; every name gets the
/// answer (192.0.2.1, which the server gives each `okclose` name).
#[test]
fn queries_on_a_connection_the_server_closes_are_asked_again() {
    let root = FaultServer::start(FaultKind::Tcp);
    let input = temp_path("okclose-names.txt");
    let names = 200;
    let text: String = (0..names)
        .map(|i| format!("okclose.n{i}.example\n"))
        .collect();
    std::fs::write(&input, text).unwrap();
    let out = run_ok(
        dnsluice()
            .args([
                "lookup",
                "A",
                "--iterative",
                "-q",
                "--transport",
                "tcp",
                "--name-servers",
            ])
            .arg(root.addr().to_string())
            .args(["--authority-port", &root.addr().port().to_string()])
            .args(["--workers", "50", "--input"])
            .arg(&input),
    );
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), names);
    let failed: Vec<&Value> = records
        .iter()
        .filter(|r| r["status"] != "NOERROR")
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed, the first: {}",
        failed.len(),
        failed[0]
    );
    for record in &records {
        let answer = &record["data"]["answers"][0];
        assert_eq!(answer["answer"], "192.0.2.1", "{record}");
    }
}
