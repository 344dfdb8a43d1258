//! Objects that flow through a chain.
//!
//! A [`Packet`] is a zero-copy view: its bytes borrow from the input's mmap or
//! read buffer. Objects are lent mutably down a chain, so a filter annotates
//! one in place ([`Layers`]) and passes it on without copying. A
//! [`DnsMessage`] refers to the packet that carried it. A [`Response`] is
//! what a DNS client stage (`output.dnscli`) got back for one query. A
//! [`Text`] is a line of text: a name to look up, or a lookup's JSON record.

use crate::dns::{CompactInfo, DnsInfo};
use crate::wire::{Layers, LinkType, Transport, Tunnels};

/// One object handed from stage to stage.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Object<'a> {
    /// A captured packet (from a pcap file or a live interface).
    Packet(Packet<'a>),
    /// A DNS message found in a packet (or reassembled from several).
    Dns(DnsMessage<'a>),
    /// A line of text: a name to look up, or a finished result as JSON.
    Text(Text<'a>),
    /// A client's query and what came back for it (answer or error), with the latency.
    Response(Response<'a>),
}

/// What a [`Text`] object holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    /// A line read from a text input (`input.lines`), without its line ending.
    Line,
    /// One finished record (a lookup result), a complete JSON object that
    /// `output.json` writes as it is.
    Record,
}

/// A line of text and where it came from.
#[derive(Clone, Copy, Debug)]
pub struct Text<'a> {
    /// Line or record.
    pub kind: TextKind,
    /// The line number in its input (1-based), or the record's sequence number.
    pub number: u64,
    /// The text, without a line ending.
    pub text: &'a str,
}

impl<'a> Object<'a> {
    /// The packet: the object itself, or the one that carried (completed) a DNS message.
    pub fn packet(&self) -> Option<&Packet<'a>> {
        match self {
            Object::Packet(p) => Some(p),
            Object::Dns(m) => Some(m.packet.get()),
            Object::Text(_) => None,
            Object::Response(_) => None,
        }
    }

    /// The packet, mutably (for filters that annotate it).
    pub fn packet_mut(&mut self) -> Option<&mut Packet<'a>> {
        match self {
            Object::Packet(p) => Some(p),
            Object::Dns(m) => Some(m.packet.get_mut()),
            Object::Text(_) => None,
            Object::Response(_) => None,
        }
    }

    /// The DNS message, when this object is one.
    pub fn dns(&self) -> Option<&DnsMessage<'a>> {
        match self {
            Object::Dns(m) => Some(m),
            _ => None,
        }
    }

    /// The text, when this object is a line or a record.
    pub fn text(&self) -> Option<&Text<'a>> {
        match self {
            Object::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// Ports and transport of a message's flow (the addresses are the carrying
/// packet's: every fragment of a datagram has the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flow {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// UDP or TCP.
    pub transport: Transport,
}

/// Where a DNS message's bytes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// One UDP datagram.
    Datagram,
    /// One TCP segment (which may hold several messages).
    TcpSegment,
    /// A TCP stream: the message spans this many segments.
    TcpReassembled {
        /// Segments that carried parts of it.
        segments: u32,
    },
    /// A UDP datagram reassembled from this many IP fragments.
    IpReassembled {
        /// Fragments.
        fragments: u32,
    },
    /// A dnstap frame (the packet carrying it is made up from the frame's
    /// addresses, ports and time).
    Dnstap {
        /// The dnstap message type (`Message.Type`: AUTH_QUERY = 1, ...,
        /// CLIENT_QUERY = 5, CLIENT_RESPONSE = 6, ...).
        message_type: u8,
        /// The dnstap socket protocol (`SocketProtocol`: UDP = 1, TCP = 2,
        /// DOT = 3, DOH = 4, ...; 0 when the frame had none).
        protocol: u8,
    },
}

/// A packet that an object refers to: borrowed from the stage that found it
/// (no copy on the per-packet path), or held (an owned copy's view, an
/// annotated copy).
#[derive(Clone, Copy, Debug)]
pub enum PacketRef<'a> {
    /// The packet as the upstream stage has it.
    Borrowed(&'a Packet<'a>),
    /// A packet held by value.
    Held(Packet<'a>),
}

impl<'a> PacketRef<'a> {
    /// The packet.
    #[inline]
    pub fn get(&self) -> &Packet<'a> {
        match self {
            PacketRef::Borrowed(p) => p,
            PacketRef::Held(p) => p,
        }
    }

    /// The packet, mutably (a borrowed one is copied first).
    pub fn get_mut(&mut self) -> &mut Packet<'a> {
        if let PacketRef::Borrowed(p) = *self {
            *self = PacketRef::Held(*p);
        }
        match self {
            PacketRef::Held(p) => p,
            PacketRef::Borrowed(_) => unreachable!("made held above"),
        }
    }
}

/// A DNS message: its bytes (without a TCP length prefix), what a full
/// check of them found, and the packet that carried or completed it.
#[derive(Clone, Copy, Debug)]
pub struct DnsMessage<'a> {
    /// The packet that carried the message, or the last of those that did.
    pub packet: PacketRef<'a>,
    /// The message.
    pub bytes: &'a [u8],
    /// What the check of the message found (header, first question, EDNS,
    /// counts, the first problem), in the compact form; [`DnsMessage::info`]
    /// expands it.
    pub checked: CompactInfo,
    /// Ports and transport (addresses: [`Packet::src`], [`Packet::dst`] of `packet`).
    pub flow: Flow,
    /// Datagram, TCP segment, or reassembled.
    pub origin: Origin,
}

impl DnsMessage<'_> {
    /// Header, first question, EDNS, counts and the first problem.
    #[inline]
    pub fn info(&self) -> DnsInfo {
        self.checked.expand(self.bytes)
    }
}

/// What a DNS client got back for one query: the query as sent (with its
/// original id), the answer or the error, and how long it took.
///
/// It is an object kind of core, like [`Packet`] and [`DnsMessage`], and not
/// a notion of one module: the modules that make exchanges (`output.dnscli`,
/// `filter.dnscli`, and any client or comparison module after them) and the
/// ones that consume them (`output.json`, `output.pcap`, `filter.select`,
/// Lua) meet only here, so none of them needs to know the others. It holds
/// only what any DNS exchange has: bytes, an error, times, the peers.
#[derive(Clone, Copy, Debug)]
pub struct Response<'a> {
    /// The query, as it was in the capture (original id).
    pub query: &'a [u8],
    /// The answer (the query's id restored); `None` when there was none.
    pub answer: Option<&'a [u8]>,
    /// Why there is no answer (`timeout`, `closed`, `tls_handshake`, ...), as a
    /// short kind; `None` when answered.
    pub error_kind: Option<&'static str>,
    /// The error in words; empty when answered.
    pub error: &'a str,
    /// From just before the query was written to the answer (or the error).
    pub latency_ns: u64,
    /// When the query was handed to the client, in nanoseconds since the Unix epoch.
    pub sent_ns: i64,
    /// The simulated client (0-based) that sent it.
    pub client: u32,
    /// The server, as the client names it (`ip:port`, or the DoH URL).
    pub server: &'a str,
    /// `udp`, `tcp`, `tls` or `https` (`tcp` also for a UDP query retried over
    /// TCP after a truncated answer).
    pub transport: &'static str,
}

/// What the capture recorded about one packet, apart from its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureMeta {
    /// 1-based index among the file's packet records (pcapng: EPB/SPB/OPB).
    pub frame: u64,
    /// Capture time in nanoseconds since the Unix epoch; `None` when the record
    /// has none (a pcapng Simple Packet Block).
    pub ts_ns: Option<i64>,
    /// Original length on the wire (may exceed the captured bytes).
    pub len: u32,
    /// The link type of the interface the packet was captured on.
    pub link: LinkType,
}

/// A captured packet: borrowed bytes, capture metadata and parsed layer offsets.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// The captured bytes (`caplen` of them), starting at the link header.
    pub data: &'a [u8],
    /// Capture metadata.
    pub meta: CaptureMeta,
    /// Layer offsets, filled in by `filter.layer` (empty before).
    pub layers: Layers,
}

impl<'a> Packet<'a> {
    /// A packet whose layers have not been parsed yet.
    pub fn new(data: &'a [u8], meta: CaptureMeta) -> Self {
        Packet {
            data,
            meta,
            layers: Layers::default(),
        }
    }

    /// Number of captured bytes.
    pub fn caplen(&self) -> usize {
        self.data.len()
    }

    /// The transport payload (UDP or TCP data) as far as it was captured;
    /// empty when layers are not parsed or there is no transport.
    pub fn payload(&self) -> &'a [u8] {
        let start = self.layers.payload_offset as usize;
        let end = start + self.layers.payload_len as usize;
        self.data.get(start..end).unwrap_or(&[])
    }

    /// Source IP address of the IP header, when parsed: the innermost
    /// packet's, when it came through tunnels ([`Packet::tunnels`] has the outer ones).
    pub fn src(&self) -> Option<std::net::IpAddr> {
        self.layers.src_addr(self.data)
    }

    /// Destination IP address of the IP header, when parsed.
    pub fn dst(&self) -> Option<std::net::IpAddr> {
        self.layers.dst_addr(self.data)
    }

    /// The tunnels the packet was found in, outermost first (empty for most
    /// packets; the layers are walked again only when there are some).
    pub fn tunnels(&self) -> Tunnels {
        if self.layers.tunnels == 0 {
            return Tunnels::default();
        }
        crate::wire::tunnels(self.meta.link, self.data, self.meta.len)
    }
}
