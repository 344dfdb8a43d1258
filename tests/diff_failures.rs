//! What `dnsluice diff` says of queries a server did not answer: two
//! servers that both fail a query agree (it is not differing), but the
//! summary counts it as answered by no server, and each server's failures
//! by kind. Before, twenty queries that no server answered read as "20
//! queries, 0 differing" and nothing more.

use serde_json::{json, Value};
use std::net::UdpSocket;
use testkit::{dnsluice, run_ok, temp_path};

/// Runs `dnsluice diff NAMES --server A --server B --timeout 100ms`; its
/// summary and what it printed.
fn diff(names: &std::path::Path, servers: [&str; 2]) -> (Value, String) {
    let summary = temp_path("failures-summary.json");
    let out = run_ok(
        dnsluice()
            .arg("diff")
            .arg(names)
            .args(["--server", servers[0], "--server", servers[1]])
            .args(["--timeout", "100ms", "--output", "/dev/null", "--summary"])
            .arg(&summary),
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    (
        serde_json::from_str(&text).unwrap(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn queries_no_server_answered_are_counted_by_server_and_kind() {
    // Two sockets that take the queries and never answer.
    let silent = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    let servers = silent
        .each_ref()
        .map(|s| s.local_addr().unwrap().to_string());
    let names = temp_path("failures-names.txt");
    let text: String = (0..20).map(|i| format!("n{i}.example. A\n")).collect();
    std::fs::write(&names, &text).unwrap();
    let (summary, stderr) = diff(&names, [&servers[0], &servers[1]]);
    // 20 lines of the names file, each asked, none answered.
    assert_eq!(summary["queries"], 20, "{summary}");
    assert_eq!(summary["differing"], 0, "{summary}");
    assert_eq!(summary["no_answer_from_any"], 20, "{summary}");
    assert_eq!(
        summary["failed"],
        json!({ servers[0].clone(): {"timeout": 20}, servers[1].clone(): {"timeout": 20} }),
        "{summary}"
    );
    assert!(stderr.contains("20 answered by no server"), "{stderr}");
}
