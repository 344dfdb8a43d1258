//! The result record of one lookup (one JSON object per line), in one of
//! two shapes ([`OutputFormat`]):
//!
//! - dnsluice's: `name`, `class`, `type` (the record type asked, or the
//!   module: `A`, `MXLOOKUP`, ...), `status`, `timestamp`, `data` (`answers`,
//!   `authorities`, `additionals`, `flags`, what a module found,
//!   `protocol`, `resolver`), `nameserver`, `attempts`, `duration_ms`, on
//!   failure `error`, and with trace verbosity `trace`;
//! - ZDNS 2.x's: `name` (`class` from long verbosity on) and
//!   `results.<MODULE>` with `status`, `error`, `timestamp`, `duration`
//!   (seconds), `data` and `trace`, so jq scripts written for ZDNS work.
//!
//! The sections' records are [`super::sections`]'s, the modules' data
//! [`super::results`]'s, the trace [`super::trace`]'s.

use super::format::{OutputFormat, RecordStyle};
use super::results::{self, ModuleData};
use super::sections::{write_flags, write_sections};
use super::trace::{self, TraceStep};
use dnsluice_core::dns::{self, mnemonic};
use dnsluice_core::time::write_rfc3339_ns;
use dnsluice_json::Fields;
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
    pub nameserver: Option<std::sync::Arc<str>>,
    /// `udp`, `tcp`, `DoT` or `DoH` (the transport of the final answer).
    pub protocol: &'static str,
    /// What a module (NSLOOKUP, MXLOOKUP, AXFR, ...) found.
    pub data: Option<ModuleData>,
    /// Every exchange, when the verbosity is `trace` (`None`: not collected).
    pub trace: Option<Vec<TraceStep>>,
}

impl Outcome {
    /// A fresh outcome that collects a trace when this one does (for a
    /// module's inner lookups, [`Outcome::absorb`]ed afterwards).
    pub fn child(&self) -> Outcome {
        Outcome {
            trace: self.trace.as_ref().map(|_| Vec::new()),
            ..Outcome::default()
        }
    }

    /// Adds an inner lookup's attempts and trace steps to this outcome.
    pub fn absorb(&mut self, inner: Outcome) {
        self.attempts += inner.attempts;
        if let (Some(trace), Some(steps)) = (&mut self.trace, inner.trace) {
            trace.extend(steps);
        }
        if self.protocol.is_empty() {
            self.protocol = inner.protocol;
        }
    }
}

/// Appends the record for `name` to `out` (no newline).
pub fn write(name: &str, outcome: &Outcome, style: &RecordStyle, out: &mut Vec<u8>) {
    match style.format {
        OutputFormat::Native => write_native(name, outcome, style, out),
        OutputFormat::Zdns => write_zdns(name, outcome, style, out),
    }
}

fn write_native(name: &str, outcome: &Outcome, style: &RecordStyle, out: &mut Vec<u8>) {
    let mut f = Fields::new();
    out.push(b'{');
    f.string(out, "name", name);
    f.string(out, "class", "IN");
    f.string(out, "type", &style.module.to_string());
    f.string(out, "status", &outcome.status);
    f.key(out, "timestamp");
    write_now(out);
    f.key(out, "data");
    write_data(outcome, style, out);
    if let Some(ns) = &outcome.nameserver {
        f.string(out, "nameserver", ns);
    }
    f.num(out, "attempts", u64::from(outcome.attempts));
    f.key(out, "duration_ms");
    write_millis(outcome.duration, out);
    if let Some(error) = &outcome.error {
        f.string(out, "error", error);
    }
    write_trace(outcome, style, &mut f, out);
    out.push(b'}');
}

fn write_zdns(name: &str, outcome: &Outcome, style: &RecordStyle, out: &mut Vec<u8>) {
    let mut f = Fields::new();
    out.push(b'{');
    f.string(out, "name", name);
    if style.long() {
        f.string(out, "class", "IN");
    }
    f.key(out, "results");
    out.push(b'{');
    let mut m = Fields::new();
    m.key(out, &style.module.to_string());
    out.push(b'{');
    let mut r = Fields::new();
    r.string(out, "status", &outcome.status);
    if let Some(error) = &outcome.error {
        r.string(out, "error", error);
    }
    r.key(out, "timestamp");
    // ZDNS's default time format is RFC 3339 to the second.
    let mut now = Vec::new();
    write_now(&mut now);
    if let (Some(dot), Some(z)) = (
        now.iter().position(|&b| b == b'.'),
        now.iter().rposition(|&b| b == b'Z'),
    ) {
        now.drain(dot..z);
    }
    out.extend_from_slice(&now);
    r.raw(
        out,
        "duration",
        &format!("{}", outcome.duration.as_secs_f64()),
    );
    // ZDNS leaves `data` out when a lookup got nothing back.
    if outcome.response.is_some() || outcome.data.is_some() || outcome.addresses.is_some() {
        r.key(out, "data");
        write_data(outcome, style, out);
    }
    write_trace(outcome, style, &mut r, out);
    out.extend_from_slice(b"}}}");
}

/// `duration` in milliseconds with three decimals (`12.345`), without
/// going through a formatter.
fn write_millis(duration: Duration, out: &mut Vec<u8>) {
    let micros = (duration.as_nanos() + 500) / 1000;
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(micros / 1000).as_bytes());
    let fraction = (micros % 1000) as u16;
    out.extend_from_slice(&[
        b'.',
        b'0' + (fraction / 100) as u8,
        b'0' + (fraction / 10 % 10) as u8,
        b'0' + (fraction % 10) as u8,
    ]);
}

fn write_now(out: &mut Vec<u8>) {
    out.push(b'"');
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    write_rfc3339_ns(now, out);
    out.push(b'"');
}

fn write_trace(outcome: &Outcome, style: &RecordStyle, f: &mut Fields, out: &mut Vec<u8>) {
    if let (true, Some(steps)) = (style.trace(), &outcome.trace) {
        f.key(out, "trace");
        trace::write(steps, style, out);
    }
}

fn write_data(outcome: &Outcome, style: &RecordStyle, out: &mut Vec<u8>) {
    let mut f = Fields::new();
    out.push(b'{');
    // A module's data stands for its inner responses (ZDNS shows only it).
    let module = outcome.data.is_some() || outcome.addresses.is_some();
    if let (false, Some(response)) = (module, &outcome.response) {
        write_sections(response, style, &mut f, out);
        // Flags: in dnsluice's records from normal verbosity on, in ZDNS's
        // from long on.
        let flags = if style.zdns() {
            style.long()
        } else {
            style.normal()
        };
        if let (true, Some(header)) = (flags, dns::Header::parse(response)) {
            write_flags(&header, "flags", &mut f, out);
        }
    }
    if let Some((v4, v6)) = &outcome.addresses {
        for (key, list) in [("ipv4_addresses", v4), ("ipv6_addresses", v6)] {
            // ZDNS leaves empty lists out; dnsluice's records always have both.
            if !style.zdns() || !list.is_empty() {
                f.key(out, key);
                results::write_strings(list, out);
            }
        }
    }
    if let Some(data) = &outcome.data {
        results::write(data, outcome.nameserver.as_deref(), style, &mut f, out);
    }
    if !module && style.normal() {
        if !outcome.protocol.is_empty() {
            f.string(out, "protocol", outcome.protocol);
        }
        if let Some(ns) = &outcome.nameserver {
            f.string(out, "resolver", ns);
        }
    }
    out.push(b'}');
}

/// The status of a response: its RCODE's mnemonic (extended RCODEs included).
pub fn status_of(response: &[u8]) -> String {
    rcode_of(response).into_owned()
}

/// [`status_of`], without a copy for the RCODEs that have a mnemonic.
pub fn rcode_of(response: &[u8]) -> std::borrow::Cow<'static, str> {
    let info = dns::scan(response, false);
    mnemonic::rcode(info.rcode())
}

/// Finished records as they travel from an engine to its caller: in
/// batches, so the caller is woken once per batch, not once per name.
pub type Batch = Vec<Finished>;

/// One finished name: its record (one JSON object, no newline) and status.
#[derive(Clone, Debug, Default)]
pub struct Finished {
    /// Input order.
    pub index: u64,
    /// `NOERROR`, `TIMEOUT`, ...
    pub status: String,
    /// The JSON record.
    pub json: String,
}

impl Finished {
    /// The record for `name` with `outcome`, written as `style` says.
    pub fn new(index: u64, name: &str, outcome: &Outcome, style: &RecordStyle) -> Finished {
        let mut record = Finished {
            index,
            status: String::new(),
            json: String::new(),
        };
        record.rewrite(index, name, outcome, style);
        record
    }

    /// [`Finished::new`] into this record's strings (a record handed back
    /// by its writer: no allocation once they are large enough).
    pub fn rewrite(&mut self, index: u64, name: &str, outcome: &Outcome, style: &RecordStyle) {
        self.index = index;
        self.status.clear();
        self.status.push_str(&outcome.status);
        let mut json = std::mem::take(&mut self.json).into_bytes();
        json.clear();
        // Room for the record's fixed part and its sections (about four
        // times the response's bytes), so it is written without regrowing.
        let response = outcome.response.as_ref().map_or(0, Vec::len);
        json.reserve(512 + 4 * response);
        write(name, outcome, style, &mut json);
        // Built from `&str`s and escaped ASCII: valid UTF-8, so the fallback
        // (a lossy copy) never runs.
        self.json = String::from_utf8(json)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_have_three_decimals() {
        let ms = |nanos: u64| {
            let mut out = Vec::new();
            write_millis(Duration::from_nanos(nanos), &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(ms(12_345_678), "12.346");
        assert_eq!(ms(0), "0.000");
        assert_eq!(ms(7_000), "0.007");
        assert_eq!(ms(2_000_000_000), "2000.000");
    }

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
        write("x.example", &outcome, &RecordStyle::default(), &mut out);
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
