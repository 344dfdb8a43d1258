//! The lookup modules (NSLOOKUP, MXLOOKUP, AXFR, BINDVERSION, SPF, DMARC),
//! the structured RDATA of lookup records, `--output-format zdns` and
//! `--result-verbosity`, against the test knot (tests/servers/up.sh).
//! Expected values come from the zone generator's own record
//! (`zones/typed.json`, `zones/axfr.json`, the records gen_zone.py writes)
//! and from `kdig`. ZDNS 2.1.1's own records are compared with ours by
//! `benches/zdns-agree.sh` (ZDNS is not built in CI).

use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use testkit::{assert_ok, dnsluice};

/// Runs `dnsluice lookup ARGS` against knot with `input`; one record per line.
fn lookup(args: &[&str], input: &str) -> Vec<Value> {
    let knot = testkit::servers().knot.to_string();
    let mut child = dnsluice()
        .arg("lookup")
        .args(["--name-servers", &knot, "-q", "--threads", "4"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsluice runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_ok(&out, format_args!("{args:?}"));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The one record for one name.
fn one(args: &[&str], name: &str) -> Value {
    let mut records = lookup(args, &format!("{name}\n"));
    assert_eq!(records.len(), 1, "{records:?}");
    records.remove(0)
}

/// `kdig +short` of `name` `rtype` from knot (class `class`).
fn kdig(name: &str, rtype: &str, class: &str) -> String {
    let knot = testkit::servers().knot;
    let out = Command::new("kdig")
        .args([&format!("@{}", knot.ip()), "-p", &knot.port().to_string()])
        .args(["+short", "-c", class, name, rtype])
        .output()
        .expect("kdig (package knot-dnsutils) is needed for this test");
    String::from_utf8(out.stdout).unwrap()
}

fn zones_file(name: &str) -> Value {
    let path = testkit::servers().dir.join("zones").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The generator's typed records (typed.json).
fn typed() -> Vec<Value> {
    zones_file("typed.json").as_array().unwrap().clone()
}

/// Our record of `rtype` in `answers` (the first of that type).
fn answer_of<'a>(answers: &'a Value, rtype: &str) -> &'a Value {
    answers
        .as_array()
        .unwrap_or_else(|| panic!("no answers: {answers}"))
        .iter()
        .find(|a| {
            a["type"] == rtype || (matches!(rtype, "CERT" | "SSHFP") && a.get("name").is_some())
        })
        .unwrap_or_else(|| panic!("no {rtype} in {answers}"))
}

/// Every field the generator recorded for each typed record equals ours,
/// in ZDNS's shape (field for field) and in ours (CERT's and SSHFP's own
/// `type` named `cert_type` and `fingerprint_type`, `answer` the
/// presentation form).
#[test]
fn structured_rdata_of_every_type_equals_the_generators_record() {
    let axfr = one(&["AXFR", "--output-format", "zdns"], "axfr.test");
    let transferred = &axfr["results"]["AXFR"]["data"]["servers"][0]["records"];
    for t in typed() {
        let (name, rtype) = (t["name"].as_str().unwrap(), t["type"].as_str().unwrap());
        let ours = if t["via"] == "axfr" {
            transferred
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .unwrap_or_else(|| panic!("{name} not in the transfer"))
                .clone()
        } else {
            let r = one(&[rtype, "--output-format", "zdns"], name);
            answer_of(&r["results"][rtype]["data"]["answers"], rtype).clone()
        };
        assert_eq!(ours["name"], name, "{ours}");
        assert_eq!(ours["class"], "IN");
        assert_eq!(ours["ttl"], t["ttl"]);
        let fields = t["fields"].as_object().unwrap();
        for (key, want) in fields {
            assert_eq!(&ours[key], want, "{name} {rtype} field {key}: {ours}");
        }
        // Nothing beyond the base fields and the generator's.
        for key in ours.as_object().unwrap().keys() {
            let base = ["name", "type", "class", "ttl"].contains(&key.as_str());
            assert!(
                base || fields.contains_key(key),
                "{name}: unexpected {key} in {ours}"
            );
        }
        if t["via"] == "axfr" {
            continue;
        }
        let native = one(&[rtype], name);
        let ours = answer_of(&native["data"]["answers"], rtype);
        assert_eq!(ours["type"], rtype, "{ours}");
        for (key, want) in fields {
            let key = match (rtype, key.as_str()) {
                ("CERT", "type") => "cert_type",
                ("SSHFP", "type") => "fingerprint_type",
                (_, "answer") => continue,
                (_, k) => k,
            };
            assert_eq!(&ours[key], want, "native {name} {key}: {ours}");
        }
    }
}

/// The structured fields, put back into presentation form, equal what
/// `kdig +short` prints for the same record.
#[test]
fn structured_rdata_equals_kdigs_presentation() {
    let mut checked = 0;
    for t in typed().into_iter().filter(|t| t["via"] == "query") {
        let (name, rtype) = (t["name"].as_str().unwrap(), t["type"].as_str().unwrap());
        let r = one(&[rtype, "--output-format", "zdns"], name);
        let ours = answer_of(&r["results"][rtype]["data"]["answers"], rtype);
        let dig = kdig(name, rtype, "IN");
        let dig = dig
            .lines()
            .next()
            .unwrap_or_else(|| panic!("kdig: nothing for {name}"));
        if rtype == "LOC" {
            assert_eq!(
                numbers(dig),
                numbers(ours["coordinates"].as_str().unwrap()),
                "{name}"
            );
        } else {
            assert_eq!(
                normal(&presentation(rtype, ours)),
                normal(dig),
                "{name} {rtype}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} records checked");
}

/// Whitespace collapsed, lower case (kdig writes hex in upper case).
fn normal(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

/// The numbers of a LOC text (hemispheres as signs), `m` units dropped.
fn numbers(text: &str) -> Vec<f64> {
    text.split_whitespace()
        .filter(|t| !matches!(*t, "N" | "S" | "E" | "W"))
        .map(|t| t.trim_end_matches('m').parse::<f64>().unwrap())
        .collect()
}

/// A record of ours written back in presentation form, field by field.
fn presentation(rtype: &str, a: &Value) -> String {
    let s = |k: &str| match &a[k] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let q = |k: &str| format!("\"{}\"", s(k));
    let type_name = |n: &Value| match n.as_u64() {
        Some(1) => "A".to_string(),
        other => format!("TYPE{}", other.unwrap()),
    };
    match rtype {
        "DNSKEY" | "CDNSKEY" => format!(
            "{} {} {} {}",
            s("flags"),
            s("protocol"),
            s("algorithm"),
            s("public_key")
        ),
        "DS" | "CDS" => format!(
            "{} {} {} {}",
            s("key_tag"),
            s("algorithm"),
            s("digest_type"),
            s("digest")
        ),
        "RRSIG" => format!(
            "{} {} {} {} {} {} {} {} {}",
            type_name(&a["type_covered"]),
            s("algorithm"),
            s("labels"),
            s("original_ttl"),
            s("expiration"),
            s("inception"),
            s("keytag"),
            s("signer_name"),
            s("signature")
        ),
        "NSEC" => format!("{}. {}", s("next_domain"), s("type_bit_map")),
        "NSEC3PARAM" => format!(
            "{} {} {} {}",
            s("hash_algorithm"),
            s("flags"),
            s("iterations"),
            s("salt")
        ),
        "TLSA" => format!(
            "{} {} {} {}",
            s("cert_usage"),
            s("selector"),
            s("matching_type"),
            s("certificate")
        ),
        "SMIMEA" => format!(
            "{} {} {} {}",
            s("usage"),
            s("selector"),
            s("matching_type"),
            s("certificate")
        ),
        "SSHFP" => format!("{} {} {}", s("algorithm"), s("type"), s("fingerprint")),
        "NAPTR" => format!(
            "{} {} {} {} {} {}",
            s("order"),
            s("preference"),
            q("flags"),
            q("service"),
            q("regexp"),
            s("replacement")
        ),
        "CERT" => {
            let number = |k: &str, table: &[(&str, u32)]| {
                table
                    .iter()
                    .find(|(n, _)| *n == s(k))
                    .map(|(_, v)| *v)
                    .unwrap()
            };
            format!(
                "{} {} {} {}",
                number("type", &[("PKIX", 1), ("PGP", 3)]),
                s("keytag"),
                number("algorithm", &[("RSASHA256", 8), ("ECDSAP256SHA256", 13)]),
                s("certificate")
            )
        }
        "URI" => format!("{} {} {}", s("priority"), s("weight"), q("target")),
        "SVCB" | "HTTPS" => {
            let mut text = format!("{} {}", s("priority"), s("target"));
            let params = a["svcparams"].as_object();
            // kdig writes the parameters in key order.
            for key in [
                "mandatory",
                "alpn",
                "no-default-alpn",
                "port",
                "ipv4hint",
                "ech",
                "ipv6hint",
                "key65000",
            ] {
                let Some(v) = params.and_then(|p| p.get(key)) else {
                    continue;
                };
                let list = |v: &Value| {
                    v.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_str().unwrap().to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                text += &match (key, v) {
                    ("no-default-alpn", _) => " no-default-alpn".to_string(),
                    ("port", v) => format!(" port={v}"),
                    ("ech", Value::String(b64)) => format!(" ech={b64}"),
                    ("key65000", Value::String(b64)) => {
                        let raw = base64_decode(b64);
                        format!(" key65000=\"{}\"", String::from_utf8(raw).unwrap())
                    }
                    (k, v) => format!(" {k}={}", list(v)),
                };
            }
            text
        }
        "CAA" => format!("{} {} {}", s("flag"), s("tag"), q("value")),
        "SOA" => format!(
            "{}. {}. {} {} {} {} {}",
            s("ns"),
            s("mbox"),
            s("serial"),
            s("refresh"),
            s("retry"),
            s("expire"),
            s("min_ttl")
        ),
        "SRV" => format!(
            "{} {} {} {}",
            s("priority"),
            s("weight"),
            s("port"),
            s("target")
        ),
        "MX" => format!("{} {}", s("preference"), s("answer")),
        "HINFO" => format!("{} {}", q("cpu"), q("os")),
        "TXT" => s("answer")
            .split('\n')
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(" "),
        _ => s("answer"),
    }
}

/// Standard base64 (RFC 4648 §4), for the test's own use.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|&c| c != b'=') {
        bits = bits << 6 | ALPHABET.iter().position(|&a| a == c).unwrap() as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out
}

/// NSLOOKUP: the zone's NS records with the glue knot sends (gen_zone.py:
/// ns1 127.0.0.1, ns2 127.0.0.3); a name without NS records has none; an
/// NXDOMAIN has its status.
#[test]
fn nslookup_gives_each_nameserver_with_its_addresses() {
    let r = one(&["NSLOOKUP"], "lookup.test");
    assert_eq!(r["status"], "NOERROR");
    assert_eq!(
        r["data"]["servers"],
        json!([
            {"name": "ns1.lookup.test", "type": "NS", "ipv4_addresses": ["127.0.0.1"], "ttl": 3600},
            {"name": "ns2.lookup.test", "type": "NS", "ipv4_addresses": ["127.0.0.3"], "ttl": 3600},
        ])
    );
    // One question: the glue in the additional section answered the rest.
    assert_eq!(r["attempts"], 1);
    let r = one(&["NSLOOKUP"], "mx.lookup.test");
    assert_eq!(
        (r["status"].as_str(), r["data"].get("servers")),
        (Some("NOERROR"), None)
    );
    assert_eq!(one(&["NSLOOKUP"], "nx.lookup.test")["status"], "NXDOMAIN");
}

/// MXLOOKUP: each exchange with its preference and its A records (looked
/// up: gen_zone.py's mail1 192.0.2.25, mail2 192.0.2.26); AAAA with
/// --ipv6-lookup (there are none).
#[test]
fn mxlookup_gives_each_exchange_with_its_addresses() {
    let r = one(&["MXLOOKUP"], "mx.lookup.test");
    assert_eq!(r["status"], "NOERROR");
    assert_eq!(
        r["data"]["exchanges"],
        json!([
            {"name": "mail1.lookup.test", "type": "MX", "class": "IN", "preference": 10,
             "ipv4_addresses": ["192.0.2.25"], "ttl": 3600},
            {"name": "mail2.lookup.test", "type": "MX", "class": "IN", "preference": 20,
             "ipv4_addresses": ["192.0.2.26"], "ttl": 3600},
        ])
    );
    assert_eq!(
        r["attempts"], 3,
        "the MX question and one A question per exchange"
    );
    let v6 = one(&["MXLOOKUP", "--ipv6-lookup"], "mx.lookup.test");
    let exchanges = v6["data"]["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 2);
    assert!(
        exchanges.iter().all(|x| x.get("ipv4_addresses").is_none()),
        "{v6}"
    );
    assert_eq!(
        one(&["MXLOOKUP"], "lookup.test")["data"]["exchanges"],
        json!([])
    );
    assert_eq!(one(&["MXLOOKUP"], "nx.lookup.test")["status"], "NXDOMAIN");
}

/// BINDVERSION: knot's `version` (up.sh's KNOT_VERSION), as kdig reads it.
#[test]
fn bindversion_reads_version_bind_in_class_chaos() {
    let env = std::fs::read_to_string(testkit::servers().dir.join("servers.env")).unwrap();
    let version = env
        .lines()
        .find_map(|l| l.strip_prefix("KNOT_VERSION="))
        .unwrap();
    assert_eq!(
        kdig("version.bind", "TXT", "CH").trim(),
        format!("\"{version}\"")
    );
    let r = one(&["BINDVERSION"], "any.name");
    assert_eq!(r["status"], "NOERROR");
    assert_eq!(r["data"]["version"], version);
    assert_eq!(r["data"]["resolver"], testkit::servers().knot.to_string());
}

/// SPF and DMARC: the TXT record ZDNS's rules pick (gen_zone.py's records).
#[test]
fn spf_and_dmarc_pick_the_record_zdns_picks() {
    for (name, status, spf) in [
        (
            "spf",
            "NOERROR",
            Some("v=spf1 include:_spf.lookup.test -all"),
        ),
        ("spf-case", "NOERROR", Some("V=SPF1 ip4:192.0.2.0/24 -all")),
        // Two strings: joined by a newline, as ZDNS joins them.
        (
            "spf-split",
            "NOERROR",
            Some("v=spf1 \nip4:192.0.2.0/24 -all"),
        ),
        // ZDNS's rule is a prefix: `v=spf10` passes.
        ("nospf", "NOERROR", Some("v=spf10 is not spf")),
        ("txt", "NORECORD", None),
        ("nx", "NXDOMAIN", None),
    ] {
        let r = one(&["SPF"], &format!("{name}.lookup.test"));
        assert_eq!(r["status"], status, "{r}");
        assert_eq!(r["data"].get("spf").and_then(Value::as_str), spf, "{r}");
    }
    for (name, status, dmarc) in [
        (
            "_dmarc",
            "NOERROR",
            Some("v=DMARC1; p=reject; rua=mailto:dmarc@lookup.test"),
        ),
        ("_dmarc.spaced", "NOERROR", Some("v = DMARC1 ;\\009p=none")),
        ("_dmarc.bad", "NORECORD", None),
    ] {
        let r = one(&["DMARC"], &format!("{name}.lookup.test"));
        assert_eq!(r["status"], status, "{r}");
        assert_eq!(r["data"].get("dmarc").and_then(Value::as_str), dmarc, "{r}");
    }
}

/// AXFR: from each nameserver NSLOOKUP finds, every record the generator
/// wrote (axfr.json; knot sends them in its own order), opened and closed
/// by the SOA; the third
/// nameserver (nothing listens there) gives its error; a refused zone gives
/// knot's NOTAUTH per server; a pinned line transfers from that server only.
#[test]
fn axfr_transfers_from_each_nameserver_or_says_why_not() {
    let port = testkit::servers().knot.port();
    let written = zones_file("axfr.json");
    let written = written.as_array().unwrap();
    let r = one(&["AXFR"], "axfr.test");
    assert_eq!(r["status"], "NOERROR");
    let servers = r["data"]["servers"].as_array().unwrap();
    let summary: Vec<_> = servers
        .iter()
        .map(|s| (s["server"].clone(), s["Status"].clone()))
        .collect();
    assert_eq!(
        summary,
        [
            ("127.0.0.1", "NOERROR"),
            ("127.0.0.3", "NOERROR"),
            ("127.0.0.9", "ERROR")
        ]
        .map(|(a, b)| (json!(a), json!(b)))
    );
    assert!(
        servers[2]["error"].as_str().unwrap().contains("refused"),
        "{}",
        servers[2]
    );
    for server in &servers[..2] {
        let records = server["records"].as_array().unwrap();
        // The zone is over 200 kB: several TCP messages, read to the closing SOA.
        assert_eq!(records.len(), written.len() + 1);
        assert_eq!(
            (&records[0]["type"], &records[records.len() - 1]["type"]),
            (&json!("SOA"), &json!("SOA"))
        );
        let key = |r: &Value| {
            let name = r["name"]
                .as_str()
                .unwrap()
                .trim_end_matches('.')
                .to_string();
            (
                name,
                r["type"].as_str().unwrap().to_string(),
                r["answer"].as_str().unwrap().to_string(),
            )
        };
        // NSEC3's fields are checked against the generator's by
        // structured_rdata_of_every_type_equals_the_generators_record.
        let mut ours: Vec<_> = records[..records.len() - 1].iter().map(key).collect();
        let mut theirs: Vec<_> = written.iter().map(key).collect();
        for list in [&mut ours, &mut theirs] {
            list.iter_mut()
                .filter(|k| k.1 == "NSEC3")
                .for_each(|k| k.2.clear());
            list.sort();
        }
        let differ = ours.iter().zip(&theirs).find(|(a, b)| a != b);
        assert_eq!(differ, None, "first difference");
        assert_eq!(ours.len(), theirs.len());
    }
    let refused = one(&["AXFR"], "noaxfr.test");
    for s in refused["data"]["servers"].as_array().unwrap() {
        assert_eq!(s["Status"], "ERROR");
        assert!(s["error"].as_str().unwrap().contains("NOTAUTH"), "{s}");
    }
    assert_eq!(refused["data"]["servers"].as_array().unwrap().len(), 2);
    let pinned = lookup(&["AXFR"], &format!("axfr.test,127.0.0.3:{port}\n"));
    let servers = pinned[0]["data"]["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1);
    assert_eq!(
        (servers[0]["server"].as_str(), servers[0]["Status"].as_str()),
        (Some("127.0.0.3"), Some("NOERROR"))
    );
    assert_eq!(pinned[0]["attempts"], 1, "no NS lookup for a pinned line");
}

/// --output-format zdns and --result-verbosity: ZDNS's keys at each level;
/// trace lists every exchange with the server asked.
#[test]
fn zdns_shape_and_verbosity_levels() {
    let knot = testkit::servers().knot.to_string();
    let short = one(
        &[
            "MX",
            "--output-format",
            "zdns",
            "--result-verbosity",
            "short",
        ],
        "mx.lookup.test",
    );
    let mx = &short["results"]["MX"];
    assert_eq!(mx["status"], "NOERROR");
    let answers = mx["data"]["answers"].as_array().unwrap();
    assert_eq!(
        answers[0],
        json!({"name": "mx.lookup.test", "type": "MX", "class": "IN",
        "preference": 10, "answer": "mail1.lookup.test."})
    );
    assert!(
        mx["data"].get("protocol").is_none() && short.get("class").is_none(),
        "{short}"
    );
    let normal = one(&["MX", "--output-format", "zdns"], "mx.lookup.test");
    let data = &normal["results"]["MX"]["data"];
    assert_eq!(
        (data["protocol"].as_str(), data["resolver"].as_str()),
        (Some("udp"), Some(knot.as_str()))
    );
    assert_eq!(data["answers"][0]["ttl"], 3600);
    assert!(
        data.get("flags").is_none() && data.get("authorities").is_none(),
        "{normal}"
    );
    // The EDNS record among the additionals, as ZDNS shows it.
    let edns = data["additionals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["type"] == "EDNS0")
        .unwrap();
    assert_eq!(
        edns,
        &json!({"type": "EDNS0", "version": 0, "flags": "", "udpsize": 1232})
    );
    let long = one(
        &[
            "MX",
            "--output-format",
            "zdns",
            "--result-verbosity",
            "long",
        ],
        "mx.lookup.test",
    );
    assert_eq!(long["class"], "IN");
    assert_eq!(
        long["results"]["MX"]["data"]["flags"]["authoritative"],
        true
    );
    let trace = one(
        &[
            "MXLOOKUP",
            "--output-format",
            "zdns",
            "--result-verbosity",
            "trace",
        ],
        "mx.lookup.test",
    );
    let steps = trace["results"]["MXLOOKUP"]["trace"].as_array().unwrap();
    let asked: Vec<_> = steps
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["type"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        asked,
        [
            ("mx.lookup.test", 15),
            ("mail1.lookup.test", 1),
            ("mail2.lookup.test", 1)
        ]
    );
    for s in steps {
        assert_eq!(s["name_server"], knot.as_str());
        assert!(s["duration"].as_f64().unwrap() > 0.0);
        assert_eq!(s["results"]["flags"]["authoritative"], true);
    }
    assert_eq!(steps[1]["results"]["answers"][0]["answer"], "192.0.2.25");
    // Our own shape carries the trace too, and no trace below that level.
    let native = one(&["A", "--result-verbosity", "trace"], "n5.lookup.test");
    assert_eq!(
        native["trace"][0]["results"]["answers"][0]["answer"],
        "10.0.0.5"
    );
    assert!(one(&["A"], "n5.lookup.test").get("trace").is_none());
}
