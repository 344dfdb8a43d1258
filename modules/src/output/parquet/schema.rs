//! The Parquet schema of `output.parquet` (docs/parquet.md describes every
//! column): one row per DNS message, client response or lookup record.
//!
//! The schema is versioned: [`SCHEMA_VERSION`] is written in the file's
//! key-value metadata under [`VERSION_KEY`]. A later version may add
//! columns; it never renames, retypes or removes one.

use parquet::errors::ParquetError;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::Type;
use std::sync::Arc;

/// The version of the schema below.
pub const SCHEMA_VERSION: &str = "1";

/// The key-value metadata key that holds [`SCHEMA_VERSION`].
pub const VERSION_KEY: &str = "dnsluice.schema_version";

/// The schema, in Parquet's message syntax. The column order is the order
/// in which [`super::columns::Columns::write_row_group`] writes the leaves.
pub const MESSAGE: &str = "
message dnsluice {
  REQUIRED BINARY kind (STRING);
  OPTIONAL INT64 time (TIMESTAMP(NANOS,true));
  OPTIONAL INT64 frame;
  OPTIONAL BINARY src (STRING);
  OPTIONAL BINARY dst (STRING);
  OPTIONAL INT32 sport (INTEGER(16,false));
  OPTIONAL INT32 dport (INTEGER(16,false));
  OPTIONAL BINARY transport (STRING);
  OPTIONAL INT32 id (INTEGER(16,false));
  OPTIONAL BOOLEAN qr;
  OPTIONAL BINARY opcode (STRING);
  OPTIONAL BINARY rcode (STRING);
  OPTIONAL BOOLEAN aa;
  OPTIONAL BOOLEAN tc;
  OPTIONAL BOOLEAN rd;
  OPTIONAL BOOLEAN ra;
  OPTIONAL BOOLEAN ad;
  OPTIONAL BOOLEAN cd;
  OPTIONAL BINARY qname (STRING);
  OPTIONAL BINARY qtype (STRING);
  OPTIONAL BINARY qclass (STRING);
  OPTIONAL INT32 qdcount (INTEGER(16,false));
  OPTIONAL INT32 ancount (INTEGER(16,false));
  OPTIONAL INT32 nscount (INTEGER(16,false));
  OPTIONAL INT32 arcount (INTEGER(16,false));
  OPTIONAL INT32 edns_udp_size (INTEGER(16,false));
  OPTIONAL BOOLEAN edns_do;
  OPTIONAL INT32 edns_version (INTEGER(8,false));
  OPTIONAL group edns_options (LIST) {
    REPEATED group list {
      REQUIRED INT32 element (INTEGER(16,false));
    }
  }
  OPTIONAL group answers (LIST) {
    REPEATED group list {
      REQUIRED group element {
        REQUIRED BINARY name (STRING);
        REQUIRED BINARY type (STRING);
        REQUIRED INT64 ttl;
        REQUIRED BINARY data (STRING);
      }
    }
  }
  OPTIONAL BINARY dns_error (STRING);
  OPTIONAL BINARY status (STRING);
  OPTIONAL BINARY nameserver (STRING);
  OPTIONAL INT32 tries;
  OPTIONAL DOUBLE duration_ms;
}
";

/// The schema as a Parquet type tree.
pub fn schema() -> Result<Arc<Type>, ParquetError> {
    parse_message_type(MESSAGE).map(Arc::new)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_parses_with_one_leaf_per_column_buffer() {
        let schema = super::schema().unwrap();
        let descr = parquet::schema::types::SchemaDescriptor::new(schema);
        assert_eq!(descr.num_columns(), super::super::columns::LEAVES);
    }
}
