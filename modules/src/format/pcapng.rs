//! pcapng: a sequence of blocks (type, total length, body, total length
//! again); each section starts with a Section Header Block that sets the
//! byte order and resets the interface table. The layout constants serve
//! the reader here and the writer in [`super::write`].

use super::{Endian, RecordInfo, Step, MAX_RECORD};
use dnsluice_core::LinkType;

/// The SHB block type; a palindrome, so it reads the same in both byte orders.
pub(super) const SHB_TYPE: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// The SHB's byte-order magic, as written in the section's byte order.
pub(super) const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
/// The section format version this reader and writer speak: 1.0.
pub(super) const VERSION: (u16, u16) = (1, 0);
/// Interface Description Block.
pub(super) const IDB: u32 = 1;
/// Obsolete Packet Block.
const OPB: u32 = 2;
/// Simple Packet Block.
pub(super) const SPB: u32 = 3;
/// Enhanced Packet Block.
pub(super) const EPB: u32 = 6;
/// `opt_endofopt`.
pub(super) const OPT_END: u16 = 0;
/// `if_tsresol`: the interface's timestamp unit.
pub(super) const OPT_IF_TSRESOL: u16 = 9;
/// `if_tsoffset`: seconds added to the interface's timestamps.
const OPT_IF_TSOFFSET: u16 = 14;
/// Bytes of a block's type and two lengths.
pub(super) const BLOCK_OVERHEAD: usize = 12;
/// Bytes of an EPB's fixed fields (interface, timestamp high and low,
/// captured and original length) before the packet.
pub(super) const EPB_FIXED: usize = 20;
/// Bytes of an SPB's fixed field (original length) before the packet.
pub(super) const SPB_FIXED: usize = 4;

/// One interface of the current section.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    snaplen: u32,
    /// `if_tsresol`: high bit clear → 10^-n s, set → 2^-n s.
    tsresol: u8,
    /// `if_tsoffset`, seconds added to every timestamp.
    tsoffset: i64,
    /// Nanoseconds in one unit and in the offset, when both are whole
    /// numbers (a decimal resolution down to 10^-9 s) and the offset fits:
    /// the fast path's times ([`Pcapng::record`]); `None` leaves a packet
    /// of this interface to [`Interface::to_ns`].
    whole_ns: Option<(i64, i64)>,
}

impl Interface {
    /// [`Interface::whole_ns`] for this resolution and offset.
    fn whole_ns(&self) -> Option<(i64, i64)> {
        let exp = (self.tsresol & 0x80 == 0).then_some(u32::from(self.tsresol))?;
        let unit = 10i64.checked_pow(9u32.checked_sub(exp)?)?;
        Some((unit, self.tsoffset.checked_mul(1_000_000_000)?))
    }

    /// Converts a timestamp in this interface's units to ns since the epoch.
    fn to_ns(self, units: u64) -> Option<i64> {
        let units = u128::from(units);
        let ns = if self.tsresol & 0x80 == 0 {
            let exp = u32::from(self.tsresol);
            if exp <= 9 {
                units * 10u128.pow(9 - exp)
            } else {
                units / 10u128.checked_pow(exp - 9)?
            }
        } else {
            let exp = u32::from(self.tsresol & 0x7f);
            (units * 1_000_000_000).checked_shr(exp).unwrap_or(0)
        };
        i64::try_from(ns)
            .ok()?
            .checked_add(self.tsoffset.checked_mul(1_000_000_000)?)
    }
}

/// pcapng state: the current section's byte order and interfaces.
#[derive(Debug, Default, Clone)]
pub struct Pcapng {
    pub(super) endian: Endian,
    interfaces: Vec<Interface>,
    seen_shb: bool,
}

impl Pcapng {
    /// The complete, sane Enhanced Packet Block at the start of `buf`, of an
    /// interface whose times are whole nanoseconds, or `None` (then
    /// [`Pcapng::next`] says what is there: it gives the same record for
    /// every block this gives one for). The per-packet fast path: the byte
    /// order is chosen once per block, not once per field.
    #[inline]
    pub fn record(&self, buf: &[u8]) -> Option<RecordInfo> {
        self.endian.with_words(|read| self.record_in(buf, read))
    }

    /// [`Pcapng::record`] with the byte order's reader (also the per-record
    /// step of [`super::CaptureFormat::walk`]).
    #[inline(always)]
    pub(super) fn record_in(&self, buf: &[u8], read: fn([u8; 4]) -> u32) -> Option<RecordInfo> {
        const HEAD: usize = 8 + EPB_FIXED;
        let head: &[u8; HEAD] = buf.get(..HEAD)?.try_into().ok()?;
        let field = |at: usize| read([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let block_len = field(4) as usize;
        let caplen = field(20) as usize;
        // Its fixed fields, the packet and the trailing length fit in the
        // block (options may follow the packet), and the block in `buf`.
        let sane = field(0) == EPB
            && block_len <= MAX_RECORD
            && block_len.is_multiple_of(4)
            && HEAD + caplen + 4 <= block_len
            && block_len <= buf.len();
        if !sane {
            return None;
        }
        let trailer: [u8; 4] = buf[block_len - 4..block_len].try_into().ok()?;
        let interface = self.interfaces.get(field(8) as usize)?;
        let (unit_ns, offset_ns) = interface.whole_ns?;
        if read(trailer) as usize != block_len {
            return None;
        }
        let units = (u64::from(field(12)) << 32) | u64::from(field(16));
        Some(RecordInfo {
            consumed: block_len,
            data_at: HEAD,
            caplen,
            len: field(24).max(caplen as u32),
            ts_ns: i64::try_from(units)
                .ok()
                .and_then(|units| units.checked_mul(unit_ns))
                .and_then(|ns| ns.checked_add(offset_ns)),
            link: interface.link,
        })
    }

    pub(super) fn next(&mut self, buf: &[u8]) -> Result<Step, String> {
        if buf.len() < BLOCK_OVERHEAD {
            return Ok(Step::NeedMore {
                needed: BLOCK_OVERHEAD,
            });
        }
        if buf[..4] == SHB_TYPE {
            let magic_le = Endian::Little.u32(buf, 8).unwrap_or_default();
            self.endian = match magic_le {
                BYTE_ORDER_MAGIC => Endian::Little,
                m if m.swap_bytes() == BYTE_ORDER_MAGIC => Endian::Big,
                m => {
                    return Err(format!(
                        "section header with a bad byte-order magic 0x{m:08x}"
                    ))
                }
            };
            self.interfaces.clear();
            self.seen_shb = true;
        } else if !self.seen_shb {
            return Err("pcapng file does not start with a section header block".to_string());
        }
        let block_type = self.endian.u32(buf, 0).unwrap_or_default();
        let block_len = self.endian.u32(buf, 4).unwrap_or_default() as usize;
        if block_len < BLOCK_OVERHEAD || !block_len.is_multiple_of(4) {
            return Err(format!(
                "block of type 0x{block_type:08x} has an invalid length {block_len}"
            ));
        }
        if block_len > MAX_RECORD {
            return Err(format!(
                "block of type 0x{block_type:08x} claims {block_len} bytes: corrupt file"
            ));
        }
        if buf.len() < block_len {
            return Ok(Step::NeedMore { needed: block_len });
        }
        let trailer = self.endian.u32(buf, block_len - 4).unwrap_or_default() as usize;
        if trailer != block_len {
            return Err(format!(
                "block of type 0x{block_type:08x}: leading length {block_len} and trailing length {trailer} differ"
            ));
        }
        let body = &buf[8..block_len - 4];
        match block_type {
            IDB => {
                self.interfaces.push(self.read_interface(body)?);
                Ok(Step::Skip {
                    consumed: block_len,
                })
            }
            EPB => self.enhanced_packet(body, block_len),
            OPB => self.obsolete_packet(body, block_len),
            SPB => self.simple_packet(body, block_len),
            _ => Ok(Step::Skip {
                consumed: block_len,
            }),
        }
    }

    fn read_interface(&self, body: &[u8]) -> Result<Interface, String> {
        let e = self.endian;
        let link = e
            .u16(body, 0)
            .ok_or("interface description block too short")?;
        let snaplen = e
            .u32(body, 4)
            .ok_or("interface description block too short")?;
        let mut interface = Interface {
            link: LinkType(u32::from(link)),
            snaplen,
            tsresol: 6,
            tsoffset: 0,
            whole_ns: None,
        };
        for (code, value) in Options::new(e, body.get(8..).unwrap_or_default()) {
            match code {
                OPT_IF_TSRESOL if !value.is_empty() => interface.tsresol = value[0],
                OPT_IF_TSOFFSET if value.len() == 8 => {
                    interface.tsoffset = e.u64(value, 0).unwrap_or_default() as i64
                }
                _ => {}
            }
        }
        interface.whole_ns = interface.whole_ns();
        Ok(interface)
    }

    fn interface(&self, id: u32) -> Result<Interface, String> {
        self.interfaces.get(id as usize).copied().ok_or_else(|| {
            format!(
                "packet block names interface {id}, but the section has {}",
                self.interfaces.len()
            )
        })
    }

    /// EPB body: interface (u32), ts high, ts low, caplen, len, data, options.
    fn enhanced_packet(&self, body: &[u8], block_len: usize) -> Result<Step, String> {
        let interface = self
            .endian
            .u32(body, 0)
            .ok_or("enhanced packet block too short")?;
        self.timed_packet(interface, body, block_len)
    }

    /// OPB body: interface (u16), drops (u16), then as an EPB.
    fn obsolete_packet(&self, body: &[u8], block_len: usize) -> Result<Step, String> {
        let interface = self.endian.u16(body, 0).ok_or("packet block too short")?;
        self.timed_packet(u32::from(interface), body, block_len)
    }

    /// The fields EPB and OPB share after the interface: ts high, ts low, caplen, len, data.
    fn timed_packet(&self, interface: u32, body: &[u8], block_len: usize) -> Result<Step, String> {
        let field = |at| self.endian.u32(body, at).ok_or("packet block too short");
        let interface = self.interface(interface)?;
        let units = (u64::from(field(4)?) << 32) | u64::from(field(8)?);
        self.packet(
            interface,
            Some(units),
            EPB_FIXED,
            field(12)? as usize,
            field(16)?,
            body,
            block_len,
        )
    }

    /// SPB body: original length, data (captured length implied by the block length and snaplen).
    fn simple_packet(&self, body: &[u8], block_len: usize) -> Result<Step, String> {
        let len = self
            .endian
            .u32(body, 0)
            .ok_or("simple packet block too short")?;
        let interface = self.interface(0)?;
        let mut caplen = (len as usize).min(body.len() - 4);
        if interface.snaplen > 0 {
            caplen = caplen.min(interface.snaplen as usize);
        }
        self.packet(interface, None, SPB_FIXED, caplen, len, body, block_len)
    }

    #[allow(clippy::too_many_arguments)]
    fn packet(
        &self,
        interface: Interface,
        units: Option<u64>,
        data_in_body: usize,
        caplen: usize,
        len: u32,
        body: &[u8],
        block_len: usize,
    ) -> Result<Step, String> {
        if data_in_body + caplen > body.len() {
            return Err(format!(
                "packet block claims {caplen} captured bytes but holds {}",
                body.len().saturating_sub(data_in_body)
            ));
        }
        Ok(Step::Packet(RecordInfo {
            consumed: block_len,
            data_at: 8 + data_in_body,
            caplen,
            len: len.max(caplen as u32),
            ts_ns: units.and_then(|u| interface.to_ns(u)),
            link: interface.link,
        }))
    }
}

/// Iterates over a pcapng options list: (code, value) until `opt_endofopt` or the end.
struct Options<'a> {
    endian: Endian,
    rest: &'a [u8],
}

impl<'a> Options<'a> {
    fn new(endian: Endian, rest: &'a [u8]) -> Self {
        Options { endian, rest }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let code = self.endian.u16(self.rest, 0)?;
        let len = usize::from(self.endian.u16(self.rest, 2)?);
        if code == OPT_END {
            return None;
        }
        let value = self.rest.get(4..4 + len)?;
        let padded = 4 + len.div_ceil(4) * 4;
        self.rest = self.rest.get(padded..).unwrap_or_default();
        Some((code, value))
    }
}
