//! The record walker shared by the native inputs: a [`CaptureFormat`] over a
//! [`RecordSource`] (an mmap or a read buffer), producing zero-copy packets.

use crate::format::stream::RecordSource;
use crate::format::{CaptureFormat, FormatError, RecordInfo, Step};
use dnsluice_core::{
    CaptureMeta, InputParts, Object, Packet, Producer, Pulled, PushTo, Pushed, Reading, StageError,
    StageStats,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod push;

/// A capture reader: walks records of a pcap or pcapng file and produces packets.
pub struct CaptureReader<S> {
    module: &'static str,
    path: PathBuf,
    source: S,
    format: CaptureFormat,
    /// Bytes of the last produced record, consumed at the next call (the
    /// packet borrows them until then).
    pending: usize,
    /// Records read, their bytes, and the capture times seen.
    counts: Tally,
    skipped_blocks: u64,
    warnings: Vec<String>,
    /// Remarks on how the input was read (not problems), shown with the warnings.
    notes: Vec<String>,
    done: bool,
    /// Hands the records over to be read in parts (`Producer::parts`),
    /// for a source that can be.
    hand_over: Option<HandOver<S>>,
    /// The records were handed over: how their reading goes.
    elsewhere: Option<Arc<dyn ReadElsewhere>>,
}

/// Hands a reader's records over to be read in parts: what reads them, and
/// what a split's threads are given.
pub(crate) type HandOver<S> =
    fn(&mut CaptureReader<S>) -> Option<(Arc<dyn ReadElsewhere>, InputParts)>;

/// The reading of records a reader handed over (in parts, by threads), as
/// the reader's side sees it.
pub(crate) trait ReadElsewhere: Send + Sync {
    /// Waits until every record is taken (see `MappedParts::wait_for_end`).
    fn wait_for_end(&self, due: Option<&AtomicBool>) -> Result<Pulled<'static>, StageError>;
    /// The reader's statistics, as far as the reading has got.
    fn stats(&self) -> StageStats;
}

impl<S: RecordSource> CaptureReader<S> {
    /// Reads the file header from `source` and prepares to walk records.
    pub fn new(module: &'static str, path: PathBuf, mut source: S) -> Result<Self, StageError> {
        let mut needed = 4;
        let (format, header) = loop {
            let more = source.fill(needed).map_err(|e| StageError::io(&path, e))?;
            match CaptureFormat::detect(source.window()) {
                Ok(found) => break found,
                Err(FormatError::NeedMore(n)) if more && n > source.window().len() => needed = n,
                Err(FormatError::NeedMore(_)) => {
                    let message = if let Some(note) = source.end_note() {
                        // A compressed stream cut off before a whole header.
                        format!("{note}: no capture file header before the cut")
                    } else if source.window().is_empty() {
                        "empty file: not a pcap or pcapng capture".to_string()
                    } else {
                        format!(
                            "file too short ({} bytes) for a capture file header",
                            source.window().len()
                        )
                    };
                    return Err(StageError::format(&path, message));
                }
                Err(FormatError::Invalid(message)) => {
                    return Err(StageError::format(&path, message))
                }
            }
        };
        source.consume(header);
        Ok(CaptureReader {
            module,
            path,
            source,
            format,
            pending: 0,
            counts: Tally::default(),
            skipped_blocks: 0,
            warnings: Vec::new(),
            notes: Vec::new(),
            done: false,
            hand_over: None,
            elsewhere: None,
        })
    }

    /// Lets the reader hand its records over to be read in parts, with
    /// `hand_over` (see `Producer::parts`).
    pub(crate) fn readable_in_parts(&mut self, hand_over: HandOver<S>) {
        self.hand_over = Some(hand_over);
    }

    /// Its source.
    pub(crate) fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// Adds a remark on how the input is read, shown at the end of the run.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Records the end of the data, warning when bytes of a partial record remain.
    fn end(&mut self) {
        self.done = true;
        let left = self.source.window().len();
        if let Some(note) = self.source.end_note() {
            self.warnings.push(format!(
                "{}: file cut off: {note}; the {} complete packet records before the cut were read{}",
                self.path.display(),
                self.counts.frames,
                if left > 0 {
                    format!(" (the {left} bytes of an incomplete record after them were ignored)")
                } else {
                    String::new()
                }
            ));
        } else if left > 0 {
            let warning = cut_off(&self.path, left, self.source.offset(), self.counts.frames);
            self.warnings.push(warning);
        }
    }

    /// The format of a reader that has read nothing yet (no record, no
    /// block), and its source: what reading in parts starts from
    /// (`input.mmpcap`).
    pub(crate) fn format_at_start(&mut self) -> Option<(CaptureFormat, &Path, &mut S)> {
        let untouched = self.counts.frames == 0 && self.pending == 0 && self.skipped_blocks == 0;
        untouched.then(|| (self.format.clone(), self.path.as_path(), &mut self.source))
    }
}

/// The error for a corrupt record or block at byte `at` (`of`: " of the
/// decompressed … data", or nothing); `message` says what is wrong.
pub(crate) fn corrupt_at(at: u64, of: &str, message: &str) -> String {
    format!("at byte offset {at}{of}: {message}")
}

/// The warning for a file that ends inside a record: `left` bytes from
/// byte `offset` ignored after `frames` complete records.
pub(crate) fn cut_off(path: &Path, left: usize, offset: u64, frames: u64) -> String {
    format!(
        "{}: file cut off: the {left} bytes from byte offset {offset} are an incomplete record or block and were ignored; the {frames} complete packet records before them were read",
        path.display(),
    )
}

impl<S: RecordSource> CaptureReader<S> {
    /// Counts the record and hands out its packet; the record's bytes are
    /// consumed at the next call, as the packet borrows them until then.
    #[inline(always)]
    fn emit(&mut self, record: RecordInfo) -> Object<'_> {
        self.pending = record.consumed;
        Object::Packet(self.counts.packet(self.source.window(), 0, &record))
    }

    /// The next packet ([`Producer::produce`]), inlined where it is called.
    #[inline(always)]
    fn next_object(&mut self) -> Result<Option<Object<'_>>, StageError> {
        self.source.consume(std::mem::take(&mut self.pending));
        // Fast path: a complete packet record already in the window.
        if let Some(record) = self.format.record(self.source.window()) {
            return Ok(Some(self.emit(record)));
        }
        self.produce_slow()
    }

    /// The general path: any format, incomplete records, refills, the end.
    #[cold]
    #[inline(never)]
    fn produce_slow(&mut self) -> Result<Option<Object<'_>>, StageError> {
        if let Some(elsewhere) = &self.elsewhere {
            return elsewhere.wait_for_end(None).map(|_| None);
        }
        if self.done {
            return Ok(None);
        }
        loop {
            let step = match self.format.next(self.source.window()) {
                Ok(step) => step,
                Err(message) => {
                    let of = match self.source.compression() {
                        Some(name) => format!(" of the decompressed {name} data"),
                        None => String::new(),
                    };
                    let at = self.source.offset();
                    let message = corrupt_at(at, &of, &message);
                    self.done = true;
                    return Err(StageError::format(&self.path, message));
                }
            };
            match step {
                Step::Packet(record) => return Ok(Some(self.emit(record))),
                Step::Skip { consumed } => {
                    self.skipped_blocks += 1;
                    self.source.consume(consumed);
                }
                Step::NeedMore { needed } => {
                    let more = self
                        .source
                        .fill(needed)
                        .map_err(|e| StageError::io(&self.path, e))?;
                    if !more && self.source.window().len() < needed {
                        self.end();
                        return Ok(None);
                    }
                }
            }
        }
    }
}

impl<S: RecordSource> Producer for CaptureReader<S> {
    #[inline]
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        self.next_object()
    }

    fn waits(&self) -> bool {
        self.elsewhere.is_some()
    }

    /// The walk as one loop with the chain's first stage: the reader's
    /// state stays at hand from one record to the next, where a call per
    /// record would store and load it (and the format's and byte order's
    /// choice is made once for the loop, not per record).
    fn push_into(&mut self, to: PushTo<'_>) -> Option<Result<Pushed, StageError>> {
        if self.elsewhere.is_some() {
            return None;
        }
        Some(self.push_all(to))
    }

    fn produce_or_wait(&mut self, due: &AtomicBool) -> Result<Pulled<'_>, StageError> {
        if let Some(elsewhere) = &self.elsewhere {
            return elsewhere.wait_for_end(Some(due));
        }
        Ok(match self.produce()? {
            Some(obj) => Pulled::Object(obj),
            None => Pulled::End,
        })
    }

    fn parts(&mut self) -> Option<InputParts> {
        let (elsewhere, parts) = (self.hand_over?)(self)?;
        self.elsewhere = Some(elsewhere);
        Some(parts)
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        if let Some(elsewhere) = &self.elsewhere {
            out.push(elsewhere.stats());
            return;
        }
        let read = ReadSoFar {
            module: self.module,
            frames: self.counts.frames,
            bytes: self.counts.bytes,
            skipped_blocks: self.skipped_blocks,
            reading: Reading {
                offset: self.source.offset() + self.pending as u64,
                total: self.source.total(),
                first_ts_ns: self.counts.first_ts_ns,
                last_ts_ns: self.counts.last_ts_ns,
            },
        };
        out.push(read.stats(&self.notes, &self.warnings));
    }
}

/// A reader's counts: the records read, their captured bytes, and the
/// capture times of the first and the latest record that had one (for the
/// time span of interval statistics). Copied into a local by the push loop
/// ([`CaptureReader::push_walked`]), so that they stay in registers there.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    frames: u64,
    bytes: u64,
    first_ts_ns: Option<i64>,
    last_ts_ns: Option<i64>,
}

impl Tally {
    /// Counts the record at `at` in `window` and makes its packet.
    #[inline(always)]
    fn packet<'a>(&mut self, window: &'a [u8], at: usize, record: &RecordInfo) -> Packet<'a> {
        let (data, meta) = self.record(window, at, record);
        Packet::new(data, meta)
    }

    /// Counts the record at `at` in `window`: its captured bytes and capture
    /// facts, the packet not made yet.
    #[inline(always)]
    fn record<'a>(
        &mut self,
        window: &'a [u8],
        at: usize,
        record: &RecordInfo,
    ) -> (&'a [u8], CaptureMeta) {
        self.frames += 1;
        self.bytes += record.caplen as u64;
        self.last_ts_ns = record.ts_ns.or(self.last_ts_ns);
        if self.first_ts_ns.is_none() {
            self.note_first(record.ts_ns);
        }
        let start = at + record.data_at;
        let meta = CaptureMeta {
            frame: self.frames,
            ts_ns: record.ts_ns,
            len: record.len,
            link: record.link,
        };
        (&window[start..start + record.caplen], meta)
    }

    /// The first record's capture time (once: out of the per-record path).
    #[cold]
    fn note_first(&mut self, ts_ns: Option<i64>) {
        self.first_ts_ns = ts_ns;
    }
}

/// What a capture reader has read, as its statistics say it (the reader's
/// own, or the parts' reading of `input.mmpcap`).
pub(crate) struct ReadSoFar {
    pub module: &'static str,
    /// Packet records read.
    pub frames: u64,
    /// Their captured bytes.
    pub bytes: u64,
    /// Blocks that were not packets (pcapng).
    pub skipped_blocks: u64,
    /// Where the reading is, and the capture times seen.
    pub reading: Reading,
}

impl ReadSoFar {
    /// The statistics, with remarks on the reading (`notes`) and problems
    /// (`warnings`: a file cut off).
    pub fn stats(&self, notes: &[String], warnings: &[String]) -> StageStats {
        let mut stats = StageStats::new(self.module);
        stats.input = self.frames;
        stats.output = self.frames;
        stats.add_counter("bytes", self.bytes);
        stats.add_counter("skipped_blocks", self.skipped_blocks);
        stats.reading = Some(self.reading);
        if !warnings.is_empty() {
            stats.add_error("truncated_file", 1);
        }
        stats.warnings = notes.iter().chain(warnings).cloned().collect();
        stats
    }
}
