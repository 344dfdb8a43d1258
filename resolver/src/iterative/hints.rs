//! Where iteration starts: the root servers, from a hints file in the
//! `named.root` format that BIND and unbound read (`--root-hints`), from the
//! addresses given with `--name-servers`, or the IANA root servers built in.

use super::delegation::{Delegation, NsServer};
use super::name::Name;
use std::net::IpAddr;
use std::path::Path;

/// The IANA root servers (`named.root` of 2023-09, `b` renumbered): name,
/// IPv4, IPv6.
const IANA_ROOTS: [(&str, &str, &str); 13] = [
    ("a.root-servers.net", "198.41.0.4", "2001:503:ba3e::2:30"),
    ("b.root-servers.net", "170.247.170.2", "2801:1b8:10::b"),
    ("c.root-servers.net", "192.33.4.12", "2001:500:2::c"),
    ("d.root-servers.net", "199.7.91.13", "2001:500:2d::d"),
    ("e.root-servers.net", "192.203.230.10", "2001:500:a8::e"),
    ("f.root-servers.net", "192.5.5.241", "2001:500:2f::f"),
    ("g.root-servers.net", "192.112.36.4", "2001:500:12::d0d"),
    ("h.root-servers.net", "198.97.190.53", "2001:500:1::53"),
    ("i.root-servers.net", "192.36.148.17", "2001:7fe::53"),
    ("j.root-servers.net", "192.58.128.30", "2001:503:c27::2:30"),
    ("k.root-servers.net", "193.0.14.129", "2001:7fd::1"),
    ("l.root-servers.net", "199.7.83.42", "2001:500:9f::42"),
    ("m.root-servers.net", "202.12.27.33", "2001:dc3::35"),
];

/// The built-in root servers.
pub fn iana() -> Delegation {
    let servers = IANA_ROOTS
        .iter()
        .map(|(name, v4, v6)| NsServer {
            name: Name::parse(name).expect("a valid built-in name"),
            addrs: [v4, v6]
                .iter()
                .map(|a| a.parse().expect("a valid built-in address"))
                .collect(),
        })
        .collect();
    Delegation {
        zone: Name::root(),
        servers,
    }
}

/// Root servers known by address only (`--name-servers` with `--iterative`).
pub fn from_addresses(addrs: &[IpAddr]) -> Delegation {
    Delegation {
        zone: Name::root(),
        servers: addrs
            .iter()
            .enumerate()
            .map(|(i, addr)| NsServer {
                // A name no real server has, so that nothing else matches it.
                name: Name::parse(&format!("root{i}.hints.invalid")).expect("a valid name"),
                addrs: vec![*addr],
            })
            .collect(),
    }
}

/// Why a hints file cannot be used.
#[derive(Debug)]
pub struct HintsError {
    /// The file.
    pub path: String,
    /// The line (1-based), when the problem is on one.
    pub line: Option<usize>,
    /// What is wrong.
    pub why: String,
}

impl std::fmt::Display for HintsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path, self.why),
            None => write!(f, "{}: {}", self.path, self.why),
        }
    }
}

/// Reads a hints file.
pub fn read(path: &Path) -> Result<Delegation, HintsError> {
    let error = |line: Option<usize>, why: String| HintsError {
        path: path.display().to_string(),
        line,
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(None, e.to_string()))?;
    parse(&text).map_err(|(line, why)| error(line, why))
}

/// Parses hints text: `.` NS records and the A/AAAA records of their names
/// (owner, optional TTL and class, type, data; `;` starts a comment).
pub fn parse(text: &str) -> Result<Delegation, (Option<usize>, String)> {
    let mut names: Vec<Name> = Vec::new();
    let mut addresses: Vec<(Name, IpAddr)> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split(';').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = Some(index + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        // owner [ttl] [class] type data: the type is the first word after the
        // owner that is neither a number nor a class.
        let Some(kind_at) = words
            .iter()
            .skip(1)
            .position(|w| !w.chars().all(|c| c.is_ascii_digit()) && !w.eq_ignore_ascii_case("IN"))
            .map(|p| p + 1)
        else {
            return Err((at, format!("no record type in `{line}`")));
        };
        let (Some(kind), Some(data)) = (words.get(kind_at), words.get(kind_at + 1)) else {
            return Err((at, format!("no record data in `{line}`")));
        };
        let owner =
            Name::parse(words[0]).map_err(|e| (at, format!("bad name `{}`: {e}", words[0])))?;
        match kind.to_ascii_uppercase().as_str() {
            "NS" => {
                if !owner.is_root() {
                    return Err((at, format!("an NS record for `{owner}`, not the root")));
                }
                let target =
                    Name::parse(data).map_err(|e| (at, format!("bad name `{data}`: {e}")))?;
                if !names.contains(&target) {
                    names.push(target);
                }
            }
            "A" | "AAAA" => {
                let addr: IpAddr = data
                    .parse()
                    .map_err(|_| (at, format!("bad address `{data}`")))?;
                if addr.is_ipv4() != kind.eq_ignore_ascii_case("A") {
                    return Err((at, format!("`{data}` is not an {kind} address")));
                }
                addresses.push((owner, addr));
            }
            other => return Err((at, format!("unexpected record type {other}"))),
        }
    }
    if names.is_empty() {
        return Err((None, "no NS records for the root".to_string()));
    }
    let servers: Vec<NsServer> = names
        .into_iter()
        .map(|name| NsServer {
            addrs: addresses
                .iter()
                .filter(|(owner, _)| *owner == name)
                .map(|(_, addr)| *addr)
                .collect(),
            name,
        })
        .collect();
    if servers.iter().all(|s| s.addrs.is_empty()) {
        return Err((None, "no addresses for the root servers".to_string()));
    }
    Ok(Delegation {
        zone: Name::root(),
        servers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_root_format() {
        let text = "\
; a comment
.                        3600000      NS    A.ROOT-SERVERS.NET.
A.ROOT-SERVERS.NET.      3600000      A     198.41.0.4
A.ROOT-SERVERS.NET.      3600000      AAAA  2001:503:ba3e::2:30
.  NS b.root.test. ; trailing comment
b.root.test. IN A 127.53.0.2
";
        let hints = parse(text).unwrap();
        assert!(hints.zone.is_root());
        assert_eq!(hints.servers.len(), 2);
        assert_eq!(
            hints.servers[0].name,
            Name::parse("a.root-servers.net").unwrap()
        );
        assert_eq!(
            hints.servers[0].addrs,
            [
                "198.41.0.4".parse::<IpAddr>().unwrap(),
                "2001:503:ba3e::2:30".parse().unwrap()
            ]
        );
        assert_eq!(
            hints.servers[1].addrs,
            ["127.53.0.2".parse::<IpAddr>().unwrap()]
        );
    }

    #[test]
    fn bad_hints_name_the_line() {
        let (line, why) = parse(".  NS a.test.\na.test. A 1.2.3\n").unwrap_err();
        assert_eq!(line, Some(2));
        assert!(why.contains("bad address"), "{why}");
        let (line, why) = parse("a.test. A 1.2.3.4\n").unwrap_err();
        assert_eq!(line, None);
        assert!(why.contains("no NS"), "{why}");
        let (_, why) = parse("com. NS a.test.\n").unwrap_err();
        assert!(why.contains("not the root"), "{why}");
        let (_, why) = parse(". NS a.test.\n").unwrap_err();
        assert!(why.contains("no addresses"), "{why}");
        let (_, why) = parse(". NS a.test.\na.test. AAAA 1.2.3.4\n").unwrap_err();
        assert!(why.contains("not an AAAA"), "{why}");
    }

    #[test]
    fn the_built_in_roots_are_unbounds() {
        // unbound compiles the same IANA list in; its binary is the
        // independent source (Debian's unbound package).
        let Ok(binary) = std::fs::read("/usr/sbin/unbound") else {
            panic!("unbound is not installed (apt-get install unbound)");
        };
        let text = String::from_utf8_lossy(&binary);
        let roots = iana();
        assert_eq!(roots.servers.len(), 13);
        for server in &roots.servers {
            for addr in &server.addrs {
                let needle = format!("{addr}\0");
                assert!(
                    text.contains(&needle),
                    "{addr} of {} is not unbound's",
                    server.name
                );
            }
        }
    }
}
