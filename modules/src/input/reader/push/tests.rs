//! The push side against each capture's own record of what it holds: every
//! capture here is built packet by packet, and what is pushed must be those
//! packets, in order, whole and once, whichever way the walk went (the loop
//! over the window, or one record at a time where a block is not a packet
//! or a buffer ends inside a record).

use crate::format::tests::{block, epb, idb, pcap_header, pcap_record, shb};
use crate::input::{fpcap, mmpcap};
use dnsluice_core::{Object, Producer, PushTo, Pushed, Receiver, StageError, StageStats};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// A packet as written: capture time in ns, length on the wire, bytes.
type Written = (i64, u32, Vec<u8>);

/// The bytes and capture time of packet `i` of a test capture: 40 to 300
/// bytes (records of all sizes, the buffer's ends falling anywhere in them),
/// a thousand packets a second.
fn packet(i: usize) -> (u32, u32, Vec<u8>) {
    let len = 40 + (i * 37) % 261;
    let data = (0..len).map(|j| (i * 7 + j) as u8).collect();
    (
        1_700_000_000 + (i / 1000) as u32,
        (i % 1000) as u32 * 997,
        data,
    )
}

/// A classic pcap (microseconds) of `n` packets, and what it holds.
fn classic(n: usize, big: bool) -> (Vec<u8>, Vec<Written>) {
    let mut bytes = pcap_header(big, false, 1);
    let mut written = Vec::new();
    for i in 0..n {
        let (secs, micros, data) = packet(i);
        let wire = data.len() as u32 + 4;
        bytes.extend(pcap_record(big, secs, micros, &data, wire));
        written.push((
            i64::from(secs) * 1_000_000_000 + i64::from(micros) * 1000,
            wire,
            data,
        ));
    }
    (bytes, written)
}

/// A pcapng of `n` packets (Enhanced Packet Blocks, microseconds) with a
/// block that is not a packet after every tenth, and what it holds.
fn pcapng(n: usize, big: bool) -> (Vec<u8>, Vec<Written>) {
    let mut bytes = shb(big);
    bytes.extend(idb(big, 1, 65535, &[]));
    let mut written = Vec::new();
    for i in 0..n {
        let (secs, micros, data) = packet(i);
        let wire = data.len() as u32 + 4;
        let units = u64::from(secs) * 1_000_000 + u64::from(micros);
        bytes.extend(epb(big, 0, units, &data, wire));
        if i % 10 == 9 {
            bytes.extend(block(big, 0x0bad, b"a custom block"));
        }
        written.push((units as i64 * 1000, wire, data));
    }
    (bytes, written)
}

/// Writes `bytes` to a file of its own for the test `name`.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("push-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Keeps what it is pushed; fails at its `fail_at`-th packet; sets `due`
/// after every `due_every` packets.
#[derive(Default)]
struct Kept<'a> {
    packets: Vec<Written>,
    frames: Vec<u64>,
    fail_at: Option<usize>,
    due: Option<(&'a AtomicBool, usize)>,
}

impl Receiver for Kept<'_> {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let Object::Packet(p) = obj else {
            panic!("not a packet: {obj:?}");
        };
        if self.fail_at == Some(self.packets.len()) {
            return Err(StageError::other("test", "fails here"));
        }
        self.frames.push(p.meta.frame);
        self.packets
            .push((p.meta.ts_ns.unwrap(), p.meta.len, p.data.to_vec()));
        if let Some((due, every)) = self.due {
            if self.packets.len().is_multiple_of(every) {
                due.store(true, Ordering::Relaxed);
            }
        }
        Ok(())
    }
    fn stats(&self, _out: &mut Vec<StageStats>) {}
}

/// Where to push: into `receiver`, watching `due`, counting in `moved`.
fn to<'a>(
    receiver: &'a mut dyn Receiver,
    due: Option<&'a AtomicBool>,
    moved: &'a mut u64,
) -> PushTo<'a> {
    PushTo {
        receiver,
        due,
        moved,
    }
}

/// Every way of reading the file at `path` that pushes: mapped without
/// and with the helper, and buffered in chunks of 4 KiB (most records then
/// start in one chunk and end in the next, and go the slow way).
fn readers(path: &Path) -> Vec<(&'static str, Box<dyn Producer>)> {
    vec![
        (
            "map",
            Box::new(mmpcap::open_with(path.to_path_buf(), false).unwrap()),
        ),
        (
            "map and helper",
            Box::new(mmpcap::open_with(path.to_path_buf(), true).unwrap()),
        ),
        (
            "buffer",
            Box::new(fpcap::open_with(path.to_path_buf(), 4096, false).unwrap()),
        ),
    ]
}

/// Pushes the whole input of `reader` into `kept`: how many were moved.
fn push_whole(reader: &mut dyn Producer, kept: &mut Kept<'_>) -> u64 {
    let mut moved = 0;
    let pushed = reader
        .push_into(to(kept, None, &mut moved))
        .unwrap()
        .unwrap();
    assert_eq!(pushed, Pushed::End);
    moved
}

/// The reader's own statistics.
fn stats(reader: &dyn Producer) -> StageStats {
    let mut out = Vec::new();
    reader.stats(&mut out);
    out.remove(0)
}

/// Pushes the capture `bytes` through every reader: each must give exactly
/// `written`, numbered from 1, and count them and their bytes.
fn every_reader_pushes(name: &str, bytes: &[u8], written: &[Written]) {
    let path = file(name, bytes);
    let captured: usize = written.iter().map(|(_, _, data)| data.len()).sum();
    for (how, mut reader) in readers(&path) {
        let mut kept = Kept::default();
        let moved = push_whole(&mut *reader, &mut kept);
        assert_eq!(moved, written.len() as u64, "{name}, {how}");
        assert!(kept.packets == written, "{name}, {how}: the packets differ");
        let numbers: Vec<u64> = (1..=written.len() as u64).collect();
        assert_eq!(kept.frames, numbers, "{name}, {how}");
        let stats = stats(&*reader);
        assert_eq!(stats.input, written.len() as u64, "{name}, {how}");
        assert_eq!(stats.counters["bytes"], captured as u64, "{name}, {how}");
        assert!(
            stats.warnings.is_empty(),
            "{name}, {how}: {:?}",
            stats.warnings
        );
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn every_packet_is_pushed_once_in_order_in_both_formats_and_byte_orders() {
    // About 800 KiB each: many of the walk's chunks.
    for big in [false, true] {
        let (bytes, written) = classic(5000, big);
        every_reader_pushes(&format!("classic-{big}"), &bytes, &written);
        let (bytes, written) = pcapng(5000, big);
        every_reader_pushes(&format!("pcapng-{big}"), &bytes, &written);
    }
}

#[test]
fn a_watcher_due_pauses_the_push_and_it_goes_on_where_it_stopped() {
    let (bytes, written) = classic(5000, false);
    let path = file("due", &bytes);
    for (how, mut reader) in readers(&path) {
        let due = AtomicBool::new(true);
        let mut kept = Kept {
            due: Some((&due, 250)),
            ..Kept::default()
        };
        let mut moved = 0;
        // Due before the first packet: nothing is pushed.
        let first = reader.push_into(to(&mut kept, Some(&due), &mut moved));
        assert_eq!(first.unwrap().unwrap(), Pushed::Paused, "{how}");
        assert_eq!((moved, kept.packets.len()), (0, 0), "{how}");
        let mut pauses = 0;
        loop {
            due.store(false, Ordering::Relaxed);
            match reader
                .push_into(to(&mut kept, Some(&due), &mut moved))
                .unwrap()
                .unwrap()
            {
                Pushed::Paused => pauses += 1,
                Pushed::End => break,
            }
        }
        // Once after every 250th packet but the last.
        assert_eq!(pauses, 5000 / 250 - 1, "{how}");
        assert_eq!(moved, 5000, "{how}");
        assert!(kept.packets == written, "{how}: the packets differ");
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_failing_stage_stops_the_push_at_its_packet_and_the_next_read_goes_on_after_it() {
    let (bytes, written) = classic(3000, false);
    let path = file("fail", &bytes);
    for (how, mut reader) in readers(&path) {
        let mut kept = Kept {
            fail_at: Some(1234),
            ..Kept::default()
        };
        let mut moved = 0;
        let failed = reader.push_into(to(&mut kept, None, &mut moved)).unwrap();
        assert!(failed.is_err(), "{how}: {failed:?}");
        assert_eq!(moved, 1234, "{how}");
        assert!(kept.packets[..] == written[..1234], "{how}");
        // The failed packet was read (counted, handed out): the next is 1236.
        assert_eq!(stats(&*reader).input, 1235, "{how}");
        let next = reader.produce().unwrap().unwrap();
        let Object::Packet(p) = next else {
            panic!("{how}: not a packet")
        };
        assert_eq!(p.meta.frame, 1236, "{how}");
        assert_eq!(p.data, &written[1235].2[..], "{how}");
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_capture_cut_off_inside_a_record_ends_the_push_with_a_warning() {
    let (mut bytes, written) = classic(3000, false);
    // Into the last packet's bytes: its header whole, 10 of its bytes.
    let last = written.last().unwrap().2.len();
    bytes.truncate(bytes.len() - last + 10);
    let path = file("cut", &bytes);
    for (how, mut reader) in readers(&path) {
        let mut kept = Kept::default();
        assert_eq!(push_whole(&mut *reader, &mut kept), 2999, "{how}");
        assert!(kept.packets[..] == written[..2999], "{how}");
        let stats = stats(&*reader);
        assert_eq!(stats.input, 2999, "{how}");
        let warning = stats.warnings.join(" ");
        assert!(warning.contains("file cut off"), "{how}: {warning}");
        assert!(warning.contains("the 26 bytes"), "{how}: {warning}");
    }
    std::fs::remove_file(&path).unwrap();
}

/// A whole capture in memory that notes how far each step forward went.
struct Noting {
    bytes: Vec<u8>,
    at: usize,
    steps: std::rc::Rc<std::cell::RefCell<Vec<usize>>>,
}

impl crate::format::stream::RecordSource for Noting {
    fn window(&self) -> &[u8] {
        &self.bytes[self.at..]
    }
    fn consume(&mut self, n: usize) {
        self.at += n;
        self.steps.borrow_mut().push(n);
    }
    fn fill(&mut self, _needed: usize) -> std::io::Result<bool> {
        Ok(false)
    }
    fn offset(&self) -> u64 {
        self.at as u64
    }
}

#[test]
fn the_source_hears_where_the_walk_is_at_least_every_chunk() {
    // What a map's helper keeps its lead by and releases behind.
    let (bytes, written) = classic(5000, false);
    let steps = std::rc::Rc::default();
    let source = Noting {
        bytes: bytes.clone(),
        at: 0,
        steps: std::rc::Rc::clone(&steps),
    };
    let path = PathBuf::from("noting.pcap");
    let mut reader = crate::input::reader::CaptureReader::new("test", path, source).unwrap();
    let mut kept = Kept::default();
    assert_eq!(push_whole(&mut reader, &mut kept), 5000);
    assert!(kept.packets == written, "the packets differ");
    let steps = steps.borrow();
    // The file header, then steps of at most a chunk and a record.
    let longest = 16 + 300;
    assert_eq!(steps.iter().sum::<usize>(), bytes.len());
    assert!(
        steps[1..].iter().all(|&n| n <= super::PUSH_CHUNK + longest),
        "{steps:?}"
    );
    assert!(
        steps.len() >= bytes.len() / (super::PUSH_CHUNK + longest),
        "{steps:?}"
    );
}

/// One of a split's workers in [`a_split_after_the_reader_takes_every_packet_once`]:
/// keeps what its copy of the chain is handed, with the frame number, in
/// the order it comes.
struct ToWorker {
    kept: ByWorker,
    index: usize,
}

/// What each worker was handed: frame numbers and packets.
type ByWorker = std::sync::Arc<std::sync::Mutex<Vec<Vec<(u64, Written)>>>>;

impl Receiver for ToWorker {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let Object::Packet(p) = obj else {
            panic!("not a packet: {obj:?}");
        };
        let written = (p.meta.ts_ns.unwrap(), p.meta.len, p.data.to_vec());
        self.kept.lock().unwrap()[self.index].push((p.meta.frame, written));
        Ok(())
    }
    fn stats(&self, _out: &mut Vec<StageStats>) {}
}

/// A split right after the reader takes the reader's packets in the
/// reader's own loop (`Split::try_take`); what that loop cannot take (the
/// first and last of a batch) goes the usual way. From every reader, with
/// batches of 1, 5 and 256 handed to two workers in turn: each packet
/// reaches one worker once, whole, with its frame number; each worker's in
/// order, in runs of at most a batch; and the split counts every one.
#[test]
fn a_split_after_the_reader_takes_every_packet_once() {
    use crate::filter::split::{By, Split, SplitOptions};
    use std::sync::{Arc, Mutex};
    let (bytes, written) = classic(5000, false);
    let path = file("split", &bytes);
    for batch in [1, 5, 256] {
        for (how, mut reader) in readers(&path) {
            let kept = Arc::new(Mutex::new(vec![Vec::new(), Vec::new()]));
            let to_workers = kept.clone();
            let options = SplitOptions {
                threads: 2,
                by: By::RoundRobin,
                queue: 64,
                batch,
                ordered: false,
                report: true,
                inline: false,
            };
            let build: dnsluice_core::registry::DownstreamBuilder = Arc::new(move |index| {
                let kept = to_workers.clone();
                Ok(Box::new(ToWorker { kept, index }) as Box<dyn Receiver>)
            });
            let mut split = Split::new(&options, build, None).unwrap();
            let mut moved = 0;
            let pushed = reader.push_into(to(&mut split, None, &mut moved));
            assert_eq!(pushed.unwrap().unwrap(), Pushed::End, "{how}, {batch}");
            split.finish().unwrap();
            assert_eq!(moved, 5000, "{how}, {batch}");
            let mut out = Vec::new();
            split.stats(&mut out);
            assert_eq!(out[0].input, 5000, "{how}, {batch}: the split's count");
            assert_eq!(out[0].output, 5000, "{how}, {batch}: the workers' count");
            let by_worker = std::mem::take(&mut *kept.lock().unwrap());
            let mut all = Vec::new();
            for (worker, packets) in by_worker.into_iter().enumerate() {
                // Each worker's own count, as the split reports it.
                let counted = out[0].counters.get(&format!("thread.{worker}")).copied();
                assert_eq!(
                    counted,
                    Some(packets.len() as u64),
                    "{how}, {batch}: worker {worker}"
                );
                let frames: Vec<u64> = packets.iter().map(|(frame, _)| *frame).collect();
                assert!(frames.windows(2).all(|p| p[0] < p[1]), "{how}, {batch}");
                // Runs of consecutive frames: a batch at most (a buffered
                // reader's batches end early where its blocks do).
                let longest = frames
                    .chunk_by(|a, b| b == &(a + 1))
                    .map(<[u64]>::len)
                    .max();
                assert!(
                    longest <= Some(batch as usize),
                    "{how}, {batch}: worker {worker} {frames:?}"
                );
                all.extend(packets);
            }
            all.sort_by_key(|(frame, _)| *frame);
            let frames: Vec<u64> = all.iter().map(|(frame, _)| *frame).collect();
            assert_eq!(frames, (1..=5000).collect::<Vec<u64>>(), "{how}, {batch}");
            let packets: Vec<Written> = all.into_iter().map(|(_, packet)| packet).collect();
            assert!(packets == written, "{how}, {batch}: the packets differ");
        }
    }
    std::fs::remove_file(&path).unwrap();
}
