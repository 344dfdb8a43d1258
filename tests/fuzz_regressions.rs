//! Replays what the fuzzers found (`fuzz/regressions/*`) through the fuzz
//! targets' own bodies (`dnsluice::modules::fuzzing`: the same invariants
//! the fuzzer checks, with no libFuzzer), and feeds prefixes and damaged
//! copies of small corpus captures to the capture-reader target.

use dnsluice::modules::fuzzing;
use std::path::Path;

/// The fuzz target whose input format a regression file uses, from its name
/// (`<target>-<short-name>.bin`; `hand-*` files are hostile captures
/// written by hand, for `capture_reader`): its name and its body.
fn target_of(file: &str) -> (&'static str, fn(&[u8])) {
    let (prefix, _) = file
        .split_once('-')
        .unwrap_or_else(|| panic!("{file}: not named <target>-<name>.bin"));
    match prefix {
        "capture_reader" | "hand" => ("capture_reader", fuzzing::capture_reader),
        "layers" => ("layers", fuzzing::layers),
        "dns_message" => ("dns_message", fuzzing::dns_message),
        "dnstap_file" => ("dnstap_file", fuzzing::dnstap_file),
        "reassembly" => ("reassembly", fuzzing::reassembly),
        "resolver_reply" => ("resolver_reply", fuzzing::resolver_reply),
        "threads" => ("threads", fuzzing::threads),
        other => panic!("{file}: no fuzz target `{other}` (see fuzz/README.md)"),
    }
}

#[test]
fn fuzzer_findings_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut replayed = std::collections::BTreeMap::<&str, usize>::new();
    for entry in std::fs::read_dir(&dir).expect("fuzz/regressions") {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            file.ends_with(".bin"),
            "{file}: regressions are <target>-<name>.bin"
        );
        let (target, body) = target_of(&file);
        body(&std::fs::read(&path).unwrap());
        *replayed.entry(target).or_default() += 1;
    }
    // Every target has inputs of its own kind here.
    assert_eq!(
        replayed.keys().copied().collect::<Vec<_>>(),
        [
            "capture_reader",
            "dns_message",
            "dnstap_file",
            "layers",
            "reassembly",
            "resolver_reply",
            "threads"
        ],
        "{replayed:?}"
    );
}

#[test]
fn every_prefix_and_a_flipped_byte_of_small_captures_reads_cleanly() {
    for name in [
        "pcapng_multi_if.pcapng",
        "pcapng_two_sections.pcapng",
        "malformed.pcap",
        "vlan_qinq.pcap",
    ] {
        let bytes = std::fs::read(testkit::corpus::corpus_dir().join(name)).unwrap();
        for cut in (0..bytes.len()).step_by(7) {
            fuzzing::capture_reader(&bytes[..cut]);
        }
        for at in (0..bytes.len()).step_by(13) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0xff;
            fuzzing::capture_reader(&flipped);
        }
    }
}

/// The `threads` target's body on every corpus and field capture (those of
/// `tests/threads.rs`, read there in the default parts and reads): here in
/// parts and reads of 1 KiB, through a split placed by hand with batches of
/// three, by client (after the layers and after the DNS filter), compressed,
/// unordered, and a file a thread, on one to three threads: the same
/// outcome, lines and statistics.
#[test]
fn every_corpus_capture_runs_the_same_on_threads_in_small_parts() {
    let field = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/field");
    let mut ran = 0;
    for dir in [testkit::corpus::corpus_dir(), field] {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                let name = path.to_string_lossy();
                name.ends_with(".pcap") || name.ends_with(".pcapng")
            })
            .collect();
        files.sort();
        for path in files {
            fuzzing::threads(&std::fs::read(&path).unwrap());
            ran += 1;
        }
    }
    assert!(ran > 100, "the corpus and field captures: {ran}");
}
