//! Row groups encoded and compressed in memory on an encoder thread
//! ([`encode`]), to be spliced into the file later ([`splice`]) in the
//! order the row groups were filled. Encoding and compressing is most of a
//! row group's cost; done in memory, several row groups are encoded at
//! once while the file is written in order.

use super::columns::Columns;
use super::sink::ChunkEncoder;
use bytes::Bytes;
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterPropertiesPtr;
use parquet::file::writer::SerializedRowGroupWriter;
use parquet::schema::types::SchemaDescriptor;
use std::io::Write;

/// A row group encoded and compressed in memory: each leaf column's chunk
/// (its pages) and what closing its writer said.
pub struct EncodedRowGroup {
    /// Rows in the group.
    pub rows: u64,
    /// One chunk per leaf column, in schema order.
    pub chunks: Vec<(Bytes, ColumnCloseResult)>,
}

/// Encodes and compresses `columns`' rows (emptying them) as one row group.
pub fn encode(
    columns: &mut Columns,
    schema: &SchemaDescriptor,
    properties: &WriterPropertiesPtr,
) -> Result<EncodedRowGroup, ParquetError> {
    let rows = columns.rows() as u64;
    let mut encoder = ChunkEncoder {
        schema,
        properties,
        chunks: Vec::with_capacity(schema.num_columns()),
    };
    columns.write_row_group(&mut encoder)?;
    Ok(EncodedRowGroup {
        rows,
        chunks: encoder.chunks,
    })
}

/// Splices an encoded row group into a file's next row group.
pub fn splice<W: Write + Send>(
    group: EncodedRowGroup,
    rg: &mut SerializedRowGroupWriter<'_, W>,
) -> Result<(), ParquetError> {
    for (bytes, close) in group.chunks {
        rg.append_column(&bytes, close)?;
    }
    Ok(())
}
