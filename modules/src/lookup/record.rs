//! The result record of one lookup, in ZDNS's shape (one JSON object per line):
//! `name`, `class`, `status`, `timestamp`, `data` (`answers`, `authorities`,
//! `additionals`, `protocol`, `resolver`), plus our `nameserver`, `attempts`,
//! `duration_ms` and, on failure, `error`.
//!
//! Record `name`s are printed without the trailing dot (as ZDNS does); `answer`
//! is the RDATA in presentation form, as `dig` prints it.

use super::trace::{write_steps, Step};
use crate::json::{push_json_str, Fields};
use dnsluice_core::dns::{self, mnemonic, rdata, Section};
use dnsluice_core::time::write_rfc3339_ns;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a lookup ended.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// `NOERROR`, `NXDOMAIN`, ... (the RCODE's mnemonic), `TIMEOUT` or `ERROR`.
    pub status: String,
    /// The final response, when one came.
    pub response: Option<Vec<u8>>,
    /// For `ALOOKUP`: the IPv4 and IPv6 addresses found (after CNAMEs).
    pub addresses: Option<(Vec<String>, Vec<String>)>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Queries sent (retries and TCP fallback included).
    pub attempts: u32,
    /// From the first query to the end.
    pub duration: Duration,
    /// The nameserver asked (`ip:port` or URL); `None` when none was.
    pub nameserver: Option<String>,
    /// `udp`, `tcp`, `DoT` or `DoH` (the transport of the final answer).
    pub protocol: &'static str,
    /// Every step on the way (`--result-verbosity trace`); empty otherwise.
    pub trace: Vec<Step>,
}

/// Appends the record for `name` to `out` (no newline).
pub fn write(name: &str, outcome: &Outcome, out: &mut Vec<u8>) {
    let mut f = Fields::new();
    out.push(b'{');
    f.string(out, "name", name);
    f.string(out, "class", "IN");
    f.string(out, "status", &outcome.status);
    f.key(out, "timestamp");
    out.push(b'"');
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    write_rfc3339_ns(now, out);
    out.push(b'"');
    f.key(out, "data");
    write_data(outcome, out);
    if let Some(ns) = &outcome.nameserver {
        f.string(out, "nameserver", ns);
    }
    f.num(out, "attempts", u64::from(outcome.attempts));
    f.key(out, "duration_ms");
    let ms = outcome.duration.as_secs_f64() * 1000.0;
    out.extend_from_slice(format!("{ms:.3}").as_bytes());
    if let Some(error) = &outcome.error {
        f.string(out, "error", error);
    }
    out.push(b'}');
}

fn write_data(outcome: &Outcome, out: &mut Vec<u8>) {
    let mut f = Fields::new();
    out.push(b'{');
    if let Some(response) = &outcome.response {
        for (key, section) in [
            ("answers", Section::Answer),
            ("authorities", Section::Authority),
            ("additionals", Section::Additional),
        ] {
            f.key(out, key);
            write_section(response, section, out);
        }
        if let Some(header) = dns::Header::parse(response) {
            f.raw(out, "flags", &flags_json(&header));
        }
    }
    if let Some((v4, v6)) = &outcome.addresses {
        for (key, list) in [("ipv4_addresses", v4), ("ipv6_addresses", v6)] {
            f.key(out, key);
            write_strings(list, out);
        }
    }
    if !outcome.protocol.is_empty() {
        f.string(out, "protocol", outcome.protocol);
    }
    if let Some(ns) = &outcome.nameserver {
        f.string(out, "resolver", ns);
    }
    if !outcome.trace.is_empty() {
        f.key(out, "trace");
        write_steps(&outcome.trace, out);
    }
    out.push(b'}');
}

fn flags_json(h: &dns::Header) -> String {
    format!(
        "{{\"response\":{},\"opcode\":{},\"authoritative\":{},\"truncated\":{},\"recursion_desired\":{},\"recursion_available\":{},\"authenticated\":{},\"checking_disabled\":{}}}",
        h.qr(),
        h.opcode(),
        h.aa(),
        h.tc(),
        h.rd(),
        h.ra(),
        h.ad(),
        h.cd()
    )
}

fn write_strings(list: &[String], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_json_str(s.as_bytes(), out);
    }
    out.push(b']');
}

/// Appends the records of `section` (OPT left out) as a JSON array.
fn write_section(msg: &[u8], section: Section, out: &mut Vec<u8>) {
    out.push(b'[');
    let mut first = true;
    let mut scratch = Vec::new();
    for record in dns::records(msg).filter(|r| r.section == section) {
        if record.rtype == dns::TYPE_OPT {
            continue;
        }
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        let mut f = Fields::new();
        out.push(b'{');
        scratch.clear();
        let _ = dns::name::write(msg, record.name as usize, &mut scratch);
        if scratch.len() > 1 && scratch.last() == Some(&b'.') {
            scratch.pop();
        }
        f.key(out, "name");
        push_json_str(&scratch, out);
        f.string(out, "type", &mnemonic::rtype(record.rtype));
        f.string(out, "class", &mnemonic::class(record.class));
        f.num(out, "ttl", u64::from(record.ttl));
        scratch.clear();
        rdata::write(msg, &record, &mut scratch);
        f.key(out, "answer");
        push_json_str(&scratch, out);
        out.push(b'}');
    }
    out.push(b']');
}

/// The status of a response: its RCODE's mnemonic (extended RCODEs included).
pub fn status_of(response: &[u8]) -> String {
    let info = dns::scan(response, false);
    mnemonic::rcode(info.rcode()).into_owned()
}

/// One finished name: its record (one JSON object, no newline) and status.
#[derive(Clone, Debug)]
pub struct Finished {
    /// Input order.
    pub index: u64,
    /// `NOERROR`, `TIMEOUT`, ...
    pub status: String,
    /// The JSON record.
    pub json: String,
}

impl Finished {
    /// The record for `name` with `outcome`.
    pub fn new(index: u64, name: &str, outcome: &Outcome) -> Finished {
        let mut json = Vec::with_capacity(256);
        write(name, outcome, &mut json);
        Finished {
            index,
            status: outcome.status.clone(),
            // Built from `&str`s and escaped ASCII: valid UTF-8, so the
            // fallback (a lossy copy) never runs.
            json: String::from_utf8(json)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_has_its_line() {
        let outcome = Outcome {
            status: "TIMEOUT".into(),
            error: Some("timeout".into()),
            attempts: 3,
            nameserver: Some("127.0.0.1:53".into()),
            protocol: "udp",
            ..Outcome::default()
        };
        let mut out = Vec::new();
        write("x.example", &outcome, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["name"], "x.example");
        assert_eq!(v["status"], "TIMEOUT");
        assert_eq!(v["attempts"], 3);
        assert_eq!(v["error"], "timeout");
        assert_eq!(v["data"]["resolver"], "127.0.0.1:53");
        assert_eq!(v["data"]["protocol"], "udp");
        assert!(v["timestamp"].as_str().unwrap().ends_with('Z'));
    }
}
