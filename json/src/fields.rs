//! The lowest level of our JSON writing: `"key":value` pairs and escaped
//! strings, appended to a reused buffer (no allocation per object; `serde_json`
//! would build a value first).

use std::io::Write;

/// Writes `"key":value` pairs, with the commas between them.
pub struct Fields {
    first: bool,
}

impl Fields {
    /// At the start of an object (after its `{`).
    pub fn new() -> Self {
        Fields { first: true }
    }

    /// Writes `,"key":` (no comma before the first key).
    pub fn key(&mut self, out: &mut Vec<u8>, key: &str) {
        if !std::mem::take(&mut self.first) {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
    }

    /// A number.
    pub fn num(&mut self, out: &mut Vec<u8>, key: &str, value: u64) {
        self.key(out, key);
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    /// A string (escaped).
    pub fn string(&mut self, out: &mut Vec<u8>, key: &str, value: &str) {
        self.key(out, key);
        push_json_str(value.as_bytes(), out);
    }

    /// Raw JSON text (`true`, `null`, an object written by the caller).
    pub fn raw(&mut self, out: &mut Vec<u8>, key: &str, value: &str) {
        self.key(out, key);
        out.extend_from_slice(value.as_bytes());
    }
}

impl Default for Fields {
    fn default() -> Self {
        Self::new()
    }
}

/// Appends `text` as a JSON string: quotes, backslashes and control bytes
/// escaped; other bytes as they are (callers pass ASCII or UTF-8).
pub fn push_json_str(text: &[u8], out: &mut Vec<u8>) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    // Runs of bytes that need no escape are copied whole.
    let mut rest = text;
    while let Some(at) = rest.iter().position(|&b| needs_escape(b)) {
        out.extend_from_slice(&rest[..at]);
        match rest[at] {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// Whether `b` is written escaped in a JSON string.
fn needs_escape(b: u8) -> bool {
    matches!(b, b'"' | b'\\' | 0..=0x1f | 0x7f)
}
