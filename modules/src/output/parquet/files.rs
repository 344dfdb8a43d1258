//! The files `output.parquet` writes: the open one, its row groups, and
//! the next one when `max_rows` or `max_bytes` says so. Used on the chain's
//! thread, or on a writer thread of its own ([`super::background`]).

use super::columns::Columns;
use super::encode::{self, EncodedRowGroup};
use dnsluice_core::StageError;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use parquet::schema::types::SchemaDescriptor;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A row group of an open file.
type Group<'a> = SerializedRowGroupWriter<'a, BufWriter<File>>;

/// One open file.
struct Open {
    writer: SerializedFileWriter<BufWriter<File>>,
    path: PathBuf,
    rows: u64,
}

/// Where rows go: the path pattern, the rotation, and what was written.
pub(super) struct Files {
    path: PathBuf,
    max_rows: u64,
    max_bytes: u64,
    properties: Arc<WriterProperties>,
    schema: Arc<parquet::schema::types::Type>,
    file: Option<Open>,
    /// Files opened.
    pub files: u64,
    /// Rows written.
    pub rows: u64,
    /// Row groups written.
    pub row_groups: u64,
}

impl Files {
    /// Opens the first file of `path` (`{n}` the file's number).
    pub fn open(
        path: PathBuf,
        (max_rows, max_bytes): (u64, u64),
        properties: Arc<WriterProperties>,
        schema: Arc<parquet::schema::types::Type>,
    ) -> Result<Files, StageError> {
        let mut files = Files {
            path,
            max_rows,
            max_bytes,
            properties,
            schema,
            file: None,
            files: 0,
            rows: 0,
            row_groups: 0,
        };
        files.open_next()?;
        Ok(files)
    }

    /// Rows in the open file.
    pub fn rows_in_file(&self) -> u64 {
        self.file.as_ref().map_or(0, |f| f.rows)
    }

    /// The path of file number `n`.
    fn path_of(&self, n: u64) -> PathBuf {
        PathBuf::from(self.path.to_string_lossy().replace("{n}", &n.to_string()))
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

    /// Writes `columns`' rows as a row group (emptying them), then closes
    /// the file when it is full (the next opens with the next rows).
    pub fn write(&mut self, columns: &mut Columns) -> Result<(), StageError> {
        let rows = columns.rows() as u64;
        self.row_group(rows, |rg| columns.write_row_group(rg))
    }

    /// Writes a row group an encoder thread encoded, then closes the file
    /// when it is full.
    pub fn append(&mut self, group: EncodedRowGroup) -> Result<(), StageError> {
        self.row_group(group.rows, |rg| encode::splice(group, rg))
    }

    /// The leaf columns of the schema, as encoders need them.
    pub fn descriptor(&self) -> Arc<SchemaDescriptor> {
        Arc::new(SchemaDescriptor::new(self.schema.clone()))
    }

    /// The writer's properties (compression, encodings).
    pub fn properties(&self) -> Arc<WriterProperties> {
        self.properties.clone()
    }

    /// Writes a row group of `rows` rows with `fill` (in a new file when
    /// the last one is full), then closes the file when it is full.
    fn row_group(
        &mut self,
        rows: u64,
        fill: impl FnOnce(&mut Group<'_>) -> Result<(), ParquetError>,
    ) -> Result<(), StageError> {
        if rows == 0 {
            return Ok(());
        }
        if self.file.is_none() {
            // The last one was full: the next is opened for rows to come
            // (at its end, an input would have left an empty file).
            self.open_next()?;
        }
        let Some(open) = self.file.as_mut() else {
            return Err(StageError::other(super::MODULE, "no file is open"));
        };
        let mut rg = open
            .writer
            .next_row_group()
            .map_err(|e| parquet_error(&open.path, e))?;
        fill(&mut rg).map_err(|e| parquet_error(&open.path, e))?;
        rg.close().map_err(|e| parquet_error(&open.path, e))?;
        open.rows += rows;
        self.rows += rows;
        self.row_groups += 1;
        let full_rows = self.max_rows > 0 && open.rows >= self.max_rows;
        let full_bytes = self.max_bytes > 0 && open.writer.bytes_written() as u64 >= self.max_bytes;
        if full_rows || full_bytes {
            self.close()?;
        }
        Ok(())
    }

    /// Writes the footer of the open file.
    pub fn close(&mut self) -> Result<(), StageError> {
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
