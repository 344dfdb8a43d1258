//! What a packet was wrapped in: one [`Tunnel`] per encapsulation the layer
//! parser walked through, outermost first. [`Layers`] keeps only how many
//! there were (the per-packet struct stays small); [`tunnels`] walks the
//! packet again to list them, which only packets with tunnels pay for.

use super::{ip_addr, walk, Layers, LinkType, Network, Side};
use std::net::IpAddr;

/// How many encapsulations (tunnels and MPLS labels) are walked through at most.
pub const MAX_TUNNELS: usize = 8;

/// A kind of encapsulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// GRE (over IP, or over UDP port 4754); id: the key, or PPTP's call id.
    Gre,
    /// ERSPAN inside GRE; id: the session id (types II and III).
    Erspan,
    /// An IP packet straight inside another (IP protocol 4 or 41: IPIP, 6in4, 4in6, 6in6).
    IpInIp,
    /// VXLAN (UDP 4789); id: the VNI.
    Vxlan,
    /// Geneve (UDP 6081); id: the VNI.
    Geneve,
    /// GTP-U (UDP 2152); id: the TEID.
    GtpU,
    /// One MPLS label stack entry; id: the label.
    Mpls,
}

impl TunnelKind {
    /// The lower-case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            TunnelKind::Gre => "gre",
            TunnelKind::Erspan => "erspan",
            TunnelKind::IpInIp => "ip-in-ip",
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::GtpU => "gtp-u",
            TunnelKind::Mpls => "mpls",
        }
    }

    /// What the kind's id is called in JSON (`key`, `vni`, `teid`, ...).
    pub fn id_name(self) -> &'static str {
        match self {
            TunnelKind::Gre => "key",
            TunnelKind::Erspan => "session",
            TunnelKind::IpInIp => "id",
            TunnelKind::Vxlan | TunnelKind::Geneve => "vni",
            TunnelKind::GtpU => "teid",
            TunnelKind::Mpls => "label",
        }
    }
}

/// One encapsulation: its kind, its id, and the IP header that carried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// The kind.
    pub kind: TunnelKind,
    /// The key, VNI, TEID, session id or label, when the kind has one.
    pub id: Option<u32>,
    /// The carrier's IP header: IPv4 or IPv6, or another kind when there is
    /// none (an MPLS label on Ethernet).
    pub outer: Network,
    /// Offset of the carrier's IP header in the packet.
    pub outer_l3: u32,
}

impl Tunnel {
    /// The tunnel found with `layers` describing its carrier.
    pub(super) fn new(kind: TunnelKind, id: Option<u32>, layers: &Layers) -> Self {
        let (outer, outer_l3) = match layers.network {
            Network::Ipv4 | Network::Ipv6 => (layers.network, layers.l3_offset),
            other => (other, 0),
        };
        Tunnel {
            kind,
            id,
            outer,
            outer_l3,
        }
    }

    /// The carrier's source address, read from the packet's bytes `data`.
    pub fn src(&self, data: &[u8]) -> Option<IpAddr> {
        ip_addr(data, self.outer, self.outer_l3 as usize, Side::Source)
    }

    /// The carrier's destination address, read from `data`.
    pub fn dst(&self, data: &[u8]) -> Option<IpAddr> {
        ip_addr(data, self.outer, self.outer_l3 as usize, Side::Destination)
    }
}

/// The encapsulations of one packet, outermost first.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tunnels {
    hops: [Option<Tunnel>; MAX_TUNNELS],
    len: usize,
}

impl Tunnels {
    /// The tunnels, outermost first.
    pub fn iter(&self) -> impl Iterator<Item = &Tunnel> {
        self.hops[..self.len].iter().flatten()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.len
    }

    /// None at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Walks the packet `data` of link type `link` (`wire_len` bytes on the
/// wire) again and lists the encapsulations around the packet that
/// [`super::parse_layers`] describes.
pub fn tunnels(link: LinkType, data: &[u8], wire_len: u32) -> Tunnels {
    let mut list = Tunnels::default();
    let mut layers = Layers::default();
    walk(link, data, wire_len, &mut layers, &mut |tunnel| {
        if list.len < MAX_TUNNELS {
            list.hops[list.len] = Some(tunnel);
            list.len += 1;
        }
    });
    list
}
