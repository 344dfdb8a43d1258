//! Where the split sends an object: the client's address (`by = "client"`)
//! or the flow's addresses (`by = "flow"`), read from the packet.

use dnsluice_core::wire::{parse_layers, Network};
use dnsluice_core::{LinkType, Object};
use foldhash::fast::FixedState;
use std::hash::BuildHasher;
use std::net::IpAddr;

/// The client's address of a packet: its source, unless it comes from a DNS
/// server port (53, 853, 443, 5353) to another port, then its destination. So
/// queries and their answers, and both directions of a TCP connection, meet
/// on one thread.
///
/// A DNS message's ports are its flow's: the packet of a message reassembled
/// from fragments is its last fragment, which has no ports of its own, so
/// after `filter.dns` a fragmented answer meets its client's queries. A
/// fragment before `filter.dns` has no ports to tell the client by: it goes
/// by its source, as every fragment of its datagram does (so they are still
/// reassembled), and a fragmented answer goes with its server's address.
pub(super) fn client_address(obj: &Object<'_>) -> Option<IpAddr> {
    let packet = obj.packet()?;
    let src = packet.src()?;
    let server_port = |port: u16| matches!(port, 53 | 853 | 443 | 5353);
    let (sport, dport) = match obj {
        Object::Dns(message) => (message.flow.sport, message.flow.dport),
        _ => (packet.layers.sport, packet.layers.dport),
    };
    if server_port(sport) && !server_port(dport) {
        return packet.dst().or(Some(src));
    }
    Some(src)
}

/// What a glance at a packet tells of where it goes ([`glance_v4`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Glance {
    /// A DNS datagram that stands alone: any thread may take it.
    Alone,
    /// A flow (TCP to or from port 53, or a fragment) with this hash.
    Flow(u32),
    /// Not told at a glance: [`flow_hash`] looks closer.
    Closer,
}

/// A glance at `obj`, for the common packets only: an untagged Ethernet
/// frame of IPv4 without options carrying UDP or TCP to or from port 53, or
/// a fragment. What it tells is what [`flow_hash`] would, by the same rule
/// ([`classify_v4`]); anything else is `Closer`. Kept small, for the
/// split's path without calls.
#[inline(always)]
pub(super) fn glance_v4(obj: &Object<'_>) -> Glance {
    match obj {
        Object::Packet(packet) => glance_v4_at(packet.data, packet.meta.link),
        _ => Glance::Closer,
    }
}

/// [`glance_v4`] at a packet's captured bytes `data` on link `link`, for a
/// reader that has not made a packet of them.
#[inline(always)]
pub(super) fn glance_v4_at(data: &[u8], link: LinkType) -> Glance {
    let Some(head) = data.first_chunk::<38>() else {
        return Glance::Closer;
    };
    if link != LinkType::EN10MB || head[12..14] != [0x08, 0x00] || head[14] != 0x45 {
        return Glance::Closer;
    }
    classify_v4(head, 20)
}

/// Where an untagged Ethernet frame of IPv4 whose IP header is `header`
/// bytes goes: a DNS datagram (UDP to or from port 53, not a fragment)
/// stands alone; TCP to or from port 53, and any fragment, is a flow of its
/// two addresses (fragments after the first carry no ports); the rest is
/// left to a closer look. The one rule of [`glance_v4`] and [`flow_hash`].
#[inline(always)]
fn classify_v4(data: &[u8], header: usize) -> Glance {
    let Some(fixed) = data.first_chunk::<34>() else {
        return Glance::Closer;
    };
    let port = |at: usize| {
        data.get(at..at + 2)
            .map(|p| u16::from_be_bytes([p[0], p[1]]))
    };
    let ports = 14 + header;
    let fragment = u16::from_be_bytes([fixed[20], fixed[21]]) & 0x3fff != 0;
    let protocol = fixed[23];
    let direct_dns =
        matches!(protocol, 6 | 17) && (port(ports) == Some(53) || port(ports + 2) == Some(53));
    if protocol == 17 && !fragment && direct_dns {
        Glance::Alone
    } else if fragment || direct_dns {
        Glance::Flow(symmetric_hash_v4(
            array(&fixed[26..30]),
            array(&fixed[30..34]),
        ))
    } else {
        Glance::Closer
    }
}

/// Where a packet goes when flows must stay together: `None` for a DNS
/// datagram that stands alone (UDP to or from port 53, not a fragment: most
/// of a capture), which any thread may take; else a hash of its two
/// addresses, the same both ways (the innermost ones, through tunnels: an
/// inner flow may change tunnels). Fragments after the first carry no ports,
/// so ports are left out: a datagram's fragments meet on one thread.
/// Untagged Ethernet carrying DNS straight over IPv4 or IPv6 is read in
/// place; anything else has its layers parsed here when no stage before did.
pub(super) fn flow_hash(obj: &Object<'_>) -> Option<u32> {
    let packet = obj.packet()?;
    let data = packet.data;
    let dns_port = |at: usize| {
        let port = |i: usize| data.get(i..i + 2).map(|p| u16::from_be_bytes([p[0], p[1]]));
        port(at) == Some(53) || port(at + 2) == Some(53)
    };
    if packet.meta.link == LinkType::EN10MB && data.len() >= 14 {
        let (v4, v6) = (data[12..14] == [0x08, 0x00], data[12..14] == [0x86, 0xdd]);
        if v4 && data.len() >= 34 {
            match classify_v4(data, usize::from(data[14] & 0x0f) * 4) {
                Glance::Alone => return None,
                Glance::Flow(hash) => return Some(hash),
                Glance::Closer => {}
            }
        }
        if v6 && data.len() >= 54 {
            // UDP or TCP right after the fixed header; a fragment header.
            let next = data[20];
            if next == 17 && dns_port(54) {
                return None;
            }
            if next == 44 || (next == 6 && dns_port(54)) {
                return Some(symmetric_hash_v6(
                    array(&data[22..38]),
                    array(&data[38..54]),
                ));
            }
        }
    }
    let parsed;
    let layers = if packet.layers.network == Network::Unparsed {
        parsed = parse_layers(packet.meta.link, data, packet.meta.len);
        &parsed
    } else {
        &packet.layers
    };
    let (src, dst) = (layers.src_addr(data)?, layers.dst_addr(data)?);
    Some(match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => symmetric_hash_v4(s.octets(), d.octets()),
        (s, d) => symmetric_hash_v6(sixteen(s), sixteen(d)),
    })
}

/// The splitting thread's own work per packet (reading it, hashing its
/// flow, handing it over), as a share of what a copy of the chain does
/// with it: about an eighth on the chain of `configs/dump.toml` over TCP
/// (1,000,000 connections: one thread 1.07 s of CPU; on 2 threads with equal
/// shares the input's thread 0.71 s, the worker 0.59 s, so ~0.12 s its own;
/// `docs/benchmarks.md`). A cheaper chain makes it larger.
const SPLITTING_COST: (u64, u64) = (1, 8);

/// Which of `n` lanes a flow hash goes to. Hashes below `cut` go to lane 0;
/// the rest, less `cut`, are scaled onto lanes `first..n` by `scale` (lanes
/// per hash value, times 2^64): a subtraction, a multiplication and a
/// shift, not a division, as this runs for every packet of a flow.
#[derive(Clone, Copy, Debug)]
pub(super) struct FlowLanes {
    cut: u64,
    first: u64,
    scale: u64,
}

impl FlowLanes {
    /// Every lane takes an equal share of the flows.
    pub fn even(n: u32) -> FlowLanes {
        FlowLanes {
            cut: 0,
            first: 0,
            scale: u64::from(n.max(1)) << 32,
        }
    }

    /// Lane 0 is the splitting thread's own (it reads the input and hands
    /// the other lanes their packets too), so it takes a smaller share: so
    /// much less that it has as much to do as each worker, by
    /// [`SPLITTING_COST`] — on 2 threads 7/8 of an equal share, on 4 threads
    /// 5/8, from 9 threads none (it only reads and hands over).
    pub fn with_splitting_lane(n: u32) -> FlowLanes {
        if n < 2 {
            return FlowLanes::even(n);
        }
        let n = u64::from(n);
        let (cost, per) = SPLITTING_COST;
        // Its share of an equal share, in `per`ths: 1 - (n - 1) * cost.
        let share = per.saturating_sub((n - 1) * cost);
        let cut = (1u64 << 32) * share / (per * n);
        FlowLanes {
            cut,
            first: 1,
            scale: (((n - 1) as u128) << 64).div_ceil(u128::from((1u64 << 32) - cut)) as u64,
        }
    }

    /// The lane of flow hash `hash`.
    #[inline(always)]
    pub fn lane(&self, hash: u32) -> usize {
        match u64::from(hash).checked_sub(self.cut) {
            None => 0,
            Some(rest) => {
                let scaled = (u128::from(rest) * u128::from(self.scale)) >> 64;
                (self.first + scaled as u64) as usize
            }
        }
    }
}

/// `N` bytes of a slice of length `N` (the callers slice exactly that).
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    bytes.try_into().unwrap_or([0; N])
}

/// An address as 16 bytes (IPv4 mapped into IPv6).
fn sixteen(address: IpAddr) -> [u8; 16] {
    match address {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The hasher of IPv6 flows: foldhash, as the TCP tables use, with a fixed
/// seed so that a flow goes to the same thread in every run.
const FLOWS: FixedState = FixedState::with_seed(0);

/// A hash of two IPv4 addresses, the same both ways: the lower and the
/// higher as one 64-bit word, times 2^64 divided by the golden ratio, whose
/// upper half is the hash (Fibonacci hashing: one multiplication; every bit
/// of the pair moves the upper half, and addresses numbered in a row spread
/// evenly). Only where a flow's thread is chosen: a capture crafted to put
/// every flow on one thread gets one thread's speed, nothing worse (the TCP
/// tables key with a random seed). Against foldhash, which it replaced: 1 M
/// TCP connections on 2 threads 0.739 → 0.721 s (9 rounds). (Byte by byte,
/// as FNV went, it cost a third of the split's time per packet.)
pub(super) fn symmetric_hash_v4(a: [u8; 4], b: [u8; 4]) -> u32 {
    let (a, b) = (u32::from_be_bytes(a), u32::from_be_bytes(b));
    let pair = u64::from(a.min(b)) << 32 | u64::from(a.max(b));
    (pair.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32
}

/// [`symmetric_hash_v4`] for IPv6 addresses.
pub(super) fn symmetric_hash_v6(a: [u8; 16], b: [u8; 16]) -> u32 {
    let (a, b) = (u128::from_be_bytes(a), u128::from_be_bytes(b));
    fold(FLOWS.hash_one((a.min(b), a.max(b))))
}

/// A 64-bit hash folded to 32 bits, every bit of it kept in play.
fn fold(h: u64) -> u32 {
    (h >> 32) as u32 ^ h as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::{CaptureMeta, Packet};
    use testkit::rng::Rng;

    /// Test addresses from a seeded generator, so the test needs no crate.
    fn addresses(seed: u64) -> impl Iterator<Item = [u8; 16]> {
        let mut rng = Rng(seed);
        std::iter::repeat_with(move || {
            let mut out = [0u8; 16];
            for chunk in out.chunks_mut(8) {
                chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
            }
            out
        })
    }

    /// Asserts that `counts` (of draws over lanes) are no further from the
    /// expected `shares` than five standard deviations of a fair draw.
    fn assert_fair(counts: &[u32], shares: &[f64], what: &str) {
        let total = f64::from(counts.iter().sum::<u32>());
        for (lane, (&count, &p)) in counts.iter().zip(shares).enumerate() {
            let expected = total * p;
            let sd = (total * p * (1.0 - p)).sqrt().max(1.0);
            let off = (f64::from(count) - expected).abs();
            assert!(
                off < 5.0 * sd,
                "{what}: lane {lane} got {count} (expected {expected:.0})"
            );
        }
    }

    /// An even spread is the hash scaled onto the lanes, exactly (every
    /// hash on a grid across the whole range, and both ends).
    #[test]
    fn even_lanes_scale_the_hash_onto_the_range() {
        for n in [1u32, 2, 3, 7, 16, 1024] {
            let lanes = FlowLanes::even(n);
            for hash in (0..=u32::MAX).step_by(65_521).chain([u32::MAX]) {
                let expected = (u64::from(hash) * u64::from(n)) >> 32;
                assert_eq!(lanes.lane(hash) as u64, expected, "{n} lanes, hash {hash}");
            }
        }
    }

    /// With the splitting thread's lane 0 taking less: on 2 threads 7/16 of
    /// the flows, on 3 threads 3/12, on 4 threads 5/32, from 9 threads none;
    /// the other lanes share the rest evenly, and no hash falls outside.
    #[test]
    fn the_splitting_lane_takes_a_smaller_share() {
        let cases: [(u32, f64); 5] = [
            (2, 7.0 / 16.0),
            (3, 3.0 / 12.0),
            (4, 5.0 / 32.0),
            (9, 0.0),
            (16, 0.0),
        ];
        let mut gen = addresses(5);
        let hashes: Vec<u32> = (0..200_000)
            .map(|_| {
                let (a, b) = (gen.next().unwrap(), gen.next().unwrap());
                symmetric_hash_v4(array(&a[..4]), array(&b[..4]))
            })
            .collect();
        for (n, first) in cases {
            let lanes = FlowLanes::with_splitting_lane(n);
            let mut counts = vec![0u32; n as usize];
            for &hash in hashes.iter().chain(&[0, u32::MAX]) {
                counts[lanes.lane(hash)] += 1;
            }
            let rest = (1.0 - first) / f64::from(n - 1);
            let mut shares = vec![rest; n as usize];
            shares[0] = first;
            assert_fair(&counts, &shares, &format!("{n} lanes, the first smaller"));
            if first == 0.0 {
                assert_eq!(counts[0], 0, "{n} lanes: lane 0 should take nothing");
            }
        }
    }

    /// An Ethernet frame of IPv4 (header `ihl` words, `protocol`, flags
    /// and fragment offset `fragment`) from port `sport` to `dport`, with a
    /// few bytes of payload; `ethertype` in place of IPv4's.
    fn frame(ethertype: u16, ihl: u8, protocol: u8, fragment: u16, ports: (u16, u16)) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        let mut ip = vec![0u8; usize::from(ihl) * 4];
        ip[0] = 0x40 | ihl;
        ip[6..8].copy_from_slice(&fragment.to_be_bytes());
        ip[9] = protocol;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        // Options, if any, read as port 53 where the ports would be without them.
        for pair in ip[20..].chunks_exact_mut(2) {
            pair.copy_from_slice(&53u16.to_be_bytes());
        }
        f.extend_from_slice(&ip);
        f.extend_from_slice(&ports.0.to_be_bytes());
        f.extend_from_slice(&ports.1.to_be_bytes());
        f.extend_from_slice(&[0u8; 12]);
        f
    }

    /// A glance tells only what the full look ([`flow_hash`]) would: a DNS
    /// datagram standing alone (untagged IPv4 without options, UDP to or
    /// from port 53, not a fragment), a flow with the same hash (TCP to or
    /// from port 53, a fragment), and leaves the rest to the full look.
    #[test]
    fn a_glance_tells_only_what_the_full_look_would() {
        let (en, v4, udp) = (LinkType::EN10MB, 0x0800, 17);
        // What, link, ethertype, header words, protocol, flags and fragment
        // offset, ports, what a glance tells: (A)lone, (F)low, (C)loser.
        let cases = [
            ("query", en, v4, 5, udp, 0, (40000, 53), 'A'),
            ("answer", en, v4, 5, udp, 0x4000, (53, 40000), 'A'),
            ("options", en, v4, 6, udp, 0, (40000, 5353), 'C'),
            ("first fragment", en, v4, 5, udp, 0x2000, (40000, 53), 'F'),
            ("later fragment", en, v4, 5, udp, 0x0010, (40000, 53), 'F'),
            ("fragment of ICMP", en, v4, 5, 1, 0x0010, (1, 2), 'F'),
            ("tcp", en, v4, 5, 6, 0, (40000, 53), 'F'),
            ("tcp, other port", en, v4, 5, 6, 0, (40000, 80), 'C'),
            ("udp, other port", en, v4, 5, udp, 0, (40000, 5353), 'C'),
            ("vlan", en, 0x8100, 5, udp, 0, (40000, 53), 'C'),
            ("raw ip", LinkType::RAW, v4, 5, udp, 0, (40000, 53), 'C'),
        ];
        for (what, link, ethertype, ihl, protocol, fragment, ports, told) in cases {
            let data = frame(ethertype, ihl, protocol, fragment, ports);
            let obj = packet(link, &data);
            let glance = glance_v4(&obj);
            let full = flow_hash(&obj);
            match (told, glance) {
                ('A', Glance::Alone) => assert_eq!(full, None, "{what}"),
                ('F', Glance::Flow(hash)) => assert_eq!(full, Some(hash), "{what}"),
                // Left to the full look, which reads the ports after the
                // options (not DNS here): a flow.
                ('C', Glance::Closer) if what == "options" => assert!(full.is_some(), "{what}"),
                ('C', Glance::Closer) => {}
                _ => panic!("{what}: told {glance:?}"),
            }
        }
        let short = frame(v4, 5, udp, 0, (40000, 53));
        assert_eq!(glance_v4(&packet(en, &short[..37])), Glance::Closer);
        // Cut anywhere in the IPv4 header: no panic, and no addresses to
        // keep together (it goes in turn).
        for len in [14, 15, 20, 33] {
            assert_eq!(flow_hash(&packet(en, &short[..len])), None, "{len} bytes");
        }
    }

    /// A packet of `data` on `link`.
    fn packet(link: LinkType, data: &[u8]) -> Object<'_> {
        let meta = CaptureMeta {
            frame: 1,
            ts_ns: Some(0),
            len: data.len() as u32,
            link,
        };
        Object::Packet(Packet::new(data, meta))
    }

    #[test]
    fn a_flow_hashes_the_same_both_ways() {
        let mut gen = addresses(7);
        for _ in 0..1000 {
            let (a, b) = (gen.next().unwrap(), gen.next().unwrap());
            assert_eq!(symmetric_hash_v6(a, b), symmetric_hash_v6(b, a));
            let (a4, b4) = (array(&a[..4]), array(&b[..4]));
            assert_eq!(symmetric_hash_v4(a4, b4), symmetric_hash_v4(b4, a4));
        }
    }

    /// Flows spread evenly over 2, 3 and 16 lanes: no lane further from its
    /// share than five standard deviations of a fair draw (a hash that
    /// favoured lanes would be far outside), for 102,400 clients numbered in
    /// a row (as the bench captures' and many real ones are) and as many random.
    #[test]
    fn flows_spread_evenly_over_the_lanes() {
        const CLIENTS: u32 = 102_400;
        let server = [192, 0, 2, 53];
        let in_a_row = (0..CLIENTS).map(|i| (0x0a00_0000 + i).to_be_bytes());
        let mut gen = addresses(11);
        let random = (0..CLIENTS).map(|_| array(&gen.next().unwrap()[..4]));
        // Numbered in their first two bytes (below and above the server).
        let high = (0..CLIENTS).map(|i| ((i % 65_536) << 16 | 7).to_be_bytes());
        let sets: [Vec<[u8; 4]>; 3] = [in_a_row.collect(), random.collect(), high.collect()];
        for clients in &sets {
            for n in [2u32, 3, 16] {
                let mut counts = vec![0u32; n as usize];
                let lanes = FlowLanes::even(n);
                for &client in clients {
                    counts[lanes.lane(symmetric_hash_v4(client, server))] += 1;
                }
                let shares = vec![1.0 / f64::from(n); n as usize];
                assert_fair(&counts, &shares, &format!("{n} even lanes"));
            }
        }
    }
}
