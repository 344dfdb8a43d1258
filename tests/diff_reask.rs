//! `dnsluice diff --reask` over HTTPS with more differing queries than a
//! window holds: every one is asked again and judged on its new answer.
//! The HTTPS client kept its outcomes in a channel sized for a caller that
//! takes them at each query; `--reask` sends them all first, and all but
//! about 1,100 were dropped: those queries were never judged again, and an
//! answer that had changed was reported as a stable difference.

use serde_json::Value;
use testkit::{dnsluice, run_ok, temp_path, FaultKind, FaultServer, TestCert};

/// More than the old channel's room (the window of 100, the queue of 1,024).
const NAMES: usize = 2000;

#[test]
fn every_differing_query_is_asked_again_over_https() {
    let cert = TestCert::generate("dns.test");
    let (a, b) = (
        FaultServer::start(FaultKind::Https { cert: cert.clone() }),
        FaultServer::start(FaultKind::Https { cert: cert.clone() }),
    );
    let url = |server: &FaultServer| format!("https://{}/dns-query", server.addr());
    let ca = cert.ca_file().to_str().unwrap().to_string();
    let tls = ["--ca-file", &ca, "--tls-name", "dns.test"];
    // `flip` names: the address the first time a server is asked, NXDOMAIN
    // after. Asked of the second server once before, the two servers then
    // differ on every name, and the first one's answer changes when asked
    // again: every difference is unstable.
    let names = temp_path("flip-names.txt");
    let text: String = (0..NAMES).map(|i| format!("flip.n{i}.example\n")).collect();
    std::fs::write(&names, text).unwrap();
    run_ok(
        dnsluice()
            .args([
                "lookup",
                "A",
                "--transport",
                "https",
                "--name-servers",
                &url(&b),
            ])
            .args(tls)
            .arg("--output")
            .arg(temp_path("warm.jsonl"))
            .stdin(std::fs::File::open(&names).unwrap()),
    );
    let (lines, summary) = (temp_path("reask.jsonl"), temp_path("reask.json"));
    run_ok(
        dnsluice()
            .arg("diff")
            .arg(&names)
            .args([
                "--transport",
                "https",
                "--server",
                &url(&a),
                "--server",
                &url(&b),
            ])
            .args(tls)
            .args(["--reask", "1", "--output"])
            .arg(&lines)
            .arg("--summary")
            .arg(&summary),
    );
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let reported = std::fs::read_to_string(&lines).unwrap().lines().count();
    assert_eq!(summary["unstable"], NAMES, "{summary}");
    assert_eq!(reported, 0, "differences reported as stable: {summary}");
}
