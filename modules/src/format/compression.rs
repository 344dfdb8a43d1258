//! Compressed captures: which compression a file uses, told from its first
//! bytes (never from its name), so `capture.pcap.zst`, a renamed file and a
//! compressed stream on standard input are all read the same way.
//!
//! The magic numbers: zstd frames start `28 b5 2f fd` (RFC 8878 §3.1.1),
//! LZ4 frames `04 22 4d 18` (the LZ4 frame format), gzip members `1f 8b`
//! (RFC 1952 §2.3.1), xz streams `fd 37 7a 58 5a 00` (the .xz format, §2.1.1).
//! None of them starts a pcap or pcapng file.

/// Where a decoder leaves its note when the stream ends inside a frame.
pub type CutOff = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// A compression a capture may be stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed (or not in a format we know: the capture reader says).
    None,
    /// Zstandard.
    Zstd,
    /// LZ4, frame format (what the `lz4` tool writes).
    Lz4,
    /// gzip (deflate).
    Gzip,
    /// xz (LZMA2).
    Xz,
}

/// The longest magic number: bytes [`Compression::detect`] wants to see.
pub const MAGIC_LEN: usize = 6;

impl Compression {
    /// The compression of a file that starts with `head` (at least
    /// [`MAGIC_LEN`] bytes unless the file is shorter).
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else if head.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
            Compression::Lz4
        } else if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Compression::Xz
        } else {
            Compression::None
        }
    }

    /// The name, as the command-line tools call it (`zstd`, `lz4`, `gzip`, `xz`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers() {
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0x24]),
            Compression::Zstd
        );
        assert_eq!(
            Compression::detect(&[0x04, 0x22, 0x4d, 0x18, 0x64]),
            Compression::Lz4
        );
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 0x08]), Compression::Gzip);
        assert_eq!(Compression::detect(b"\xfd7zXZ\x00\x00"), Compression::Xz);
        // pcap (both byte orders, both resolutions) and pcapng are not compressed.
        for magic in [
            [0xd4, 0xc3, 0xb2, 0xa1],
            [0xa1, 0xb2, 0xc3, 0xd4],
            [0x4d, 0x3c, 0xb2, 0xa1],
            [0x0a, 0x0d, 0x0d, 0x0a],
        ] {
            assert_eq!(Compression::detect(&magic), Compression::None);
        }
        assert_eq!(Compression::detect(b"\xfd7zX"), Compression::None);
        assert_eq!(Compression::detect(&[]), Compression::None);
    }
}
