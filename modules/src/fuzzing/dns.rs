//! The `dns_message` target: a DNS message through every decoder.

use dnsluice_core::dns::{check, name, questions, rdata, records, scan, scan_without_fast_path};
use dnsluice_core::wire::{Layers, Transport};
use dnsluice_core::{CaptureMeta, DnsMessage, Flow, LinkType, Object, Origin, Packet, PacketRef};

/// A DNS message through `scan` (with and without the capture-cut flag), the
/// question and record iterators, name and RDATA printing, and its JSON line;
/// the summary must agree with what the iterators find.
pub fn dns_message(msg: &[u8]) {
    for cut in [false, true] {
        let info = scan(msg, cut);
        assert_eq!(
            scan_without_fast_path(msg, cut),
            info,
            "the query fast path agrees with the general scan"
        );
        assert!(info.error_offset as usize <= msg.len(), "{info:?}");
        let checked = check(msg, cut);
        assert_eq!(
            checked.expand(msg),
            info,
            "the compact form expands to the summary"
        );
        if let Some(h) = info.header {
            assert!(msg.len() >= 12);
            assert!(info.questions <= h.qdcount);
            if info.error.is_none() {
                assert_eq!(info.questions, h.qdcount);
                assert_eq!(info.records, [h.ancount, h.nscount, h.arcount]);
            }
        }
        let found: Vec<_> = questions(msg).collect();
        assert_eq!(found.len(), usize::from(info.questions), "{info:?}");
        assert_eq!(found.first().copied(), info.question);
        let mut text = Vec::new();
        for q in &found {
            same_name_both_ways(msg, q.name as usize);
            assert!(
                name::write(msg, q.name as usize, &mut text).is_ok(),
                "a question that scanned has a name"
            );
        }
        let listed: usize = info.records.iter().map(|n| usize::from(*n)).sum();
        assert_eq!(records(msg).count(), listed, "{info:?}");
        for r in records(msg) {
            same_name_both_ways(msg, r.name as usize);
            let _ = name::write(msg, r.name as usize, &mut text);
            rdata::write(msg, &r, &mut text);
        }
        let packet = Packet {
            data: &[],
            meta: CaptureMeta {
                frame: 1,
                ts_ns: Some(0),
                len: 0,
                link: LinkType::RAW,
            },
            layers: Layers::default(),
        };
        let message = DnsMessage {
            packet: PacketRef::Held(packet),
            bytes: msg,
            checked,
            flow: Flow {
                sport: 53,
                dport: 53,
                transport: Transport::Udp,
            },
            origin: Origin::Datagram,
        };
        let mut line = Vec::new();
        crate::json::write_object(&Object::Dns(message), &mut line, &mut Vec::new());
        assert!(line.starts_with(b"{") && line.ends_with(b"}"));
        assert!(std::str::from_utf8(&line).is_ok(), "JSON must be UTF-8");
        // serde_json, not our writer, says whether the line is JSON (names
        // and RDATA are escaped in place, with unchecked stores).
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(&line) {
            panic!("not JSON ({e}): {}", String::from_utf8_lossy(&line));
        }
    }
}

/// The name at `at` printed with the fast path for plain names and through
/// the full walk alone: the same end (or error) and, when it printed, the
/// same text.
fn same_name_both_ways(msg: &[u8], at: usize) {
    let (mut fast, mut walked) = (Vec::new(), Vec::new());
    let fast_end = name::write(msg, at, &mut fast);
    assert_eq!(
        fast_end,
        name::write_walked(msg, at, &mut walked),
        "name at {at}"
    );
    if fast_end.is_ok() {
        assert_eq!(fast, walked, "name at {at}");
    }
}
