//! Unpadded base64url (RFC 4648 §5), for DNS-over-HTTPS GET requests.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Appends the unpadded base64url form of `bytes` to `out`.
pub fn encode_into(bytes: &[u8], out: &mut String) {
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let symbols = chunk.len() + 1;
        for i in 0..symbols {
            let index = (n >> (18 - 6 * i)) & 63;
            out.push(ALPHABET[index as usize] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode_into;

    fn encode(bytes: &[u8]) -> String {
        let mut s = String::new();
        encode_into(bytes, &mut s);
        s
    }

    #[test]
    fn rfc4648_vectors_without_padding() {
        // RFC 4648 §10 test vectors, padding removed.
        assert_eq!(encode(b""), "");
        assert_eq!(encode(b"f"), "Zg");
        assert_eq!(encode(b"fo"), "Zm8");
        assert_eq!(encode(b"foo"), "Zm9v");
        assert_eq!(encode(b"foob"), "Zm9vYg");
        assert_eq!(encode(b"fooba"), "Zm9vYmE");
        assert_eq!(encode(b"foobar"), "Zm9vYmFy");
        // The URL-safe symbols.
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn rfc8484_example_query() {
        // RFC 8484 §4.1.1: the query for www.example.com A with id 0.
        let query = [
            0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x77,
            0x77, 0x77, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d,
            0x00, 0x00, 0x01, 0x00, 0x01,
        ];
        assert_eq!(
            encode(&query),
            "AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA2NvbQAAAQAB"
        );
    }
}
