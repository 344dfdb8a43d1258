//! `--result-verbosity trace`: every exchange of a lookup, in the order it
//! happened. An [`super::ask::Ask`] adds a [`TraceStep`] per query it
//! sends (a retry and a TCP fallback are steps of their own) when the
//! outcome collects them; an iterative resolver adds its referrals the
//! same way. Written as ZDNS writes its trace, with our `duration` and
//! `error`.

use super::format::RecordStyle;
use super::sections::{write_flags, write_sections};
use dnsluice_json::Fields;
use std::time::Duration;

/// One exchange.
#[derive(Clone, Debug, Default)]
pub struct TraceStep {
    /// The name asked.
    pub name: String,
    /// The type asked.
    pub qtype: u16,
    /// The class asked.
    pub qclass: u16,
    /// The server asked (`ip:port` or URL).
    pub nameserver: String,
    /// `udp`, `tcp`, `DoT`, `DoH`.
    pub protocol: &'static str,
    /// How deep in a resolution (1 when asking a given nameserver).
    pub depth: u32,
    /// The zone the server was asked as (the name itself when asking a
    /// given nameserver, as ZDNS writes it).
    pub layer: String,
    /// Answered from a cache, not the wire.
    pub cached: bool,
    /// Which try of the question this was (0 for the first).
    pub try_number: u32,
    /// The response, when one came.
    pub response: Option<Vec<u8>>,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// How long the exchange took.
    pub duration: Duration,
}

/// Writes `steps` as a JSON array.
pub fn write(steps: &[TraceStep], style: &RecordStyle, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut f = Fields::new();
        out.push(b'{');
        f.key(out, "results");
        out.push(b'{');
        let mut r = Fields::new();
        if let Some(response) = &step.response {
            write_sections(response, style, &mut r, out);
            if let Some(header) = dnsluice_core::dns::Header::parse(response) {
                write_flags(&header, "flags", &mut r, out);
            }
        }
        r.string(out, "protocol", step.protocol);
        r.string(out, "resolver", &step.nameserver);
        out.push(b'}');
        f.num(out, "type", u64::from(step.qtype));
        f.num(out, "class", u64::from(step.qclass));
        f.string(out, "name", &step.name);
        f.string(out, "name_server", &step.nameserver);
        f.num(out, "depth", u64::from(step.depth));
        f.string(out, "layer", &step.layer);
        f.raw(out, "cached", if step.cached { "true" } else { "false" });
        f.num(out, "try", u64::from(step.try_number));
        f.raw(out, "duration", &format!("{}", step.duration.as_secs_f64()));
        if let Some(error) = &step.error {
            f.string(out, "error", error);
        }
        out.push(b'}');
    }
    out.push(b']');
}
