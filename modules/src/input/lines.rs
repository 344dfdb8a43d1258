//! `input.lines`: reads a text file (or standard input) one line at a time,
//! e.g. the names to look up. Line endings (`\n`, `\r\n`) are removed; blank
//! lines and lines starting with `#` are skipped and counted. With `shard`
//! `I/N` only line `k` (counted from 0, blank lines too) with `k mod N = I`
//! is read: N runs given 0/N .. N-1/N read every line exactly once. With
//! `skip_recorded`, the lines whose name has a record in that file already
//! are skipped (a scan that goes on where it stopped; see [`super::recorded`]).

use super::recorded::{name_of, read_recorded};
use super::shard::Shard;
use super::until_stop::{self, readable};
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{stop, Pulled};
use dnsluice_core::{Object, Producer, Reading, StageError, StageStats, Text, TextKind};
use dnsluice_options::Options;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Options of `input.lines`.
#[derive(Debug, Options)]
pub struct LinesOptions {
    /// The text file, one item per line, or `-` for standard input.
    pub path: PathBuf,
    /// Read only shard I of N (`"I/N"`): lines k with k mod N = I.
    #[option(default = Shard::ALL)]
    pub shard: Shard,
    /// Skip the lines whose name already has a record in this file (JSON
    /// lines of lookup records, as `lookup.dns` writes them): a scan that
    /// stopped goes on where it was (`dnsluice lookup --resume`). A name on
    /// several lines skips as many as it has records. A file that does not
    /// exist holds no record.
    pub skip_recorded: Option<PathBuf>,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::input(
        "input.lines",
        "read a text file or stdin one line at a time (names to look up)",
        |o: LinesOptions| {
            let mut lines =
                LineReader::open(o.path)?.with_shard(Some(o.shard).filter(|s| *s != Shard::ALL));
            if let Some(path) = &o.skip_recorded {
                lines = lines.skipping(read_recorded("input.lines", path)?.names);
            }
            Ok(Box::new(lines))
        },
    )
}

/// Reads lines; see the module docs.
pub struct LineReader {
    path: PathBuf,
    reader: BufReader<Box<dyn Read>>,
    /// The descriptor to wait on when lines come as they are written (a
    /// pipe, a terminal, a FIFO; not a regular file).
    wait_fd: Option<RawFd>,
    raw: Vec<u8>,
    line: String,
    number: u64,
    produced: u64,
    skipped: u64,
    not_utf8: u64,
    /// A last line cut short by a stop (SIGINT, SIGTERM), left out.
    cut_by_stop: u64,
    shard: Option<Shard>,
    other_shards: u64,
    /// The names recorded already (`skip_recorded`), with their records
    /// not yet matched to a line; the names there were; the lines skipped
    /// for it.
    recorded: Option<HashMap<String, u64>>,
    recorded_names: u64,
    recorded_lines: u64,
    /// Bytes read, and the file's size when it is a regular file (for progress).
    offset: u64,
    total: Option<u64>,
}

impl LineReader {
    /// Opens `path` (`-` for standard input).
    pub fn open(path: PathBuf) -> Result<LineReader, StageError> {
        let source = until_stop::open(&path).map_err(|e| StageError::io(&path, e))?;
        let (regular, fd) = (source.regular(), source.fd);
        let mut lines = LineReader::from_reader(path, source.reader);
        lines.total = source
            .metadata
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        lines.wait_fd = (!regular).then_some(fd);
        Ok(lines)
    }
    /// Reads from any reader; `path` names it in errors.
    pub fn from_reader(path: PathBuf, reader: Box<dyn Read>) -> LineReader {
        LineReader {
            path,
            reader: BufReader::with_capacity(1 << 16, reader),
            wait_fd: None,
            raw: Vec::new(),
            line: String::new(),
            number: 0,
            produced: 0,
            skipped: 0,
            not_utf8: 0,
            cut_by_stop: 0,
            shard: None,
            other_shards: 0,
            recorded: None,
            recorded_names: 0,
            recorded_lines: 0,
            offset: 0,
            total: None,
        }
    }

    /// Reads only `shard`'s lines (all when `None`).
    pub fn with_shard(mut self, shard: Option<Shard>) -> LineReader {
        self.shard = shard;
        self
    }

    /// Skips the lines whose name is in `recorded` (see [`name_of`]): as
    /// many lines of a name as it has records (a name on two lines with one
    /// record is asked once more).
    pub fn skipping(mut self, recorded: HashMap<String, u64>) -> LineReader {
        self.recorded_names = recorded.len() as u64;
        self.recorded = Some(recorded);
        self
    }
}

impl Producer for LineReader {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        loop {
            self.raw.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.raw)
                .map_err(|e| StageError::io(&self.path, e))?;
            if read == 0 {
                return Ok(None);
            }
            // A stop that came while the line's writer was still on it (the
            // read ended there): not a whole line, so not a name to ask.
            if self.raw.last() != Some(&b'\n') && stop::requested().is_some() {
                self.cut_by_stop += 1;
                return Ok(None);
            }
            self.offset += read as u64;
            self.number += 1;
            if self.shard.is_some_and(|s| !s.takes(self.number - 1)) {
                self.other_shards += 1;
                continue;
            }
            while matches!(self.raw.last(), Some(b'\n' | b'\r')) {
                self.raw.pop();
            }
            self.line.clear();
            match std::str::from_utf8(&self.raw) {
                Ok(text) => self.line.push_str(text),
                // Passed on with replacement characters, so the line is not lost:
                // the stage that reads it reports it as malformed.
                Err(_) => {
                    self.not_utf8 += 1;
                    self.line.push_str(&String::from_utf8_lossy(&self.raw));
                }
            }
            let trimmed = self.line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                self.skipped += 1;
                continue;
            }
            if let Some(records) = self
                .recorded
                .as_mut()
                .and_then(|recorded| recorded.get_mut(name_of(trimmed)))
            {
                if *records > 0 {
                    *records -= 1;
                    self.recorded_lines += 1;
                    continue;
                }
            }
            self.produced += 1;
            return Ok(Some(Object::Text(Text {
                kind: TextKind::Line,
                number: self.number,
                text: self.line.trim(),
            })));
        }
    }

    fn waits(&self) -> bool {
        self.wait_fd.is_some()
    }

    fn produce_or_wait(&mut self, due: &AtomicBool) -> Result<Pulled<'_>, StageError> {
        if let Some(fd) = self.wait_fd {
            // Read when a whole line is buffered or the descriptor has
            // more (or its end); meanwhile give way to the watcher.
            while !self.reader.buffer().contains(&b'\n') && !readable(fd, LOOK_MS) {
                // Asked to stop (SIGINT, SIGTERM): the input ends here.
                if stop::requested().is_some() {
                    return Ok(Pulled::End);
                }
                if due.load(Ordering::Relaxed) {
                    return Ok(Pulled::Waiting);
                }
            }
        }
        Ok(match self.produce()? {
            Some(obj) => Pulled::Object(obj),
            None => Pulled::End,
        })
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut s = StageStats::new("input.lines");
        s.input = self.number;
        s.output = self.produced;
        s.add_counter("blank_or_comment_lines", self.skipped);
        if self.shard.is_some() {
            s.add_counter("other_shards_lines", self.other_shards);
        }
        if self.recorded.is_some() {
            s.add_counter("recorded_names", self.recorded_names);
            s.add_counter("recorded_lines", self.recorded_lines);
        }
        s.add_error("not_utf8", self.not_utf8);
        s.add_error("line_cut_by_stop", self.cut_by_stop);
        s.reading = Some(Reading {
            offset: self.offset,
            total: self.total,
            ..Reading::default()
        });
        out.push(s);
    }
}

/// How long a wait for a line lasts before the watcher is looked at, ms.
const LOOK_MS: i32 = 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_trimmed_and_blank_lines_skipped() {
        let text = b"a.example\r\n\n# comment\n  b.example,127.0.0.1 \n\xffc\nlast";
        let mut reader = LineReader::from_reader("t".into(), Box::new(&text[..]));
        let mut seen = Vec::new();
        while let Some(Object::Text(t)) = reader.produce().unwrap() {
            seen.push((t.number, t.text.to_string()));
        }
        assert_eq!(
            seen,
            vec![
                (1, "a.example".to_string()),
                (4, "b.example,127.0.0.1".to_string()),
                (5, "\u{fffd}c".to_string()),
                (6, "last".to_string()),
            ]
        );
        let mut stats = Vec::new();
        reader.stats(&mut stats);
        assert_eq!(stats[0].counters["blank_or_comment_lines"], 2);
        assert_eq!(stats[0].errors["not_utf8"], 1);
    }

    #[test]
    fn recorded_names_are_skipped_and_counted() {
        // b.example is on three lines (three resolvers compared) and has
        // two records: its third line is asked again.
        let text = b"a.example\nb.example,127.0.0.1\n\nc.example\nb.example,127.0.0.2\nb.example,127.0.0.3\n";
        let recorded = [("b.example".to_string(), 2), ("z.example".to_string(), 1)].into();
        let mut reader =
            LineReader::from_reader("t".into(), Box::new(&text[..])).skipping(recorded);
        let mut seen = Vec::new();
        while let Some(Object::Text(t)) = reader.produce().unwrap() {
            seen.push(t.text.to_string());
        }
        assert_eq!(seen, ["a.example", "c.example", "b.example,127.0.0.3"]);
        let mut stats = Vec::new();
        reader.stats(&mut stats);
        assert_eq!(stats[0].counters["recorded_lines"], 2);
        assert_eq!(stats[0].counters["recorded_names"], 2);
    }

    #[test]
    fn shards_split_lines_by_position() {
        let text = b"a\nb\n\nc\nd\n";
        let read = |shard: &str| {
            let mut reader = LineReader::from_reader("t".into(), Box::new(&text[..]))
                .with_shard(Some(shard.parse().unwrap()));
            let mut seen = Vec::new();
            while let Some(Object::Text(t)) = reader.produce().unwrap() {
                seen.push(t.text.to_string());
            }
            seen
        };
        // Lines 0..4 are a, b, (blank), c, d: shard 0/2 takes 0, 2, 4.
        assert_eq!(read("0/2"), vec!["a", "d"]);
        assert_eq!(read("1/2"), vec!["b", "c"]);
    }
}
