//! The records of DNS responses in our JSON against tshark's decoding of the
//! same capture (a fixture made with the command at the top of
//! tests/data/tshark/live_mini_en10mb.udp-responses.tsv).

use serde_json::Value;
use std::collections::BTreeMap;
use testkit::corpus::corpus_dir;
use testkit::{assert_ok, run_pipeline, temp_path};

const TYPE_OPT: &str = "41";

/// Field lists of one message, keyed by tshark field name.
type Fields = BTreeMap<&'static str, Vec<String>>;

const KEYS: [&str; 9] = [
    "names", "types", "ttls", "a", "aaaa", "cname", "ns", "mx", "txt",
];

fn tshark_fixture() -> BTreeMap<u64, Fields> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/tshark/live_mini_en10mb.udp-responses.tsv"),
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split(';').collect();
        let mut fields = Fields::new();
        for (key, col) in KEYS.iter().zip(&cols[1..]) {
            let values = if col.is_empty() {
                Vec::new()
            } else {
                col.split('|').map(str::to_string).collect()
            };
            fields.insert(key, values);
        }
        // tshark lists the OPT pseudo-record among the records (name `<Root>`, type 41,
        // no TTL field); we show it as `edns`.
        fields.get_mut("names").unwrap().retain(|n| n != "<Root>");
        fields.get_mut("types").unwrap().retain(|t| t != TYPE_OPT);
        out.insert(cols[0].parse().unwrap(), fields);
    }
    out
}

fn ours() -> BTreeMap<u64, Fields> {
    let json = temp_path("dns.jsonl");
    let text = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.select\"\nqr = \"response\"\ntransport = \"udp\"\n[[stage]]\nmodule = \"output.json\"\npath = \"{}\"\n",
        corpus_dir().join("live_mini_en10mb.pcap").display(),
        json.display()
    );
    assert_ok(&run_pipeline(&text, &["-q"]), "dnsluice run");
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(&json).unwrap().lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let mut fields: Fields = KEYS.iter().map(|k| (*k, Vec::new())).collect();
        let dns = &row["dns"];
        for section in ["answer", "authority", "additional"] {
            for rr in dns[section].as_array().unwrap() {
                let name = rr["name"]
                    .as_str()
                    .unwrap()
                    .trim_end_matches('.')
                    .to_string();
                let rtype = rr["type"].as_str().unwrap();
                let number = dnsluice::core::dns::mnemonic::rtype_from_str(rtype).unwrap();
                // tshark 4.0 files an SRV record's owner under dns.srv.name, not dns.resp.name.
                if rtype != "SRV" {
                    fields.get_mut("names").unwrap().push(name);
                }
                fields.get_mut("types").unwrap().push(number.to_string());
                fields.get_mut("ttls").unwrap().push(rr["ttl"].to_string());
                let data = rr["data"].as_str().unwrap();
                let plain = |d: &str| d.trim_end_matches('.').to_string();
                match rtype {
                    "A" => fields.get_mut("a").unwrap().push(data.into()),
                    "AAAA" => fields.get_mut("aaaa").unwrap().push(data.into()),
                    "CNAME" => fields.get_mut("cname").unwrap().push(plain(data)),
                    "NS" => fields.get_mut("ns").unwrap().push(plain(data)),
                    "MX" => fields
                        .get_mut("mx")
                        .unwrap()
                        .push(plain(data.split_once(' ').unwrap().1)),
                    "TXT" => {
                        // One string per record here: "text" → text.
                        let text = data
                            .strip_prefix('"')
                            .and_then(|d| d.strip_suffix('"'))
                            .unwrap();
                        fields
                            .get_mut("txt")
                            .unwrap()
                            .push(text.replace("\\\"", "\""));
                    }
                    _ => {}
                }
            }
        }
        out.insert(row["frame"].as_u64().unwrap(), fields);
    }
    out
}

#[test]
fn response_records_match_tshark() {
    let tshark = tshark_fixture();
    let ours = ours();
    assert!(tshark.len() > 400, "fixture has {} responses", tshark.len());
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        tshark.keys().collect::<Vec<_>>(),
        "same responses"
    );
    let mut records = 0;
    for (frame, want) in &tshark {
        assert_eq!(&ours[frame], want, "frame {frame}");
        records += want["names"].len();
    }
    assert!(records > 1000, "{records} records compared");
}
