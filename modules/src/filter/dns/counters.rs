//! `filter.dns`'s counters and how they appear in the summary.

use super::defrag::DefragCounters;
use super::tcp::TcpCounters;
use dnsluice_core::dns::{mnemonic, DnsError, DnsInfo, Inspect};
use dnsluice_core::wire::Transport;
use dnsluice_core::{Flow, Origin, StageStats};

/// How many qtypes and rcodes the summary lists.
const TOP: usize = 10;

/// The breakdown of messages by qtype (its `qtype X` counters list the [`TOP`]).
pub const QTYPE: &str = "qtype";
/// The breakdown of responses by rcode (its `rcode X` counters list the [`TOP`]).
pub const RCODE: &str = "rcode";

/// Counts per message, cheap enough for the hot path: a message costs one
/// increment for where it came from, one for its QR bit and opcode, one for
/// its qtype (and one for its rcode, if a response); the totals the summary
/// shows are added up at the end.
#[derive(Debug)]
pub struct DnsCounters {
    /// Objects passed on that are not messages found here: packets kept with
    /// `keep_non_dns`, objects that were messages already.
    pub passed_on: u64,
    /// Messages by origin: [`ORIGIN_UDP`], [`ORIGIN_UDP_DEFRAG`],
    /// [`ORIGIN_TCP`], [`ORIGIN_TCP_REASSEMBLED`].
    by_origin: [u64; 4],
    /// Messages with a header (whole or partial), by `(qr << 4) | opcode`.
    by_qr_opcode: [u64; 32],
    pub with_edns: u64,
    pub non_dns: u64,
    pub empty_udp: u64,
    pub malformed: [u64; DnsError::ALL.len()],
    /// Messages by qtype: every qtype has its slot (512 KiB, of which only
    /// the pages of the qtypes seen are ever touched).
    qtypes: Box<[u64; 1 << 16]>,
    rcodes: [u64; 4096],
    /// The qtypes and rcodes counted at least once, in the order first
    /// seen: a snapshot ([`DnsCounters::report`], up to ten a second
    /// while a metrics endpoint is scraped) reads only their slots, not
    /// the 65,536 + 4,096 of them (half a megabyte through the cache).
    seen_qtypes: Vec<u16>,
    seen_rcodes: Vec<u16>,
}

/// A UDP datagram.
const ORIGIN_UDP: usize = 0;
/// A UDP datagram reassembled from IP fragments.
const ORIGIN_UDP_DEFRAG: usize = 1;
/// One TCP segment.
const ORIGIN_TCP: usize = 2;
/// A message over several TCP segments.
const ORIGIN_TCP_REASSEMBLED: usize = 3;

impl Default for DnsCounters {
    fn default() -> Self {
        DnsCounters {
            passed_on: 0,
            by_origin: [0; 4],
            by_qr_opcode: [0; 32],
            with_edns: 0,
            non_dns: 0,
            empty_udp: 0,
            malformed: [0; DnsError::ALL.len()],
            qtypes: vec![0; 1 << 16]
                .into_boxed_slice()
                .try_into()
                .expect("a slice of 1 << 16 counts"),
            rcodes: [0; 4096],
            seen_qtypes: Vec::new(),
            seen_rcodes: Vec::new(),
        }
    }
}

impl DnsCounters {
    /// Counts one message's transport and origin (its summary is counted
    /// by [`Inspect::inspect`], as `scan_inspect` makes it).
    #[inline(always)]
    pub fn count_flow(&mut self, flow: &Flow, origin: &Origin) {
        let index = match (flow.transport, origin) {
            (Transport::Tcp, Origin::TcpReassembled { .. }) => ORIGIN_TCP_REASSEMBLED,
            (Transport::Tcp, _) => ORIGIN_TCP,
            (_, Origin::IpReassembled { .. }) => ORIGIN_UDP_DEFRAG,
            _ => ORIGIN_UDP,
        };
        self.by_origin[index] += 1;
    }

    /// Adds the counters to `stats`.
    pub fn report(&self, stats: &mut StageStats) {
        let [udp, udp_defrag, tcp, tcp_reassembled] = self.by_origin;
        let messages = udp + udp_defrag + tcp + tcp_reassembled;
        let (queries, responses) = self.by_qr_opcode.split_at(16);
        stats.output = messages + self.passed_on;
        for (name, n) in [
            ("messages", messages),
            ("queries", queries.iter().sum()),
            ("responses", responses.iter().sum()),
            ("udp", udp + udp_defrag),
            ("tcp", tcp + tcp_reassembled),
            ("tcp_reassembled", tcp_reassembled),
            ("ip_reassembled", udp_defrag),
            ("edns", self.with_edns),
            ("non_dns_packets", self.non_dns),
            ("empty_udp_payloads", self.empty_udp),
        ] {
            stats.add_counter(name, n);
        }
        for (kind, n) in DnsError::ALL.iter().zip(self.malformed) {
            stats.add_error(kind.as_str(), n);
        }
        // Every qtype and rcode seen, as breakdowns (for intervals and
        // reports); the summary's counters list the TOP most frequent.
        for &t in &self.seen_qtypes {
            stats.add_breakdown(QTYPE, &mnemonic::rtype(t), self.qtypes[usize::from(t)]);
        }
        for &r in &self.seen_rcodes {
            stats.add_breakdown(RCODE, &mnemonic::rcode(r), self.rcodes[usize::from(r)]);
        }
        stats.list_top(QTYPE, TOP);
        stats.list_top(RCODE, TOP);
        for (op, (q, r)) in queries.iter().zip(responses).enumerate() {
            if q + r > 0 && op != 0 {
                stats.add_counter(&format!("opcode {}", mnemonic::opcode(op as u8)), q + r);
            }
        }
    }
}

impl Inspect for DnsCounters {
    /// Counts one message's header, question, EDNS and error.
    #[inline(always)]
    fn inspect(&mut self, info: &DnsInfo) {
        // A message too short for a whole header still has its flags (tshark counts it too).
        if let Some(h) = info.header.or(info.partial_header) {
            if h.qr() {
                let rcode = info.rcode() & 0xfff;
                let slot = &mut self.rcodes[usize::from(rcode)];
                *slot += 1;
                if *slot == 1 {
                    self.seen_rcodes.push(rcode);
                }
            }
            self.by_qr_opcode[(usize::from(h.qr()) << 4) | usize::from(h.opcode())] += 1;
        }
        if let Some(q) = info.question {
            let slot = &mut self.qtypes[usize::from(q.qtype)];
            *slot += 1;
            if *slot == 1 {
                self.seen_qtypes.push(q.qtype);
            }
        }
        self.with_edns += u64::from(info.edns.is_some());
        if let Some(e) = info.error {
            self.malformed[e.index()] += 1;
        }
    }
}

/// Adds the TCP reassembly counters.
pub fn report_tcp(c: &TcpCounters, stats: &mut StageStats) {
    for (name, n) in [
        ("tcp_segments", c.segments),
        ("tcp_retransmissions", c.retransmissions),
        ("tcp_overlaps", c.overlaps),
        ("tcp_out_of_order", c.out_of_order),
        ("tcp_truncated_segments", c.truncated_segments),
        ("tcp_beyond_window", c.beyond_window),
        ("tcp_empty_messages", c.empty_messages),
        ("tcp_flows_evicted", c.flows_evicted),
        ("tcp_flows_expired", c.flows_expired),
        ("tcp_flows_overflowed", c.flows_overflowed),
        ("tcp_incomplete_messages", c.incomplete_messages),
        ("tcp_incomplete_bytes", c.incomplete_bytes),
        ("tcp_gaps", c.gaps),
        ("tcp_gap_bytes", c.gap_bytes),
        ("tcp_skipped_bytes", c.skipped_bytes),
    ] {
        stats.add_counter(name, n);
    }
}

/// Adds the defragmentation counters.
pub fn report_defrag(c: &DefragCounters, stats: &mut StageStats) {
    for (name, n) in [
        ("ip_fragments", c.fragments),
        ("ip_datagrams_reassembled", c.reassembled),
        ("ip_fragments_overlapping", c.overlapping),
        ("ip_fragments_duplicate", c.duplicates),
        ("ip_fragments_inconsistent", c.inconsistent),
        ("ip_datagrams_expired", c.expired),
        ("ip_datagrams_incomplete", c.incomplete_at_end),
        ("ip_datagrams_evicted", c.evicted),
    ] {
        stats.add_counter(name, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::dns::scan_inspect;

    /// A query for `qtype` (one question, the root name, class IN).
    fn query(qtype: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        m
    }

    #[test]
    fn qtypes_above_255_are_counted_under_their_names() {
        let mut counters = DnsCounters::default();
        for (qtype, n) in [(1, 3), (257, 2), (65534, 1), (65535, 4)] {
            for _ in 0..n {
                scan_inspect(&query(qtype), false, &mut counters);
            }
        }
        let mut stats = StageStats::new("filter.dns");
        counters.report(&mut stats);
        let count = |k: &str| stats.counters.get(k).copied();
        assert_eq!(count("qtype A"), Some(3));
        assert_eq!(count("qtype CAA"), Some(2));
        assert_eq!(count("qtype TYPE65534"), Some(1));
        assert_eq!(count("qtype ANY"), None, "255 was never asked for");
        assert_eq!(count("qtype TYPE65535"), Some(4));
        let qtypes = &stats.breakdowns["qtype"];
        assert_eq!(qtypes.len(), 4, "{qtypes:?}");
        assert_eq!(qtypes["CAA"], 2);
    }
}
