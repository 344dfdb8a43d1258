//! The simulated internet of `tests/world` is what its generator says it is,
//! checked before any resolver of ours is tested against it:
//! - unbound, resolving iteratively from the world's root hints, answers
//!   every line of `expected.jsonl` with the rcode and answer RRset that
//!   `gen.py` recorded (poison cases first: their victims must still come
//!   out right afterwards);
//! - the servers answer `version.bind` and AXFR as recorded;
//! - every level of the hierarchy is its own server (no server can answer
//!   for a level below the one it is asked about);
//! - the misbehaving servers misbehave: UDP truncated, REFUSED, silent,
//!   upward referral, poison in the additional and authority sections,
//!   slow, IPv6-only.
//!
//! Fails (does not skip) when the world is not running.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Instant;

use testkit::kdig::{self, Question, Reply};
use testkit::{Expected, Rr, World};

/// Lines where unbound's answer may differ from the generator's, and why.
/// Empty: unbound agrees with every line (CNAME loops and dead delegations
/// are SERVFAIL in both; poison is never accepted).
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[];

/// Edge cases `expected.jsonl` must cover (issue 14, item 7).
const CASES: &[&str] = &[
    "poison",
    "poison-victim",
    "nxdomain-root",
    "nodata-root",
    "nxdomain-tld",
    "nodata-tld",
    "nxdomain-leaf",
    "nodata-leaf",
    "glueless",
    "sibling-glue",
    "mixed-glue",
    "lame-refused",
    "lame-silent",
    "upward-referral",
    "all-lame-refused",
    "all-lame-silent",
    "noedns",
    "missing-glue",
    "cname-chain",
    "dname",
    "cname-loop",
    "wildcard",
    "wildcard-nodata",
    "truncating",
    "slow",
    "ipv6-only-glue",
    "deep-12",
    "rdata",
    "leaf",
    "bindversion",
    "axfr",
];

/// Record types that must each appear in some answer of `expected.jsonl`.
const RDATA_TYPES: &[&str] = &[
    "A",
    "AAAA",
    "MX",
    "NS",
    "TXT",
    "CNAME",
    "DNAME",
    "SOA",
    "DNSKEY",
    "DS",
    "RRSIG",
    "NSEC",
    "NSEC3",
    "NSEC3PARAM",
    "TLSA",
    "SSHFP",
    "NAPTR",
    "LOC",
    "CERT",
    "URI",
    "SVCB",
    "HTTPS",
    "CAA",
    "SRV",
    "PTR",
    "HINFO",
];

/// How many questions one kdig run asks, and how many runs at once.
const BATCH: usize = 100;
const PARALLEL: usize = 4;

fn question(e: &Expected) -> Question {
    Question {
        name: e.name.clone(),
        rtype: e.rtype.clone(),
        class: e.class.clone(),
    }
}

fn split(addr: SocketAddr) -> (String, u16) {
    (addr.ip().to_string(), addr.port())
}

/// Why `got` is not `want`, or None when they agree: same rcode, same
/// answer records (name, type, data), and no TTL above the zone's.
fn disagreement(want: &Expected, got: &Result<Reply, String>) -> Option<String> {
    let got = match got {
        Ok(reply) => reply,
        Err(e) => return Some(e.clone()),
    };
    if got.rcode != want.rcode {
        return Some(format!("rcode {} (want {})", got.rcode, want.rcode));
    }
    let keys = |rrs: &[Rr]| rrs.iter().map(Rr::key).collect::<BTreeSet<_>>();
    let (have, need) = (keys(&got.answers), keys(&want.answers));
    if have != need || got.answers.len() != want.answers.len() {
        return Some(format!(
            "answers {:?}\n      want {:?}",
            got.answers.iter().map(Rr::key).collect::<Vec<_>>(),
            need
        ));
    }
    for rr in &got.answers {
        let zone_ttl = want
            .answers
            .iter()
            .find(|w| w.key() == rr.key())
            .map(|w| w.ttl);
        if zone_ttl.is_some_and(|ttl| rr.ttl > ttl) {
            return Some(format!(
                "{} {} ttl {} above the zone's {zone_ttl:?}",
                rr.name, rr.rtype, rr.ttl
            ));
        }
    }
    None
}

/// Asks unbound every question (in `BATCH`es, `PARALLEL` kdig runs at once)
/// and returns the replies in order.
fn ask_unbound(world: &World, entries: &[&Expected]) -> Vec<Result<Reply, String>> {
    let (ip, port) = split(world.unbound);
    let chunks: Vec<&[&Expected]> = entries.chunks(BATCH).collect();
    let mut replies: Vec<Vec<Result<Reply, String>>> = vec![Vec::new(); chunks.len()];
    std::thread::scope(|s| {
        for (slot, group) in replies
            .chunks_mut(chunks.len().div_ceil(PARALLEL))
            .zip(chunks.chunks(chunks.len().div_ceil(PARALLEL)))
        {
            let (ip, port) = (&ip, port);
            s.spawn(move || {
                for (out, chunk) in slot.iter_mut().zip(group) {
                    let questions: Vec<Question> = chunk.iter().map(|e| question(e)).collect();
                    *out = kdig::ask(ip, port, true, &questions, &["+timeout=20", "+retry=0"]);
                }
            });
        }
    });
    replies.into_iter().flatten().collect()
}

#[test]
fn unbound_resolves_every_world_name_as_the_generator_recorded() {
    let world = testkit::world();
    let expected = world.expected();
    let cases: BTreeSet<&str> = expected.iter().map(|e| e.case.as_str()).collect();
    for case in CASES {
        assert!(cases.contains(case), "expected.jsonl has no `{case}` line");
    }
    let types: BTreeSet<&str> = expected
        .iter()
        .flat_map(|e| e.answers.iter().map(|a| a.rtype.as_str()))
        .collect();
    for rtype in RDATA_TYPES {
        assert!(
            types.contains(rtype),
            "no {rtype} record in any expected answer"
        );
    }
    let resolvable: Vec<&Expected> = expected.iter().filter(|e| e.server.is_none()).collect();
    assert!(
        resolvable.len() as u32 >= 2 * world.zones,
        "expected.jsonl has {} resolver lines for {} zones",
        resolvable.len(),
        world.zones
    );
    // Poison first, on its own, in file order; then everything.
    let (first, rest): (Vec<&Expected>, Vec<&Expected>) = resolvable
        .iter()
        .partition(|e| e.case.starts_with("poison"));
    let (ip, port) = split(world.unbound);
    let questions: Vec<Question> = first.iter().map(|e| question(e)).collect();
    let started = Instant::now();
    let mut replies = kdig::ask(&ip, port, true, &questions, &["+timeout=20", "+retry=0"]);
    replies.extend(ask_unbound(&world, &rest));
    let took = started.elapsed();

    let mut wrong = Vec::new();
    let mut known = 0;
    for (want, got) in first.iter().chain(&rest).zip(&replies) {
        let Some(why) = disagreement(want, got) else {
            continue;
        };
        if KNOWN_DIFFERENCES
            .iter()
            .any(|(name, rtype, _)| *name == want.name && *rtype == want.rtype)
        {
            known += 1;
        } else {
            wrong.push(format!(
                "{} {} [{}]: {why}",
                want.name, want.rtype, want.case
            ));
        }
    }
    eprintln!(
        "world: unbound agrees on {} of {} lines ({known} known differences) in {:.1}s",
        resolvable.len() - wrong.len() - known,
        resolvable.len(),
        took.as_secs_f64()
    );
    assert!(
        wrong.is_empty(),
        "{} lines where unbound disagrees with expected.jsonl, e.g.\n  {}",
        wrong.len(),
        wrong
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

#[test]
fn servers_answer_version_bind_and_axfr_as_recorded() {
    let world = testkit::world();
    let pinned: Vec<Expected> = world
        .expected()
        .into_iter()
        .filter(|e| e.server.is_some())
        .collect();
    assert!(pinned
        .iter()
        .any(|e| e.rtype == "AXFR" && e.rcode == "NOERROR"));
    assert!(pinned
        .iter()
        .any(|e| e.rtype == "AXFR" && e.rcode != "NOERROR"));
    assert!(pinned.iter().filter(|e| e.case == "bindversion").count() >= 10);
    for e in &pinned {
        let server = e.server.as_deref().expect("filtered");
        if e.rtype == "AXFR" {
            match kdig::axfr(server, &e.name) {
                Ok(records) => {
                    assert_eq!(
                        e.rcode, "NOERROR",
                        "AXFR {} from {server} was allowed",
                        e.name
                    );
                    let sorted = |rrs: &[Rr]| {
                        let mut keys: Vec<_> = rrs.iter().map(Rr::key).collect();
                        keys.sort();
                        keys
                    };
                    assert_eq!(
                        sorted(&records),
                        sorted(&e.answers),
                        "AXFR {} from {server}",
                        e.name
                    );
                    assert_eq!(records.first().map(|r| r.rtype.as_str()), Some("SOA"));
                    assert_eq!(records.last().map(|r| r.rtype.as_str()), Some("SOA"));
                }
                Err(rcode) => assert_eq!(rcode, e.rcode, "AXFR {} from {server}", e.name),
            }
        } else {
            let reply = kdig::ask(server, 53, false, &[question(e)], &["+timeout=2"]).remove(0);
            if let Some(why) = disagreement(e, &reply) {
                panic!("{} {} {} at {server}: {why}", e.name, e.class, e.rtype);
            }
        }
    }
}

fn ask_one(server: &str, name: &str, rtype: &str, extra: &[&str]) -> Result<Reply, String> {
    let q = Question {
        name: name.into(),
        rtype: rtype.into(),
        class: "IN".into(),
    };
    kdig::ask(server, 53, false, &[q], extra).remove(0)
}

/// Asserts that `server` answers `name` with a referral to exactly
/// `child`: NOERROR, not authoritative, no answer, NS records for `child`
/// (kdig's `+authority` puts them after the empty answer section).
fn assert_referral(server: &str, name: &str, child: &str) {
    let reply = ask_one(server, name, "A", &["+authority", "+timeout=2"]).unwrap();
    assert_eq!(reply.rcode, "NOERROR", "{server} for {name}");
    assert!(
        !reply.has_flag("aa"),
        "{server} answered {name} authoritatively"
    );
    assert!(
        !reply.answers.is_empty(),
        "{server} gave no referral for {name}"
    );
    for rr in &reply.answers {
        assert_eq!(
            (rr.name.as_str(), rr.rtype.as_str()),
            (child, "NS"),
            "{server} for {name}: {:?}",
            reply.answers
        );
    }
}

#[test]
fn every_level_is_its_own_server() {
    let world = testkit::world();
    let deepest = world
        .expected()
        .into_iter()
        .filter(|e| e.case.starts_with("deep-"))
        .max_by_key(|e| e.name.len())
        .expect("deep chain lines")
        .name;
    // deep.com., l2.deep.com., ..., the zone of the deepest name.
    let mut zones = vec!["deep.com.".to_owned()];
    while zones
        .last()
        .is_some_and(|z| !deepest.ends_with(&format!("www.{z}")))
    {
        let labels: Vec<&str> = deepest.split('.').collect();
        let depth = zones.last().unwrap().split('.').count();
        zones.push(labels[labels.len() - depth - 1..].join("."));
    }
    assert!(
        zones.len() >= 12,
        "the deep chain has {} zones",
        zones.len()
    );
    // Each level refers exactly one level down, from the root on.
    assert_referral(&world.addr(0, 1), &deepest, "com.");
    assert_referral(&world.addr(1, 1), &deepest, "deep.com.");
    for (level, child) in zones.iter().enumerate().skip(1) {
        assert_referral(&world.addr(30, level as u8), &deepest, child);
    }
    assert_referral(&world.addr(0, 1), "www.cname-c.org.", "org.");
    assert_referral(&world.addr(1, 5), "www.cname-c.org.", "cname-c.org.");
}

#[test]
fn misbehaving_servers_misbehave() {
    let world = testkit::world();
    // Every UDP answer truncated; TCP answered.
    let udp = ask_one(
        &world.addr(50, 1),
        "www.tc.com.",
        "A",
        &["+ignore", "+timeout=2"],
    )
    .unwrap();
    assert!(udp.has_flag("tc") && udp.answers.is_empty(), "{udp:?}");
    let tcp = ask_one(
        &world.addr(50, 1),
        "www.tc.com.",
        "A",
        &["+tcp", "+timeout=2"],
    )
    .unwrap();
    assert_eq!(tcp.answers.len(), 1, "{tcp:?}");
    // Lame: REFUSED, and silent.
    let refused = ask_one(&world.addr(52, 1), "www.lame.com.", "A", &["+timeout=2"]).unwrap();
    assert_eq!(refused.rcode, "REFUSED");
    let silent = ask_one(
        &world.addr(53, 1),
        "www.lamesilent.com.",
        "A",
        &["+timeout=1", "+retry=0"],
    );
    assert!(silent.is_err(), "the silent server answered: {silent:?}");
    // Upward referral: to the root.
    assert_referral(&world.addr(55, 1), "www.upward.com.", ".");
    // Poison: the right answer, and out-of-bailiwick records beside it.
    let poison = ask_one(
        &world.addr(54, 1),
        "www.poison.com.",
        "A",
        &["+authority", "+additional"],
    )
    .unwrap();
    assert!(poison.has_flag("aa"));
    let names: BTreeSet<&str> = poison.answers.iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains("www.poison.com."), "{names:?}");
    assert!(
        names.contains("a.nic.com.") && names.contains("com."),
        "{names:?}"
    );
    // Slow: at least the delay each way.
    let started = Instant::now();
    let slow = ask_one(&world.addr(51, 1), "www.slow.com.", "A", &["+timeout=5"]).unwrap();
    assert_eq!(slow.answers.len(), 1);
    assert!(
        started.elapsed() >= 2 * world.slow_delay,
        "{:?}",
        started.elapsed()
    );
    // IPv6-only: its one server is on ::1.
    let v6 = ask_one("::1", "www.v6only.net.", "AAAA", &["+timeout=2"]).unwrap();
    assert!(v6.has_flag("aa") && v6.answers.len() == 1, "{v6:?}");
}
