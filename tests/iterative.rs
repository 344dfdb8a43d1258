//! `dnsluice lookup --iterative` on the simulated internet of tests/world
//! (knot, nsd, dnsdist and a small Python server on port 53 of 127.N.x.y
//! addresses; `bash tests/world/up.sh`). The truth is unbound resolving the
//! same names from the same root hints, and the world generator's own record
//! (`expected.jsonl`) for each edge case.

use dnsluice::core::dns::mnemonic::rtype_from_str;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};
use testkit::kdig::{self, Question};
use testkit::{assert_ok, dnsluice, normalise_data, temp_path, wan_world, world, World};

/// One line of `expected.jsonl`, its answer as compared (see [`rr`]).
#[derive(Clone, Debug)]
struct Expected {
    name: String,
    qtype: String,
    rcode: String,
    case: String,
    answers: BTreeSet<(String, String, String)>,
    /// The zone's TTL of each answer record.
    ttls: BTreeMap<(String, String, String), u32>,
    /// A question for one server (`version.bind`, AXFR), not for a resolver.
    pinned: bool,
}

/// The generator's record of the truth.
fn expected(world: &World) -> Vec<Expected> {
    world
        .expected()
        .into_iter()
        .map(|e| Expected {
            answers: e
                .answers
                .iter()
                .map(|a| rr(&a.name, &a.rtype, &a.data))
                .collect(),
            ttls: e
                .answers
                .iter()
                .map(|a| (rr(&a.name, &a.rtype, &a.data), a.ttl))
                .collect(),
            pinned: e.server.is_some(),
            name: e.name,
            qtype: e.rtype,
            rcode: e.rcode,
            case: e.case,
        })
        .collect()
}

/// A record as compared: owner (lower case, no trailing dot), type, data
/// (names in it lower-cased; hex upper-cased, as zone files differ).
fn rr(name: &str, rtype: &str, data: &str) -> (String, String, String) {
    let data = normalise_data(data);
    let data = match rtype {
        "NS" | "CNAME" | "DNAME" | "MX" | "PTR" | "SRV" | "SOA" => data.to_ascii_lowercase(),
        // Key tag, algorithm, digest type and the digest in hex, any case.
        "DS" => data.to_ascii_uppercase(),
        // RFC 3597's form (`\# 16 0012...`): kdig +generic groups the hex.
        _ if data.starts_with("\\# ") => generic(&data),
        _ => data,
    };
    (key(name), rtype.to_string(), data)
}

/// RFC 3597's unknown-RDATA form with the hex in one run, lower case.
fn generic(data: &str) -> String {
    let mut words = data.split_whitespace();
    let (mark, len) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let hex: String = words.collect::<String>().to_ascii_lowercase();
    format!("{mark} {len} {hex}")
}

fn answers_of(record: &Value) -> BTreeSet<(String, String, String)> {
    record["data"]["answers"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|a| {
                    let text = |k: &str| a[k].as_str().unwrap_or_default().to_string();
                    rr(&text("name"), &text("type"), &text("answer"))
                })
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
    let (mut phases, stats) = lookup_phased(args, &[lines], Duration::ZERO);
    (phases.remove(0), stats)
}

/// Runs `dnsluice lookup ARGS` and gives it `phases` of lines one after
/// the other: a phase's lines reach its standard input only once every
/// name of the phase before is done (its interval statistics, every 20 ms,
/// count them) and `gap` has passed since, so whatever a phase's lookups
/// leave in the cache is there for the next, whatever order the engine
/// takes names in. The records of each phase (told apart by their names,
/// which must differ between phases) in the order written, and the stats.
fn lookup_phased(args: &[&str], phases: &[&[String]], gap: Duration) -> (Vec<Vec<Value>>, Value) {
    let (stats_file, intervals) = (temp_path("stats.json"), temp_path("stats.jsonl"));
    let mut child = dnsluice()
        .arg("lookup")
        .args(args)
        .arg("--stats-json")
        .arg(&stats_file)
        .args(["--stats-interval", "20ms", "--stats-jsonl"])
        .arg(&intervals)
        .arg("-q")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsluice runs");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let mut stdin = Some(child.stdin.take().unwrap());
    let mut asked = 0;
    for (i, lines) in phases.iter().enumerate() {
        let input: String = lines.iter().map(|n| format!("{n}\n")).collect();
        let pipe = stdin.as_mut().unwrap();
        pipe.write_all(input.as_bytes()).unwrap();
        pipe.flush().unwrap();
        asked += lines.len() as u64;
        if i + 1 == phases.len() {
            break;
        }
        let started = Instant::now();
        while names_done(&intervals) < asked {
            assert!(
                child.try_wait().unwrap().is_none(),
                "dnsluice lookup {args:?} ended in phase {i}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "phase {i} never ended"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(gap);
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text = reader.join().unwrap().unwrap();
    assert_ok(&out, format_args!("dnsluice lookup {args:?}"));
    let mut records = vec![Vec::new(); phases.len()];
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let name = record["name"].as_str().unwrap();
        let name = name.strip_suffix('.').unwrap_or(name);
        let phase = match phases.len() {
            1 => 0,
            _ => phases
                .iter()
                .position(|p| p.iter().any(|l| l.strip_suffix('.').unwrap_or(l) == name))
                .unwrap_or_else(|| panic!("a record of a name not asked: {record}")),
        };
        records[phase].push(record);
    }
    for (i, (lines, got)) in phases.iter().zip(&records).enumerate() {
        assert_eq!(got.len(), lines.len(), "one record per line of phase {i}");
    }
    let stats = serde_json::from_str(&std::fs::read_to_string(&stats_file).unwrap()).unwrap();
    let _ = std::fs::remove_file(&stats_file);
    let _ = std::fs::remove_file(&intervals);
    (records, stats)
}

/// How many names the interval statistics in `path` say are done so far.
fn names_done(path: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v["type"] == "interval")
        .filter_map(|v| v["names"].as_u64())
        .sum()
}

/// A name as records are matched: lower case, no trailing dot (`.` for the root).
fn key(name: &str) -> String {
    match name.trim_end_matches('.') {
        "" => ".".to_string(),
        name => name.to_ascii_lowercase(),
    }
}

/// Our iterative lookup of `names` as `qtype`, from the world's root hints.
fn iterate(
    world: &World,
    qtype: &str,
    extra: &[&str],
    names: &[&str],
) -> (BTreeMap<String, Value>, Value) {
    let hints = world.root_hints.to_str().unwrap();
    let mut args = vec![qtype, "--iterative", "--root-hints", hints];
    args.extend_from_slice(extra);
    lookup(&args, names)
}

/// The edge cases where our status, ZDNS's, says more than the rcode
/// unbound and the generator give (SERVFAIL): the case and our status. (A
/// zone whose servers are all silent is asked again round after round,
/// `--retries` 5, until `--iteration-timeout` ends the step.)
const OUR_STATUSES: &[(&str, &str)] = &[
    ("cname-loop", "CIRCULAR"),
    ("all-lame-silent", "ITERATIVE_TIMEOUT"),
];

/// The status we must give for `e`: the generator's rcode, or the case's
/// own status from [`OUR_STATUSES`].
fn our_status(e: &Expected) -> &str {
    OUR_STATUSES
        .iter()
        .find(|(case, _)| *case == e.case)
        .map_or(e.rcode.as_str(), |(_, status)| status)
}

/// The statuses that say "could not resolve", where unbound says SERVFAIL.
fn as_rcode(status: &str) -> &str {
    match status {
        "CIRCULAR" | "TIMEOUT" | "ITERATIVE_TIMEOUT" => "SERVFAIL",
        other => other,
    }
}

/// Why our answer's TTLs are wrong for `e`: a record above the zone's TTL
/// (`expected.jsonl` gives the zone's), or none.
fn ttl_above_the_zones(e: &Expected, record: &Value) -> Option<String> {
    let answers = record["data"]["answers"].as_array()?;
    answers.iter().find_map(|a| {
        let text = |k: &str| a[k].as_str().unwrap_or_default().to_string();
        let key = rr(&text("name"), &text("type"), &text("answer"));
        let zone = e.ttls.get(&key)?;
        let ttl = a["ttl"].as_u64().unwrap_or(u64::MAX);
        (ttl > u64::from(*zone)).then(|| format!("{key:?} ttl {ttl} above the zone's {zone}"))
    })
}

/// The types whose `answer` we write in RFC 3597's form (`\# 16 0012...`),
/// the fields beside it (docs/lookups.md): their answers are compared
/// with unbound's in the same form, read by `kdig +generic`.
const GENERIC_TYPES: &[&str] = &[
    "CERT",
    "DNSKEY",
    "HINFO",
    "LOC",
    "NAPTR",
    "NSEC",
    "NSEC3",
    "NSEC3PARAM",
    "RRSIG",
    "SSHFP",
    "TLSA",
    "URI",
];

/// The records of an answer as compared (see [`rr`]).
type Answers = BTreeSet<(String, String, String)>;

/// unbound's answers to `entries` read by `kdig +generic`: the records in
/// RFC 3597's form, by question (name, type).
fn unbound_generic(world: &World, entries: &[&Expected]) -> BTreeMap<(String, String), Answers> {
    let questions: Vec<Question> = entries
        .iter()
        .map(|e| Question {
            name: e.name.clone(),
            // kdig +generic names every type by number, the question's too.
            rtype: format!("TYPE{}", rtype_from_str(&e.qtype).unwrap()),
            class: "IN".into(),
        })
        .collect();
    let server = world.unbound.ip().to_string();
    let replies = kdig::ask(
        &server,
        world.unbound.port(),
        true,
        &questions,
        &["+generic", "+timeout=5"],
    );
    entries
        .iter()
        .zip(replies)
        .map(|(e, reply)| {
            let reply = reply.unwrap_or_else(|err| panic!("kdig {} {}: {err}", e.name, e.qtype));
            assert_eq!(reply.rcode, e.rcode, "unbound: {} {}", e.name, e.qtype);
            let answers = reply
                .answers
                .iter()
                .map(|a| rr(&a.name, &e.qtype, &a.data))
                .collect();
            ((key(&e.name), e.qtype.clone()), answers)
        })
        .collect()
}

/// The resolver lines of `expected.jsonl` (not those for one server): 2 per
/// leaf zone and the edge cases' (tests/world/README.md), all compared.
const EDGE_CASE_LINES: usize = 83;

/// Asks us every resolver question of `world` (`expected.jsonl`, which is
/// unbound's answer to every line: tests/world.rs asks unbound with kdig
/// and finds it equal, rcode and RRset) and checks status, answers and
/// TTLs; how many were compared, and how many of our queries timed out.
fn every_question_as_unbound_answers(world: &World) -> (usize, u64) {
    let mut by_type: BTreeMap<String, Vec<Expected>> = BTreeMap::new();
    for e in expected(world) {
        // version.bind (class CH) and zone transfers ask one server, not the tree.
        if !e.pinned {
            by_type.entry(e.qtype.clone()).or_default().push(e);
        }
    }
    let generic_entries: Vec<&Expected> = by_type
        .iter()
        .filter(|(qtype, _)| GENERIC_TYPES.contains(&qtype.as_str()))
        .flat_map(|(_, entries)| entries)
        .collect();
    assert!(generic_entries.len() >= GENERIC_TYPES.len());
    let unbound_generic = unbound_generic(world, &generic_entries);
    let (mut compared, mut differ, mut timeouts) = (0, Vec::new(), 0);
    for (qtype, entries) in &by_type {
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        // Deep enough for the world's deepest delegation (its max-depth case
        // is tested on its own below).
        let (ours, stats) = iterate(world, qtype, &["--max-depth", "20"], &names);
        timeouts += stats["timeouts"].as_u64().unwrap_or(0);
        for e in entries {
            let ours = &ours[&key(&e.name)];
            compared += 1;
            let question = (key(&e.name), e.qtype.clone());
            let want = unbound_generic.get(&question).unwrap_or(&e.answers);
            let why = if ours["status"] != our_status(e) {
                Some(format!("status {} {}", ours["status"], ours["error"]))
            } else if answers_of(ours) != *want {
                Some(format!("answers {:?}", answers_of(ours)))
            } else {
                ttl_above_the_zones(e, ours)
            };
            if let Some(why) = why {
                differ.push(format!(
                    "{} {qtype} ({}): want {} {want:?}; ours: {why}",
                    e.name,
                    e.case,
                    our_status(e),
                ));
            }
        }
    }
    eprintln!(
        "{compared} world questions compared with unbound's answers, {} differ",
        differ.len()
    );
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    (compared, timeouts)
}

#[test]
fn every_world_name_resolves_as_unbound_does() {
    let world = world();
    let (compared, _) = every_question_as_unbound_answers(&world);
    assert_eq!(compared, 2 * world.zones as usize + EDGE_CASE_LINES);
}

/// The same world behind an emulated wide-area network (every authority
/// 10 to 40 ms of round trip away through tools/netem, 0.5 % of datagrams
/// lost each way; `testkit::wan_world`): with the defaults, every question
/// still gets unbound's answer. Datagrams were lost on the way (the
/// emulator's count), our queries timed out, and asking again made up for it.
#[test]
fn behind_a_wide_area_network_every_world_name_resolves_the_same() {
    let world = wan_world();
    let lost = || {
        // The emulator rewrites its counters every 100 ms.
        std::thread::sleep(Duration::from_millis(250));
        let path = world.dir.join("wan/stats.json");
        let stats: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let links = stats["links"].as_array().unwrap();
        let lost: u64 = links
            .iter()
            .map(|l| l["up_lost"].as_u64().unwrap() + l["down_lost"].as_u64().unwrap())
            .sum();
        (lost, stats["kernel_drops"].as_u64().unwrap())
    };
    let (lost_before, _) = lost();
    let (compared, timeouts) = every_question_as_unbound_answers(&world);
    let (lost_after, kernel_drops) = lost();
    assert_eq!(compared, 2 * world.zones as usize + EDGE_CASE_LINES);
    assert!(
        lost_after - lost_before > 50,
        "{lost_before} -> {lost_after} lost"
    );
    assert!(timeouts > 0, "none of our queries timed out");
    assert_eq!(
        kernel_drops, 0,
        "the emulator dropped datagrams it was not told to"
    );
}

/// The generator's record of `(name, qtype)`.
fn truth<'a>(all: &'a [Expected], name: &str, qtype: &str) -> &'a Expected {
    all.iter()
        .find(|e| key(&e.name) == key(name) && e.qtype == qtype)
        .unwrap_or_else(|| panic!("{name} {qtype} is not in expected.jsonl"))
}

/// Resolves every question of each edge case alone (a new process, a cold
/// cache) and checks our status against the case's and our answer against
/// the generator's records; the records and stats, in order.
fn check_cases(world: &World, extra: &[&str], cases: &[(&str, &str)]) -> Vec<(Value, Value)> {
    let all = expected(world);
    let mut results = Vec::new();
    for (case, status) in cases {
        let entries: Vec<&Expected> = all.iter().filter(|e| e.case == *case).collect();
        assert!(!entries.is_empty(), "no case {case} in expected.jsonl");
        for e in entries {
            let (got, stats) = iterate(world, &e.qtype, extra, &[&e.name]);
            let record = got[&key(&e.name)].clone();
            assert_eq!(
                record["status"], *status,
                "{case}: {} {}: {record}",
                e.name, e.qtype
            );
            assert_eq!(as_rcode(status), e.rcode, "{case}: the generator's rcode");
            assert_eq!(
                answers_of(&record),
                e.answers,
                "{case}: {} {}: {record}",
                e.name,
                e.qtype
            );
            results.push((record, stats));
        }
    }
    results
}

#[test]
fn referrals_glue_and_lame_servers() {
    let world = world();
    check_cases(
        &world,
        &[],
        &[
            ("root", "NOERROR"),
            ("glueless", "NOERROR"),
            ("sibling-glue", "NOERROR"),
            ("mixed-glue", "NOERROR"),
            ("lame-refused", "NOERROR"),
            ("upward-referral", "NOERROR"),
            ("all-lame-refused", "SERVFAIL"),
            // The only nameserver's name is in the zone and has no glue.
            ("missing-glue", "SERVFAIL"),
        ],
    );
    // A glueless delegation makes a nested lookup of the nameserver's address.
    let glueless = check_cases(&world, &[], &[("glueless", "NOERROR")]);
    assert!(
        glueless[0].1["iterative"]["glueless_lookups"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

#[test]
fn lame_servers_are_passed_over_every_time() {
    // The lame server of each zone is tried first half the time (the NS set
    // is shuffled): every try must still end with the answer.
    let world = world();
    let mut lame_seen = 0;
    for _ in 0..6 {
        for (_, stats) in check_cases(
            &world,
            &[],
            &[("lame-refused", "NOERROR"), ("upward-referral", "NOERROR")],
        ) {
            lame_seen += stats["iterative"]["lame_responses"].as_u64().unwrap();
        }
    }
    assert!(lame_seen > 0, "the lame servers were never asked in 6 runs");
}

#[test]
fn silent_servers_and_the_budgets() {
    let world = world();
    // The lame-silent zone's second server answers.
    check_cases(
        &world,
        &["--timeout", "300ms"],
        &[("lame-silent", "NOERROR")],
    );
    // Its only server never answers: each budget ends the walk with its status.
    let all = expected(&world);
    let dead = &all
        .iter()
        .find(|e| e.case == "all-lame-silent")
        .unwrap()
        .name;
    for (flags, status) in [
        (&["--timeout", "200ms", "--retries", "1"][..], "TIMEOUT"),
        (
            &["--timeout", "2s", "--iteration-timeout", "300ms"][..],
            "ITERATIVE_TIMEOUT",
        ),
        (
            &["--timeout", "2s", "--name-timeout", "400ms"][..],
            "TIMEOUT",
        ),
    ] {
        let (got, _) = iterate(&world, "A", flags, &[dead]);
        let record = &got[&key(dead)];
        assert_eq!(record["status"], status, "{flags:?}: {record}");
        // One budget for the name: the timeouts do not add up (ZDNS #524):
        // every bound above is under half a second, two tries at most.
        let took = record["duration_ms"].as_f64().unwrap();
        assert!(took < 2_000.0, "{flags:?}: {took} ms");
    }
}

#[test]
fn cname_and_dname_chains_across_zones() {
    let world = world();
    check_cases(
        &world,
        &[],
        &[
            ("cname-chain", "NOERROR"),
            ("cname-dangling", "NXDOMAIN"),
            ("dname", "NOERROR"),
            ("cname-loop", "CIRCULAR"),
        ],
    );
}

#[test]
fn negative_answers_at_every_level() {
    let world = world();
    let results = check_cases(
        &world,
        &[],
        &[
            ("nxdomain-root", "NXDOMAIN"),
            ("nodata-root", "NOERROR"),
            ("nxdomain-tld", "NXDOMAIN"),
            ("nodata-tld", "NOERROR"),
            ("nxdomain-leaf", "NXDOMAIN"),
            ("nodata-leaf", "NOERROR"),
            ("wildcard-nodata", "NOERROR"),
        ],
    );
    // Each negative answer carries the SOA of the zone that gave it (RFC 2308).
    let soa_owners: Vec<String> = results
        .iter()
        .map(|(record, _)| {
            let soa = &record["data"]["authorities"][0];
            assert_eq!(soa["type"], "SOA", "{record}");
            soa["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(soa_owners[..4], [".", ".", "com", "com"]);
    let leaf_zone = |i: usize| {
        let name = results[i].0["name"].as_str().unwrap().trim_end_matches('.');
        name.split_once('.').unwrap().1.to_string()
    };
    assert_eq!(soa_owners[4], leaf_zone(4));
    assert_eq!(soa_owners[5], leaf_zone(5));
}

#[test]
fn wildcards_truncation_slowness_and_ipv6_glue() {
    let world = world();
    check_cases(
        &world,
        &[],
        &[
            ("wildcard", "NOERROR"),
            ("wildcard-exists", "NOERROR"),
            ("slow", "NOERROR"),
            ("handmade", "NOERROR"),
        ],
    );
    // A server from before EDNS: FORMERR to the EDNS query, then the answer
    // to the same query without EDNS.
    for (_, stats) in check_cases(&world, &[], &[("noedns", "NOERROR")]) {
        assert_eq!(stats["iterative"]["edns_fallbacks"], 1, "{stats}");
    }
    // The truncating server's answers came over TCP after TC=1 over UDP.
    for (record, stats) in check_cases(&world, &[], &[("truncating", "NOERROR")]) {
        assert_eq!(record["data"]["protocol"], "tcp", "{record}");
        assert_eq!(stats["iterative"]["tcp_fallbacks"], 1, "{stats}");
    }
    // The IPv6-only zone's server is [::1]:53; with --4 it cannot be reached.
    for (record, _) in check_cases(&world, &[], &[("ipv6-only-glue", "NOERROR")]) {
        assert_eq!(record["data"]["resolver"], "[::1]:53", "{record}");
        let name = record["name"].as_str().unwrap();
        let (got, _) = iterate(&world, "A", &["--4"], &[name]);
        let record = &got[&key(name)];
        assert_eq!(record["status"], "SERVFAIL", "{record}");
        assert!(
            record["error"]
                .as_str()
                .unwrap()
                .contains("without usable glue"),
            "{record}"
        );
    }
}

#[test]
fn max_depth_bounds_the_walk() {
    let world = world();
    // deep-K is K+1 referrals below the root (com, deep.com, l2 ... lK).
    let shallow: Vec<String> = (1..=9).map(|k| format!("deep-{k}")).collect();
    let shallow: Vec<(&str, &str)> = shallow.iter().map(|c| (c.as_str(), "NOERROR")).collect();
    check_cases(&world, &[], &shallow);
    let all = expected(&world);
    for case in ["deep-10", "deep-11", "deep-12"] {
        let name = &all.iter().find(|e| e.case == case).unwrap().name;
        let (got, _) = iterate(&world, "A", &[], &[name]);
        let record = &got[&key(name)];
        assert_eq!(record["status"], "ERROR", "{record}");
        assert!(
            record["error"].as_str().unwrap().contains("--max-depth"),
            "{record}"
        );
    }
    check_cases(&world, &["--max-depth", "13"], &[("deep-12", "NOERROR")]);
}

/// What the poison server slips in (tests/world/gen.py), in any record
/// of `record`: an address for the victim's host, its own address for a
/// TLD server and a nameserver of another zone, and itself as their
/// nameserver; or, for a name of the poison zone, a record of another.
fn poison_in(world: &World, record: &Value) -> Option<String> {
    let poison_ip = world.addr(54, 1);
    let poisoned = ["192.0.2.66", poison_ip.as_str()];
    let asked_poison = record["name"].as_str().unwrap().contains("poison");
    for section in ["additionals", "authorities", "answers"] {
        for rr in record["data"][section].as_array().into_iter().flatten() {
            let data = rr["answer"].as_str().unwrap();
            let owner = rr["name"].as_str().unwrap();
            if poisoned.contains(&data)
                || (data == "ns1.poison.com." && owner != "poison.com")
                || (asked_poison && !owner.contains("poison"))
            {
                return Some(format!("{section}: {rr}"));
            }
        }
    }
    None
}

#[test]
fn the_poison_is_never_used_nor_shown() {
    let world = world();
    let all = expected(&world);
    let poison: Vec<&Expected> = all.iter().filter(|e| e.case == "poison").collect();
    let victims: Vec<&Expected> = all.iter().filter(|e| e.case == "poison-victim").collect();
    let hints = world.root_hints.to_str().unwrap();
    for qtype in ["A", "MX", "NS"] {
        let poison: Vec<String> = poison.iter().map(|p| p.name.clone()).collect();
        let victims: Vec<&&Expected> = victims.iter().filter(|v| v.qtype == qtype).collect();
        let victim_names: Vec<String> = victims.iter().map(|v| v.name.clone()).collect();
        // The poison server's answers first, every one of them resolved
        // before a victim is read: anything they slipped into the cache
        // would be used for the victims. Then the other way round: a
        // victim resolved first must not be overwritten by the poison.
        for (order, phases) in [
            ("poison first", [&poison[..], &victim_names[..]]),
            ("poison last", [&victim_names[..], &poison[..]]),
        ] {
            let args = [
                qtype,
                "--iterative",
                "--root-hints",
                hints,
                "--workers",
                "1",
            ];
            let (got, stats) = lookup_phased(&args, &phases, Duration::ZERO);
            let got: BTreeMap<String, &Value> = got
                .iter()
                .flatten()
                .map(|r| (key(r["name"].as_str().unwrap()), r))
                .collect();
            assert_eq!(got.len(), poison.len() + victims.len(), "{order}");
            for v in &victims {
                let record = got[&key(&v.name)];
                assert_eq!(record["status"], "NOERROR", "{order}: {record}");
                assert_eq!(answers_of(record), v.answers, "{order}: {record}");
            }
            for record in got.values() {
                if let Some(poison) = poison_in(&world, record) {
                    panic!("{qtype} {order}: poison in {poison}: {record}");
                }
            }
            // Each poison answer carried the out-of-bailiwick records
            // (tests/world.rs sees them with kdig), and they were dropped.
            let dropped = stats["iterative"]["out_of_bailiwick_dropped"]
                .as_u64()
                .unwrap();
            assert!(dropped >= 5, "{qtype} {order}: {stats}");
        }
    }
}

#[test]
fn the_cache_answers_the_second_time() {
    let world = world();
    let all = expected(&world);
    let names: Vec<&str> = ["leaf", "cname-chain", "nxdomain-leaf", "dname"]
        .iter()
        .map(|case| {
            all.iter()
                .find(|e| e.case == *case && e.qtype == "A")
                .unwrap()
                .name
                .as_str()
        })
        .collect();
    // The same names again, spelt in capitals, once every first record is
    // out and at least a second and a half later: the cache answers them,
    // with TTLs gone down by the time they were kept.
    let first: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let again: Vec<String> = names.iter().map(|n| n.to_ascii_uppercase()).collect();
    let gap = Duration::from_millis(1500);
    let started = Instant::now();
    let (phases, stats) = lookup_phased(
        &[
            "A",
            "--iterative",
            "--root-hints",
            world.root_hints.to_str().unwrap(),
        ],
        &[&first, &again],
        gap,
    );
    let took = started.elapsed().as_secs();
    for record in phases.iter().flatten() {
        let name = record["name"].as_str().unwrap();
        let truth = truth(&all, name, "A");
        assert_eq!(answers_of(record), truth.answers, "{record}");
        assert_eq!(ttl_above_the_zones(truth, record), None, "{record}");
    }
    let ttls = |record: &Value| -> Vec<u64> {
        let answers = record["data"]["answers"].as_array();
        answers
            .into_iter()
            .flatten()
            .map(|a| a["ttl"].as_u64().unwrap())
            .collect()
    };
    for cold in &phases[0] {
        let name = cold["name"].as_str().unwrap();
        let warm = phases[1]
            .iter()
            .find(|r| key(r["name"].as_str().unwrap()) == key(name))
            .unwrap_or_else(|| panic!("{name}: no second record"));
        assert_eq!(warm["attempts"], 0, "the cache answers: {warm}");
        let (before, after) = (ttls(cold), ttls(warm));
        assert_eq!(before.len(), after.len(), "{cold}\n{warm}");
        for (b, a) in before.iter().zip(&after) {
            // At least 1.5 s later, at most the whole run later.
            assert!(
                *a < *b && *a + took + 1 >= *b,
                "ttl {b}, then {a}: {cold}\n{warm}"
            );
        }
    }
    let hits = stats["iterative"]["cache_hits"].as_u64().unwrap();
    assert!(hits >= names.len() as u64, "{stats}");
}

#[test]
fn roots_from_name_servers_and_bad_hints() {
    let world = world();
    let all = expected(&world);
    let leaf = all
        .iter()
        .find(|e| e.case == "leaf" && e.qtype == "A")
        .unwrap()
        .name
        .clone();
    let roots: Vec<String> = world.roots.iter().map(|r| r.to_string()).collect();
    let (got, _) = lookup(
        &["A", "--iterative", "--name-servers", &roots.join(",")],
        &[leaf.as_str()],
    );
    assert_eq!(
        answers_of(&got[&key(&leaf)]),
        truth(&all, &leaf, "A").answers
    );
    let bad = temp_path("bad-hints");
    std::fs::write(&bad, ". NS a.test.\na.test. A 1.2.3\n").unwrap();
    let out = dnsluice()
        .args(["lookup", "A", "--iterative", "--root-hints"])
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:2: bad address", bad.display())),
        "{err}"
    );
}

/// Every authoritative server address of the world (`layout.json`).
fn world_addresses(world: &World) -> usize {
    let layout: Value =
        serde_json::from_str(&std::fs::read_to_string(&world.layout).unwrap()).unwrap();
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
fn tcp_keeps_a_few_connections_per_authority() {
    let world = world();
    let all = expected(&world);
    let leaves: Vec<&Expected> = all
        .iter()
        .filter(|e| e.case == "leaf" && e.qtype == "A")
        .take(400)
        .collect();
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
        assert_eq!(
            stats["connections_reused"].as_u64().unwrap(),
            queries - opened,
            "{stats}"
        );
        seen.insert(transport, (queries, opened));
    }
    let (tcp_queries, tcp_opened) = seen["tcp"];
    // At most 4 connections per authoritative address of the world, shared
    // by the 100 workers.
    assert!(
        tcp_opened <= 4 * world_addresses(&world) as u64,
        "{tcp_opened} TCP connections"
    );
    assert!(
        tcp_queries >= 4 * tcp_opened,
        "{tcp_queries} queries on {tcp_opened} connections"
    );
    // UDP sockets are replaced every 64 queries (new source ports).
    let (udp_queries, udp_opened) = seen["udp"];
    assert!(
        udp_opened >= udp_queries / 64,
        "{udp_queries} queries on {udp_opened} sockets"
    );
}

#[test]
fn a_trace_lists_every_step() {
    let world = world();
    let all = expected(&world);
    let glueless = all.iter().find(|e| e.case == "glueless").unwrap();
    // The same name twice, one at a time: the second time from the cache.
    let lines = [glueless.name.clone(), glueless.name.to_ascii_uppercase()];
    let hints = world.root_hints.to_str().unwrap();
    let (records, _) = lookup_in_order(
        &[
            "A",
            "--iterative",
            "--root-hints",
            hints,
            "--workers",
            "1",
            "--result-verbosity",
            "trace",
        ],
        &lines,
    );
    let steps = records[0]["trace"].as_array().unwrap();
    // The walk: the root refers to the TLD, the TLD to the zone (no glue),
    // nested walks (deeper) find the nameserver's address, then the zone answers.
    let zone = key(&glueless.name).split_once('.').unwrap().1.to_string();
    assert_eq!(steps[0]["layer"], ".", "{}", records[0]);
    assert_eq!(steps[0]["depth"], 1);
    let roots: Vec<String> = world.roots.iter().map(|r| r.to_string()).collect();
    let first_server = steps[0]["name_server"].as_str().unwrap().to_string();
    assert!(roots.contains(&first_server), "{}", records[0]);
    assert!(
        steps.iter().any(|s| s["depth"] == 2),
        "a nested lookup: {}",
        records[0]
    );
    let last = steps.last().unwrap();
    assert_eq!(last["layer"], format!("{zone}."), "{}", records[0]);
    assert_eq!(last["depth"], 1);
    assert_eq!(last["cached"], false);
    let answered = answers_of(&serde_json::json!({"data": last["results"]}));
    assert_eq!(answered, glueless.answers, "{last}");
    let steps = records[1]["trace"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{}", records[1]);
    assert_eq!(steps[0]["cached"], true, "{}", records[1]);
}

/// The generator's answers for (`name`, `qtype`), as compared, if it recorded them.
fn recorded<'a>(all: &'a [Expected], name: &str, qtype: &str) -> Option<&'a Expected> {
    all.iter()
        .find(|e| key(&e.name) == key(name) && e.qtype == qtype)
}

/// Addresses unbound gives for `names` (A), by name: the truth for the
/// addresses the modules look up themselves.
fn unbound_addresses(
    world: &World,
    names: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let questions: Vec<testkit::kdig::Question> = names
        .iter()
        .map(|n| testkit::kdig::Question {
            name: format!("{n}."),
            rtype: "A".into(),
            class: "IN".into(),
        })
        .collect();
    let replies = testkit::kdig::ask(
        &world.unbound.ip().to_string(),
        world.unbound.port(),
        true,
        &questions,
        &[],
    );
    names
        .iter()
        .zip(replies)
        .map(|(name, reply)| {
            let reply = reply.unwrap_or_else(|e| panic!("unbound on {name}: {e}"));
            let found = reply
                .answers
                .iter()
                .filter(|a| a.rtype == "A")
                .map(|a| a.data.clone())
                .collect();
            (name.clone(), found)
        })
        .collect()
}

/// A list of strings in a record, as a set.
fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The lookup modules run unchanged over the iterative resolver: NSLOOKUP
/// and MXLOOKUP give the generator's NS and MX sets with the addresses
/// unbound finds for them, SPF and DMARC the generator's TXT records.
#[test]
fn lookup_modules_run_iteratively_on_the_world() {
    let world = world();
    let all = expected(&world);
    let leaf = |qtype: &str| -> Vec<&Expected> {
        all.iter()
            .filter(|e| e.case == "leaf" && e.qtype == qtype && e.rcode == "NOERROR")
            .take(25)
            .collect()
    };
    // MXLOOKUP: every exchange of the generator's MX set, with its addresses.
    let mx = leaf("MX");
    let names: Vec<&str> = mx.iter().map(|e| e.name.as_str()).collect();
    let (records, _) = iterate(&world, "MXLOOKUP", &[], &names);
    let targets: BTreeSet<String> = mx
        .iter()
        .flat_map(|e| {
            e.answers
                .iter()
                .map(|(_, _, data)| key(data.split(' ').nth(1).unwrap()))
        })
        .collect();
    let truth = unbound_addresses(&world, &targets);
    for e in &mx {
        let record = &records[&key(&e.name)];
        assert_eq!(record["status"], "NOERROR", "{record}");
        let exchanges = record["data"]["exchanges"].as_array().unwrap();
        let got: BTreeSet<(u64, String)> = exchanges
            .iter()
            .map(|x| {
                (
                    x["preference"].as_u64().unwrap(),
                    key(x["name"].as_str().unwrap()),
                )
            })
            .collect();
        let want: BTreeSet<(u64, String)> = e
            .answers
            .iter()
            .map(|(_, _, data)| {
                let (pref, target) = data.split_once(' ').unwrap();
                (pref.parse().unwrap(), key(target))
            })
            .collect();
        assert_eq!(got, want, "{}", e.name);
        for x in exchanges {
            let name = key(x["name"].as_str().unwrap());
            assert_eq!(strings(&x["ipv4_addresses"]), truth[&name], "{name}");
        }
    }
    // NSLOOKUP: the generator's NS names, with the addresses unbound finds.
    let ns = leaf("NS");
    let names: Vec<&str> = ns.iter().map(|e| e.name.as_str()).collect();
    let (records, _) = iterate(&world, "NSLOOKUP", &[], &names);
    let servers: BTreeSet<String> = ns
        .iter()
        .flat_map(|e| e.answers.iter().map(|(_, _, data)| key(data)))
        .collect();
    let truth = unbound_addresses(&world, &servers);
    for e in &ns {
        let record = &records[&key(&e.name)];
        assert_eq!(record["status"], "NOERROR", "{record}");
        let listed = record["data"]["servers"].as_array().unwrap();
        let got: BTreeSet<String> = listed
            .iter()
            .map(|s| key(s["name"].as_str().unwrap()))
            .collect();
        let want: BTreeSet<String> = e.answers.iter().map(|(_, _, data)| key(data)).collect();
        assert_eq!(got, want, "{}", e.name);
        for s in listed {
            let name = key(s["name"].as_str().unwrap());
            assert_eq!(strings(&s["ipv4_addresses"]), truth[&name], "{name}");
        }
    }
    // SPF and DMARC: the zone's `v=spf1` TXT and its `_dmarc` TXT.
    let txt: Vec<&Expected> = all
        .iter()
        .filter(|e| e.case == "leaf" && e.qtype == "TXT")
        .collect();
    let value = |e: &Expected, prefix: &str| {
        e.answers
            .iter()
            .map(|(_, _, data)| data.trim_matches('"').to_string())
            .find(|text| text.starts_with(prefix))
    };
    let spf: Vec<(&str, String)> = txt
        .iter()
        .filter_map(|e| Some((e.name.as_str(), value(e, "v=spf1")?)))
        .take(20)
        .collect();
    // As ZDNS, DMARC asks the name given: `_dmarc.<domain>`.
    let dmarc: Vec<(String, String)> = txt
        .iter()
        .filter(|e| key(&e.name).starts_with("_dmarc."))
        .filter_map(|e| Some((key(&e.name), value(e, "v=DMARC1")?)))
        .take(20)
        .collect();
    assert!(
        spf.len() == 20 && dmarc.len() == 20,
        "the world has SPF and DMARC records"
    );
    let names: Vec<&str> = spf.iter().map(|(n, _)| *n).collect();
    let (records, _) = iterate(&world, "SPF", &[], &names);
    for (name, text) in &spf {
        assert_eq!(records[&key(name)]["data"]["spf"], text.as_str(), "{name}");
    }
    let names: Vec<&str> = dmarc.iter().map(|(n, _)| n.as_str()).collect();
    let (records, _) = iterate(&world, "DMARC", &[], &names);
    for (name, text) in &dmarc {
        assert_eq!(
            records[&key(name)]["data"]["dmarc"],
            text.as_str(),
            "{name}"
        );
    }
}

/// AXFR, iteratively: the zone's NS set found from the root, then a transfer
/// from each; `axfr.com.` gives the generator's whole zone from every
/// server, `noaxfr.com.` each server's refusal.
#[test]
fn axfr_finds_the_servers_from_the_root_and_transfers_from_each() {
    let world = world();
    let all = expected(&world);
    let zone = recorded(&all, "axfr.com.", "AXFR").expect("the world records axfr.com's zone");
    let (records, _) = iterate(&world, "AXFR", &[], &["axfr.com", "noaxfr.com"]);
    let record = &records["axfr.com"];
    assert_eq!(record["status"], "NOERROR", "{record}");
    let servers = record["data"]["servers"].as_array().unwrap();
    let ns = recorded(&all, "axfr.com.", "NS").map_or(2, |e| e.answers.len());
    assert_eq!(servers.len(), ns, "one transfer per nameserver: {record}");
    for server in servers {
        assert_eq!(server["Status"], "NOERROR", "{server}");
        let got: BTreeSet<(String, String, String)> = server["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                rr(&text("name"), &text("type"), &text("answer"))
            })
            .collect();
        assert_eq!(got, zone.answers, "{}", server["server"]);
    }
    let refused = records["noaxfr.com"]["data"]["servers"].as_array().unwrap();
    assert!(!refused.is_empty());
    for server in refused {
        assert_eq!(server["Status"], "ERROR", "{server}");
        assert!(
            server["error"].as_str().unwrap().contains("NOTAUTH"),
            "{server}"
        );
    }
}

/// BINDVERSION, pinned to each world server: the version string the
/// generator gave each instance (and REFUSED where it gave none).
#[test]
fn bindversion_asks_each_world_server() {
    let world = world();
    let lines: Vec<(String, String, String)> = world
        .expected()
        .into_iter()
        .filter(|e| e.case == "bindversion")
        .map(|e| {
            let server = e
                .server
                .clone()
                .expect("a bindversion line names its server");
            let version = e
                .answers
                .first()
                .map(|a| a.data.trim_matches('"').to_string());
            (server, e.rcode.clone(), version.unwrap_or_default())
        })
        .collect();
    assert!(lines.len() >= 20, "every knot and nsd instance");
    let input: Vec<String> = lines
        .iter()
        .map(|(server, _, _)| format!("version.bind,{server}"))
        .collect();
    let (records, _) = lookup_in_order(&["BINDVERSION", "--retries", "0"], &input);
    for record in &records {
        let server = record["nameserver"].as_str().unwrap();
        let (_, rcode, version) = lines
            .iter()
            .find(|(s, _, _)| {
                [format!("{s}:53"), format!("[{s}]:53")]
                    .iter()
                    .any(|a| a == server)
            })
            .unwrap_or_else(|| panic!("{server} was asked"));
        if rcode == "NOERROR" {
            assert_eq!(record["data"]["version"], version.as_str(), "{record}");
        } else {
            assert_eq!(record["status"], rcode.as_str(), "{record}");
        }
    }
}

/// `CAALOOKUP` climbs from a name to the closest CAA RRset (RFC 8659 §3).
/// The world's one CAA RRset is `rdata.com.`'s (tests/world/gen.py), and
/// unbound's answer to it is in `expected.jsonl`: the name itself, a name
/// below it without CAA, and a name below it that does not exist all get
/// that RRset; a leaf zone's name, with no CAA up to `com.`, gets NOERROR
/// and no answer.
#[test]
fn caalookup_finds_the_closest_caa_rrset_up_the_tree() {
    let world = world();
    let all = expected(&world);
    let truth = all
        .iter()
        .find(|e| e.name == "rdata.com." && e.qtype == "CAA")
        .expect("the generator records rdata.com's CAA");
    assert_eq!(truth.rcode, "NOERROR");
    assert!(!truth.answers.is_empty(), "{truth:?}");
    let leaf = all
        .iter()
        .find(|e| e.case == "leaf" && e.qtype == "A" && e.rcode == "NOERROR")
        .expect("a leaf name");
    let below = ["rdata.com.", "ptr.rdata.com.", "no.such.name.rdata.com."];
    let names: Vec<&str> = below.iter().copied().chain([leaf.name.as_str()]).collect();
    let (got, _) = iterate(&world, "CAALOOKUP", &[], &names);
    for name in below {
        let record = &got[&key(name)];
        assert_eq!(record["status"], "NOERROR", "{record}");
        assert_eq!(answers_of(record), truth.answers, "{name}: {record}");
    }
    // Asked at the name and each parent below rdata.com: 3 questions at
    // least for the name that is not there (its NXDOMAIN climbs too);
    // rdata.com's own CAA may come from the run's cache, filled by the
    // other names' climbs (CI once saw 3 attempts: the 4th was cached).
    let deep = &got[&key("no.such.name.rdata.com.")];
    assert!(deep["attempts"].as_u64().unwrap() >= 3, "{deep}");
    let record = &got[&key(&leaf.name)];
    assert_eq!(record["status"], "NOERROR", "{record}");
    assert!(answers_of(record).is_empty(), "no CAA up to com.: {record}");
}

/// `--rate` holds for the walks of `--iterative`: 40 leaves asked at
/// `--rate 50` take at least their queries ÷ 50 seconds, and each still
/// gets the generator's answer (the cap was read only by the UDP engine of
/// the direct lookups). `--rate-per-nameserver`, which has no nameservers
/// to cap here, is refused with the reason.
#[test]
fn the_rate_cap_holds_for_the_walks() {
    let world = world();
    let all = expected(&world);
    let leaves: Vec<&Expected> = all
        .iter()
        .filter(|e| e.case == "leaf" && e.qtype == "A")
        .take(40)
        .collect();
    let names: Vec<&str> = leaves.iter().map(|e| e.name.as_str()).collect();
    let started = Instant::now();
    let (got, stats) = iterate(&world, "A", &["--rate", "50"], &names);
    let took = started.elapsed();
    for e in &leaves {
        let record = &got[&key(&e.name)];
        assert_eq!(record["status"], e.rcode.as_str(), "{record}");
        assert_eq!(answers_of(record), e.answers, "{record}");
    }
    let queries = stats["queries"].as_u64().unwrap();
    assert!(queries >= names.len() as u64, "{stats}");
    let least = Duration::from_secs_f64((queries - 1) as f64 / 50.0 * 0.95);
    assert!(took >= least, "{took:?} for {queries} queries: {stats}");
    let hints = world.root_hints.to_str().unwrap();
    let out = dnsluice()
        .args(["lookup", "A", "--iterative", "--root-hints", hints])
        .args(["--rate-per-nameserver", "10"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--rate-per-nameserver: ") && err.contains("authorities"),
        "{err}"
    );
}
