//! A run on many threads whose last thread cannot build its chain fails
//! with that thread's error, promptly, instead of hanging. The threads that
//! did start read the capture in parts at once and hand what they write to
//! a merger that is only started once every thread is ready: they used to
//! wait for ever for room in their lanes, and the split for them.

use dnsluice_core::pipeline::Pipeline;
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::{Map, Object, StageError, StageStats};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;
use testkit::replay::pcap_header;
use testkit::temp_dir;
use testkit::wire::query;

/// Threads of the run: enough that the threads that start may take more
/// parts ahead (twice the threads) than a lane has room for (64).
const THREADS: usize = 64;

/// DNS queries in the one TCP stream of the capture, one a segment.
const SEGMENTS: u32 = 3000;

/// A pass-through stage whose copy on the last thread fails to build,
/// after the other threads have had time to read.
struct PassThrough;

impl Map for PassThrough {
    fn map(&mut self, _obj: &mut Object<'_>) {}

    fn stats(&self) -> StageStats {
        StageStats::new("test.fail_last")
    }
}

fn fail_last() -> ModuleEntry {
    ModuleEntry::map(
        "test.fail_last",
        "fails to build on the last thread",
        |(): ()| {
            let last = format!("split-{}", THREADS - 1);
            if std::thread::current().name() == Some(last.as_str()) {
                std::thread::sleep(Duration::from_millis(300));
                return Err(StageError::other(
                    "test.fail_last",
                    "no copy on the last thread",
                ));
            }
            Ok(PassThrough)
        },
    )
    .parallel(Parallel::Any)
}

/// A classic pcap (raw IPv4) of one TCP stream from 10.0.0.1:40000 to
/// 10.0.0.2:53: `SEGMENTS` segments, each one DNS query for example.com
/// with its two-byte length. About 240 KB: some 240 parts of 1 KiB, all
/// with packets of the stream's one owner.
fn one_tcp_stream(path: &Path) {
    let mut out = pcap_header(101);
    let mut seq: u32 = 1000;
    for i in 0..SEGMENTS {
        let dns = query(i as u16, "example.com", 1, None);
        let mut payload = (dns.len() as u16).to_be_bytes().to_vec();
        payload.extend_from_slice(&dns);
        let ip_len = (20 + 20 + payload.len()) as u16;
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&ip_len.to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        ip.extend_from_slice(&40_000u16.to_be_bytes());
        ip.extend_from_slice(&53u16.to_be_bytes());
        ip.extend_from_slice(&seq.to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        ip.extend_from_slice(&payload);
        seq = seq.wrapping_add(payload.len() as u32);
        out.extend_from_slice(&(1_700_000_000 + i).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        out.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        out.extend_from_slice(&ip);
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn a_thread_that_cannot_build_its_chain_fails_the_run_instead_of_hanging_it() {
    let dir = temp_dir("threads-start");
    let capture = dir.join("stream.pcap");
    one_tcp_stream(&capture);
    let text = format!(
        "threads = {THREADS}\n\
         [[stage]]\nmodule = \"input.mmpcap\"\npath = {:?}\npart_kib = 1\n\
         [[stage]]\nmodule = \"filter.layer\"\n\
         [[stage]]\nmodule = \"filter.dns\"\n\
         [[stage]]\nmodule = \"test.fail_last\"\n\
         [[stage]]\nmodule = \"output.json\"\npath = {:?}\n",
        capture.display().to_string(),
        dir.join("out.jsonl").display().to_string(),
    );
    let (done, outcome) = mpsc::channel();
    // The build starts the threads; a hang is left behind on its own thread.
    std::thread::spawn(move || {
        let mut registry = dnsluice_modules::registry();
        registry.add(fail_last());
        let pipeline = Pipeline::parse("threads-start.toml", &text).unwrap();
        let built = pipeline.build(&registry).map(|_| ());
        let _ = done.send(built.map_err(|e| e.to_string()));
    });
    let built = outcome
        .recv_timeout(Duration::from_secs(60))
        .expect("the build still hangs a minute on");
    let error = built.expect_err("the last thread's chain cannot be built");
    assert!(
        error.contains("no copy on the last thread"),
        "the failing thread's error: {error}"
    );
}
