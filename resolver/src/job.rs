//! One unit of lookup work: a name, what to ask, and where.

use dnsluice_net::{DnsTransport, Endpoint};
use std::collections::HashMap;

/// A name to resolve, from one input line.
#[derive(Clone, Debug)]
pub struct Job {
    /// Input order (0-based), for whoever wants to restore it.
    pub index: u64,
    /// The name as given (trimmed).
    pub name: String,
    /// The nameserver this line is pinned to (`name,nameserver`), else `None`.
    pub pinned: Option<Endpoint>,
}

/// A line that cannot become a job: the name (or the whole line) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    /// What to print as the record's `name`.
    pub name: String,
    /// Why the line was rejected.
    pub reason: String,
}

/// Parses `name` or `name,nameserver` (nameserver as for `--name-servers`);
/// `known` caches the nameservers parsed so far, by their text; `scratch`
/// is room to check that the name encodes (kept between calls; `None`:
/// the caller's engine checks it when it builds the query).
pub fn parse_line(
    index: u64,
    line: &str,
    transport: DnsTransport,
    known: &mut HashMap<String, Endpoint>,
    scratch: Option<&mut Vec<u8>>,
) -> Result<Job, BadLine> {
    let line = line.trim();
    let (name, server) = match line.split_once(',') {
        Some((name, server)) => (name.trim(), Some(server.trim())),
        None => (line, None),
    };
    let bad = |reason: String| BadLine {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("empty name".to_string()));
    }
    // The name must encode: checked here so the error names the line.
    if let Some(scratch) = scratch {
        scratch.clear();
        dnsluice_net::query::push_name(name, scratch).map_err(|e| bad(format!("bad name: {e}")))?;
    }
    let pinned = match server {
        Some(text) => Some(match known.get(text) {
            Some(endpoint) => endpoint.clone(),
            None => {
                let endpoint = Endpoint::parse(text, transport).map_err(|e| bad(e.to_string()))?;
                known.insert(text.to_string(), endpoint.clone());
                endpoint
            }
        }),
        None => None,
    };
    Ok(Job {
        index,
        name: name.to_string(),
        pinned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_pinned_nameservers() {
        let job = parse_line(
            3,
            " example.com ",
            DnsTransport::Udp,
            &mut HashMap::new(),
            Some(&mut Vec::new()),
        )
        .unwrap();
        assert_eq!(
            (job.index, job.name.as_str(), job.pinned),
            (3, "example.com", None)
        );
        let job = parse_line(
            0,
            "example.com,127.0.0.2:5300",
            DnsTransport::Tcp,
            &mut HashMap::new(),
            Some(&mut Vec::new()),
        )
        .unwrap();
        assert_eq!(job.pinned.unwrap().addr.to_string(), "127.0.0.2:5300");
        let job = parse_line(
            0,
            "example.com,[::1]",
            DnsTransport::Tls,
            &mut HashMap::new(),
            Some(&mut Vec::new()),
        )
        .unwrap();
        assert_eq!(job.pinned.unwrap().addr.to_string(), "[::1]:853");
    }

    #[test]
    fn bad_lines_say_why() {
        let err = parse_line(
            0,
            "a..b",
            DnsTransport::Udp,
            &mut HashMap::new(),
            Some(&mut Vec::new()),
        )
        .unwrap_err();
        assert_eq!(err.name, "a..b");
        assert!(err.reason.contains("empty label"), "{}", err.reason);
        let err = parse_line(
            0,
            "ok.example,not-an-address:x",
            DnsTransport::Udp,
            &mut HashMap::new(),
            Some(&mut Vec::new()),
        )
        .unwrap_err();
        assert_eq!(err.name, "ok.example");
        assert!(err.reason.contains("port"), "{}", err.reason);
        assert!(parse_line(
            0,
            ",127.0.0.1",
            DnsTransport::Udp,
            &mut HashMap::new(),
            Some(&mut Vec::new())
        )
        .is_err());
    }
}
