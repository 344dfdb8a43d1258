//! Where the leaf columns of a row group go ([`LeafSink`]): straight into a
//! file's row group, or encoded and compressed into memory, one chunk per
//! column ([`ChunkEncoder`], for [`super::encode`]).

use bytes::Bytes;
use parquet::column::writer::{get_column_writer, get_typed_column_writer_mut, ColumnCloseResult};
use parquet::data_type::DataType;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterPropertiesPtr;
use parquet::file::writer::{SerializedPageWriter, SerializedRowGroupWriter, TrackedWrite};
use parquet::schema::types::SchemaDescriptor;
use std::io::Write;

/// Takes the leaf columns of one row group, in schema order.
pub trait LeafSink {
    /// The next leaf column: its values, definition and repetition levels.
    fn leaf<D: DataType>(
        &mut self,
        values: &[D::T],
        defs: Option<&[i16]>,
        reps: Option<&[i16]>,
    ) -> Result<(), ParquetError>;
}

impl<W: Write + Send> LeafSink for SerializedRowGroupWriter<'_, W> {
    fn leaf<D: DataType>(
        &mut self,
        values: &[D::T],
        defs: Option<&[i16]>,
        reps: Option<&[i16]>,
    ) -> Result<(), ParquetError> {
        let mut column = self.next_column()?.ok_or_else(|| {
            ParquetError::General("fewer columns in the schema than buffers".into())
        })?;
        column.typed::<D>().write_batch(values, defs, reps)?;
        column.close()
    }
}

/// Encodes leaf columns into memory, one chunk each.
pub struct ChunkEncoder<'a> {
    /// The schema's leaf columns.
    pub schema: &'a SchemaDescriptor,
    /// Compression and encodings.
    pub properties: &'a WriterPropertiesPtr,
    /// The chunks encoded so far, in schema order.
    pub chunks: Vec<(Bytes, ColumnCloseResult)>,
}

impl LeafSink for ChunkEncoder<'_> {
    fn leaf<D: DataType>(
        &mut self,
        values: &[D::T],
        defs: Option<&[i16]>,
        reps: Option<&[i16]>,
    ) -> Result<(), ParquetError> {
        let index = self.chunks.len();
        if index >= self.schema.num_columns() {
            return Err(ParquetError::General(
                "more buffers than columns in the schema".into(),
            ));
        }
        let mut sink = TrackedWrite::new(Vec::new());
        let close = {
            let pages = Box::new(SerializedPageWriter::new(&mut sink));
            let mut writer =
                get_column_writer(self.schema.column(index), self.properties.clone(), pages);
            get_typed_column_writer_mut::<D>(&mut writer).write_batch(values, defs, reps)?;
            writer.close()?
        };
        self.chunks.push((Bytes::from(sink.into_inner()?), close));
        Ok(())
    }
}
