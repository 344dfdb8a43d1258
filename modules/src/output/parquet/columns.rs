//! The buffered row group of `output.parquet`: one buffer per column of
//! [`super::schema::MESSAGE`], filled a row at a time ([`Columns::end_row`]
//! fills every column a row left out with null) and written as a row group.

use super::levels::{List, ListLevels, Strings, SymbolList, Symbols, Text, Values};
use super::sink::LeafSink;
use parquet::data_type::{BoolType, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use std::borrow::Cow;

/// Leaf columns of the schema.
#[cfg(test)]
pub const LEAVES: usize = 38;

/// The answer records of each row: a list of (name, type, ttl, data).
#[derive(Default)]
pub struct Answers {
    levels: ListLevels,
    names: Text,
    types: SymbolList,
    ttls: Vec<i64>,
    datas: Text,
    /// Records of the row being built.
    open: usize,
}

impl Answers {
    /// Starts this row's list (then [`Answers::record`] for each record,
    /// then [`Answers::close`]).
    pub fn open(&mut self) {
        self.open = 0;
    }

    /// One record: `make_name` and `make_data` write the name and the data;
    /// a record whose name does not parse is left out.
    pub fn record(
        &mut self,
        make_name: impl FnOnce(&mut Vec<u8>) -> bool,
        rtype: Cow<'static, str>,
        ttl: i64,
        make_data: impl FnOnce(&mut Vec<u8>),
    ) {
        if !self.names.push_with(make_name) {
            return;
        }
        self.types.push(rtype);
        self.ttls.push(ttl);
        self.datas.push_with(|out| {
            make_data(out);
            true
        });
        self.open += 1;
    }

    /// Ends this row's list.
    pub fn close(&mut self) {
        self.levels.list(self.open);
    }

    fn bytes(&self) -> usize {
        self.names.bytes() + self.types.bytes() + self.datas.bytes() + 4 * self.levels.defs.len()
    }

    fn write(&mut self, sink: &mut impl LeafSink) -> Result<(), ParquetError> {
        let (defs, reps) = (Some(&self.levels.defs[..]), Some(&self.levels.reps[..]));
        sink.leaf::<ByteArrayType>(&self.names.take(), defs, reps)?;
        sink.leaf::<ByteArrayType>(&self.types.take(), defs, reps)?;
        sink.leaf::<Int64Type>(&self.ttls, defs, reps)?;
        sink.leaf::<ByteArrayType>(&self.datas.take(), defs, reps)?;
        self.ttls.clear();
        self.levels.clear();
        Ok(())
    }
}

/// Every column of one row group, in schema order.
pub struct Columns {
    /// `message`, `dnstap`, `response` or `lookup`.
    pub kind: Symbols,
    /// Nanoseconds since the Unix epoch.
    pub time: Values<Int64Type>,
    /// The capture's record number.
    pub frame: Values<Int64Type>,
    /// Source address.
    pub src: Strings,
    /// Destination address.
    pub dst: Strings,
    /// Source port.
    pub sport: Values<Int32Type>,
    /// Destination port.
    pub dport: Values<Int32Type>,
    /// `udp`, `tcp`, ...
    pub transport: Symbols,
    /// The message id.
    pub id: Values<Int32Type>,
    /// QR.
    pub qr: Values<BoolType>,
    /// The opcode's mnemonic.
    pub opcode: Symbols,
    /// The (extended) RCODE's mnemonic.
    pub rcode: Symbols,
    /// AA, TC, RD, RA, AD, CD.
    pub flags: [Values<BoolType>; 6],
    /// The first question's name.
    pub qname: Strings,
    /// Its type's mnemonic.
    pub qtype: Symbols,
    /// Its class's mnemonic.
    pub qclass: Symbols,
    /// QDCOUNT, ANCOUNT, NSCOUNT, ARCOUNT.
    pub counts: [Values<Int32Type>; 4],
    /// EDNS UDP payload size.
    pub edns_udp_size: Values<Int32Type>,
    /// EDNS DO bit.
    pub edns_do: Values<BoolType>,
    /// EDNS version.
    pub edns_version: Values<Int32Type>,
    /// EDNS option codes.
    pub edns_options: List<Int32Type>,
    /// The answer section.
    pub answers: Answers,
    /// The first problem found in the message.
    pub dns_error: Symbols,
    /// A lookup's status or a response's error kind.
    pub status: Strings,
    /// The nameserver asked.
    pub nameserver: Strings,
    /// Queries sent for a lookup.
    pub tries: Values<Int32Type>,
    /// A lookup's duration or a response's latency.
    pub duration_ms: Values<DoubleType>,
    rows: usize,
}

impl Default for Columns {
    fn default() -> Self {
        Self::new()
    }
}

impl Columns {
    /// No rows.
    pub fn new() -> Self {
        Columns {
            kind: Symbols::required(),
            time: Values::new(),
            frame: Values::new(),
            src: Strings::optional(),
            dst: Strings::optional(),
            sport: Values::new(),
            dport: Values::new(),
            transport: Symbols::optional(),
            id: Values::new(),
            qr: Values::new(),
            opcode: Symbols::optional(),
            rcode: Symbols::optional(),
            flags: std::array::from_fn(|_| Values::new()),
            qname: Strings::optional(),
            qtype: Symbols::optional(),
            qclass: Symbols::optional(),
            counts: std::array::from_fn(|_| Values::new()),
            edns_udp_size: Values::new(),
            edns_do: Values::new(),
            edns_version: Values::new(),
            edns_options: List::new(),
            answers: Answers::default(),
            dns_error: Symbols::optional(),
            status: Strings::optional(),
            nameserver: Strings::optional(),
            tries: Values::new(),
            duration_ms: Values::new(),
            rows: 0,
        }
    }

    /// Rows buffered.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Ends a row: every column it left out gets a null.
    pub fn end_row(&mut self) {
        self.rows += 1;
        let rows = self.rows;
        for v in [&mut self.time, &mut self.frame] {
            v.pad(rows);
        }
        for v in [&mut self.sport, &mut self.dport, &mut self.id] {
            v.pad(rows);
        }
        for v in self.counts.iter_mut() {
            v.pad(rows);
        }
        for v in [
            &mut self.edns_udp_size,
            &mut self.edns_version,
            &mut self.tries,
        ] {
            v.pad(rows);
        }
        for v in self
            .flags
            .iter_mut()
            .chain([&mut self.qr, &mut self.edns_do])
        {
            v.pad(rows);
        }
        for s in self.strings() {
            s.pad(rows);
        }
        for s in self.symbols() {
            s.pad(rows);
        }
        self.nameserver.pad(rows);
        self.edns_options.pad(rows);
        self.answers.levels.pad(rows);
        self.duration_ms.pad(rows);
    }

    fn strings(&mut self) -> [&mut Strings; 4] {
        [
            &mut self.src,
            &mut self.dst,
            &mut self.qname,
            &mut self.status,
        ]
    }

    fn symbols(&mut self) -> [&mut Symbols; 7] {
        [
            &mut self.kind,
            &mut self.transport,
            &mut self.opcode,
            &mut self.rcode,
            &mut self.qtype,
            &mut self.qclass,
            &mut self.dns_error,
        ]
    }

    /// Bytes held, roughly: strings and levels, and 8 bytes a row for each
    /// of the fixed-size columns.
    pub fn bytes(&mut self) -> usize {
        let strings: usize = self.strings().iter().map(|s| s.bytes()).sum();
        let symbols: usize = self.symbols().iter().map(|s| s.bytes()).sum();
        strings + symbols + self.nameserver.bytes() + self.answers.bytes() + self.rows * 8 * 20
    }

    /// Writes the buffered rows as one row group (in schema order) and
    /// empties the buffers.
    pub fn write_row_group(&mut self, rg: &mut impl LeafSink) -> Result<(), ParquetError> {
        self.kind.write(rg)?;
        self.time.write(rg)?;
        self.frame.write(rg)?;
        self.src.write(rg)?;
        self.dst.write(rg)?;
        self.sport.write(rg)?;
        self.dport.write(rg)?;
        self.transport.write(rg)?;
        self.id.write(rg)?;
        self.qr.write(rg)?;
        self.opcode.write(rg)?;
        self.rcode.write(rg)?;
        for flag in self.flags.iter_mut() {
            flag.write(rg)?;
        }
        self.qname.write(rg)?;
        self.qtype.write(rg)?;
        self.qclass.write(rg)?;
        for count in self.counts.iter_mut() {
            count.write(rg)?;
        }
        self.edns_udp_size.write(rg)?;
        self.edns_do.write(rg)?;
        self.edns_version.write(rg)?;
        self.edns_options.write(rg)?;
        self.answers.write(rg)?;
        self.dns_error.write(rg)?;
        self.status.write(rg)?;
        self.nameserver.write(rg)?;
        self.tries.write(rg)?;
        self.duration_ms.write(rg)?;
        self.rows = 0;
        Ok(())
    }
}
