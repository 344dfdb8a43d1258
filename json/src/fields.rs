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

/// Appends an address as a JSON string (see [`push_ip`]).
pub fn push_json_ip(addr: std::net::IpAddr, out: &mut Vec<u8>) {
    out.push(b'"');
    push_ip(addr, out);
    out.push(b'"');
}

/// Appends an address as text. IPv4 is written digit by digit (the
/// formatting machinery of `Display` took a tenth of a JSON or Parquet
/// run's time on addresses alone, and a copy call per octet a twentieth);
/// IPv6, whose text form compresses zeros (RFC 5952), by its `Display`.
pub fn push_ip(addr: std::net::IpAddr, out: &mut Vec<u8>) {
    match addr {
        std::net::IpAddr::V4(v4) => {
            out.reserve(15);
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_u8(octet, out);
            }
        }
        std::net::IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Appends `n` in decimal.
fn push_u8(n: u8, out: &mut Vec<u8>) {
    if n >= 100 {
        out.push(b'0' + n / 100);
    }
    if n >= 10 {
        out.push(b'0' + n / 10 % 10);
    }
    out.push(b'0' + n % 10);
}

/// Appends `true` or `false`.
pub fn push_bool(value: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(if value { b"true" } else { b"false" });
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    fn ip_text(addr: IpAddr) -> String {
        let mut out = Vec::new();
        push_json_ip(addr, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// Every octet value, in every place, as the standard library writes it.
    #[test]
    fn ipv4_is_written_as_the_standard_library_writes_it() {
        for n in 0..=255u8 {
            for addr in [
                Ipv4Addr::new(n, 0, 0, 0),
                Ipv4Addr::new(1, n, 2, 3),
                Ipv4Addr::new(10, 20, n, 255),
                Ipv4Addr::new(192, 168, 100, n),
            ] {
                assert_eq!(ip_text(addr.into()), format!("\"{addr}\""));
            }
        }
    }

    #[test]
    fn ipv6_is_compressed_as_rfc_5952_says() {
        let addr: Ipv6Addr = "2001:db8:0:0:0:0:2:1".parse().unwrap();
        assert_eq!(ip_text(addr.into()), "\"2001:db8::2:1\"");
    }

    #[test]
    fn booleans() {
        let mut out = Vec::new();
        push_bool(true, &mut out);
        push_bool(false, &mut out);
        assert_eq!(out, b"truefalse");
    }
}
