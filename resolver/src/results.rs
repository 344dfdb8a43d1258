//! What the lookup modules found, beyond one response: NSLOOKUP's servers,
//! MXLOOKUP's exchanges, AXFR's transfers, BINDVERSION's version, SPF's and
//! DMARC's record, and how each is written into a record's `data` (ZDNS's
//! field names; the same in both output formats).

use super::format::RecordStyle;
use super::sections::write_records;
use dnsluice_core::dns::{self, Section};
use dnsluice_json::{push_json_str, Fields};

/// A name with the addresses found for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Host {
    /// The host name, without the trailing dot.
    pub name: String,
    /// The TTL of the record that named it.
    pub ttl: u32,
    /// IPv4 addresses (A).
    pub ipv4: Vec<String>,
    /// IPv6 addresses (AAAA).
    pub ipv6: Vec<String>,
}

/// One MX record with its exchange's addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MailExchange {
    /// The exchange and its addresses.
    pub host: Host,
    /// The preference.
    pub preference: u16,
    /// The record's class (`IN`).
    pub class: String,
}

/// One server's zone transfer.
#[derive(Clone, Debug, Default)]
pub struct ServerTransfer {
    /// The server's address (no port), as ZDNS writes it.
    pub server: String,
    /// `NOERROR`, or `ERROR`/`TIMEOUT`.
    pub status: String,
    /// Why the transfer failed.
    pub error: Option<String>,
    /// The transfer's messages (their answer sections hold every record).
    pub messages: Vec<Vec<u8>>,
}

/// What a module found.
#[derive(Clone, Debug)]
pub enum ModuleData {
    /// NSLOOKUP: the zone's nameservers (`servers`).
    NameServers(Vec<Host>),
    /// MXLOOKUP: the mail exchanges (`exchanges`).
    MailExchanges(Vec<MailExchange>),
    /// AXFR: one transfer per server (`servers`).
    Transfers(Vec<ServerTransfer>),
    /// BINDVERSION: the version text (`version`, with `resolver`).
    Version(Option<String>),
    /// SPF or DMARC: the key (`spf`, `dmarc`) and the matching text.
    Text(&'static str, Option<String>),
}

/// Writes `data`'s fields into the open `data` object `f`.
pub fn write(
    data: &ModuleData,
    resolver: Option<&str>,
    style: &RecordStyle,
    f: &mut Fields,
    out: &mut Vec<u8>,
) {
    match data {
        ModuleData::NameServers(hosts) => {
            if !hosts.is_empty() {
                f.key(out, "servers");
                write_list(hosts, out, |h, out| {
                    let mut g = Fields::new();
                    g.string(out, "name", &h.name);
                    g.string(out, "type", "NS");
                    write_addresses(h, &mut g, out);
                    if style.normal() {
                        g.num(out, "ttl", u64::from(h.ttl));
                    }
                });
            }
        }
        ModuleData::MailExchanges(exchanges) => {
            f.key(out, "exchanges");
            write_list(exchanges, out, |mx, out| {
                let mut g = Fields::new();
                g.string(out, "name", &mx.host.name);
                g.string(out, "type", "MX");
                if style.normal() {
                    g.string(out, "class", &mx.class);
                }
                g.num(out, "preference", u64::from(mx.preference));
                write_addresses(&mx.host, &mut g, out);
                if style.normal() {
                    g.num(out, "ttl", u64::from(mx.host.ttl));
                }
            });
        }
        ModuleData::Transfers(transfers) => {
            if !transfers.is_empty() {
                f.key(out, "servers");
                write_list(transfers, out, |t, out| {
                    let mut g = Fields::new();
                    g.string(out, "server", &t.server);
                    // ZDNS's field has no JSON name of its own: `Status`.
                    g.string(out, "Status", &t.status);
                    if let Some(error) = &t.error {
                        g.string(out, "error", error);
                    }
                    if !t.messages.is_empty() {
                        g.key(out, "records");
                        write_transfer_records(&t.messages, style, out);
                    }
                });
            }
        }
        ModuleData::Version(version) => {
            if let Some(version) = version {
                f.string(out, "version", version);
            }
            f.string(out, "resolver", resolver.unwrap_or(""));
        }
        ModuleData::Text(key, text) => {
            if let Some(text) = text {
                f.string(out, key, text);
            }
        }
    }
}

/// Every answer record of every message, in order, as one array.
fn write_transfer_records(messages: &[Vec<u8>], style: &RecordStyle, out: &mut Vec<u8>) {
    out.push(b'[');
    let mut first = true;
    for msg in messages {
        let mut one = Vec::new();
        let answers = dns::records(msg).filter(|r| r.section == Section::Answer);
        write_records(msg, answers, style, &mut one);
        // `one` is `[...]`: splice its items into the one array.
        let items = &one[1..one.len() - 1];
        if !items.is_empty() {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            out.extend_from_slice(items);
        }
    }
    out.push(b']');
}

fn write_addresses(host: &Host, g: &mut Fields, out: &mut Vec<u8>) {
    for (key, list) in [
        ("ipv4_addresses", &host.ipv4),
        ("ipv6_addresses", &host.ipv6),
    ] {
        if !list.is_empty() {
            g.key(out, key);
            write_strings(list, out);
        }
    }
}

/// `list` as a JSON array of objects, each written by `item` between braces.
fn write_list<T>(list: &[T], out: &mut Vec<u8>, mut item: impl FnMut(&T, &mut Vec<u8>)) {
    out.push(b'[');
    for (i, x) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'{');
        item(x, out);
        out.push(b'}');
    }
    out.push(b']');
}

/// A JSON array of strings.
pub fn write_strings(list: &[String], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_json_str(s.as_bytes(), out);
    }
    out.push(b']');
}
