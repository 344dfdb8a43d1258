//! The merger: one thread that writes what the workers' outputs wrote into
//! the one stream they share (see [`dnsluice_core::merge`]).
//!
//! Unordered, it writes each batch's bytes as they come, lane after lane.
//! Ordered, it merges the lanes' marks by the objects' places in the input
//! (each object that wrote something has one; each buffer says how far its
//! lane had got), so the stream is the one a single thread would have
//! written; at the end it writes what each worker's chain wrote as it
//! finished, lane by lane. Merging by place, it works per object that wrote
//! something and per run of them from one lane, not per object of the
//! input (a TCP capture's handshake packets write nothing), and the split
//! keeps no log of where each object went. The runs are written where they
//! lie, many with one system call ([`Gather`]), not copied. When the bytes it needs are not
//! there yet, it spins briefly, then sleeps on its [`Doorbell`] until the
//! lane it waits for rings it.

use super::doorbell::Doorbell;
use super::gather::Gather;
use super::lanes::{time_to_sleep, Lane, OnPanic};
use dnsluice_core::merge::{LaneBuffer, AT_FINISH};
use dnsluice_core::sync::lock;
use dnsluice_core::StageError;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The merger's state: the real output and, per lane, the batch it is in.
pub(super) struct Merger {
    lanes: Vec<Arc<Lane>>,
    sink: Sink,
    /// Per lane: the buffer being written and how many of its marks are.
    current: Vec<Option<(LaneBuffer, usize)>>,
    /// Ordered: the runs to write next, where they lie.
    gather: Gather,
    /// Per lane: how far it had got at its last buffer written (see
    /// [`LaneBuffer::through`]).
    through: Vec<u64>,
    failed: Arc<AtomicBool>,
    /// What it sleeps on when the bytes it needs are not there yet (the
    /// workers ring it; see `lanes.rs`).
    bell: Arc<Doorbell>,
    /// How many times it looked at a lane's next mark (what the tests
    /// count: a run must not look at every lane).
    #[cfg(test)]
    looks: Arc<std::sync::atomic::AtomicU64>,
}

impl Merger {
    /// A merger of `lanes` into `out`; `failed` is set when it stops on an error.
    pub fn new(
        lanes: Vec<Arc<Lane>>,
        (path, out): (PathBuf, Box<dyn Write + Send>),
        failed: Arc<AtomicBool>,
    ) -> Merger {
        let current = lanes.iter().map(|_| None).collect();
        let through = vec![0; lanes.len()];
        let bell = lanes
            .first()
            .map(|lane| lane.merger.clone())
            .unwrap_or_default();
        Merger {
            bell,
            lanes,
            sink: Sink {
                out: BufWriter::with_capacity(LARGE, out),
                path,
            },
            current,
            gather: Gather::default(),
            through,
            failed,
            #[cfg(test)]
            looks: Arc::default(),
        }
    }

    /// Runs to the end, in input order when `ordered`. An error stops the
    /// workers (through `failed`) and is returned.
    pub fn run(mut self, ordered: bool) -> Result<(), StageError> {
        let failed = self.failed.clone();
        let _said = OnPanic(move || failed.store(true, Ordering::SeqCst));
        let result = match ordered {
            true => {
                let merged = self.ordered();
                // What was gathered goes out, even before an error.
                let written = self.write_gathered();
                merged.and(written)
            }
            false => self.unordered(),
        }
        .and_then(|()| self.sink.flush());
        if result.is_err() {
            self.failed.store(true, Ordering::SeqCst);
        }
        result
    }

    /// Writes the runs gathered, and gives back the buffers they held.
    fn write_gathered(&mut self) -> Result<(), StageError> {
        if self.gather.is_empty() {
            return Ok(());
        }
        let Merger {
            gather,
            current,
            sink: Sink { out, path },
            lanes,
            ..
        } = self;
        // What was buffered first, then the runs straight to the output.
        out.flush()
            .and_then(|()| {
                gather.write(current, out.get_mut(), |lane, buffer| {
                    recycle(lanes, lane, buffer)
                })
            })
            .map_err(|e| StageError::io(&*path, e))
    }

    /// Each batch's bytes as they come; then each lane's last bytes.
    fn unordered(&mut self) -> Result<(), StageError> {
        let mut spins = 0u32;
        loop {
            let mut wrote = false;
            let mut all_finished = true;
            for index in 0..self.lanes.len() {
                // Read before popping: a lane seen finished has pushed all.
                let finished = self.lanes[index].finished.load(Ordering::SeqCst);
                while let Some(buffer) = self.lanes[index].written.pop() {
                    self.sink.write(&buffer.bytes)?;
                    recycle(&self.lanes, index, buffer);
                    wrote = true;
                }
                all_finished &= finished;
            }
            if all_finished {
                return self.worker_failures();
            }
            if wrote {
                spins = 0;
            } else if time_to_sleep(&mut spins) {
                let lanes = &self.lanes;
                self.bell.wait(|| {
                    lanes.iter().any(|lane| !lane.written.is_empty())
                        || lanes
                            .iter()
                            .all(|lane| lane.finished.load(Ordering::SeqCst))
                });
            }
        }
    }

    /// The lanes' bytes in input order: repeatedly the run of marks of the
    /// lane whose next mark is placed first, up to where another lane's next
    /// mark (or the place a lane with nothing in hand has got to) comes;
    /// then what the chains wrote as they finished, lane by lane (placed at
    /// [`AT_FINISH`], ties going to the lower lane).
    ///
    /// The lanes with a mark in hand wait in a heap by their next mark, so a
    /// run costs the same however many lanes there are (a TCP capture's
    /// runs are a line or two: every lane looked at per run made the merger
    /// the busiest thread from about eight threads). A lane with nothing in
    /// hand ([`Idle`]) is looked at again only when the least place such a
    /// lane has got to holds the next run back: until then, whatever it
    /// takes next is placed after every mark written.
    fn ordered(&mut self) -> Result<(), StageError> {
        let mut marks = BinaryHeap::with_capacity(self.lanes.len());
        let mut idle = Idle {
            lanes: (0..self.lanes.len()).collect(),
            behind: None,
        };
        let mut spins = 0u32;
        loop {
            let mut moved = self.look_at_idle(&mut idle, &mut marks)?;
            while let Some(&Reverse((key, lane))) = marks.peek() {
                let behind = idle.behind.map(|(through, _)| through);
                if behind.is_some_and(|through| key >= through) {
                    break;
                }
                marks.pop();
                let next_mark = marks.peek().map(|&Reverse(mark)| mark);
                self.write_run(lane, next_mark, behind)?;
                moved = true;
                match self.next_of(lane)? {
                    Next::Mark(key) => marks.push(Reverse((key, lane))),
                    Next::Through(through) => idle.add(lane, through),
                    Next::Finished => {}
                }
            }
            if moved {
                spins = 0;
                continue;
            }
            let Some((_, lane)) = idle.behind else {
                // No mark and no lane behind: every lane has finished.
                return self.worker_failures();
            };
            if time_to_sleep(&mut spins) {
                // Nothing gathered waits while the merger sleeps.
                self.write_gathered()?;
                // Merged in order, the split may be waiting for the merger:
                // a worker that sleeps on fewer batches than wake it must
                // not hold everything up.
                self.lanes[lane].wake_worker();
                self.bell.wait_for(lane, || self.lanes[lane].has_news());
            }
        }
    }

    /// Looks at each lane that had nothing in hand: one that has a buffer
    /// now joins `marks`, one that finished leaves; the others say how far
    /// they have got. Whether any of that changed.
    fn look_at_idle(
        &mut self,
        idle: &mut Idle,
        marks: &mut BinaryHeap<Reverse<(u64, usize)>>,
    ) -> Result<bool, StageError> {
        let before = (idle.lanes.len(), idle.behind);
        idle.behind = None;
        // The lanes still idle move to the front, in place (this runs each
        // time the merger spins).
        let mut kept = 0;
        for index in 0..idle.lanes.len() {
            let lane = idle.lanes[index];
            match self.next_of(lane)? {
                Next::Mark(key) => marks.push(Reverse((key, lane))),
                Next::Through(through) => {
                    idle.lanes[kept] = lane;
                    kept += 1;
                    idle.note(lane, through);
                }
                Next::Finished => {}
            }
        }
        idle.lanes.truncate(kept);
        Ok((idle.lanes.len(), idle.behind) != before)
    }

    /// Lane `lane`'s next unwritten mark, taking its next buffer when the
    /// one in hand is done; an error when its worker stopped early.
    fn next_of(&mut self, lane: usize) -> Result<Next, StageError> {
        #[cfg(test)]
        self.looks.fetch_add(1, Ordering::Relaxed);
        loop {
            if let Some((buffer, done)) = &self.current[lane] {
                if let Some(mark) = buffer.marks.get(*done) {
                    return Ok(Next::Mark(mark.key));
                }
                self.through[lane] = buffer.through;
                let (buffer, _) = self.current[lane].take().expect("looked at above");
                if let Some(buffer) = self.gather.retire(lane, buffer) {
                    recycle(&self.lanes, lane, buffer);
                }
            }
            // Read before popping: a lane seen finished has pushed all.
            let finished = self.lanes[lane].finished.load(Ordering::SeqCst);
            match self.lanes[lane].written.pop() {
                Some(buffer) => self.current[lane] = Some((buffer, 0)),
                None if !finished => return Ok(Next::Through(self.through[lane])),
                None if self.through[lane] == AT_FINISH => return Ok(Next::Finished),
                None => {
                    let why = self.lanes[lane].failure();
                    let why = why.unwrap_or_else(|| format!("worker {lane} ended early"));
                    return Err(StageError::other(super::MODULE, why));
                }
            }
        }
    }

    /// Writes lane `lane`'s marks from its next one while each comes before
    /// `next_mark` (another lane's next mark, as (key, lane)) and before
    /// `behind` (the least place a lane with nothing in hand has got to).
    /// The caller has seen that the first one does.
    fn write_run(
        &mut self,
        lane: usize,
        next_mark: Option<(u64, usize)>,
        behind: Option<u64>,
    ) -> Result<(), StageError> {
        let (buffer, done) = self.current[lane].as_mut().expect("a mark in hand");
        let first = *done;
        let comes_first = |key: u64| {
            next_mark.is_none_or(|next| (key, lane) < next) && behind.is_none_or(|b| key < b)
        };
        let last = first
            + buffer.marks[first..]
                .iter()
                .take_while(|mark| comes_first(mark.key))
                .count();
        *done = last;
        let (start, end) = (buffer.start_of(first), buffer.marks[last - 1].end);
        self.gather.add(lane, start, end);
        match self.gather.is_full() {
            true => self.write_gathered(),
            false => Ok(()),
        }
    }

    fn worker_failures(&self) -> Result<(), StageError> {
        match self.lanes.iter().find_map(|lane| lane.failure()) {
            Some(e) => Err(StageError::other(super::MODULE, e)),
            None => Ok(()),
        }
    }
}

/// The lanes with nothing in hand, for the ordered merger.
struct Idle {
    lanes: Vec<usize>,
    /// The least place one of them has got to, and that lane.
    behind: Option<(u64, usize)>,
}

impl Idle {
    /// Adds `lane`, which has got to `through`.
    fn add(&mut self, lane: usize, through: u64) {
        self.lanes.push(lane);
        self.note(lane, through);
    }

    /// Notes that `lane`, one of them, has got to `through`.
    fn note(&mut self, lane: usize, through: u64) {
        if self.behind.is_none_or(|least| (through, lane) < least) {
            self.behind = Some((through, lane));
        }
    }
}

/// What a lane has next for the ordered merger.
enum Next {
    /// A mark, placed at this key.
    Mark(u64),
    /// Nothing in hand: it has got this far (see [`LaneBuffer::through`]).
    Through(u64),
    /// Nothing more: it has finished and everything it wrote is written.
    Finished,
}

/// The real output.
struct Sink {
    out: BufWriter<Box<dyn Write + Send>>,
    path: PathBuf,
}

/// Bytes written past the buffer, straight to the output (a whole batch).
const LARGE: usize = 64 * 1024;

impl Sink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), StageError> {
        let result = if bytes.len() >= LARGE {
            // Not copied through the buffer: what it holds first, then these.
            self.out
                .flush()
                .and_then(|()| self.out.get_mut().write_all(bytes))
        } else {
            self.out.write_all(bytes)
        };
        result.map_err(|e| StageError::io(&self.path, e))
    }

    fn flush(&mut self) -> Result<(), StageError> {
        self.out.flush().map_err(|e| StageError::io(&self.path, e))
    }
}

/// Gives an emptied buffer back to lane `lane`'s worker.
fn recycle(lanes: &[Arc<Lane>], lane: usize, mut buffer: LaneBuffer) {
    // One that only said how far its lane got holds no memory to reuse.
    if buffer.bytes.capacity() == 0 && buffer.marks.capacity() == 0 {
        return;
    }
    buffer.clear();
    lock(&lanes[lane].spare).push(buffer);
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::merge::Mark;
    use std::sync::Mutex;
    use std::time::Duration;
    use testkit::rng::Rng;

    /// An output the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Shared {
        /// What was written, as text.
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A lane buffer of `(key, line)` objects that wrote a line, lane having got to `through`.
    fn buffer<S: AsRef<str>>(objects: &[(u64, S)], through: u64) -> LaneBuffer {
        let mut buffer = LaneBuffer::default();
        for (key, line) in objects {
            buffer.bytes.extend_from_slice(line.as_ref().as_bytes());
            buffer.bytes.push(b'\n');
            let end = buffer.bytes.len();
            buffer.marks.push(Mark { key: *key, end });
        }
        buffer.through = through;
        buffer
    }

    fn lanes(n: usize) -> Vec<Arc<Lane>> {
        let bell = Arc::new(Doorbell::default());
        (0..n)
            .map(|index| Arc::new(Lane::new(index, 8, bell.clone())))
            .collect()
    }

    /// A buffer written goes back to its lane emptied, its memory kept; one
    /// that only said how far its lane got (no memory) is dropped, so a
    /// spare taken for the next bytes is never one that must grow from
    /// nothing.
    #[test]
    fn only_buffers_with_memory_go_back_to_their_lane() {
        let lanes = lanes(2);
        recycle(&lanes, 1, buffer(&[(0, "a line")], 1));
        recycle(
            &lanes,
            1,
            LaneBuffer {
                through: 2,
                ..LaneBuffer::default()
            },
        );
        let spares = std::mem::take(&mut *lock(&lanes[1].spare));
        assert_eq!(spares.len(), 1);
        assert!(spares[0].bytes.is_empty() && spares[0].bytes.capacity() > 0);
        assert!(lock(&lanes[0].spare).is_empty());
    }

    /// A merger of `lanes` into an output the test reads back.
    fn merger(lanes: &[Arc<Lane>]) -> (Merger, Shared) {
        let out = Shared::default();
        let sink = (
            PathBuf::from("out.jsonl"),
            Box::new(out.clone()) as Box<dyn Write + Send>,
        );
        let merger = Merger::new(lanes.to_vec(), sink, Arc::new(AtomicBool::new(false)));
        (merger, out)
    }

    /// What an ordered merger of `lanes` gives, and what it wrote.
    fn merge(lanes: &[Arc<Lane>]) -> (Result<(), StageError>, String) {
        let (merger, out) = merger(lanes);
        let result = merger.run(true);
        (result, out.text())
    }

    /// Lines come out by their objects' places, whatever lane wrote them and
    /// however the lanes cut their buffers (one with no marks but how far
    /// its lane got); what the chains wrote as they finished comes last,
    /// lane 0's before lane 1's, though lane 1 had finished first.
    #[test]
    fn lines_come_out_by_place_then_each_lanes_finish_in_lane_order() {
        let lanes = lanes(2);
        let push = |lane: usize, buffer: LaneBuffer| lanes[lane].written.push(buffer).unwrap();
        push(1, buffer(&[(0, "a"), (1, "b")], 3));
        push(1, buffer::<&str>(&[], 6));
        push(
            1,
            buffer(&[(6, "g"), (9, "j"), (AT_FINISH, "end1")], AT_FINISH),
        );
        lanes[1].finish();
        push(0, buffer(&[(3, "d"), (4, "e")], 5));
        push(0, buffer(&[(5, "f"), (7, "h"), (8, "i")], 10));
        push(0, buffer(&[(10, "k"), (AT_FINISH, "end0")], AT_FINISH));
        lanes[0].finish();
        let (result, text) = merge(&lanes);
        result.unwrap();
        assert_eq!(text, "a\nb\nd\ne\nf\ng\nh\ni\nj\nk\nend0\nend1\n");
    }

    /// A run costs the same however many lanes there are: two lanes
    /// taking turns line by line (as a TCP capture's flows do) beside thirty
    /// that have finished, the merger looks at a lane's next mark about once
    /// per run, not once per lane per run (which was 32 × 2,000 looks).
    #[test]
    fn a_run_does_not_look_at_every_lane() {
        let lanes = lanes(32);
        // Lanes 0 and 1 take turns: even places, odd places.
        let lines = |lane: u64| -> Vec<(u64, String)> {
            let keys = (0..1000).map(|i| 2 * i + lane);
            keys.map(|key| (key, key.to_string())).collect()
        };
        for (index, lane) in lanes.iter().enumerate() {
            let mut objects = match index {
                0 | 1 => lines(index as u64),
                _ => Vec::new(),
            };
            objects.push((AT_FINISH, String::new()));
            lane.written.push(buffer(&objects, AT_FINISH)).unwrap();
            lane.finish();
        }
        let (merger, out) = merger(&lanes);
        let looks = merger.looks.clone();
        merger.run(true).unwrap();
        let text = out.text();
        let expected: String = (0..2000).map(|key| format!("{key}\n")).collect();
        assert_eq!(text, format!("{expected}{}", "\n".repeat(32)));
        let looks = looks.load(Ordering::Relaxed);
        assert!(looks < 2 * (2000 + 32), "{looks} looks for 2,000 runs");
    }

    /// A lane whose bytes come later holds the others back only as far as
    /// it is known to have got: lane 0's objects before place 2 go out at
    /// once, the rest wait (the merger asleep) until lane 1, woken for,
    /// hands over its object at place 2.
    #[test]
    fn a_late_lane_holds_back_only_what_comes_after_it() {
        let lanes = lanes(2);
        let early = [(0, "a"), (1, "b"), (3, "d"), (4, "e"), (AT_FINISH, "end0")];
        lanes[0].written.push(buffer(&early, AT_FINISH)).unwrap();
        lanes[0].finish();
        lanes[1].written.push(buffer::<&str>(&[], 2)).unwrap();
        let late = lanes[1].clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            late.written.push(buffer(&[(2, "c")], 5)).unwrap();
            late.merger.ring_for(1);
            std::thread::sleep(Duration::from_millis(30));
            late.written.push(buffer::<&str>(&[], AT_FINISH)).unwrap();
            late.finish();
        });
        let (result, text) = merge(&lanes);
        writer.join().unwrap();
        result.unwrap();
        assert_eq!(text, "a\nb\nc\nd\ne\nend0\n");
    }

    /// A merger that panics (a bug; a build that unwinds) says it failed:
    /// the split and the workers stop instead of waiting for it.
    #[test]
    fn a_merger_that_panics_says_it_failed() {
        struct Panics;
        impl Write for Panics {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                panic!("a bug in the output");
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lanes = lanes(1);
        lanes[0].finish();
        for ordered in [true, false] {
            let last = buffer(&[(AT_FINISH, "x")], AT_FINISH);
            lanes[0].written.push(last).unwrap();
            let failed = Arc::new(AtomicBool::new(false));
            let sink = (
                PathBuf::from("out.jsonl"),
                Box::new(Panics) as Box<dyn Write + Send>,
            );
            let merger = Merger::new(lanes.clone(), sink, failed.clone());
            let ran = std::thread::spawn(move || merger.run(ordered)).join();
            assert!(ran.is_err(), "it panicked");
            assert!(failed.load(Ordering::SeqCst), "ordered {ordered}: said so");
        }
    }

    /// Lane `lane`'s buffers, of the objects `0..owner.len()` whose
    /// `owner` is that lane: its objects in runs of 0 to 4 a buffer, each
    /// buffer saying the lane has got to its next object's place (or, now
    /// and then, only just past its last one), then its finish.
    fn buffers_of(lane: u64, owner: &[u64], rng: &mut Rng) -> Vec<LaneBuffer> {
        let keys: Vec<u64> = (0..owner.len() as u64)
            .filter(|&key| owner[key as usize] == lane)
            .collect();
        let mut buffers = Vec::new();
        let (mut at, mut through) = (0, 0);
        while at < keys.len() {
            let take = (rng.below(5) as usize).min(keys.len() - at);
            let objects: Vec<(u64, String)> = keys[at..at + take]
                .iter()
                .map(|&key| (key, key.to_string()))
                .collect();
            at += take;
            // At most its next object's place; at least past its last one
            // (never back: the last buffer's `through` was at most this
            // one's first place).
            let next = keys.get(at).copied().unwrap_or(owner.len() as u64);
            let least = objects.last().map_or(through, |(key, _)| key + 1);
            through = if rng.below(3) == 0 { least } else { next };
            buffers.push(buffer(&objects, through));
        }
        buffers.push(buffer(&[(AT_FINISH, format!("end{lane}"))], AT_FINISH));
        buffers
    }

    /// Lanes whose workers hand their buffers over at their own pace (a
    /// thread each, pausing at random; the merger sees lanes with nothing
    /// in hand, lanes behind and lanes ahead) always merge into the lines
    /// in place order, then each lane's finish in lane order: 40 seeds, 1
    /// to 6 lanes, 300 objects each.
    #[test]
    fn lanes_handing_over_at_their_own_pace_merge_in_place_order() {
        for seed in 1..=40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let count = 1 + rng.below(6);
            let owner: Vec<u64> = (0..300).map(|_| rng.below(count)).collect();
            let lanes = lanes(count as usize);
            let writers: Vec<_> = (0..count)
                .map(|index| {
                    let lane = lanes[index as usize].clone();
                    let mut pace = Rng(seed + 97 * index + 1);
                    let buffers = buffers_of(index, &owner, &mut Rng(seed + index + 7));
                    std::thread::spawn(move || {
                        for mut buffer in buffers {
                            while let Err(back) = lane.written.push(buffer) {
                                buffer = back;
                                std::thread::yield_now();
                            }
                            if pace.below(4) == 0 {
                                lane.merger.ring_for(lane.index);
                            }
                            std::thread::sleep(Duration::from_micros(pace.below(200)));
                        }
                        lane.finish();
                    })
                })
                .collect();
            let (result, text) = merge(&lanes);
            writers
                .into_iter()
                .for_each(|writer| writer.join().unwrap());
            result.unwrap();
            let lines: String = (0..300).map(|key| format!("{key}\n")).collect();
            let ends: String = (0..count).map(|lane| format!("end{lane}\n")).collect();
            assert_eq!(text, format!("{lines}{ends}"), "seed {seed}, {count} lanes");
        }
    }

    /// A worker that stopped before handing over its finish is an error
    /// (with its own reason when it gave one), not a shorter stream.
    #[test]
    fn a_lane_that_ended_early_is_an_error() {
        let lanes = lanes(2);
        lanes[0]
            .written
            .push(buffer(&[(0, "a"), (AT_FINISH, "end0")], AT_FINISH))
            .unwrap();
        lanes[0].finish();
        lanes[1].written.push(buffer(&[(1, "b")], 5)).unwrap();
        lanes[1].finish();
        let (result, _) = merge(&lanes);
        let error = result.unwrap_err().to_string();
        assert!(error.contains("worker 1 ended early"), "{error}");
        lanes[1].fail("its chain failed".into());
        lanes[1].written.push(buffer(&[(1, "b")], 5)).unwrap();
        lanes[0]
            .written
            .push(buffer(&[(AT_FINISH, "x")], AT_FINISH))
            .unwrap();
        let (result, _) = merge(&lanes);
        assert!(result.unwrap_err().to_string().contains("its chain failed"));
    }
}
