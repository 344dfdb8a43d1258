//! The `threads` target: one capture through the chain of
//! `configs/dump.toml` (layers → DNS with TCP reassembly and
//! defragmentation → JSON lines) on one thread, and on two and three
//! threads (`threads = N`: the split reads a mapped capture in parts, a
//! buffered one through the input's thread). Whatever the bytes, every run
//! must end the same way (each succeeds, or each fails with the same
//! message), write the same lines in the same order (`ordered`, the
//! default), and give the same counts, errors and counters in every stage.
//!
//! Each is asked of the mapped input read in parts of 1 KiB, of the
//! buffered input read 1 KiB at a time, of a split placed by hand after the
//! buffered input with batches of three objects, of a split by client
//! (`by = "client"`, three threads) placed by hand after the layers and
//! after the DNS filter, and of the same bytes compressed with zstd (on two
//! threads); and once with `ordered = false`, and once with a file a thread
//! (`{thread}` in the output's path), whose lines must be the same
//! multiset.
//!
//! This is what `tests/threads.rs` checks on the corpus, asked of any
//! bytes: a packet whose flow the split's quick glance places differently
//! from its full look, a fragment or segment sent to another thread than
//! the rest of its flow, or a part boundary that loses or repeats a record
//! shows here as a line or a count that differs. The timeouts are set past
//! any capture's time span, since a thread that sees only some of the
//! packets also sees capture time pass differently (an idle flow is then
//! dropped at another packet); everything else is the default.

use super::capture::temp_path;
use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::StageStats;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `threads` target's body.
pub fn threads(data: &[u8]) {
    let capture = temp_path();
    std::fs::write(&capture, data).expect("writing the capture for the fuzz input");
    let out = temp_path();
    let registry = crate::registry();
    // Small parts and reads, so that a few KiB of input already make several
    // parts (and blocks) for the threads to share; a split placed by hand
    // with batches of three, so that batches end and cross often.
    let mapped = format!("module = \"input.mmpcap\"\npath = {capture:?}\npart_kib = 1\n");
    let buffered = format!("module = \"input.fpcap\"\npath = {capture:?}\nbuffer_kib = 1\n");
    // The same bytes compressed: read through the decompressing reader
    // (on a thread of its own where there is a core for it).
    let packed = temp_path();
    let zstd = zstd::encode_all(data, 1).expect("compressing the fuzz input");
    std::fs::write(&packed, zstd).expect("writing the compressed capture");
    let compressed = format!("module = \"input.fpcap\"\npath = {packed:?}\n");
    let by_hand = format!(
        "{buffered}[[stage]]\nmodule = \"filter.split\"\nthreads = 2\nby = \"flow\"\nbatch = 3\ninline = true\n"
    );
    // By client, after the layers (the client is read from them), on
    // three threads: a connection's two directions, and a datagram's
    // fragments, must still meet.
    let by_client =
        "[[stage]]\nmodule = \"filter.split\"\nthreads = 3\nby = \"client\"\nbatch = 3\n";
    let several = |threads, stages| Several {
        threads,
        stages,
        after_layers: "",
        after_dns: "",
        ordered: true,
        per_thread: false,
    };
    let unordered = Several {
        ordered: false,
        ..several(2, &mapped)
    };
    // Each thread's lines to a file of its own (`{thread}` in the path).
    let per_thread = Several {
        ordered: false,
        per_thread: true,
        ..several(2, &mapped)
    };
    for (input, runs) in [
        (
            &mapped,
            vec![
                several(2, &mapped),
                several(3, &mapped),
                unordered,
                per_thread,
            ],
        ),
        (
            &buffered,
            vec![
                several(2, &buffered),
                several(3, &buffered),
                several(1, &by_hand),
                Several {
                    after_layers: by_client,
                    ..several(1, &buffered)
                },
                // The same after the DNS filter: messages (reassembled
                // ones too) go by their flow's ports.
                Several {
                    after_dns: by_client,
                    ..several(1, &buffered)
                },
            ],
        ),
        (&compressed, vec![several(2, &compressed)]),
    ] {
        let one = run(&registry, &several(1, input), &out);
        for many in runs {
            let ordered = many.ordered;
            let what = format!(
                "{}{}{}threads = {}, ordered = {ordered}, per-thread files {}, against one thread",
                many.stages, many.after_layers, many.after_dns, many.threads, many.per_thread
            );
            let many = run(&registry, &many, &out);
            // Built, it must have run on threads: else nothing was compared.
            assert!(many.built.is_none_or(|split| split), "{what}: no split ran");
            assert_eq!(one.outcome, many.outcome, "{what}: how the run ended");
            if one.outcome.is_ok() {
                let (mut expected, mut got) = (lines(&one.lines), lines(&many.lines));
                if !ordered {
                    expected.sort_unstable();
                    got.sort_unstable();
                }
                assert!(
                    expected == got,
                    "{what}: the lines differ\none:\n{}\nmany:\n{}",
                    String::from_utf8_lossy(&one.lines),
                    String::from_utf8_lossy(&many.lines)
                );
                same_statistics(&one.stats, &many.stats, &what);
            }
        }
    }
    let _ = std::fs::remove_file(&capture);
    let _ = std::fs::remove_file(&packed);
}

/// A run on several threads, to hold to one thread's.
struct Several<'a> {
    /// The pipeline's `threads` key.
    threads: usize,
    /// The input's table, and any stage placed after it.
    stages: &'a str,
    /// Any stage placed after the layers.
    after_layers: &'a str,
    /// Any stage placed after the DNS filter.
    after_dns: &'a str,
    /// The pipeline's `ordered` key: false, the lines are compared as a
    /// multiset.
    ordered: bool,
    /// Each thread writes its own file (`{thread}` in the output's path);
    /// the files' lines together are compared.
    per_thread: bool,
}

/// The lines of `text`.
fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split(|&byte| byte == b'\n').collect()
}

/// What one run gave.
struct Ran {
    /// How it ended: the error's message, if any. (The count of objects
    /// the driver moved is left out: read in parts, the threads move them.)
    outcome: Result<(), String>,
    /// The JSON lines written.
    lines: Vec<u8>,
    /// Every stage's statistics but the split's, by module.
    stats: BTreeMap<String, StageStats>,
    /// Built: whether it ran on several threads (`threads = N` planned
    /// them, or a split placed by hand reports); not built (the input would
    /// not open): `None`.
    built: Option<bool>,
}

/// Runs the dump chain as `run` says (its input's table, any stage after
/// it, after the layers and after the DNS filter, on its `threads`), the
/// lines to `out` (or to `out` and the thread's number, one file a thread).
fn run(registry: &dnsluice_core::registry::Registry, run: &Several<'_>, out: &Path) -> Ran {
    let Several {
        threads,
        stages,
        after_layers,
        after_dns,
        ordered,
        per_thread,
    } = run;
    // The output's path, and the files it names.
    let (path, files): (String, Vec<PathBuf>) = match per_thread {
        true => (
            format!("{}-{{thread}}", out.display()),
            (0..*threads)
                .map(|thread| PathBuf::from(format!("{}-{thread}", out.display())))
                .collect(),
        ),
        false => (out.display().to_string(), vec![out.to_path_buf()]),
    };
    let text = format!(
        "threads = {threads}\nordered = {ordered}\n\
         [[stage]]\n{stages}\
         [[stage]]\nmodule = \"filter.layer\"\n{after_layers}\
         [[stage]]\nmodule = \"filter.dns\"\n\
         tcp_idle_timeout = \"{FOREVER}\"\nfragment_timeout = \"{FOREVER}\"\n{after_dns}\
         [[stage]]\nmodule = \"output.json\"\npath = {path:?}\n"
    );
    let pipeline = Pipeline::parse("fuzz-threads.toml", &text).expect("the fuzz pipeline parses");
    let (outcome, stats, built) = match pipeline.build(registry) {
        Ok(mut chain) => {
            let outcome = chain.run(None).map(|_| ()).map_err(|e| e.to_string());
            let (splits, stats): (Vec<_>, Vec<_>) = chain
                .stats()
                .into_iter()
                .partition(|s| s.module == "filter.split");
            let stats = stats.into_iter().map(|s| (s.module.clone(), s)).collect();
            (
                outcome,
                stats,
                Some(chain.threads.count > 1 || !splits.is_empty()),
            )
        }
        // Opening the input fails before any thread runs (not a capture).
        Err(e) => (Err(e.to_string()), BTreeMap::new(), None),
    };
    let mut lines = Vec::new();
    for file in files {
        lines.extend(std::fs::read(&file).unwrap_or_default());
        let _ = std::fs::remove_file(&file);
    }
    Ran {
        outcome,
        lines,
        stats,
        built,
    }
}

/// A timeout past any capture's span (a pcap's 32-bit seconds reach 136
/// years).
const FOREVER: &str = "10000000000s";

/// Panics unless `one` (one thread's statistics, by module) and `many`
/// (several threads') have the same stages with the same counts, errors
/// and counters: what must not change with the threads. Counters listing a
/// breakdown's most frequent keys (`qtype A`) may list more keys once
/// merged, each with its exact count; they are compared key by key from the
/// one thread's side. The fuzz target and `tests/threads.rs` (from the
/// summary's JSON) both compare with this.
pub fn same_statistics(
    one: &BTreeMap<String, StageStats>,
    many: &BTreeMap<String, StageStats>,
    what: &str,
) {
    assert_eq!(
        one.keys().collect::<Vec<_>>(),
        many.keys().collect::<Vec<_>>(),
        "{what}: the stages"
    );
    for (module, a) in one {
        let b = &many[module];
        assert_eq!(
            (a.input, a.output),
            (b.input, b.output),
            "{what}: {module} counts"
        );
        assert_eq!(a.errors, b.errors, "{what}: {module} errors");
        for (name, value) in &a.counters {
            assert_eq!(
                b.counters.get(name),
                Some(value),
                "{what}: {module} counter {name}"
            );
        }
        for (name, value) in &b.counters {
            assert!(
                a.counters.contains_key(name) || name.contains(' '),
                "{what}: {module}: {name} = {value} only with threads"
            );
        }
    }
}
