//! The JSON line of a packet or a DNS message (`output.json`'s shape; the
//! field names are a public contract, see the crate README).

use super::dns;
use dnsluice_core::time::write_rfc3339_ns;
use dnsluice_core::wire::{Network, Transport};
use dnsluice_core::{Object, Origin, Packet, Text, TextKind};
use dnsluice_json::{push_json_ip, push_json_str, push_u64, Fields};
use std::io::Write;

/// A record is already one JSON object and is written as it is; a line becomes
/// `{"line":N,"text":"..."}`.
fn write_text(t: &Text<'_>, out: &mut Vec<u8>) {
    match t.kind {
        TextKind::Record => out.extend_from_slice(t.text.as_bytes()),
        TextKind::Line => {
            let mut f = Fields::new();
            out.push(b'{');
            f.num(out, "line", t.number);
            f.string(out, "text", t.text);
            out.push(b'}');
        }
    }
}

/// Appends the JSON object for one object: a packet, or a DNS message with
/// the fields of the packet that carried it (without the newline).
/// `scratch` is reused for names and RDATA before they are escaped.
pub fn write_object(obj: &Object<'_>, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    if let Object::Text(t) = obj {
        write_text(t, out);
        return;
    }
    let Some(p) = obj.packet() else { return };
    let message = obj.dns();
    let mut f = Fields::new();
    out.push(b'{');
    f.num(out, "frame", p.meta.frame);
    f.key(out, "ts");
    match p.meta.ts_ns {
        Some(ts) => {
            out.push(b'"');
            write_rfc3339_ns(ts, out);
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    f.num(out, "caplen", p.data.len() as u64);
    f.num(out, "len", u64::from(p.meta.len));
    f.key(out, "link");
    match p.meta.link.name() {
        Some(name) => push_json_str(name.as_bytes(), out),
        None => {
            let _ = write!(out, "\"{}\"", p.meta.link);
        }
    }
    let l = &p.layers;
    if l.vlan_count > 0 {
        f.key(out, "vlan");
        out.push(b'[');
        for (i, id) in l.vlans().iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_u64(out, u64::from(*id));
        }
        out.push(b']');
    }
    if l.tunnels > 0 {
        write_tunnels(p, &mut f, out);
    }
    match l.network {
        Network::NonIp(protocol) => f.num(out, "l3_protocol", u64::from(protocol)),
        Network::Llc => f.raw(out, "llc", "true"),
        _ => {}
    }
    if let Some(version) = l.ip_version() {
        f.num(out, "ip", u64::from(version));
        if let (Some(src), Some(dst)) = (p.src(), p.dst()) {
            f.key(out, "src");
            push_json_ip(src, out);
            f.key(out, "dst");
            push_json_ip(dst, out);
        }
    }
    // A DNS message's transport is its flow's (for a reassembled datagram the
    // last fragment's own header has no ports).
    let (transport, sport, dport) = match message {
        Some(m) => (m.flow.transport, m.flow.sport, m.flow.dport),
        None => (l.transport, l.sport, l.dport),
    };
    if let Some(name) = transport.name() {
        f.string(out, "transport", &name);
        if matches!(transport, Transport::Udp | Transport::Tcp) {
            f.num(out, "sport", u64::from(sport));
            f.num(out, "dport", u64::from(dport));
        }
        // The carrying packet's payload (a DNS message's own length is `dns_len`).
        f.num(out, "payload_len", u64::from(l.payload_len));
    }
    if let Some(fr) = l.fragment {
        f.key(out, "fragment");
        let _ = write!(
            out,
            "{{\"id\":{},\"offset\":{},\"more\":{},\"protocol\":{},\"atomic\":{}}}",
            fr.id, fr.offset, fr.more, fr.protocol, fr.atomic
        );
    }
    if l.truncated {
        f.raw(out, "truncated", "true");
    }
    if let Some(e) = l.error {
        f.string(out, "layer_error", e.as_str());
    }
    if let Some(m) = message {
        f.num(out, "dns_len", m.bytes.len() as u64);
        match m.origin {
            Origin::TcpReassembled { segments } => {
                f.key(out, "reassembled");
                out.extend_from_slice(b"{\"from\":\"tcp\",\"segments\":");
                push_u64(out, u64::from(segments));
                out.push(b'}');
            }
            Origin::IpReassembled { fragments } => {
                f.key(out, "reassembled");
                out.extend_from_slice(b"{\"from\":\"ip\",\"fragments\":");
                push_u64(out, u64::from(fragments));
                out.push(b'}');
            }
            Origin::Dnstap {
                message_type,
                protocol,
            } => {
                use crate::format::dnstap::{message_type_name, protocol_name};
                f.key(out, "dnstap");
                let mut d = Fields::new();
                out.push(b'{');
                match message_type_name(i32::from(message_type)) {
                    Some(name) => d.string(out, "type", name),
                    None => d.num(out, "type", u64::from(message_type)),
                }
                if let Some(name) = protocol_name(i32::from(protocol)) {
                    d.string(out, "protocol", name);
                }
                out.push(b'}');
            }
            _ => {}
        }
        dns::write_dns(m, out, scratch);
    }
    out.push(b'}');
}

/// `"tunnel":[{"type":"gre","src":...,"dst":...,"key":7}, ...]`, outermost first.
fn write_tunnels(p: &Packet<'_>, f: &mut Fields, out: &mut Vec<u8>) {
    f.key(out, "tunnel");
    out.push(b'[');
    for (i, t) in p.tunnels().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{{\"type\":\"{}\"", t.kind.as_str());
        if let (Some(src), Some(dst)) = (t.src(p.data), t.dst(p.data)) {
            let _ = write!(out, ",\"src\":\"{src}\",\"dst\":\"{dst}\"");
        }
        if let Some(id) = t.id {
            let _ = write!(out, ",\"{}\":{id}", t.kind.id_name());
        }
        out.push(b'}');
    }
    out.push(b']');
}
