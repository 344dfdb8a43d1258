//! The JSON line of a client's [`Response`]: the query, the answer or the
//! error, the latency, the client and the server.
//!
//! `{"type":"response","client","server","transport","ts","latency_ms",
//! "query":{"len","dns"},"answer":{"len","dns"}|null,"error":{"kind","message"}}`
//! (`error` only when there is no answer).

use super::dns;
use dnsluice_core::dns::check;
use dnsluice_core::object::{CaptureMeta, DnsMessage, Flow, Origin, PacketRef};
use dnsluice_core::time::write_rfc3339_ns;
use dnsluice_core::wire::{Layers, Transport};
use dnsluice_core::{LinkType, Packet, Response};
use dnsluice_json::Fields;
use std::io::Write;

/// Appends the JSON object for `r` (without the newline).
pub fn write_response(r: &Response<'_>, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    let mut f = Fields::new();
    out.push(b'{');
    f.string(out, "type", "response");
    f.num(out, "client", u64::from(r.client));
    f.string(out, "server", r.server);
    f.string(out, "transport", r.transport);
    f.key(out, "ts");
    out.push(b'"');
    write_rfc3339_ns(r.sent_ns, out);
    out.push(b'"');
    f.key(out, "latency_ms");
    let _ = write!(out, "{:.3}", r.latency_ns as f64 / 1e6);
    f.key(out, "query");
    message(r.query, out, scratch);
    f.key(out, "answer");
    match r.answer {
        Some(answer) => message(answer, out, scratch),
        None => out.extend_from_slice(b"null"),
    }
    if let Some(kind) = r.error_kind {
        f.key(out, "error");
        let mut e = Fields::new();
        out.push(b'{');
        e.string(out, "kind", kind);
        e.string(out, "message", r.error);
        out.push(b'}');
    }
    out.push(b'}');
}

/// Appends `{"len":N,"dns":{...}}` for the message `bytes`.
pub fn message(bytes: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    let _ = write!(out, "{{\"len\":{}", bytes.len());
    let packet = Packet {
        data: &[],
        meta: CaptureMeta {
            frame: 0,
            ts_ns: None,
            len: 0,
            link: LinkType::RAW,
        },
        layers: Layers::default(),
    };
    let m = DnsMessage {
        packet: PacketRef::Held(packet),
        bytes,
        checked: check(bytes, false),
        flow: Flow {
            sport: 0,
            dport: 0,
            transport: Transport::Udp,
        },
        origin: Origin::Datagram,
    };
    dns::write_dns(&m, out, scratch);
    out.push(b'}');
}
