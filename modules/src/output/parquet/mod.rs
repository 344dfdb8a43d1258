//! `output.parquet`: DNS messages (captures, dnstap), client responses and
//! lookup records as a Parquet file, in the versioned schema of
//! [`schema`] (docs/parquet.md), zstd-compressed.
//!
//! Rows are buffered a row group at a time (`row_group_rows`, and at most
//! [`ROW_GROUP_BYTES`] of buffered values), so memory stays flat whatever
//! the input's size. `max_rows` / `max_bytes` start a new file (`{n}` in
//! the path) once a file holds that many rows or bytes. The footer is
//! written by `finish`, which the driver calls at the end of the input, on
//! a fatal error of the input and on SIGINT/SIGTERM: the file a run leaves
//! is one a reader opens, unless writing the file itself failed
//! (docs/parquet.md).
//!
//! Written with the `parquet` crate's column writer API, without the arrow
//! crates (docs/parquet.md says why).

mod background;
mod columns;
mod encode;
mod files;
mod levels;
mod lookup;
mod rows;
pub mod schema;
mod sink;

use background::Background;
use columns::Columns;
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::{Object, Receiver, StageError, StageStats, TextKind};
use dnsluice_options::Options;
use files::Files;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const MODULE: &str = "output.parquet";

/// Buffered bytes at which a row group is written even before it has
/// `row_group_rows` rows (long names and answers).
pub const ROW_GROUP_BYTES: usize = 64 << 20;

/// Options of `output.parquet`.
#[derive(Debug, Options)]
pub struct ParquetOptions {
    /// The file to write; `{n}` in it is the file's number (0, 1, ...) when
    /// `max_rows` or `max_bytes` start new files.
    pub path: PathBuf,
    /// Rows of a row group (the unit a reader reads and the writer buffers).
    #[option(default = 131_072, range = 1..=16_777_216)]
    pub row_group_rows: u64,
    /// Start a new file once one holds this many rows (0: never).
    #[option(default = 0)]
    pub max_rows: u64,
    /// Start a new file once one holds this many bytes, checked after each
    /// row group (0: never).
    #[option(default = 0)]
    pub max_bytes: u64,
    /// The zstd compression level (1: fastest; higher levels make smaller
    /// files more slowly).
    #[option(default = 1, range = 1..=22)]
    pub zstd_level: u32,
    /// Threads that encode and compress row groups while the chain fills
    /// the next one (row groups stay in order; each buffers one).
    #[option(default = 2, range = 1..=64)]
    pub encoders: u32,
}

/// Where the row groups are written: on the chain's thread (when
/// `max_bytes` rotates files: the chain must know each file's rows for
/// `max_rows`, and only the writer sees its bytes), else on a thread of
/// their own.
enum Output {
    Here(Box<Files>),
    Thread(Background),
}

/// Writes the rows of a Parquet file (or of a series of files).
pub struct ParquetWriter {
    options: ParquetOptions,
    columns: Box<Columns>,
    output: Output,
    /// Rows handed to the writer thread for the open file (for `max_rows`).
    rows_in_file: u64,
    /// Rows handed to the writer thread (written, or being encoded).
    handed: u64,
    /// Objects with no row (packets that are not DNS, lines of text).
    skipped: u64,
    /// Lookup records that were not JSON objects.
    bad_records: u64,
}

impl ParquetWriter {
    /// Opens the first file of `options`.
    pub fn create(options: ParquetOptions) -> Result<Self, StageError> {
        let rotates = options.max_rows > 0 || options.max_bytes > 0;
        if rotates && !options.path.to_string_lossy().contains("{n}") {
            return Err(StageError::option(
                MODULE,
                Some("path"),
                "max_rows and max_bytes start new files: the path needs {n} for the file's number",
            ));
        }
        let level = ZstdLevel::try_new(options.zstd_level as i32)
            .map_err(|e| StageError::option(MODULE, Some("zstd_level"), e.to_string()))?;
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_created_by(format!("dnsluice {}", env!("CARGO_PKG_VERSION")))
            // Min/max statistics cost a comparison (and a copy) per value:
            // kept for the time and the frame, what a reader prunes on.
            .set_statistics_enabled(EnabledStatistics::None)
            .set_column_statistics_enabled(ColumnPath::from("time"), EnabledStatistics::Chunk)
            .set_column_statistics_enabled(ColumnPath::from("frame"), EnabledStatistics::Chunk)
            .set_key_value_metadata(Some(vec![KeyValue::new(
                schema::VERSION_KEY.to_string(),
                schema::SCHEMA_VERSION.to_string(),
            )]))
            // No dictionary encoding: zstd finds the repeated values (qtype,
            // rcode, addresses) as well, and the file came out smaller and
            // written faster without it (docs/parquet.md).
            .set_dictionary_enabled(false)
            .build();
        let schema = schema::schema().map_err(|e| StageError::other(MODULE, e.to_string()))?;
        let files = Files::open(
            options.path.clone(),
            (options.max_rows, options.max_bytes),
            Arc::new(properties),
            schema,
        )?;
        let output = if options.max_bytes > 0 {
            Output::Here(Box::new(files))
        } else {
            Output::Thread(Background::start(files, options.encoders as usize)?)
        };
        Ok(ParquetWriter {
            options,
            columns: Box::new(Columns::new()),
            output,
            rows_in_file: 0,
            handed: 0,
            skipped: 0,
            bad_records: 0,
        })
    }

    /// Rows the current row group may still take before it is written.
    fn room(&self) -> u64 {
        let in_file = match &self.output {
            Output::Here(files) => files.rows_in_file(),
            Output::Thread(_) => self.rows_in_file,
        };
        let mut room = self.options.row_group_rows;
        if self.options.max_rows > 0 {
            room = room.min(self.options.max_rows.saturating_sub(in_file));
        }
        room.saturating_sub(self.columns.rows() as u64)
    }

    /// Writes the buffered rows as a row group (here, or handed to the
    /// writer thread).
    fn flush_row_group(&mut self) -> Result<(), StageError> {
        let rows = self.columns.rows() as u64;
        if rows == 0 {
            return Ok(());
        }
        match &mut self.output {
            Output::Here(files) => files.write(&mut self.columns),
            Output::Thread(background) => {
                let full = std::mem::take(&mut self.columns);
                self.columns = background.hand_over(full)?;
                self.rows_in_file += rows;
                self.handed += rows;
                // The thread starts the next file on the same count.
                if self.options.max_rows > 0 && self.rows_in_file >= self.options.max_rows {
                    self.rows_in_file = 0;
                }
                Ok(())
            }
        }
    }

    /// Files, rows and row groups written so far.
    fn written(&self) -> (u64, u64, u64) {
        match &self.output {
            Output::Here(files) => (files.files, files.rows, files.row_groups),
            Output::Thread(background) => {
                let w = &background.written;
                let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
                (load(&w.files), load(&w.rows), load(&w.row_groups))
            }
        }
    }
}

impl Receiver for ParquetWriter {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        match obj {
            Object::Dns(m) => rows::message_row(m, &mut self.columns),
            Object::Response(r) => rows::response_row(r, &mut self.columns),
            Object::Text(t) if t.kind == TextKind::Record => {
                if !lookup::lookup_row(t.text, &mut self.columns) {
                    self.bad_records += 1;
                }
            }
            _ => {
                self.skipped += 1;
                return Ok(());
            }
        }
        if self.room() == 0
            || (self.columns.rows().is_multiple_of(1024) && self.columns.bytes() >= ROW_GROUP_BYTES)
        {
            self.flush_row_group()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), StageError> {
        let flushed = self.flush_row_group();
        let closed = match &mut self.output {
            Output::Here(files) => files.close(),
            Output::Thread(background) => background.stop(),
        };
        flushed.and(closed)
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        // Rows count once handed to the writer thread (its count of rows
        // written lags while it encodes a row group: counts that went down
        // mid-run), or while they wait here.
        let (files, written, row_groups) = self.written();
        let rows = match self.output {
            Output::Here(_) => written,
            Output::Thread(_) => self.handed,
        };
        let held = self.columns.rows() as u64;
        let mut stats = StageStats::new(MODULE);
        stats.input = rows + held + self.skipped + self.bad_records;
        stats.output = rows + held;
        stats.add_counter("row_groups", row_groups);
        stats.add_counter("files", files);
        stats.add_counter("skipped", self.skipped);
        stats.add_error("bad_records", self.bad_records);
        out.push(stats);
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        MODULE,
        "write DNS messages, responses and lookup records as a Parquet file (zstd, row groups of bounded size)",
        |o: ParquetOptions| Ok(Box::new(ParquetWriter::create(o)?)),
    )
    .parallel(Parallel::FilePerThread)
}
