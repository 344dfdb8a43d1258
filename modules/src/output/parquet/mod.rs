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
//! is always one a reader opens.
//!
//! Written with the `parquet` crate's column writer API, without the arrow
//! crates (docs/parquet.md says why).

mod columns;
mod levels;
mod lookup;
mod rows;
pub mod schema;

use columns::Columns;
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Receiver, StageError, StageStats, TextKind};
use dnsluice_options::Options;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
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
}

/// One open file.
struct Open {
    writer: SerializedFileWriter<BufWriter<File>>,
    path: PathBuf,
    rows: u64,
}

/// Writes the rows of a Parquet file (or of a series of files).
pub struct ParquetWriter {
    options: ParquetOptions,
    properties: Arc<WriterProperties>,
    schema: Arc<parquet::schema::types::Type>,
    columns: Columns,
    file: Option<Open>,
    files: u64,
    rows: u64,
    row_groups: u64,
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
        let mut writer = ParquetWriter {
            options,
            properties: Arc::new(properties),
            schema,
            columns: Columns::new(),
            file: None,
            files: 0,
            rows: 0,
            row_groups: 0,
            skipped: 0,
            bad_records: 0,
        };
        writer.open_next()?;
        Ok(writer)
    }

    /// The path of file number `n`.
    fn path_of(&self, n: u64) -> PathBuf {
        PathBuf::from(
            self.options
                .path
                .to_string_lossy()
                .replace("{n}", &n.to_string()),
        )
    }

    fn open_next(&mut self) -> Result<(), StageError> {
        let path = self.path_of(self.files);
        let file = File::create(&path).map_err(|e| StageError::io(&path, e))?;
        let writer = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            self.schema.clone(),
            self.properties.clone(),
        )
        .map_err(|e| parquet_error(&path, e))?;
        self.files += 1;
        self.file = Some(Open {
            writer,
            path,
            rows: 0,
        });
        Ok(())
    }

    /// Rows the current row group may still take before it is written.
    fn room(&self) -> u64 {
        let in_file = self.file.as_ref().map_or(0, |f| f.rows);
        let mut room = self.options.row_group_rows;
        if self.options.max_rows > 0 {
            room = room.min(self.options.max_rows.saturating_sub(in_file));
        }
        room.saturating_sub(self.columns.rows() as u64)
    }

    /// Writes the buffered rows as a row group, then starts the next file
    /// when this one is full.
    fn flush_row_group(&mut self) -> Result<(), StageError> {
        if self.columns.rows() == 0 {
            return Ok(());
        }
        let rows = self.columns.rows() as u64;
        let Some(open) = self.file.as_mut() else {
            return Err(StageError::other(MODULE, "no file is open"));
        };
        let mut rg = open
            .writer
            .next_row_group()
            .map_err(|e| parquet_error(&open.path, e))?;
        self.columns
            .write_row_group(&mut rg)
            .map_err(|e| parquet_error(&open.path, e))?;
        rg.close().map_err(|e| parquet_error(&open.path, e))?;
        open.rows += rows;
        self.rows += rows;
        self.row_groups += 1;
        let full_rows = self.options.max_rows > 0 && open.rows >= self.options.max_rows;
        let full_bytes = self.options.max_bytes > 0
            && open.writer.bytes_written() as u64 >= self.options.max_bytes;
        if full_rows || full_bytes {
            self.close_file()?;
            self.open_next()?;
        }
        Ok(())
    }

    /// Writes the footer of the open file.
    fn close_file(&mut self) -> Result<(), StageError> {
        let Some(open) = self.file.take() else {
            return Ok(());
        };
        let path = open.path;
        let out = open
            .writer
            .into_inner()
            .map_err(|e| parquet_error(&path, e))?;
        let file = out
            .into_inner()
            .map_err(|e| StageError::io(&path, e.into_error()))?;
        file.sync_data().map_err(|e| StageError::io(&path, e))
    }
}

fn parquet_error(path: &Path, e: parquet::errors::ParquetError) -> StageError {
    match e {
        parquet::errors::ParquetError::External(inner) => {
            match inner.downcast::<std::io::Error>() {
                Ok(io) => StageError::io(path, *io),
                Err(other) => StageError::format(path, other.to_string()),
            }
        }
        other => StageError::format(path, other.to_string()),
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
        self.flush_row_group()?;
        self.close_file()
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.rows + self.columns.rows() as u64 + self.skipped + self.bad_records;
        stats.output = self.rows + self.columns.rows() as u64;
        stats.add_counter("row_groups", self.row_groups);
        stats.add_counter("files", self.files);
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
}
