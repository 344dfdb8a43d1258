//! `dnsluice lookup --iterative` on the simulated internet of tests/world
//! (knot, nsd, dnsdist and a small Python server on port 53 of 127.N.x.y
//! addresses; `bash tests/world/up.sh`). The truth is unbound resolving the
//! same names from the same root hints, and the world generator's own record
//! (`expected.jsonl`) for each edge case.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// What `tests/world/up.sh` wrote in `world.env`.
struct World {
    hints: String,
    roots: String,
    unbound: String,
    expected: PathBuf,
    layout: PathBuf,
}

fn world() -> World {
    let path = testkit::servers_dir().join("world/world.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the test world is not running: run `bash tests/world/up.sh` ({}: {e})",
            path.display()
        )
    });
    let env: BTreeMap<&str, &str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect();
    let get = |key: &str| {
        env.get(key)
            .unwrap_or_else(|| panic!("{}: no {key}", path.display()))
            .to_string()
    };
    World {
        hints: get("WORLD_ROOT_HINTS"),
        roots: get("WORLD_ROOTS"),
        unbound: get("WORLD_UNBOUND"),
        expected: PathBuf::from(get("WORLD_EXPECTED")),
        layout: PathBuf::from(get("WORLD_LAYOUT")),
    }
}

/// One entry of `expected.jsonl`.
#[derive(Clone, Debug)]
struct Expected {
    name: String,
    qtype: String,
    rcode: String,
    case: String,
    answers: BTreeSet<(String, String, String)>,
}

fn expected(world: &World) -> Vec<Expected> {
    std::fs::read_to_string(&world.expected)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            Expected {
                name: v["name"].as_str().unwrap().to_string(),
                qtype: v["type"].as_str().unwrap().to_string(),
                rcode: v["rcode"].as_str().unwrap().to_string(),
                case: v["case"].as_str().unwrap_or("").to_string(),
                answers: v["answers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| rr(&a["name"], &a["type"], &a["data"]))
                    .collect(),
            }
        })
        .collect()
}

/// A record as compared: owner (lower case, no trailing dot), type, data
/// (names in it lower-cased; hex upper-cased, as zone files differ).
fn rr(name: &Value, rtype: &Value, data: &Value) -> (String, String, String) {
    let owner = name.as_str().unwrap().trim_end_matches('.').to_ascii_lowercase();
    let rtype = rtype.as_str().unwrap().to_string();
    let data = data.as_str().unwrap();
    let data = match rtype.as_str() {
        "NS" | "CNAME" | "DNAME" | "MX" | "PTR" | "SRV" | "SOA" => data.to_ascii_lowercase(),
        _ => data.to_string(),
    };
    (owner, rtype, data)
}

fn answers_of(record: &Value) -> BTreeSet<(String, String, String)> {
    record["data"]["answers"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|a| rr(&a["name"], &a["type"], &a["answer"]))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `dnsluice lookup ARGS` with `names` (one per line, each once, in
/// this order); records by name (see [`key`]) and the stats.
fn lookup(args: &[&str], names: &[&str]) -> (BTreeMap<String, Value>, Value) {
    let unique: BTreeSet<String> = names.iter().map(|n| key(n)).collect();
    let unique: Vec<String> = unique.into_iter().collect();
    let (list, stats) = lookup_in_order(args, &unique);
    let records: BTreeMap<String, Value> = list
        .into_iter()
        .map(|v| (key(v["name"].as_str().unwrap()), v))
        .collect();
    assert_eq!(records.len(), unique.len(), "one record per name");
    (records, stats)
}

/// Runs `dnsluice lookup ARGS` with `lines`; the records in the order
/// written, and the stats.
fn lookup_in_order(args: &[&str], lines: &[String]) -> (Vec<Value>, Value) {
    let stats_file = std::env::temp_dir().join(format!(
        "dnsluice-iterative-{}-{}.json",
        std::process::id(),
        next_id()
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_dnsluice"))
        .arg("lookup")
        .args(args)
        .arg("--stats-json")
        .arg(&stats_file)
        .arg("-q")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsluice runs");
    let mut stdin = child.stdin.take().unwrap();
    let input: String = lines.iter().map(|n| format!("{n}\n")).collect();
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "dnsluice lookup {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), lines.len(), "one record per line");
    let stats = serde_json::from_str(&std::fs::read_to_string(&stats_file).unwrap()).unwrap();
    let _ = std::fs::remove_file(&stats_file);
    (records, stats)
}

fn next_id() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A name as records are matched: lower case, no trailing dot (`.` for the root).
fn key(name: &str) -> String {
    match name.trim_end_matches('.') {
        "" => ".".to_string(),
        name => name.to_ascii_lowercase(),
    }
}

/// Our iterative lookup of `names` as `qtype`, from the world's root hints.
fn iterate(world: &World, qtype: &str, extra: &[&str], names: &[&str]) -> (BTreeMap<String, Value>, Value) {
    let mut args = vec![qtype, "--iterative", "--root-hints", &world.hints];
    args.extend_from_slice(extra);
    lookup(&args, names)
}

/// The statuses that say "could not resolve", where unbound says SERVFAIL.
fn as_rcode(status: &str) -> &str {
    match status {
        "CIRCULAR" | "TIMEOUT" | "ITERATIVE_TIMEOUT" | "ERROR" => "SERVFAIL",
        other => other,
    }
}

#[test]
fn every_world_name_resolves_as_unbound_does() {
    let world = world();
    let mut by_type: BTreeMap<String, Vec<Expected>> = BTreeMap::new();
    for e in expected(&world) {
        // version.bind (class CH) and zone transfers ask one server, not the tree.
        if e.case != "bindversion" && e.case != "axfr" {
            by_type.entry(e.qtype.clone()).or_default().push(e);
        }
    }
    let (mut compared, mut differ) = (0, Vec::new());
    for (qtype, entries) in &by_type {
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        // Deep enough for the world's deepest delegation (its max-depth case
        // is tested on its own below).
        let (ours, _) = iterate(&world, qtype, &["--max-depth", "20"], &names);
        // unbound itself waits out the silent servers: give it time.
        let (truth, _) = lookup(
            &[qtype, "--name-servers", &world.unbound, "--timeout", "30s"],
            &names,
        );
        for e in entries {
            let (ours, truth) = (&ours[&key(&e.name)], &truth[&key(&e.name)]);
            compared += 1;
            let ours_rcode = as_rcode(ours["status"].as_str().unwrap());
            if ours_rcode != truth["status"] || answers_of(ours) != answers_of(truth) {
                differ.push(format!(
                    "{} {qtype} ({}): unbound {} {:?}, ours {} {:?} {}",
                    e.name,
                    e.case,
                    truth["status"],
                    answers_of(truth),
                    ours["status"],
                    answers_of(ours),
                    ours["error"]
                ));
            }
        }
    }
    eprintln!("{compared} world questions compared with unbound, {} differ", differ.len());
    assert!(compared > 10_000, "{compared}");
    assert!(differ.is_empty(), "{} differ:\n{}", differ.len(), differ.join("\n"));
}

/// The generator's record of `(name, qtype)`.
fn truth<'a>(all: &'a [Expected], name: &str, qtype: &str) -> &'a Expected {
    all.iter()
        .find(|e| key(&e.name) == key(name) && e.qtype == qtype)
        .unwrap_or_else(|| panic!("{name} {qtype} is not in expected.jsonl"))
}

/// Resolves each `(name, qtype)` alone and checks our status and answer
/// against `status` and the generator's records.
fn check_cases(world: &World, extra: &[&str], cases: &[(&str, &str, &str)]) -> Vec<Value> {
    let all = expected(world);
    let mut records = Vec::new();
    for (name, qtype, status) in cases {
        let (got, stats) = iterate(world, qtype, extra, &[name]);
        let record = got[&key(name)].clone();
        let want = truth(&all, name, qtype);
        assert_eq!(record["status"], *status, "{name} {qtype}: {record}");
        assert_eq!(as_rcode(status), want.rcode, "{name}: the case's rcode");
        assert_eq!(answers_of(&record), want.answers, "{name} {qtype}: {record}");
        records.push(serde_json::json!({"record": record, "stats": stats}));
    }
    records
}

#[test]
fn referrals_glue_and_lame_servers() {
    let world = world();
    check_cases(
        &world,
        &[],
        &[
            ("www.glueless.org.", "A", "NOERROR"),
            ("www.sibling.com.", "A", "NOERROR"),
            ("www.mixed.com.", "A", "NOERROR"),
            ("www.lame.com.", "A", "NOERROR"),
            ("www.upward.com.", "A", "NOERROR"),
            ("www.deadlame.com.", "A", "SERVFAIL"),
            // The only nameserver's name is in the zone and has no glue.
            ("www.noglue.com.", "A", "SERVFAIL"),
        ],
    );
    // A glueless delegation makes a nested lookup of the nameserver's address.
    let (_, stats) = iterate(&world, "A", &[], &["www.glueless.org."]);
    assert!(stats["iterative"]["glueless_lookups"].as_u64().unwrap() >= 1, "{stats}");
}

#[test]
fn lame_servers_are_passed_over_every_time() {
    // The lame server of each zone is tried first half the time (the NS set
    // is shuffled): every try must still end with the answer.
    let world = world();
    let names = ["www.lame.com.", "www.upward.com."];
    let mut lame_seen = 0;
    for _ in 0..6 {
        let (got, stats) = iterate(&world, "A", &[], &names);
        for name in names {
            assert_eq!(got[&key(name)]["status"], "NOERROR", "{}", got[&key(name)]);
        }
        lame_seen += stats["iterative"]["lame_responses"].as_u64().unwrap();
    }
    assert!(lame_seen > 0, "the lame servers were never asked in 6 runs");
}

#[test]
fn silent_servers_and_the_budgets() {
    let world = world();
    // The lame-silent zone's second server answers.
    check_cases(&world, &["--timeout", "300ms"], &[("www.lamesilent.com.", "A", "NOERROR")]);
    // Its only server never answers: each budget ends the walk with its status.
    let dead = "www.deadsilent.com.";
    for (flags, status, most_ms) in [
        (&["--timeout", "200ms", "--retries", "1"][..], "TIMEOUT", 2_000.0),
        (&["--timeout", "2s", "--iteration-timeout", "300ms"][..], "ITERATIVE_TIMEOUT", 2_000.0),
        (&["--timeout", "2s", "--name-timeout", "400ms"][..], "TIMEOUT", 2_000.0),
    ] {
        let (got, _) = iterate(&world, "A", flags, &[dead]);
        let record = &got[&key(dead)];
        assert_eq!(record["status"], status, "{flags:?}: {record}");
        // One budget for the name: the timeouts do not add up (ZDNS #524).
        let took = record["duration_ms"].as_f64().unwrap();
        assert!(took < most_ms, "{flags:?}: {took} ms");
    }
}

#[test]
fn cname_and_dname_chains_across_zones() {
    let world = world();
    check_cases(
        &world,
        &[],
        &[
            ("www.cname-a.com.", "A", "NOERROR"),
            ("www.cname-a.com.", "CNAME", "NOERROR"),
            ("dangling.cname-a.com.", "A", "NXDOMAIN"),
            ("www.old.dname.com.", "A", "NOERROR"),
            ("mail.old.dname.com.", "MX", "NOERROR"),
            ("loop.cnameloop-a.com.", "A", "CIRCULAR"),
            ("self.cnameloop-a.com.", "A", "CIRCULAR"),
        ],
    );
}

#[test]
fn negative_answers_at_every_level() {
    let world = world();
    let records = check_cases(
        &world,
        &[],
        &[
            ("nosuchtld.", "A", "NXDOMAIN"),
            (".", "A", "NOERROR"),
            (".", "NS", "NOERROR"),
            ("nosuchzone.com.", "A", "NXDOMAIN"),
            ("com.", "MX", "NOERROR"),
            ("nosuchname.raka0.com.", "A", "NXDOMAIN"),
            ("www.raka0.com.", "TXT", "NOERROR"),
            ("anything.wild.com.", "MX", "NOERROR"),
            ("exists.wild.com.", "TXT", "NOERROR"),
        ],
    );
    // Each negative answer carries its zone's SOA (RFC 2308).
    let soa_owner = |i: usize| records[i]["record"]["data"]["authorities"][0]["name"].clone();
    assert_eq!(soa_owner(0), ".");
    assert_eq!(soa_owner(3), "com");
    assert_eq!(soa_owner(5), "raka0.com");
    assert_eq!(soa_owner(6), "raka0.com");
}

#[test]
fn wildcards_truncation_slowness_and_ipv6_glue() {
    let world = world();
    let records = check_cases(
        &world,
        &[],
        &[
            ("anything.wild.com.", "A", "NOERROR"),
            ("a.b.wild.com.", "A", "NOERROR"),
            ("anything.wild.com.", "TXT", "NOERROR"),
            ("exists.wild.com.", "A", "NOERROR"),
            ("www.tc.com.", "A", "NOERROR"),
            ("big.tc.com.", "TXT", "NOERROR"),
            ("www.slow.com.", "A", "NOERROR"),
            ("www.v6only.net.", "A", "NOERROR"),
            ("www.v6only.net.", "AAAA", "NOERROR"),
            ("www.handmade.org.", "A", "NOERROR"),
        ],
    );
    // The truncating server's answers came over TCP after TC=1 over UDP.
    for i in [4, 5] {
        assert_eq!(records[i]["record"]["data"]["protocol"], "tcp");
        assert_eq!(records[i]["stats"]["iterative"]["tcp_fallbacks"], 1);
    }
    // The IPv6-only zone's server is [::1]:53.
    assert_eq!(records[7]["record"]["data"]["resolver"], "[::1]:53");
    // With --4 it cannot be reached.
    let (got, _) = iterate(&world, "A", &["--4"], &["www.v6only.net."]);
    let record = &got["www.v6only.net"];
    assert_eq!(record["status"], "SERVFAIL", "{record}");
    assert!(record["error"].as_str().unwrap().contains("without usable glue"), "{record}");
}

#[test]
fn max_depth_bounds_the_walk() {
    let world = world();
    // deep-K is K+1 referrals below the root (com, deep.com, l2 ... lK).
    let (got, _) = iterate(
        &world,
        "A",
        &[],
        &["www.l9.l8.l7.l6.l5.l4.l3.l2.deep.com.", "www.l10.l9.l8.l7.l6.l5.l4.l3.l2.deep.com."],
    );
    assert_eq!(got["www.l9.l8.l7.l6.l5.l4.l3.l2.deep.com"]["status"], "NOERROR");
    let too_deep = &got["www.l10.l9.l8.l7.l6.l5.l4.l3.l2.deep.com"];
    assert_eq!(too_deep["status"], "ERROR", "{too_deep}");
    assert!(too_deep["error"].as_str().unwrap().contains("--max-depth"), "{too_deep}");
    check_cases(
        &world,
        &["--max-depth", "13"],
        &[("www.l12.l11.l10.l9.l8.l7.l6.l5.l4.l3.l2.deep.com.", "A", "NOERROR")],
    );
}

#[test]
fn the_poison_is_never_used_nor_shown() {
    let world = world();
    let all = expected(&world);
    let poison = ["www.poison.com.", "poison.com.", "nothing.poison.com."];
    let victims: Vec<&Expected> = all.iter().filter(|e| e.case == "poison-victim").collect();
    // One worker, the poisoning server's answers first: anything it slipped
    // into the cache would be used for the victims after it.
    for qtype in ["A", "MX", "NS"] {
        let mut names: Vec<&str> = poison.to_vec();
        names.extend(victims.iter().filter(|v| v.qtype == qtype).map(|v| v.name.as_str()));
        let (got, stats) = iterate(&world, qtype, &["--workers", "1"], &names);
        for v in victims.iter().filter(|v| v.qtype == qtype) {
            assert_eq!(answers_of(&got[&key(&v.name)]), v.answers, "{}", got[&key(&v.name)]);
        }
        for record in got.values() {
            let text = record.to_string();
            for bad in ["192.0.2.66", "ns1.poison.com\",\"type\":\"NS", "127.58.54.1\",\"type\":\"A"] {
                assert!(!text.contains(bad), "poison {bad} in {text}");
            }
            for section in ["additionals", "authorities", "answers"] {
                for rr in record["data"][section].as_array().into_iter().flatten() {
                    let owner = rr["name"].as_str().unwrap();
                    assert!(
                        !(record["name"].as_str().unwrap().contains("poison") && !owner.contains("poison")),
                        "a record of {owner} from the poison server: {record}"
                    );
                }
            }
        }
        if qtype == "A" {
            assert!(stats["iterative"]["out_of_bailiwick_dropped"].as_u64().unwrap() >= 5, "{stats}");
        }
    }
}

#[test]
fn the_cache_answers_the_second_time() {
    let world = world();
    let names = ["www.raka0.com.", "www.cname-a.com.", "nosuchname.raka0.com.", "www.old.dname.com."];
    // The same names again, spelt in capitals: one worker, one name at a
    // time, so the second round finds everything the first one cached.
    let mut input: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    input.extend(names.iter().map(|n| n.to_ascii_uppercase()));
    let (records, stats) = lookup_in_order(
        &["A", "--iterative", "--root-hints", &world.hints, "--workers", "1"],
        &input,
    );
    let all = expected(&world);
    for (i, record) in records.iter().enumerate() {
        let name = names[i % names.len()];
        assert_eq!(answers_of(record), truth(&all, name, "A").answers, "{record}");
        if i >= names.len() {
            assert_eq!(record["attempts"], 0, "from the cache: {record}");
        } else {
            assert!(record["attempts"].as_u64().unwrap() > 0, "{record}");
        }
    }
    let hits = stats["iterative"]["cache_hits"].as_u64().unwrap();
    assert!(hits >= names.len() as u64, "{stats}");
}

#[test]
fn roots_from_name_servers_and_bad_hints() {
    let world = world();
    let (got, _) = lookup(
        &["A", "--iterative", "--name-servers", &world.roots],
        &["www.raka0.com."],
    );
    let all = expected(&world);
    assert_eq!(answers_of(&got["www.raka0.com"]), truth(&all, "www.raka0.com.", "A").answers);
    let bad = std::env::temp_dir().join(format!("dnsluice-bad-hints-{}", std::process::id()));
    std::fs::write(&bad, ". NS a.test.\na.test. A 1.2.3\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dnsluice"))
        .args(["lookup", "A", "--iterative", "--root-hints"])
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:2: bad address", bad.display())), "{err}");
    let _ = &world.layout;
}

/// Every authoritative server address of the world (`layout.json`).
fn world_addresses(world: &World) -> usize {
    let layout: Value = serde_json::from_str(&std::fs::read_to_string(&world.layout).unwrap()).unwrap();
    let addrs: BTreeSet<&str> = layout["instances"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["addresses"].as_array().unwrap())
        .map(|a| a.as_str().unwrap())
        .collect();
    addrs.len()
}

#[test]
fn tcp_keeps_one_connection_per_authority() {
    let world = world();
    let all = expected(&world);
    let leaves: Vec<&Expected> = all.iter().filter(|e| e.case == "leaf" && e.qtype == "A").take(400).collect();
    let names: Vec<&str> = leaves.iter().map(|e| e.name.as_str()).collect();
    let mut seen = BTreeMap::new();
    for transport in ["udp", "tcp"] {
        let (got, stats) = iterate(&world, "A", &["--transport", transport], &names);
        for e in &leaves {
            let record = &got[&key(&e.name)];
            assert_eq!(record["status"], e.rcode.as_str(), "{record}");
            assert_eq!(answers_of(record), e.answers, "{record}");
            assert_eq!(record["data"]["protocol"], transport, "{record}");
        }
        let queries = stats["queries"].as_u64().unwrap();
        let opened = stats["connections_opened"].as_u64().unwrap();
        assert!(queries >= names.len() as u64, "{stats}");
        // Every query but the first on each connection travelled on a kept one.
        assert_eq!(stats["connections_reused"].as_u64().unwrap(), queries - opened, "{stats}");
        seen.insert(transport, (queries, opened));
    }
    let (tcp_queries, tcp_opened) = seen["tcp"];
    // At most one connection per authoritative address of the world, shared
    // by the 100 workers.
    assert!(tcp_opened <= world_addresses(&world) as u64, "{tcp_opened} TCP connections");
    assert!(tcp_queries >= 4 * tcp_opened, "{tcp_queries} queries on {tcp_opened} connections");
    // UDP sockets are replaced every 64 queries (new source ports).
    let (udp_queries, udp_opened) = seen["udp"];
    assert!(udp_opened >= udp_queries / 64, "{udp_queries} queries on {udp_opened} sockets");
}
