//! [`LinkType`]: what a capture's link header is. Kept apart from the
//! objects that carry it (`object.rs`) and the parser that reads it, so that
//! both use it and neither imports the other back.

/// A link-layer header type, as numbered by tcpdump.org's LINKTYPE_ values
/// (plus the platform DLT values 12 and 14 that mean raw IP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u32);

impl LinkType {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    pub const NULL: LinkType = LinkType(0);
    /// Ethernet (with or without 802.1Q/802.1ad tags).
    pub const EN10MB: LinkType = LinkType(1);
    /// PPP (RFC 1661), with or without the HDLC address and control bytes.
    pub const PPP: LinkType = LinkType(9);
    /// FDDI: frame control, two addresses, then LLC/SNAP.
    pub const FDDI: LinkType = LinkType(10);
    /// Raw IP as numbered on some platforms (DLT_RAW = 12).
    pub const RAW12: LinkType = LinkType(12);
    /// Raw IP as numbered on other platforms (DLT_RAW = 14).
    pub const RAW14: LinkType = LinkType(14);
    /// PPP in HDLC-like framing (RFC 1662): `ff 03` then the protocol.
    pub const PPP_HDLC: LinkType = LinkType(50);
    /// PPPoE (RFC 2516) session header, then PPP, as NetBSD captures it.
    pub const PPP_ETHER: LinkType = LinkType(51);
    /// Raw IP (LINKTYPE_RAW = 101): the version nibble says IPv4 or IPv6.
    pub const RAW: LinkType = LinkType(101);
    /// IEEE 802.11 frames, no radio header.
    pub const IEEE802_11: LinkType = LinkType(105);
    /// OpenBSD loopback: a 4-byte address family in network byte order.
    pub const LOOP: LinkType = LinkType(108);
    /// Linux cooked capture, version 1 (16-byte header).
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// IEEE 802.11 frames after a radiotap header.
    pub const IEEE802_11_RADIOTAP: LinkType = LinkType(127);
    /// `LINKTYPE_USER2`, which Apple's first PKTAP captures used.
    pub const USER2: LinkType = LinkType(149);
    /// Raw IPv4 only.
    pub const IPV4: LinkType = LinkType(228);
    /// Raw IPv6 only.
    pub const IPV6: LinkType = LinkType(229);
    /// Linux netfilter log (`tcpdump -i nflog`): a header, then TLVs, one of them the packet.
    pub const NFLOG: LinkType = LinkType(239);
    /// Apple's PKTAP (macOS `tcpdump -i pktap`): a header naming the inner link type.
    pub const PKTAP: LinkType = LinkType(258);
    /// Linux cooked capture, version 2 (20-byte header).
    pub const LINUX_SLL2: LinkType = LinkType(276);

    /// The conventional upper-case name (`"EN10MB"`, `"LINUX_SLL"`, ...), or
    /// `None` for a link type dnsluice does not know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "NULL",
            1 => "EN10MB",
            9 => "PPP",
            10 => "FDDI",
            12 | 14 | 101 => "RAW",
            50 => "PPP_HDLC",
            51 => "PPP_ETHER",
            105 => "IEEE802_11",
            108 => "LOOP",
            113 => "LINUX_SLL",
            127 => "IEEE802_11_RADIOTAP",
            149 => "USER2",
            228 => "IPV4",
            229 => "IPV6",
            239 => "NFLOG",
            258 => "PKTAP",
            276 => "LINUX_SLL2",
            _ => return None,
        })
    }
}

impl std::fmt::Display for LinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "LINKTYPE_{}", self.0),
        }
    }
}
