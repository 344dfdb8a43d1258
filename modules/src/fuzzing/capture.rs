//! The `capture_reader` target: the pcap/pcapng record walker,
//! differentially, over both native inputs.

use super::check_layers;
use crate::format::compression::Compression;
use crate::format::stream::{BufferedStream, RecordSource};
use crate::format::{CaptureFormat, Step};
use crate::input::mmpcap::parts::MappedParts;
use crate::input::{mmpcap, CaptureReader};
use dnsluice_core::{
    LinkType, Object, Packet, Producer, PushTo, Pushed, Receiver, StageError, StageStats,
};
use std::io::{self, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Debug, PartialEq, Eq)]
struct Record {
    frame: u64,
    ts_ns: Option<i64>,
    len: u32,
    link: LinkType,
    data: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// `CaptureReader::new` failed.
    Open(String),
    /// `produce` returned `Ok(None)`.
    End,
    /// `produce` returned an error.
    Error(String),
}

#[derive(Debug, PartialEq, Eq)]
struct Run {
    records: Vec<Record>,
    outcome: Outcome,
    stats: Vec<StageStats>,
}

/// The record of packet `p`, the `number`-th read (from 0), after the
/// checks every packet must pass.
fn record_of(p: &Packet<'_>, number: usize) -> Record {
    let mut p = *p;
    assert!(
        p.meta.len as usize >= p.data.len(),
        "len {} < caplen {}",
        p.meta.len,
        p.data.len()
    );
    assert_eq!(
        p.meta.frame,
        number as u64 + 1,
        "frames not numbered 1, 2, ..."
    );
    p.layers = check_layers(p.meta.link, p.data, p.meta.len);
    let _ = (p.src(), p.dst(), p.payload(), p.caplen());
    Record {
        frame: p.meta.frame,
        ts_ns: p.meta.ts_ns,
        len: p.meta.len,
        link: p.meta.link,
        data: p.data.to_vec(),
    }
}

/// Keeps the records of the packets pushed into it.
struct Kept(Vec<Record>);

impl Receiver for Kept {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        if let Some(p) = obj.packet() {
            let record = record_of(p, self.0.len());
            self.0.push(record);
        }
        Ok(())
    }
    fn stats(&self, _: &mut Vec<StageStats>) {}
}

/// Reads `reader` to its end or error, pulled (`produce`) or pushed
/// (`push_into`, the way a chain from the input runs it).
fn drain(mut reader: impl Producer, pushed: bool) -> Run {
    let mut kept = Kept(Vec::new());
    let outcome = if pushed {
        let mut moved = 0;
        let to = PushTo {
            receiver: &mut kept,
            due: None,
            moved: &mut moved,
        };
        match reader.push_into(to) {
            Some(Ok(Pushed::End)) => Outcome::End,
            Some(Ok(Pushed::Paused)) => panic!("paused with no watcher and no stop"),
            Some(Err(e)) => Outcome::Error(e.to_string()),
            None => panic!("a capture reader that does not push"),
        }
    } else {
        loop {
            match reader.produce() {
                Ok(Some(mut obj)) => kept.receive(&mut obj).expect("kept"),
                Ok(None) => break Outcome::End,
                Err(e) => break Outcome::Error(e.to_string()),
            }
        }
    };
    let records = kept.0;
    // Once finished (either way), a reader stays finished.
    assert!(
        matches!(reader.produce(), Ok(None)),
        "produce after the end did not return Ok(None)"
    );
    let mut stats = Vec::new();
    reader.stats(&mut stats);
    for s in &mut stats {
        assert_eq!(s.input, records.len() as u64);
        s.module.clear(); // input.fpcap vs input.mmpcap
        if let Some(reading) = &mut s.reading {
            reading.total = None; // known for a mapped file, not for a reader
        }
    }
    Run {
        records,
        outcome,
        stats,
    }
}

fn run<S: RecordSource>(reader: Result<CaptureReader<S>, StageError>, pushed: bool) -> Run {
    match reader {
        Ok(r) => drain(r, pushed),
        Err(e) => Run {
            records: Vec::new(),
            outcome: Outcome::Open(e.to_string()),
            stats: Vec::new(),
        },
    }
}

/// The records of the mapped file at `path` read in parts of `part_bytes`
/// (as a split's threads read them, one after the other here), when the
/// input hands its records over (a plain pcap or pcapng): the packets, the
/// outcome and the counters the input then gives.
fn run_in_parts(data: &[u8], path: &Path, part_bytes: usize) -> Option<Run> {
    // A compressed file is never read in parts (and would leave its
    // decompressing thread running past this input).
    if Compression::detect(data) != Compression::None {
        return None;
    }
    let mut input = mmpcap::open_any(path.to_path_buf(), false, part_bytes).ok()?;
    let parts = input.parts()?.downcast::<Arc<MappedParts>>().ok()?;
    let mut records = Vec::new();
    while let Some(part) = parts.claim() {
        for (key, packet) in parts.packets(&part) {
            assert_eq!(key, records.len() as u64, "a part's first place");
            records.push(Record {
                frame: packet.meta.frame,
                ts_ns: packet.meta.ts_ns,
                len: packet.meta.len,
                link: packet.meta.link,
                data: packet.data.to_vec(),
            });
        }
        assert_eq!(part.end_key, records.len() as u64, "a part's last place");
    }
    let outcome = match input.produce() {
        Ok(None) => Outcome::End,
        Ok(Some(_)) => panic!("an input read in parts gave an object itself"),
        Err(e) => Outcome::Error(e.to_string()),
    };
    let mut stats = Vec::new();
    input.stats(&mut stats);
    for s in &mut stats {
        s.module.clear();
        if let Some(reading) = &mut s.reading {
            reading.total = None;
        }
    }
    Some(Run {
        records,
        outcome,
        stats,
    })
}

/// At every record or block of `data` the general reading reaches, the
/// format's fast path gives nothing or the record the general reading gives.
fn fast_path_agrees(data: &[u8]) {
    let Ok((mut format, mut at)) = CaptureFormat::detect(data) else {
        return;
    };
    while let Some(rest) = data.get(at..) {
        let quick = format.record(rest);
        let step = format.next(rest);
        if let Some(record) = quick {
            assert_eq!(step, Ok(Step::Packet(record)), "the fast path at {at}");
        }
        match step {
            Ok(Step::Packet(record)) => at += record.consumed,
            Ok(Step::Skip { consumed }) => at += consumed,
            Ok(Step::NeedMore { .. }) | Err(_) => return,
        }
    }
}

/// A reader that returns at most `step` bytes per call and `Interrupted` every third call.
struct Trickle {
    inner: Cursor<Vec<u8>>,
    step: usize,
    calls: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.step);
        self.inner.read(&mut buf[..n])
    }
}

/// A file of its own for each call (tests call this from several threads):
/// in `/dev/shm` where there is one, so the fuzzer does not wear a disk.
pub(super) fn temp_path() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    dir.join(format!(
        "dnsluice-fuzz-capture-{}-{}.bin",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The `capture_reader` target: `data` as a capture file through
/// `input.fpcap`'s buffered stream (4096-byte reads, and a reader that
/// trickles a few bytes per call and is interrupted now and then) and
/// through `input.mmpcap`'s memory map, one thread's way and in parts (as
/// a split's threads read it, parts of 1 to 256 bytes), pulled and pushed
/// (`Producer::push_into`: the trickled reads and the map). All must give
/// the same packets (each checked by [`check_layers`]), the same outcome
/// and the same counters; and the formats' fast paths agree with their
/// general reading.
pub fn capture_reader(data: &[u8]) {
    fast_path_agrees(data);
    let path = &temp_path();

    // 1. Buffered reads of 4096 bytes from an in-memory reader (input.fpcap).
    let stream = BufferedStream::new(Box::new(Cursor::new(data.to_vec())), 4096);
    let buffered = run(
        CaptureReader::new("input.fpcap", path.clone(), stream),
        false,
    );

    // 2. Tiny, interrupted reads into a small buffer that must grow and
    // compact, pushed: most records begin in one fill and end in another.
    let trickle = Trickle {
        inner: Cursor::new(data.to_vec()),
        step: 1 + data.len() % 7,
        calls: 0,
    };
    let stream = BufferedStream::new(Box::new(trickle), 1 + data.len() % 61);
    let trickled = run(
        CaptureReader::new("input.fpcap", path.clone(), stream),
        true,
    );

    // 3. The memory map (input.mmpcap) over the same bytes in a file, pulled
    // and pushed.
    std::fs::write(path, data).expect("write the temp file");
    let mapped = run(mmpcap::open(path.clone()), false);
    let mapped_pushed = run(mmpcap::open(path.clone()), true);
    let in_parts = run_in_parts(data, path, 1 + data.len() % 256);
    let _ = std::fs::remove_file(path); // the map is gone with the reader

    assert_eq!(
        buffered, mapped,
        "input.fpcap (4096-byte reads) and input.mmpcap differ"
    );
    assert_eq!(
        trickled, mapped,
        "input.fpcap (trickled reads, pushed) and input.mmpcap differ"
    );
    assert_eq!(
        mapped_pushed, mapped,
        "input.mmpcap pushed and pulled differ"
    );
    if let Some(in_parts) = in_parts {
        assert_eq!(
            in_parts, mapped,
            "input.mmpcap read in parts and on one thread differ"
        );
    }
}
