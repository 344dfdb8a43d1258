//! `filter.dns`: finds DNS messages in UDP datagrams, TCP streams and
//! fragmented UDP datagrams on the configured ports, checks each one
//! ([`dnsluice_core::dns::scan`], no allocation), and passes on one
//! [`Object::Dns`] per message. Packets that are not DNS are dropped, or
//! passed on unchanged with `keep_non_dns = true`.
//!
//! Runs `filter.layer`'s parser itself when the layers were not parsed yet.

mod counters;
pub mod defrag;
mod flow_key;
mod resync;
pub(crate) mod table;
pub mod tcp;
mod tcp_stream;

use counters::DnsCounters;
use defrag::{DatagramKey, DefragLimits, Defragmenter};
use dnsluice_core::dns::scan_inspect;
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::wire::{be16, be32, parse_layers_into, Network, Transport};
use dnsluice_core::{
    DnsMessage, FlatMap, Flow, Object, Origin, Packet, PacketRef, Receiver, StageError, StageStats,
};
use dnsluice_options::Options;
use std::time::Duration;
use tcp::{FlowKey, TcpLimits, TcpReassembler};

const MODULE: &str = "filter.dns";

/// Options of `filter.dns`.
#[derive(Debug, Clone, Options)]
pub struct DnsOptions {
    /// The ports that carry DNS (either side).
    #[option(default = vec![53])]
    pub ports: Vec<u16>,
    /// Pass on packets that are not DNS (unchanged) instead of dropping them.
    #[option(default)]
    pub keep_non_dns: bool,
    /// Reassemble DNS over TCP streams (false: TCP is ignored).
    #[option(default = true)]
    pub tcp: bool,
    /// Reassemble fragmented UDP datagrams (IPv4 and IPv6).
    #[option(default = true)]
    pub defrag: bool,
    /// TCP flows tracked at once (the quietest is evicted).
    #[option(default = 65_536, range = 1..=16_777_216)]
    pub max_tcp_flows: usize,
    /// Bytes held per TCP flow before it is dropped.
    #[option(default = 256 * 1024, range = 2..=(1 << 30))]
    pub max_flow_bytes: usize,
    /// Capture time after which an idle TCP flow is dropped.
    #[option(default = Duration::from_secs(60))]
    pub tcp_idle_timeout: Duration,
    /// Fragmented datagrams reassembled at once.
    #[option(default = 4096, range = 1..=16_777_216)]
    pub max_fragmented_datagrams: usize,
    /// Capture time after which an incomplete datagram is reported lost.
    #[option(default = Duration::from_secs(30))]
    pub fragment_timeout: Duration,
}

/// Nanoseconds of `d`, saturated (capture timestamps are `i64` nanoseconds).
fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The DNS filter.
pub struct DnsFilter {
    ports: Vec<u16>,
    keep_non_dns: bool,
    tcp: Option<TcpReassembler>,
    defrag: Option<Defragmenter>,
    counters: DnsCounters,
    /// The input's latest capture time, when a split told it (its thread's
    /// own packets may end earlier).
    input_end_ns: Option<i64>,
    /// The capture time of the last packet seen here that had one: the time
    /// of a packet that has none (a pcapng Simple Packet Block), for the
    /// reassemblers' timeouts (0 before any).
    last_ns: i64,
}

impl DnsFilter {
    /// A filter with `options`.
    pub fn new(options: &DnsOptions) -> Self {
        DnsFilter {
            ports: options.ports.clone(),
            keep_non_dns: options.keep_non_dns,
            tcp: options.tcp.then(|| {
                TcpReassembler::new(TcpLimits {
                    max_flows: options.max_tcp_flows,
                    max_flow_bytes: options.max_flow_bytes,
                    idle_timeout_ns: nanos(options.tcp_idle_timeout),
                })
            }),
            defrag: options.defrag.then(|| {
                Defragmenter::new(DefragLimits {
                    max_datagrams: options.max_fragmented_datagrams,
                    timeout_ns: nanos(options.fragment_timeout),
                })
            }),
            counters: DnsCounters::default(),
            input_end_ns: None,
            last_ns: 0,
        }
    }

    #[inline]
    fn dns_port(&self, sport: u16, dport: u16) -> bool {
        on_port(&self.ports, sport, dport)
    }

    /// [`FlatMap::process`] for everything but the common UDP case: TCP,
    /// fragments, unparsed layers, other packets.
    #[inline(never)]
    fn process_other<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError> {
        let Object::Packet(original) = obj else {
            // Already a DNS message (or another kind): not ours to parse again.
            self.counters.passed_on += 1;
            return out.receive(obj);
        };
        // Layers are parsed once by filter.layer; parse here only if it was not upstream.
        let reparsed;
        let packet = if original.layers.network == Network::Unparsed {
            let mut copy = *original;
            let _ = parse_layers_into(copy.meta.link, copy.data, copy.meta.len, &mut copy.layers);
            reparsed = copy;
            &reparsed
        } else {
            original
        };
        let l = &packet.layers;
        // A packet without a time is taken as of the last time seen: as of
        // 1970, its flow's next packet found the flow idle for 55 years.
        let now = packet.meta.ts_ns.unwrap_or(self.last_ns);
        self.last_ns = now;
        match l.transport {
            Transport::Udp if self.dns_port(l.sport, l.dport) => {
                let Some((bytes, flow)) = udp_dns(&self.ports, packet) else {
                    self.counters.empty_udp += 1;
                    return self.not_dns(obj, out);
                };
                emit(
                    &mut self.counters,
                    out,
                    packet,
                    bytes,
                    l.truncated,
                    flow,
                    Origin::Datagram,
                )
            }
            Transport::Tcp if self.dns_port(l.sport, l.dport) && self.tcp.is_some() => {
                let at = l.l4_offset as usize;
                let (Some(seq), Some(flags)) =
                    (be32(packet.data, at + 4), packet.data.get(at + 13).copied())
                else {
                    return self.not_dns(obj, out);
                };
                let flow = Flow {
                    sport: l.sport,
                    dport: l.dport,
                    transport: Transport::Tcp,
                };
                let (Some(src), Some(dst)) = (packet.src(), packet.dst()) else {
                    return self.not_dns(obj, out);
                };
                let key = FlowKey {
                    src,
                    dst,
                    sport: l.sport,
                    dport: l.dport,
                };
                let DnsFilter { tcp, counters, .. } = self;
                let mut result = Ok(());
                let mut found = false;
                if let Some(tcp) = tcp {
                    let wire_len = l.wire_payload_len as usize;
                    tcp.segment(
                        key,
                        seq,
                        flags,
                        packet.payload(),
                        wire_len,
                        now,
                        &mut |bytes, segments, cut| {
                            found = true;
                            let origin = if segments > 1 {
                                Origin::TcpReassembled { segments }
                            } else {
                                Origin::TcpSegment
                            };
                            if result.is_ok() {
                                result = emit(counters, out, packet, bytes, cut, flow, origin);
                            }
                        },
                    );
                }
                if !found {
                    // Part of a message, or no DNS at all: not a message of its own.
                    return self.not_dns(obj, out);
                }
                result
            }
            Transport::None => match (l.fragment, self.defrag.as_mut()) {
                (Some(fragment), Some(defrag)) if !fragment.atomic && fragment.protocol == 17 => {
                    let (Some(src), Some(dst)) = (packet.src(), packet.dst()) else {
                        return self.not_dns(obj, out);
                    };
                    let key = DatagramKey {
                        src,
                        dst,
                        id: fragment.id,
                        protocol: fragment.protocol,
                    };
                    let whole = defrag.fragment(
                        key,
                        fragment.offset,
                        fragment.more,
                        packet.payload(),
                        now,
                        packet.meta.frame,
                    );
                    let message = whole.and_then(|(datagram, fragments)| {
                        let (sport, dport) = (be16(datagram, 0)?, be16(datagram, 2)?);
                        let length = usize::from(be16(datagram, 4)?);
                        if length <= 8 || !on_port(&self.ports, sport, dport) {
                            return None;
                        }
                        // The UDP length says more than the fragments held: a fragment was cut.
                        let cut = length > datagram.len();
                        let bytes = &datagram[8..length.min(datagram.len())];
                        Some((
                            bytes,
                            cut,
                            Flow {
                                sport,
                                dport,
                                transport: Transport::Udp,
                            },
                            fragments,
                        ))
                    });
                    match message {
                        Some((bytes, cut, flow, fragments)) => {
                            let origin = Origin::IpReassembled { fragments };
                            emit(&mut self.counters, out, packet, bytes, cut, flow, origin)
                        }
                        // A fragment that completes nothing yet, or a datagram that is not DNS.
                        None => self.not_dns(obj, out),
                    }
                }
                _ => self.not_dns(obj, out),
            },
            _ => self.not_dns(obj, out),
        }
    }
}

/// Is either port one of `ports`?
#[inline]
fn on_port(ports: &[u16], sport: u16, dport: u16) -> bool {
    match ports {
        [one] => *one == sport || *one == dport,
        many => many.iter().any(|p| *p == sport || *p == dport),
    }
}

/// Checks one message and counts it. `cut`: the capture ended inside it.
/// Always inlined: the message is then built where the caller puts it (on
/// the pull side, straight into the stage's return value) instead of being
/// copied there.
#[inline(always)]
fn message<'a>(
    counters: &mut DnsCounters,
    packet: PacketRef<'a>,
    bytes: &'a [u8],
    cut: bool,
    flow: Flow,
    origin: Origin,
) -> Object<'a> {
    counters.count_flow(&flow, &origin);
    let checked = scan_inspect(bytes, cut, counters);
    Object::Dns(DnsMessage {
        packet,
        bytes,
        checked,
        flow,
        origin,
    })
}

/// Checks one message, counts it and hands it on.
#[inline]
fn emit<R: Receiver + ?Sized>(
    counters: &mut DnsCounters,
    out: &mut R,
    packet: &Packet<'_>,
    bytes: &[u8],
    cut: bool,
    flow: Flow,
    origin: Origin,
) -> Result<(), StageError> {
    let packet = PacketRef::Borrowed(packet);
    out.receive(&mut message(counters, packet, bytes, cut, flow, origin))
}

/// The common case both sides take fast: `obj` is a packet whose layers
/// are parsed and that holds a UDP datagram with a DNS payload. The packet,
/// the payload and the flow; `None` for anything else.
#[inline]
fn common_udp<'o, 'a>(
    ports: &[u16],
    obj: &'o Object<'a>,
) -> Option<(&'o Packet<'a>, &'a [u8], Flow)> {
    let Object::Packet(packet) = obj else {
        return None;
    };
    // Unparsed layers: `process` parses them (into a copy).
    if packet.layers.network == Network::Unparsed {
        return None;
    }
    let (bytes, flow) = udp_dns(ports, packet)?;
    Some((packet, bytes, flow))
}

/// The DNS payload and flow of a UDP datagram on a DNS port, or `None`
/// (another transport or port, or an empty payload).
#[inline]
fn udp_dns<'a>(ports: &[u16], packet: &Packet<'a>) -> Option<(&'a [u8], Flow)> {
    let l = &packet.layers;
    if l.transport != Transport::Udp || !on_port(ports, l.sport, l.dport) {
        return None;
    }
    let bytes = packet.payload();
    let flow = Flow {
        sport: l.sport,
        dport: l.dport,
        transport: Transport::Udp,
    };
    (!bytes.is_empty()).then_some((bytes, flow))
}

impl FlatMap for DnsFilter {
    /// The common case, a UDP datagram on a DNS port whose layers are
    /// parsed, is handled here; everything else in `DnsFilter::process_other`,
    /// out of line, so this path stays small.
    #[inline]
    fn process<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError> {
        if let Some((packet, bytes, flow)) = common_udp(&self.ports, obj) {
            let cut = packet.layers.truncated;
            let origin = Origin::Datagram;
            return emit(&mut self.counters, out, packet, bytes, cut, flow, origin);
        }
        self.process_other(obj, out)
    }

    /// A UDP datagram with a DNS payload gives its message (which holds a
    /// copy of the packet's metadata; its bytes stay where the upstream has
    /// them); everything else goes through `process`.
    fn process_one<'a>(&mut self, obj: &Object<'a>) -> Option<Object<'a>> {
        let (packet, bytes, flow) = common_udp(&self.ports, obj)?;
        let cut = packet.layers.truncated;
        let held = PacketRef::Held(*packet);
        let origin = Origin::Datagram;
        Some(message(&mut self.counters, held, bytes, cut, flow, origin))
    }

    fn flush<R: Receiver + ?Sized>(&mut self, _out: &mut R) -> Result<(), StageError> {
        if let Some(tcp) = &mut self.tcp {
            tcp.finish(self.input_end_ns);
        }
        if let Some(defrag) = &mut self.defrag {
            defrag.finish(self.input_end_ns);
        }
        Ok(())
    }

    fn clock_at_end(&mut self, ts_ns: i64) {
        self.input_end_ns = Some(self.input_end_ns.map_or(ts_ns, |t| t.max(ts_ns)));
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new(MODULE);
        self.counters.report(&mut stats);
        if let Some(tcp) = &self.tcp {
            counters::report_tcp(&tcp.counters, &mut stats);
        }
        if let Some(defrag) = &self.defrag {
            counters::report_defrag(&defrag.counters, &mut stats);
            for (frame, line) in &defrag.lost {
                stats.add_example(*frame, line.clone());
            }
        }
        stats
    }
}

impl DnsFilter {
    fn not_dns<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError> {
        self.counters.non_dns += 1;
        if self.keep_non_dns {
            self.counters.passed_on += 1;
            out.receive(obj)
        } else {
            Ok(())
        }
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::flat_map(
        MODULE,
        "find DNS messages in UDP, TCP streams (reassembled) and IP fragments (reassembled); check each one",
        |o: DnsOptions| {
            if o.ports.is_empty() {
                return Err(StageError::option(MODULE, Some("ports"), "give at least one port"));
            }
            Ok(DnsFilter::new(&o))
        },
    )
    .parallel(Parallel::ByFlow)
}
