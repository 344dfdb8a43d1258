//! The steps of a lookup, for `--result-verbosity trace`: every question a
//! resolver asked on the way (or found in its cache), which server and zone,
//! what came back, and how long it took. The iterative resolver fills it for
//! each referral it follows; the direct lookups for each try. The record
//! writes it as `data.trace`, a JSON array.

use crate::json::{push_json_str, Fields};
use dnsluice_core::dns::mnemonic;
use std::time::Duration;

/// One step of a lookup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// How deep in nested lookups this step is: 0 for the name itself, 1
    /// for the address of a nameserver it needed, and so on.
    pub depth: u32,
    /// The zone whose server was asked (ZDNS's `layer`); `.` for the root.
    pub zone: String,
    /// The name asked.
    pub name: String,
    /// The type asked.
    pub qtype: u16,
    /// The class asked.
    pub qclass: u16,
    /// The server asked (`ip:port`); `None` when the cache answered.
    pub server: Option<String>,
    /// `udp` or `tcp` (empty from the cache).
    pub protocol: &'static str,
    /// Whether the cache answered instead of a server.
    pub cached: bool,
    /// Which try at this zone (1 for the first server asked).
    pub try_number: u32,
    /// The response's RCODE mnemonic, when one came.
    pub rcode: Option<String>,
    /// What the step found: `referral to com.`, `answer`, `CNAME to x.`,
    /// `NXDOMAIN`, `lame: REFUSED`, `timeout`, ...
    pub result: String,
    /// How long the step took.
    pub duration: Duration,
}

/// Appends `steps` as a JSON array.
pub fn write_steps(steps: &[Step], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut f = Fields::new();
        out.push(b'{');
        f.num(out, "depth", u64::from(step.depth));
        f.string(out, "zone", &step.zone);
        f.string(out, "name", &step.name);
        f.string(out, "type", &mnemonic::rtype(step.qtype));
        f.string(out, "class", &mnemonic::class(step.qclass));
        match &step.server {
            Some(server) => f.string(out, "name_server", server),
            None => f.raw(out, "name_server", "null"),
        }
        if !step.protocol.is_empty() {
            f.string(out, "protocol", step.protocol);
        }
        f.raw(out, "cached", if step.cached { "true" } else { "false" });
        f.num(out, "try", u64::from(step.try_number));
        if let Some(rcode) = &step.rcode {
            f.string(out, "rcode", rcode);
        }
        f.key(out, "result");
        push_json_str(step.result.as_bytes(), out);
        f.key(out, "duration_ms");
        let ms = step.duration.as_secs_f64() * 1000.0;
        out.extend_from_slice(format!("{ms:.3}").as_bytes());
        out.push(b'}');
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_json() {
        let steps = [
            Step {
                zone: ".".into(),
                name: "www.example.".into(),
                qtype: 1,
                qclass: 1,
                server: Some("127.53.0.1:53".into()),
                protocol: "udp",
                try_number: 1,
                rcode: Some("NOERROR".into()),
                result: "referral to example.".into(),
                duration: Duration::from_micros(1500),
                ..Step::default()
            },
            Step {
                depth: 1,
                zone: "example.".into(),
                name: "ns.example.".into(),
                qtype: 28,
                qclass: 1,
                cached: true,
                result: "answer".into(),
                ..Step::default()
            },
        ];
        let mut out = Vec::new();
        write_steps(&steps, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v[0]["name_server"], "127.53.0.1:53");
        assert_eq!(v[0]["type"], "A");
        assert_eq!(v[0]["result"], "referral to example.");
        assert_eq!(v[0]["duration_ms"], 1.5);
        assert_eq!(v[1]["cached"], true);
        assert_eq!(v[1]["name_server"], serde_json::Value::Null);
        assert_eq!(v[1]["type"], "AAAA");
        assert_eq!(v[1]["depth"], 1);
    }
}
