//! The fixed-size fields of an object, worked out once per object.
//!
//! A [`Record`] is filled the first time a field of the current object is
//! read (or by the LuaJIT iterator as it hands the object over) and read by
//! every later access: the C `__index` of views reads it, and under LuaJIT
//! Lua code reads it directly through the FFI (`view/jit.lua` declares the
//! same struct). Strings (names, addresses, mnemonics) are not in it: they
//! are made from the object when asked for.

use dnsluice_core::dns::{full_rcode, Header};
use dnsluice_core::wire::Transport;
use dnsluice_core::Object;

/// `has` bit: the object is a packet (or carries one).
pub const HAS_PACKET: u32 = 1 << 0;
/// `has` bit: the packet has a timestamp (`ts_ns`).
pub const HAS_TS: u32 = 1 << 1;
/// `has` bit: UDP or TCP ports (`sport`, `dport`).
pub const HAS_PORTS: u32 = 1 << 2;
/// `has` bit: an IP version (`ip`).
pub const HAS_IP: u32 = 1 << 3;
/// `has` bit: the layers were cut short by the capture (`truncated`).
pub const TRUNCATED: u32 = 1 << 4;
/// `has` bit: the object is a DNS message.
pub const IS_DNS: u32 = 1 << 5;
/// `has` bit: the id and flags are there (a header, or its first 4 bytes).
pub const HAS_FLAGS: u32 = 1 << 6;
/// `has` bit: the whole 12-byte header is there (the counts).
pub const HAS_HEADER: u32 = 1 << 7;
/// `has` bit: the first question parsed.
pub const HAS_QUESTION: u32 = 1 << 8;
/// `has` bit: an OPT record (EDNS).
pub const HAS_EDNS: u32 = 1 << 9;
/// `has` bit: the packet has VLAN tags.
pub const HAS_VLAN: u32 = 1 << 10;

/// The fixed fields of one object. `#[repr(C)]`: LuaJIT reads it as the
/// C struct `dnsluice_record` (keep `view/jit.lua` in step).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Record {
    /// The generation of the object this was filled for (0: none yet).
    pub gen: u32,
    /// Which fields are there (`HAS_*`, `IS_DNS`, `TRUNCATED`).
    pub has: u32,
    /// Frame number.
    pub frame: i64,
    /// Timestamp, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    /// The timestamp's whole seconds (`ts_ns` divided by 10^9, rounded down).
    pub ts_sec: i64,
    /// Length on the wire.
    pub len: u32,
    /// Length captured.
    pub caplen: u32,
    /// Transport payload length.
    pub payload_len: u32,
    /// DNS message length.
    pub dns_len: u32,
    /// The timestamp's nanoseconds within its second (0 to 999,999,999).
    pub ts_nsec: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// `0` none, `1` UDP, `2` TCP, `256 + n` another IP protocol `n`.
    pub transport: u16,
    /// IP version (4 or 6).
    pub ip: u16,
    /// DNS id.
    pub id: u16,
    /// The header's flags word (QR, opcode, AA, TC, RD, RA, Z, AD, CD, RCODE).
    pub flags: u16,
    /// The full RCODE (extended by EDNS).
    pub rcode: u16,
    /// Question count.
    pub qdcount: u16,
    /// Answer count.
    pub ancount: u16,
    /// Authority count.
    pub nscount: u16,
    /// Additional count.
    pub arcount: u16,
    /// The first question's QTYPE.
    pub qtype: u16,
    /// The first question's QCLASS.
    pub qclass: u16,
    /// EDNS: the UDP payload size.
    pub udp_size: u16,
    /// EDNS: version.
    pub edns_version: u8,
    /// EDNS: the upper 8 bits of the extended RCODE.
    pub ext_rcode: u8,
    /// EDNS: the DO bit (0 or 1).
    pub edns_do: u8,
    /// Padding (keeps the layout the same in C).
    pub pad: u8,
    /// Offset of the first question's name in the message.
    pub qname_at: u32,
}

/// The code [`Record::transport`] gives `transport`.
pub fn transport_code(transport: Transport) -> u16 {
    match transport {
        Transport::None => 0,
        Transport::Udp => 1,
        Transport::Tcp => 2,
        Transport::Other(n) => 256 + u16::from(n),
    }
}

impl Record {
    /// The fields of `obj`, for generation `gen`.
    pub fn of(obj: &Object<'_>, gen: u32) -> Record {
        let mut r = Record {
            gen,
            ..Record::default()
        };
        let Some(p) = obj.packet() else {
            return r;
        };
        r.has = HAS_PACKET;
        r.frame = p.meta.frame as i64;
        if let Some(ts) = p.meta.ts_ns {
            r.has |= HAS_TS;
            r.ts_ns = ts;
            r.ts_sec = ts.div_euclid(1_000_000_000);
            r.ts_nsec = ts.rem_euclid(1_000_000_000) as u32;
        }
        r.len = p.meta.len;
        r.caplen = p.data.len() as u32;
        r.payload_len = p.layers.payload_len;
        if p.layers.truncated {
            r.has |= TRUNCATED;
        }
        if p.layers.vlan_count > 0 {
            r.has |= HAS_VLAN;
        }
        if let Some(ip) = p.layers.ip_version() {
            r.has |= HAS_IP;
            r.ip = u16::from(ip);
        }
        let (transport, ports) = match obj {
            Object::Dns(m) => (m.flow.transport, Some((m.flow.sport, m.flow.dport))),
            _ => (
                p.layers.transport,
                matches!(p.layers.transport, Transport::Udp | Transport::Tcp)
                    .then_some((p.layers.sport, p.layers.dport)),
            ),
        };
        r.transport = transport_code(transport);
        if let Some((sport, dport)) = ports {
            r.has |= HAS_PORTS;
            r.sport = sport;
            r.dport = dport;
        }
        let Object::Dns(m) = obj else {
            return r;
        };
        r.has |= IS_DNS;
        r.dns_len = m.bytes.len() as u32;
        // Each part is read back from the message on its own: expanding the
        // whole summary (`m.info()`) costs more than the record itself.
        let header = Header::parse(m.bytes);
        let edns = m.checked.edns(m.bytes);
        let flags_of = header.or_else(|| Header::parse_partial(m.bytes));
        if let Some(h) = flags_of {
            r.has |= HAS_FLAGS;
            r.id = h.id;
            r.flags = h.flags;
            r.rcode = full_rcode(flags_of, edns.as_ref());
        }
        if let Some(h) = header {
            r.has |= HAS_HEADER;
            r.qdcount = h.qdcount;
            r.ancount = h.ancount;
            r.nscount = h.nscount;
            r.arcount = h.arcount;
        }
        if let Some(q) = m.checked.question(m.bytes) {
            r.has |= HAS_QUESTION;
            r.qtype = q.qtype;
            r.qclass = q.qclass;
            r.qname_at = q.name;
        }
        if let Some(e) = edns {
            r.has |= HAS_EDNS;
            r.udp_size = e.udp_size;
            r.edns_version = e.version;
            r.ext_rcode = e.ext_rcode;
            r.edns_do = u8::from(e.dnssec_ok());
        }
        r
    }

    /// Whether all the `bits` are set in [`Record::has`].
    pub fn has(&self, bits: u32) -> bool {
        self.has & bits == bits
    }
}

#[cfg(test)]
mod tests {
    /// `view/jit.lua` declares the same struct; it checks the size too.
    #[test]
    fn the_record_is_88_bytes() {
        assert_eq!(std::mem::size_of::<super::Record>(), 88);
    }
}
