//! One row of `output.parquet` from a DNS message (a capture's or dnstap's)
//! or a client's response: the message's fields read with core's DNS
//! views, names and RDATA printed as `output.json` prints them.

use super::columns::Columns;
use dnsluice_core::dns::{check, mnemonic, name, questions, rdata, records, Section, TYPE_OPT};
use dnsluice_core::object::Origin;
use dnsluice_core::{DnsMessage, Response};
use std::net::IpAddr;

/// Appends the fields of the message `bytes` (header, question, counts,
/// EDNS, answers, error) to the row being built.
fn message_fields(bytes: &[u8], info: &dnsluice_core::dns::DnsInfo, c: &mut Columns) {
    if let Some(h) = info.header.or(info.partial_header) {
        c.id.push(i32::from(h.id));
        c.qr.push(h.qr());
        c.opcode.push(mnemonic::opcode(h.opcode()));
        c.rcode.push(mnemonic::rcode(info.rcode()));
        for (column, bit) in
            c.flags
                .iter_mut()
                .zip([h.aa(), h.tc(), h.rd(), h.ra(), h.ad(), h.cd()])
        {
            column.push(bit);
        }
    }
    let Some(h) = info.header else {
        return;
    };
    for (column, n) in c
        .counts
        .iter_mut()
        .zip([h.qdcount, h.ancount, h.nscount, h.arcount])
    {
        column.push(i32::from(n));
    }
    if let Some(q) = questions(bytes).next() {
        c.qname
            .push_with(|out| name::write(bytes, q.name as usize, out).is_ok());
        c.qtype.push(mnemonic::rtype(q.qtype));
        c.qclass.push(mnemonic::class(q.qclass));
    }
    if let Some(edns) = info.edns {
        c.edns_udp_size.push(i32::from(edns.udp_size));
        c.edns_do.push(edns.dnssec_ok());
        c.edns_version.push(i32::from(edns.version));
        let at = edns.options_at as usize;
        let options = bytes
            .get(at..at + usize::from(edns.options_len))
            .unwrap_or(&[]);
        c.edns_options.push(&option_codes(options));
    }
    c.answers.open();
    for r in records(bytes).take_while(|r| r.section == Section::Answer) {
        if r.rtype == TYPE_OPT {
            continue;
        }
        c.answers.record(
            |out| name::write(bytes, r.name as usize, out).is_ok(),
            mnemonic::rtype(r.rtype),
            i64::from(r.ttl),
            |out| rdata::write(bytes, &r, out),
        );
    }
    c.answers.close();
    if let Some(error) = info.error {
        c.dns_error.push(error.as_str());
    }
}

/// The option codes of an OPT record's RDATA (up to a cut option).
fn option_codes(mut options: &[u8]) -> Vec<i32> {
    let mut codes = Vec::new();
    while let Some(head) = options.get(..4) {
        let size = usize::from(u16::from_be_bytes([head[2], head[3]]));
        if options.len() < 4 + size {
            break;
        }
        codes.push(i32::from(u16::from_be_bytes([head[0], head[1]])));
        options = &options[4 + size..];
    }
    codes
}

/// An address as text for a string column (`dnsluice_json::push_ip`).
fn address(ip: IpAddr) -> impl FnOnce(&mut Vec<u8>) -> bool {
    move |out| {
        dnsluice_json::push_ip(ip, out);
        true
    }
}

/// The row of a DNS message from a capture or from dnstap.
pub fn message_row(m: &DnsMessage<'_>, c: &mut Columns) {
    let p = m.packet.get();
    let kind = match m.origin {
        Origin::Dnstap { .. } => "dnstap",
        _ => "message",
    };
    c.kind.push(kind);
    c.time.push_opt(p.meta.ts_ns);
    c.frame.push(p.meta.frame as i64);
    if let (Some(src), Some(dst)) = (p.src(), p.dst()) {
        c.src.push_with(address(src));
        c.dst.push_with(address(dst));
    }
    if let Some(name) = m.flow.transport.name() {
        c.transport.push(name);
        c.sport.push(i32::from(m.flow.sport));
        c.dport.push(i32::from(m.flow.dport));
    }
    message_fields(m.bytes, &m.info(), c);
    c.end_row();
}

/// The row of a client's response: the answer's fields (the query's when
/// there was no answer), the server, the latency and the error's kind.
pub fn response_row(r: &Response<'_>, c: &mut Columns) {
    c.kind.push("response");
    c.time.push(r.sent_ns);
    c.transport.push(r.transport);
    c.nameserver.push(r.server.as_bytes());
    c.duration_ms.push(r.latency_ns as f64 / 1e6);
    if let Some(kind) = r.error_kind {
        c.status.push(kind.as_bytes());
    }
    let bytes = r.answer.unwrap_or(r.query);
    message_fields(bytes, &check(bytes, false).expand(bytes), c);
    c.end_row();
}

#[cfg(test)]
mod tests {
    use super::option_codes;

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for ip in [
            "10.0.0.1",
            "255.255.255.255",
            "0.0.0.0",
            "2001:db8::1",
            "100.9.99.109",
            "1.20.200.199",
        ] {
            let mut out = Vec::new();
            assert!(super::address(ip.parse().unwrap())(&mut out));
            assert_eq!(String::from_utf8(out).unwrap(), ip);
        }
    }

    #[test]
    fn option_codes_stop_at_a_cut_option() {
        let options = [0, 10, 0, 2, 1, 2, 0, 3, 0, 0, 0, 12, 0, 9, 1];
        assert_eq!(option_codes(&options), [10, 3]);
    }
}
