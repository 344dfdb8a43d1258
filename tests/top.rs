//! `filter.top` against tshark's view of corpus captures: with room for
//! every key the lists are exact (error 0) and equal the counts made here
//! from the truth file's message rows; with few counters every listed count
//! stays within its stated error of the truth, the errors within N / m, and
//! no key seen more than N / m times is missing.

use serde_json::Value;
use std::collections::HashMap;
use testkit::corpus::{corpus_dir, truth, truth_rows};
use testkit::{assert_ok, run_pipeline, temp_path};

/// `filter.top` on `file` with `options`: its stage in --stats-json.
fn top_of(file: &str, options: &str) -> Value {
    top_on_threads(file, options, 1)
}

/// [`top_of`], the chain on `threads` threads.
fn top_on_threads(file: &str, options: &str, threads: u32) -> Value {
    let stats = temp_path("top-stats.json");
    let pipeline = format!(
        "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.layer\"\n\
         [[stage]]\nmodule = \"filter.dns\"\n[[stage]]\nmodule = \"filter.top\"\n{options}\n\
         [[stage]]\nmodule = \"output.null\"\n",
        corpus_dir().join(file).display()
    );
    let threads = threads.to_string();
    let args = [
        "-q",
        "--threads",
        &threads,
        "--stats-json",
        stats.to_str().unwrap(),
    ];
    let out = run_pipeline(&pipeline, &args);
    assert_ok(&out, "dnsluice run");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    stats["stages"][3].clone()
}

/// tshark's queries of `file`, counted by lowercased qname (with the root
/// dot our names end in), by source and by destination.
fn truth_counts(file: &str) -> [HashMap<String, u64>; 3] {
    let truth = truth(file);
    let mut counts: [HashMap<String, u64>; 3] = Default::default();
    for row in truth_rows(&truth["dns_messages"]) {
        if row["qr"] != 0 {
            continue;
        }
        if let Some(name) = row["qname"].as_str() {
            let name = name.to_ascii_lowercase();
            let name = if name == "." {
                name
            } else {
                format!("{name}.")
            };
            *counts[0].entry(name).or_default() += 1;
        }
        for (i, column) in [(1, "src"), (2, "dst")] {
            *counts[i]
                .entry(row[column].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    counts
}

#[test]
fn with_room_for_every_key_the_lists_are_tsharks_counts() {
    let file = "live_mini_en10mb.pcap";
    let stage = top_of(file, "entries = 1000\ncapacity = 100000");
    assert_eq!(stage["module"], "filter.top");
    let truth = truth_counts(file);
    for (i, list) in ["qnames", "clients", "servers"].iter().enumerate() {
        let top = &stage["top"][list];
        let entries = top["entries"].as_array().unwrap();
        assert_eq!(entries.len(), truth[i].len(), "{list}: every key is listed");
        let counted: u64 = truth[i].values().sum();
        assert_eq!(
            top["counted"].as_u64(),
            Some(580),
            "{list}: tshark's 580 queries"
        );
        assert_eq!(top["unlisted_max"], 0);
        let mut last = u64::MAX;
        for e in entries {
            let key = e["key"].as_str().unwrap();
            let count = e["count"].as_u64().unwrap();
            assert_eq!(Some(&count), truth[i].get(key), "{list} {key}");
            assert_eq!(e["error"], 0, "{list} {key}: exact");
            assert!(count <= last, "{list}: most frequent first");
            last = count;
        }
        if *list != "qnames" {
            assert_eq!(counted, 580);
        }
    }
}

#[test]
fn with_few_counters_the_stated_bounds_hold() {
    let file = "live_mini_en10mb.pcap";
    let stage = top_of(file, "entries = 16\ncapacity = 16");
    let truth = truth_counts(file);
    let top = &stage["top"]["qnames"];
    let n = top["counted"].as_u64().unwrap();
    let m = top["capacity"].as_u64().unwrap();
    assert_eq!((n, m), (580, 16));
    let listed: Vec<(String, u64, u64)> = top["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_string(),
                e["count"].as_u64().unwrap(),
                e["error"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed.len(), 16);
    for (key, count, error) in &listed {
        let t = truth[0].get(key).copied().unwrap_or(0);
        assert!(
            t <= *count && *count <= t + error,
            "{key}: true {t}, listed {count} ± {error}"
        );
        assert!(*error <= n / m, "{key}: error {error} over N/m = {}", n / m);
    }
    let unlisted_max = top["unlisted_max"].as_u64().unwrap();
    assert!(unlisted_max <= n / m);
    for (key, t) in &truth[0] {
        if !listed.iter().any(|(k, _, _)| k == key) {
            assert!(*t <= unlisted_max, "{key} seen {t} times is missing");
        }
    }
    // N/m = 36: the two keys seen more often (corpus.test. 66 times,
    // _sip._udp.corpus.test. 37) must be listed.
    for heavy in ["corpus.test.", "_sip._udp.corpus.test."] {
        assert!(truth[0][heavy] > n / m);
        assert!(listed.iter().any(|(k, _, _)| k == heavy), "{heavy} missing");
    }
}

/// The lists as they come (20 entries of 4096 counters) on one, two and
/// three threads: every listed count within its error of tshark's, and
/// every key left out seen at most `unlisted_max` times. The capture has
/// some 270 names for the 20 places: the list is cut (a name seen 3 times
/// once went unlisted under an `unlisted_max` of 0, and a merge added 0 for
/// a name another thread had cut: 7 ± 0 for a true 8).
#[test]
fn a_cut_list_bounds_what_it_leaves_out_on_any_threads() {
    let file = "live_mini_en10mb.pcap";
    let truth = truth_counts(file);
    for threads in [1, 2, 3] {
        let stage = top_on_threads(file, "", threads);
        for (i, list) in ["qnames", "clients", "servers"].iter().enumerate() {
            let top = &stage["top"][list];
            let listed: HashMap<&str, (u64, u64)> = top["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    let count = e["count"].as_u64().unwrap();
                    (
                        e["key"].as_str().unwrap(),
                        (count, e["error"].as_u64().unwrap()),
                    )
                })
                .collect();
            let unlisted_max = top["unlisted_max"].as_u64().unwrap();
            for (key, &t) in &truth[i] {
                let what = format!("{threads} threads, {list} {key}: true {t}");
                match listed.get(key.as_str()) {
                    Some(&(count, error)) => {
                        assert!(
                            t <= count && count <= t + error,
                            "{what}, listed {count} ± {error}"
                        )
                    }
                    None => assert!(t <= unlisted_max, "{what}, unlisted_max {unlisted_max}"),
                }
            }
        }
    }
}

/// Names seen once each: one thread lists them in the order two threads'
/// merged lists do (ties by their text).
#[test]
fn ties_are_listed_in_the_same_order_on_any_threads() {
    let file = "ipv4_fragments.pcap";
    let one = top_on_threads(file, "", 1)["top"].clone();
    assert!(
        one["qnames"]["entries"].as_array().unwrap().len() > 3,
        "{one}"
    );
    for threads in [2, 3] {
        assert_eq!(
            top_on_threads(file, "", threads)["top"],
            one,
            "{threads} threads"
        );
    }
}
