//! Column buffers of one row group, with Parquet's definition and
//! repetition levels: an optional value ([`Values`], [`Strings`]) and a list
//! ([`List`], and the list of answer records in `columns.rs`).
//!
//! Levels, for an `OPTIONAL` column: definition 0 is null, 1 a value. For
//! an `OPTIONAL group (LIST) { REPEATED group list { REQUIRED element } }`:
//! definition 0 is a null list, 1 an empty list, 2 an element; repetition
//! 0 starts a row, 1 continues its list.

use super::sink::LeafSink;
use bytes::Bytes;
use parquet::data_type::{ByteArray, ByteArrayType, DataType};
use parquet::errors::ParquetError;
use std::borrow::Cow;

/// An optional value per row.
pub struct Values<D: DataType> {
    values: Vec<D::T>,
    defs: Vec<i16>,
}

impl<D: DataType> Values<D> {
    /// No rows.
    pub fn new() -> Self {
        Values {
            values: Vec::new(),
            defs: Vec::new(),
        }
    }

    /// A value for this row.
    pub fn push(&mut self, value: D::T) {
        self.values.push(value);
        self.defs.push(1);
    }

    /// A value, or null.
    pub fn push_opt(&mut self, value: Option<D::T>) {
        match value {
            Some(v) => self.push(v),
            None => self.defs.push(0),
        }
    }

    /// Nulls until the column has `rows` rows.
    pub fn pad(&mut self, rows: usize) {
        self.defs.resize(rows.max(self.defs.len()), 0);
    }

    /// Writes the column and empties it.
    pub fn write(&mut self, sink: &mut impl LeafSink) -> Result<(), ParquetError> {
        sink.leaf::<D>(&self.values, Some(&self.defs), None)?;
        self.values.clear();
        self.defs.clear();
        Ok(())
    }
}

impl<D: DataType> Default for Values<D> {
    fn default() -> Self {
        Self::new()
    }
}

/// Strings kept end to end in one buffer (no allocation per value).
#[derive(Default)]
pub struct Text {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Text {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() + 8 * self.ends.len()
    }

    /// Appends a string made by `make` into the buffer; when `make` says
    /// `false`, what it wrote is dropped and nothing is appended.
    pub fn push_with(&mut self, make: impl FnOnce(&mut Vec<u8>) -> bool) -> bool {
        let start = self.data.len();
        if make(&mut self.data) {
            self.ends.push(self.data.len());
            true
        } else {
            self.data.truncate(start);
            false
        }
    }

    /// The strings as Parquet values (slices of one shared buffer), emptied.
    pub fn take(&mut self) -> Vec<ByteArray> {
        let data = Bytes::from(std::mem::take(&mut self.data));
        let mut start = 0;
        let values = self
            .ends
            .iter()
            .map(|&end| {
                let value = ByteArray::from(data.slice(start..end));
                start = end;
                value
            })
            .collect();
        self.ends.clear();
        values
    }
}

/// An optional string per row.
pub struct Strings {
    text: Text,
    defs: Vec<i16>,
}

impl Strings {
    /// An `OPTIONAL` column.
    pub fn optional() -> Self {
        Strings {
            text: Text::default(),
            defs: Vec::new(),
        }
    }

    /// A string for this row.
    pub fn push(&mut self, value: &[u8]) {
        self.push_with(|out| {
            out.extend_from_slice(value);
            true
        });
    }

    /// A string made by `make`, or null when it says `false`.
    pub fn push_with(&mut self, make: impl FnOnce(&mut Vec<u8>) -> bool) {
        let made = self.text.push_with(make);
        self.defs.push(i16::from(made));
    }

    /// Nulls until the column has `rows` rows.
    pub fn pad(&mut self, rows: usize) {
        self.defs.resize(rows.max(self.defs.len()), 0);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.text.bytes() + 2 * self.defs.len()
    }

    /// Writes the column and empties it.
    pub fn write(&mut self, sink: &mut impl LeafSink) -> Result<(), ParquetError> {
        let values = self.text.take();
        sink.leaf::<ByteArrayType>(&values, Some(&self.defs), None)?;
        self.defs.clear();
        Ok(())
    }
}

/// Strings from a small set (mnemonics: `A`, `NOERROR`, `udp`), one per
/// value: kept as references to the program's own text, so the chain's
/// thread copies nothing and the encoder's values share nothing (a static
/// [`Bytes`] counts no references); a rare value made at run time
/// (`TYPE65280`) is kept as its own string. The elements of a list (the
/// types of answer records) as they are; a column's values in [`Symbols`].
#[derive(Default)]
pub struct SymbolList {
    values: Vec<Cow<'static, str>>,
}

impl SymbolList {
    /// One value.
    pub fn push(&mut self, value: impl Into<Cow<'static, str>>) {
        self.values.push(value.into());
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        24 * self.values.len()
    }

    /// The values as Parquet values, emptied.
    pub fn take(&mut self) -> Vec<ByteArray> {
        self.values.drain(..).map(symbol_value).collect()
    }
}

/// An optional (or, `required`, always present) [`SymbolList`] value per
/// row.
pub struct Symbols {
    values: SymbolList,
    defs: Vec<i16>,
    required: bool,
}

impl Symbols {
    /// An `OPTIONAL` column.
    pub fn optional() -> Self {
        Symbols {
            values: SymbolList::default(),
            defs: Vec::new(),
            required: false,
        }
    }

    /// A `REQUIRED` column (every row pushes a value).
    pub fn required() -> Self {
        Symbols {
            required: true,
            ..Symbols::optional()
        }
    }

    /// A value for this row.
    pub fn push(&mut self, value: impl Into<Cow<'static, str>>) {
        self.values.push(value);
        self.defs.push(1);
    }

    /// Nulls until the column has `rows` rows.
    pub fn pad(&mut self, rows: usize) {
        self.defs.resize(rows.max(self.defs.len()), 0);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.values.bytes() + 2 * self.defs.len()
    }

    /// Writes the column and empties it.
    pub fn write(&mut self, sink: &mut impl LeafSink) -> Result<(), ParquetError> {
        let values = self.values.take();
        let defs = (!self.required).then_some(&self.defs[..]);
        sink.leaf::<ByteArrayType>(&values, defs, None)?;
        self.defs.clear();
        Ok(())
    }
}

/// A symbol as a Parquet value, without a copy.
fn symbol_value(value: Cow<'static, str>) -> ByteArray {
    ByteArray::from(match value {
        Cow::Borrowed(text) => Bytes::from_static(text.as_bytes()),
        Cow::Owned(text) => Bytes::from(text.into_bytes()),
    })
}

/// The levels of a list column (shared by every leaf of its element).
#[derive(Default)]
pub struct ListLevels {
    /// Definition levels.
    pub defs: Vec<i16>,
    /// Repetition levels.
    pub reps: Vec<i16>,
    /// Rows so far.
    pub rows: usize,
}

impl ListLevels {
    /// A null list for this row.
    pub fn null(&mut self) {
        self.defs.push(0);
        self.reps.push(0);
        self.rows += 1;
    }

    /// A list of `len` elements for this row (the caller pushes the values).
    pub fn list(&mut self, len: usize) {
        if len == 0 {
            self.defs.push(1);
            self.reps.push(0);
        } else {
            self.defs.push(2);
            self.reps.push(0);
            for _ in 1..len {
                self.defs.push(2);
                self.reps.push(1);
            }
        }
        self.rows += 1;
    }

    /// Null lists until the column has `rows` rows.
    pub fn pad(&mut self, rows: usize) {
        while self.rows < rows {
            self.null();
        }
    }

    /// Empties the levels.
    pub fn clear(&mut self) {
        self.defs.clear();
        self.reps.clear();
        self.rows = 0;
    }
}

/// A list of integers per row (EDNS option codes).
pub struct List<D: DataType> {
    values: Vec<D::T>,
    levels: ListLevels,
}

impl<D: DataType> List<D> {
    /// No rows.
    pub fn new() -> Self {
        List {
            values: Vec::new(),
            levels: ListLevels::default(),
        }
    }

    /// A list for this row.
    pub fn push(&mut self, values: &[D::T]) {
        self.levels.list(values.len());
        self.values.extend_from_slice(values);
    }

    /// Null lists until the column has `rows` rows.
    pub fn pad(&mut self, rows: usize) {
        self.levels.pad(rows);
    }

    /// Writes the column and empties it.
    pub fn write(&mut self, sink: &mut impl LeafSink) -> Result<(), ParquetError> {
        let levels = &self.levels;
        sink.leaf::<D>(&self.values, Some(&levels.defs), Some(&levels.reps))?;
        self.values.clear();
        self.levels.clear();
        Ok(())
    }
}

impl<D: DataType> Default for List<D> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_levels_say_null_empty_and_elements() {
        let mut l = ListLevels::default();
        l.null();
        l.list(0);
        l.list(3);
        l.pad(4);
        assert_eq!(l.defs, [0, 1, 2, 2, 2, 0]);
        assert_eq!(l.reps, [0, 0, 0, 1, 1, 0]);
        assert_eq!(l.rows, 4);
    }
}
