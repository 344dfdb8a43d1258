//! Writing capture files: classic pcap and pcapng, always little-endian,
//! with the layouts of [`super::pcap`] and [`super::pcapng`] (the reader's
//! own constants, so the two sides cannot drift apart).
//!
//! Packet bytes are written as they came, with one exception: the 4-byte
//! address-family header of `LINKTYPE_NULL` (0), which the capturing host
//! wrote in its own byte order, the file's. A packet read from a big-endian
//! file carries a big-endian family; written unchanged into a little-endian
//! file it would name another family (libpcap's `ip` filter then matches
//! none of them), so it is written in the little-endian order of the file.
//! Address families are small numbers (2, 10, 24, 28, 30), so the smaller
//! of the two readings is the family, the rule Wireshark and our own layer
//! parser use too. `LINKTYPE_LOOP` (108) is big-endian by definition and is
//! left alone.

use super::{pcap, pcapng};
use dnsluice_core::LinkType;
use std::io::{self, Write};

/// Nanoseconds in a second.
const NS: i64 = 1_000_000_000;

/// The latest timestamp a classic pcap record holds (32-bit unsigned seconds), in ns.
pub const PCAP_MAX_TS_NS: i64 = u32::MAX as i64 * NS + (NS - 1);

/// The classic pcap file header: `nanos` chooses the magic (nanosecond or
/// microsecond fractions).
pub fn pcap_file_header(
    out: &mut impl Write,
    nanos: bool,
    snaplen: u32,
    link: LinkType,
) -> io::Result<()> {
    let magic = if nanos {
        pcap::MAGIC_NANO
    } else {
        pcap::MAGIC_MICRO
    };
    let mut header = [0u8; pcap::FILE_HEADER];
    header[0..4].copy_from_slice(&magic.to_le_bytes());
    header[4..6].copy_from_slice(&pcap::VERSION.0.to_le_bytes());
    header[6..8].copy_from_slice(&pcap::VERSION.1.to_le_bytes());
    // 8..16: thiszone and sigfigs, both 0.
    header[16..20].copy_from_slice(&snaplen.to_le_bytes());
    header[20..24].copy_from_slice(&link.0.to_le_bytes());
    out.write_all(&header)
}

/// One classic pcap record. `ts_ns` must be within `0..=PCAP_MAX_TS_NS`
/// (the caller clamps and counts); `nanos` is the file's resolution
/// (microsecond files drop the last three digits).
pub fn pcap_record(
    out: &mut impl Write,
    nanos: bool,
    ts_ns: i64,
    link: LinkType,
    data: &[u8],
    len: u32,
) -> io::Result<()> {
    let secs = ts_ns.div_euclid(NS) as u32;
    let fraction = ts_ns.rem_euclid(NS) as u32;
    let fraction = if nanos { fraction } else { fraction / 1000 };
    let mut header = [0u8; pcap::RECORD_HEADER];
    for (i, field) in [secs, fraction, data.len() as u32, len]
        .into_iter()
        .enumerate()
    {
        header[i * 4..i * 4 + 4].copy_from_slice(&field.to_le_bytes());
    }
    out.write_all(&header)?;
    packet_bytes(out, link, data)
}

/// The pcapng Section Header Block: byte-order magic, version 1.0, section
/// length unknown (-1), no options.
pub fn pcapng_section_header(out: &mut impl Write) -> io::Result<()> {
    let mut body = [0u8; 16];
    body[0..4].copy_from_slice(&pcapng::BYTE_ORDER_MAGIC.to_le_bytes());
    body[4..6].copy_from_slice(&pcapng::VERSION.0.to_le_bytes());
    body[6..8].copy_from_slice(&pcapng::VERSION.1.to_le_bytes());
    body[8..16].copy_from_slice(&(-1i64).to_le_bytes());
    block(
        out,
        u32::from_le_bytes(pcapng::SHB_TYPE),
        &[&body],
        body.len(),
    )
}

/// A pcapng Interface Description Block for `link` with nanosecond
/// timestamps (`if_tsresol` = 9), the unit [`pcapng_enhanced_packet`] writes.
pub fn pcapng_interface(out: &mut impl Write, link: LinkType, snaplen: u32) -> io::Result<()> {
    let mut body = [0u8; 16];
    body[0..2].copy_from_slice(&(link.0 as u16).to_le_bytes());
    // 2..4: reserved.
    body[4..8].copy_from_slice(&snaplen.to_le_bytes());
    body[8..10].copy_from_slice(&pcapng::OPT_IF_TSRESOL.to_le_bytes());
    body[10..12].copy_from_slice(&1u16.to_le_bytes());
    body[12] = 9; // 10^-9 s; then 3 bytes of padding
    let end = pcapng::OPT_END.to_le_bytes();
    block(out, pcapng::IDB, &[&body, &end, &[0, 0]], body.len() + 4)
}

/// A pcapng Enhanced Packet Block on `interface`, timestamp in ns.
pub fn pcapng_enhanced_packet(
    out: &mut impl Write,
    interface: u32,
    ts_ns: u64,
    link: LinkType,
    data: &[u8],
    len: u32,
) -> io::Result<()> {
    let mut fixed = [0u8; pcapng::EPB_FIXED];
    for (i, field) in [
        interface,
        (ts_ns >> 32) as u32,
        ts_ns as u32,
        data.len() as u32,
        len,
    ]
    .into_iter()
    .enumerate()
    {
        fixed[i * 4..i * 4 + 4].copy_from_slice(&field.to_le_bytes());
    }
    packet_block(out, pcapng::EPB, &fixed, link, data)
}

/// A pcapng Simple Packet Block (interface 0, no timestamp; its captured
/// length is implied, so the packet must be whole: `data.len() == len`).
pub fn pcapng_simple_packet(
    out: &mut impl Write,
    link: LinkType,
    data: &[u8],
    len: u32,
) -> io::Result<()> {
    packet_block(out, pcapng::SPB, &len.to_le_bytes(), link, data)
}

/// A packet block: `fixed` fields, the packet, padding to 4 bytes.
fn packet_block(
    out: &mut impl Write,
    kind: u32,
    fixed: &[u8],
    link: LinkType,
    data: &[u8],
) -> io::Result<()> {
    let body = fixed.len() + data.len();
    let total = block_total(body);
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&total.to_le_bytes())?;
    out.write_all(fixed)?;
    packet_bytes(out, link, data)?;
    out.write_all(&[0; 3][..padding(body)])?;
    out.write_all(&total.to_le_bytes())
}

/// A block of `kind` whose body is `parts` (`body_len` bytes in all), padded.
fn block(out: &mut impl Write, kind: u32, parts: &[&[u8]], body_len: usize) -> io::Result<()> {
    let total = block_total(body_len);
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&total.to_le_bytes())?;
    for part in parts {
        out.write_all(part)?;
    }
    out.write_all(&[0; 3][..padding(body_len)])?;
    out.write_all(&total.to_le_bytes())
}

fn padding(body_len: usize) -> usize {
    (4 - body_len % 4) % 4
}

fn block_total(body_len: usize) -> u32 {
    (pcapng::BLOCK_OVERHEAD + body_len + padding(body_len)) as u32
}

/// The packet's bytes, with a `LINKTYPE_NULL` family in little-endian order
/// (see the module docs).
fn packet_bytes(out: &mut impl Write, link: LinkType, data: &[u8]) -> io::Result<()> {
    if link == LinkType::NULL {
        if let Some((family, rest)) = data.split_first_chunk::<4>() {
            let family = u32::from_le_bytes(*family).min(u32::from_be_bytes(*family));
            out.write_all(&family.to_le_bytes())?;
            return out.write_all(rest);
        }
    }
    out.write_all(data)
}

#[cfg(test)]
mod tests {
    use super::super::{CaptureFormat, Step};
    use super::*;

    /// What our reader makes of a written file: (ts, len, link, bytes) per record.
    fn read_back(file: &[u8]) -> Vec<(Option<i64>, u32, LinkType, Vec<u8>)> {
        let (mut format, mut at) = CaptureFormat::detect(file).unwrap();
        let mut records = Vec::new();
        while at < file.len() {
            match format.next(&file[at..]).unwrap() {
                Step::Packet(r) => {
                    let data = file[at + r.data_at..at + r.data_at + r.caplen].to_vec();
                    records.push((r.ts_ns, r.len, r.link, data));
                    at += r.consumed;
                }
                Step::Skip { consumed } => at += consumed,
                Step::NeedMore { needed } => panic!("a whole file, yet {needed} more needed"),
            }
        }
        records
    }

    #[test]
    fn classic_pcap_reads_back_in_both_resolutions() {
        for (nanos, ts) in [
            (true, 1_700_000_000_123_456_789),
            (false, 1_700_000_000_123_456_000),
        ] {
            let mut file = Vec::new();
            pcap_file_header(&mut file, nanos, 65535, LinkType::RAW).unwrap();
            assert_eq!(file.len(), pcap::FILE_HEADER);
            pcap_record(
                &mut file,
                nanos,
                1_700_000_000_123_456_789,
                LinkType::RAW,
                b"\x45abc",
                90,
            )
            .unwrap();
            assert_eq!(
                read_back(&file),
                [(Some(ts), 90, LinkType::RAW, b"\x45abc".to_vec())]
            );
        }
    }

    #[test]
    fn pcapng_blocks_read_back() {
        let mut file = Vec::new();
        pcapng_section_header(&mut file).unwrap();
        pcapng_interface(&mut file, LinkType::EN10MB, 262_144).unwrap();
        pcapng_interface(&mut file, LinkType::RAW, 262_144).unwrap();
        pcapng_enhanced_packet(
            &mut file,
            1,
            1_700_000_000_000_000_001,
            LinkType::RAW,
            b"12345",
            5,
        )
        .unwrap();
        pcapng_simple_packet(&mut file, LinkType::EN10MB, b"abcdef", 6).unwrap();
        assert_eq!(file.len() % 4, 0);
        assert_eq!(
            read_back(&file),
            [
                (
                    Some(1_700_000_000_000_000_001),
                    5,
                    LinkType::RAW,
                    b"12345".to_vec()
                ),
                (None, 6, LinkType::EN10MB, b"abcdef".to_vec()),
            ]
        );
    }

    #[test]
    fn a_null_family_follows_the_file_byte_order() {
        // AF_INET6 as 30 (macOS), big-endian and little-endian: both written little-endian.
        for family in [[0, 0, 0, 30], [30, 0, 0, 0]] {
            let mut packet = family.to_vec();
            packet.extend_from_slice(b"\x60rest");
            let mut out = Vec::new();
            packet_bytes(&mut out, LinkType::NULL, &packet).unwrap();
            assert_eq!(out, b"\x1e\0\0\0\x60rest");
            // LOOP is network byte order by definition: untouched.
            out.clear();
            packet_bytes(&mut out, LinkType::LOOP, &packet).unwrap();
            assert_eq!(out, packet);
        }
    }
}
