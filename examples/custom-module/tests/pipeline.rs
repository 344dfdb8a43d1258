//! The example binary runs a pipeline that uses its own module by name.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

#[test]
fn custom_module_counts_packets_per_source_like_tshark() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = root.join("tests/data/corpus");
    // Under the target directory (cargo's scratch directory for tests), not /tmp.
    let stats = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("custom-module-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_dnsluice-example-custom-module"))
        .current_dir(&root)
        .args(["run", "examples/custom-module/pipeline.toml", "--set"])
        .arg(format!(
            "0.path={}",
            corpus.join("vlan_qinq.pcap").display()
        ))
        .args(["--set", "2.top=100", "--stats-json"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let stage = &stats["stages"][2];
    assert_eq!(stage["module"], "filter.count-by-source");
    let got: BTreeMap<String, u64> = stage["counters"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();

    // tshark's view of the same file: the `src` column of every IP frame.
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(corpus.join("vlan_qinq.pcap.truth.json")).unwrap(),
    )
    .unwrap();
    let columns: Vec<&str> = truth["frames"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let src = columns.iter().position(|c| *c == "src").unwrap();
    let mut want = BTreeMap::new();
    for row in truth["frames"]["rows"].as_array().unwrap() {
        if let Some(address) = row[src].as_str() {
            *want.entry(format!("src {address}")).or_insert(0u64) += 1;
        }
    }
    assert!(!want.is_empty());
    assert_eq!(got, want);
}
