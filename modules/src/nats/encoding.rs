//! How a results message's payload may be compressed: the records of a
//! work item of many lines are JSON that zstd shrinks about 30 times (a
//! 100-line item of lookup records: 55 KB to under 2 KB), which is what the
//! broker stores, replicates and sends on. The message says so in a
//! `Content-Encoding: zstd` header; a payload without the header is plain.
//! Small payloads (a single record) are sent plain: zstd would not shrink
//! them enough to matter.

use async_nats::HeaderMap;
use std::borrow::Cow;
use std::io::Read;

/// The header naming a payload's encoding.
pub const CONTENT_ENCODING: &str = "Content-Encoding";

/// The header's value for zstd.
pub const ZSTD: &str = "zstd";

/// Payloads shorter than this are sent plain.
pub const COMPRESS_FROM: usize = 1024;

/// What a decoded payload may grow to at most (a guard against a message
/// that decompresses without end).
pub const MAX_DECODED: u64 = 256 << 20;

/// zstd's level for results: its fastest regular one.
const LEVEL: i32 = 1;

/// How `output.nats` encodes the messages it publishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, dnsluice_options::Choice)]
pub enum Compression {
    /// zstd, for payloads of 1 KiB and more (the `Content-Encoding: zstd` header).
    #[default]
    Zstd,
    /// Always plain.
    None,
}

/// Compresses payloads with one reused zstd context.
pub struct Encoder {
    compressor: Option<zstd::bulk::Compressor<'static>>,
}

impl Encoder {
    /// An encoder for `compression`; fails only when zstd cannot make its context.
    pub fn new(compression: Compression) -> Result<Encoder, String> {
        let compressor = match compression {
            Compression::None => None,
            Compression::Zstd => Some(
                zstd::bulk::Compressor::new(LEVEL)
                    .map_err(|e| format!("cannot start zstd: {e}"))?,
            ),
        };
        Ok(Encoder { compressor })
    }

    /// `payload` compressed, when it is worth it (long enough, and zstd
    /// shrinks it): send it with `Content-Encoding:` [`ZSTD`]. `None`: send
    /// `payload` plain.
    pub fn compress(&mut self, payload: &[u8]) -> Option<Vec<u8>> {
        let compressor = self.compressor.as_mut()?;
        if payload.len() < COMPRESS_FROM {
            return None;
        }
        let packed = compressor.compress(payload).ok()?;
        (packed.len() < payload.len()).then_some(packed)
    }
}

/// The plain payload of a message with `headers`: decompressed when the
/// header says zstd; an error for an encoding it does not know, or a
/// payload that is not what its header says.
pub fn decode<'a>(headers: Option<&HeaderMap>, payload: &'a [u8]) -> Result<Cow<'a, [u8]>, String> {
    let encoding = headers
        .and_then(|h| h.get(CONTENT_ENCODING))
        .map(|v| v.as_str());
    match encoding {
        None => Ok(Cow::Borrowed(payload)),
        Some(ZSTD) => {
            let decoder = zstd::stream::read::Decoder::new(payload)
                .map_err(|e| format!("cannot start zstd: {e}"))?;
            let mut plain = Vec::new();
            decoder
                .take(MAX_DECODED + 1)
                .read_to_end(&mut plain)
                .map_err(|e| format!("a zstd payload that does not decode: {e}"))?;
            if plain.len() as u64 > MAX_DECODED {
                return Err(format!(
                    "a zstd payload that decodes to more than {MAX_DECODED} bytes"
                ));
            }
            Ok(Cow::Owned(plain))
        }
        Some(other) => Err(format!(
            "a payload in an encoding dnsluice does not know: {CONTENT_ENCODING}: {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(encoding: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_ENCODING, encoding);
        h
    }

    #[test]
    fn zstd_payloads_come_back_and_small_ones_stay_plain() {
        let mut encoder = Encoder::new(Compression::Zstd).unwrap();
        let records = "{\"name\":\"n1.lookup.test\",\"status\":\"NOERROR\"}\n".repeat(100);
        let packed = encoder.compress(records.as_bytes()).unwrap();
        assert!(packed.len() * 10 < records.len());
        // The zstd frame magic (RFC 8878 §3.1.1): 28 B5 2F FD, little-endian.
        assert_eq!(packed[..4], [0x28, 0xb5, 0x2f, 0xfd]);
        let plain = decode(Some(&headers("zstd")), &packed).unwrap();
        assert_eq!(&*plain, records.as_bytes());
        assert_eq!(encoder.compress(b"{\"name\":\"x\"}"), None);
        let mut plain_encoder = Encoder::new(Compression::None).unwrap();
        assert_eq!(plain_encoder.compress(records.as_bytes()), None);
    }

    #[test]
    fn bad_encodings_are_errors_not_garbage() {
        assert!(decode(Some(&headers("zstd")), b"not zstd").is_err());
        let e = decode(Some(&headers("br")), b"x").unwrap_err();
        assert!(e.contains("Content-Encoding: br"), "{e}");
        assert_eq!(&*decode(None, b"plain").unwrap(), b"plain");
    }
}
