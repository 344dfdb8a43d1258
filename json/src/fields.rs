//! The lowest level of our JSON writing: `"key":value` pairs and escaped
//! strings, appended to a reused buffer (no allocation per object; `serde_json`
//! would build a value first).

use crate::append::{clean_word, push_short, push_u64, store_short};
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

    /// Writes `,"key":` (no comma before the first key). Inlined: the key
    /// is a constant at most calls, copied without a call. One `reserve`,
    /// then the bytes stored into the room it made: a line has some forty
    /// keys, and a capacity test and a length update per piece (comma,
    /// quote, key, quote and colon) were most of what writing a key cost
    /// (`docs/benchmarks.md`).
    #[inline(always)]
    pub fn key(&mut self, out: &mut Vec<u8>, key: &str) {
        let key = key.as_bytes();
        let comma = usize::from(!std::mem::take(&mut self.first));
        let len = comma + key.len() + 3;
        out.reserve(len);
        let start = out.len();
        #[allow(unsafe_code)]
        // SAFETY: `reserve` made room for `len` bytes after `start`. The
        // stores write `start..start + len`, every byte of it: the comma
        // (or, without one, the quote over it), the quote, the key, the
        // closing quote and the colon.
        unsafe {
            let at = out.as_mut_ptr().add(start);
            at.write(b',');
            at.add(comma).write(b'"');
            store_short(at.add(comma + 1), key);
            at.add(len - 2).cast::<[u8; 2]>().write_unaligned(*b"\":");
            out.set_len(start + len);
        }
    }

    /// A number.
    #[inline(always)]
    pub fn num(&mut self, out: &mut Vec<u8>, key: &str, value: u64) {
        self.key(out, key);
        push_u64(out, value);
    }

    /// A string (escaped).
    #[inline(always)]
    pub fn string(&mut self, out: &mut Vec<u8>, key: &str, value: &str) {
        self.key(out, key);
        push_json_str(value.as_bytes(), out);
    }

    /// Raw JSON text (`true`, `null`, an object written by the caller).
    #[inline(always)]
    pub fn raw(&mut self, out: &mut Vec<u8>, key: &str, value: &str) {
        self.key(out, key);
        push_short(out, value.as_bytes());
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
            // Each octet as the table's four bytes (no branch on the
            // octets' values: they are random in a capture and the branches
            // missed), advanced by its width; appended at once.
            let mut text = [0u8; 16];
            let mut len = 0;
            for octet in v4.octets() {
                let (digits, width) = OCTET_TEXT[usize::from(octet)];
                text[len..len + 4].copy_from_slice(&digits);
                len += usize::from(width);
            }
            // Without the last dot.
            push_short(out, &text[..len - 1]);
        }
        std::net::IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Each octet's decimal text and a dot, padded to four bytes, and how
/// many of them are its own.
const OCTET_TEXT: [([u8; 4], u8); 256] = {
    let mut table = [([0u8; 4], 0u8); 256];
    let mut n = 0;
    while n < 256 {
        let (hundreds, tens, ones) = ((n / 100) as u8, (n / 10 % 10) as u8, (n % 10) as u8);
        table[n] = match n {
            100.. => ([b'0' + hundreds, b'0' + tens, b'0' + ones, b'.'], 4),
            10.. => ([b'0' + tens, b'0' + ones, b'.', 0], 3),
            _ => ([b'0' + ones, b'.', 0, 0], 2),
        };
        n += 1;
    }
    table
};

/// Appends `true` or `false`.
#[inline]
pub fn push_bool(value: bool, out: &mut Vec<u8>) {
    // Two copies of known length (one `if` around the slice would be a
    // slice of unknown length: a call).
    if value {
        out.extend_from_slice(b"true");
    } else {
        out.extend_from_slice(b"false");
    }
}

/// Appends `text` as a JSON string: quotes, backslashes and control bytes
/// escaped; other bytes as they are (callers pass ASCII or UTF-8). Runs of
/// bytes that need no escape are copied eight at a time.
pub fn push_json_str(text: &[u8], out: &mut Vec<u8>) {
    if text.len() <= 16 && short_is_clean(text) {
        push_quoted_short(text, out);
        return;
    }
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut rest = text;
    loop {
        while let Some((word, after)) = rest.split_first_chunk::<8>() {
            if !clean_word(u64::from_le_bytes(*word)) {
                break;
            }
            out.extend_from_slice(word);
            rest = after;
        }
        if rest.len() < 8 && tail_is_clean(text, rest) {
            push_short(out, rest);
            break;
        }
        // A byte of a word that needs an escape, then the words after it.
        let Some((&b, after)) = rest.split_first() else {
            break;
        };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b if needs_escape(b) => {
                let _ = write!(out, "\\u{b:04x}");
            }
            b => out.push(b),
        }
        rest = after;
    }
    out.push(b'"');
}

/// Appends, as a JSON string, the text `write` appends to the buffer it
/// is given: written straight into `out` between quotes, and only when it
/// turns out to need an escape (rarely: a name or RDATA with a quote, a
/// backslash or a control byte) copied to `scratch` and escaped from there.
/// One copy and one scan fewer than writing it to `scratch` first. When
/// `write` fails, `out` is left as it was.
pub fn push_json_text<T, E>(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<T, E>,
) -> Result<T, E> {
    let start = out.len();
    out.push(b'"');
    let result = write(out);
    if result.is_err() {
        out.truncate(start);
    } else if needs_no_escape(&out[start + 1..]) {
        out.push(b'"');
    } else {
        scratch.clear();
        scratch.extend_from_slice(&out[start + 1..]);
        out.truncate(start);
        push_json_str(scratch, out);
    }
    result
}

/// Whether no byte of `text` is written escaped in a JSON string.
fn needs_no_escape(text: &[u8]) -> bool {
    let (words, tail) = text.as_chunks::<8>();
    words
        .iter()
        .all(|word| clean_word(u64::from_le_bytes(*word)))
        && !tail.iter().copied().any(needs_escape)
}

/// Whether `b` is written escaped in a JSON string.
fn needs_escape(b: u8) -> bool {
    matches!(b, b'"' | b'\\' | 0..=0x1f | 0x7f)
}

/// Whether `text`, at most 16 bytes, needs no escape: one or two words of
/// [`clean_word`] (overlapping in the middle), or [`tail_is_clean`]'s
/// word for fewer than eight bytes.
#[inline(always)]
fn short_is_clean(text: &[u8]) -> bool {
    match (text.first_chunk::<8>(), text.last_chunk::<8>()) {
        (Some(head), Some(tail)) => {
            clean_word(u64::from_le_bytes(*head)) && clean_word(u64::from_le_bytes(*tail))
        }
        _ => tail_is_clean(text, text),
    }
}

/// Appends `text` (at most 16 bytes, none needing an escape) between
/// quotes: one `reserve`, then unchecked stores. The mnemonics of a DNS
/// line (`udp`, `QUERY`, `NOERROR`) are such strings; this way a UDP dump
/// takes about 88 instructions a line fewer than written piece by piece,
/// with a capacity test each (`docs/benchmarks.md`, tenth session).
#[inline(always)]
fn push_quoted_short(text: &[u8], out: &mut Vec<u8>) {
    let len = text.len() + 2;
    out.reserve(len);
    let start = out.len();
    #[allow(unsafe_code)]
    // SAFETY: `reserve` made room for `len` bytes after `start`; the stores
    // write every one of them: the quote, `text`, the quote.
    unsafe {
        let at = out.as_mut_ptr().add(start);
        at.write(b'"');
        store_short(at.add(1), text);
        at.add(len - 1).write(b'"');
        out.set_len(start + len);
    }
}

/// Whether `rest`, the last fewer than eight bytes of `text`, needs no
/// escape, told with one word of [`clean_word`] instead of a test per
/// byte (the mnemonics of a DNS line, `QUERY`, `NOERROR`, `udp`, are such
/// tails; byte by byte they cost a few percent of a UDP dump's
/// instructions). The word is the last eight bytes of `text` when it has
/// that many (the bytes before `rest` in it are clean, or the answer is
/// "no" and the caller looks byte by byte, as it does at an escape); of a
/// shorter `text` (then `rest` is all of it), its first and last four
/// bytes, or for three bytes or fewer its first, middle and last.
#[inline(always)]
fn tail_is_clean(text: &[u8], rest: &[u8]) -> bool {
    if let Some(last) = text.last_chunk::<8>() {
        return clean_word(u64::from_le_bytes(*last));
    }
    let word = match (rest.first_chunk::<4>(), rest.last_chunk::<4>()) {
        (Some(head), Some(tail)) => {
            u64::from(u32::from_le_bytes(*head)) | u64::from(u32::from_le_bytes(*tail)) << 32
        }
        _ => match rest {
            [] => return true,
            [first, ..] => {
                let (middle, last) = (rest[rest.len() / 2], rest[rest.len() - 1]);
                u64::from_le_bytes([*first, middle, last, *first, *first, *first, *first, *first])
            }
        },
    };
    clean_word(word)
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

    /// Every byte value at every place of strings of 0 to 24 bytes (of
    /// plain ASCII and of UTF-8 continuation bytes), escaped as RFC 8259
    /// says, byte by byte: the quote and the backslash with a backslash,
    /// control bytes (and 0x7f) as `\u00XX`, every other byte as it is.
    #[test]
    fn strings_are_escaped_byte_by_byte_as_rfc_8259_says() {
        let reference = |text: &[u8]| {
            let mut out = b"\"".to_vec();
            for &b in text {
                match b {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
                    b => out.push(b),
                }
            }
            out.push(b'"');
            out
        };
        for filler in [b'x', 0x80] {
            for len in 0..=24 {
                for place in 0..len.max(1) {
                    for b in 0..=255u8 {
                        let mut text = vec![filler; len];
                        if let Some(slot) = text.get_mut(place) {
                            *slot = b;
                        }
                        let mut out = b"before".to_vec();
                        push_json_str(&text, &mut out);
                        let mut expected = b"before".to_vec();
                        expected.extend(reference(&text));
                        assert_eq!(out, expected, "{text:?}");
                    }
                }
            }
        }
        let mut out = Vec::new();
        push_json_str(b"a\"b\\c\n\x01\x7f\"\"", &mut out);
        assert_eq!(out, br#""a\"b\\c\u000a\u0001\u007f\"\"""#);
    }

    /// Text written straight into the line comes out as the same text
    /// escaped by [`push_json_str`], whether it needs escapes or not; a
    /// failed write leaves the line as it was.
    #[test]
    fn text_written_in_place_is_escaped_like_any_string() {
        let texts: [&[u8]; 6] = [
            b"",
            b"example.com.",
            b"a-rather-long-label.with.several.labels.example.",
            b"quote\"d.",
            b"back\\slash.and.more.than.eight.bytes",
            b"\x01\x7f",
        ];
        let mut scratch = b"left over".to_vec();
        for text in texts {
            let mut out = b"[".to_vec();
            let result: Result<(), ()> = push_json_text(&mut out, &mut scratch, |into| {
                into.extend_from_slice(text);
                Ok(())
            });
            assert_eq!(result, Ok(()));
            let mut expected = b"[".to_vec();
            push_json_str(text, &mut expected);
            assert_eq!(out, expected, "{text:?}");
            let failed: Result<(), ()> = push_json_text(&mut out, &mut scratch, |into| {
                into.extend_from_slice(b"partial");
                Err(())
            });
            assert_eq!(failed, Err(()));
            assert_eq!(out, expected, "{text:?}");
        }
    }

    /// Keys of every length from 1 to 21 (each way a key is stored), the
    /// first without a comma, after whatever the line holds.
    #[test]
    fn keys_are_quoted_with_a_colon_and_commas_between() {
        let names: Vec<String> = (0..=20).map(|n| "k".repeat(n) + "z").collect();
        for before in ["", "{", "{\"x\":1"] {
            let mut out = before.as_bytes().to_vec();
            let mut fields = Fields::new();
            let mut expected = before.to_string();
            for (i, name) in names.iter().enumerate() {
                fields.num(&mut out, name, i as u64);
                let comma = if i == 0 { "" } else { "," };
                expected += &format!("{comma}\"{name}\":{i}");
            }
            assert_eq!(String::from_utf8(out).unwrap(), expected);
        }
    }

    #[test]
    fn booleans() {
        let mut out = Vec::new();
        push_bool(true, &mut out);
        push_bool(false, &mut out);
        assert_eq!(out, b"truefalse");
    }
}
