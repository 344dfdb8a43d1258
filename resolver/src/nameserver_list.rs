//! The nameservers a lookup is given: addresses on the command line (or in
//! a pipeline), or `@FILE` for a file of them, one per line, as scanners'
//! resolver lists are kept (`#` starts a comment; blank lines are skipped).
//! A bad entry is an error that names the file and line.

use dnsluice_net::{DnsTransport, Endpoint};

/// Every nameserver of `given` (entries and the lines of `@FILE` entries),
/// parsed for `transport`.
pub fn parse(given: &[String], transport: DnsTransport) -> Result<Vec<Endpoint>, String> {
    let mut endpoints = Vec::new();
    for entry in given {
        let Some(path) = entry.trim().strip_prefix('@') else {
            endpoints.push(Endpoint::parse(entry, transport).map_err(|e| e.to_string())?);
            continue;
        };
        let text = std::fs::read_to_string(path).map_err(|e| format!("@{path}: {e}"))?;
        let before = endpoints.len();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let endpoint = Endpoint::parse(line, transport)
                .map_err(|e| format!("@{path} line {}: {e}", n + 1))?;
            endpoints.push(endpoint);
        }
        if endpoints.len() == before {
            return Err(format!("@{path}: no nameserver in it"));
        }
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_nameservers_with_comments() {
        let dir = testkit::temp_dir("nameservers");
        let file = dir.join("resolvers.txt");
        std::fs::write(
            &file,
            "# test resolvers\n127.0.0.1:5300\n\n127.0.0.2   # the second\n[::1]:53\n",
        )
        .unwrap();
        let given = vec![format!("@{}", file.display()), "127.0.0.9".to_string()];
        let list: Vec<String> = parse(&given, DnsTransport::Udp)
            .unwrap()
            .iter()
            .map(|e| e.addr.to_string())
            .collect();
        assert_eq!(
            list,
            ["127.0.0.1:5300", "127.0.0.2:53", "[::1]:53", "127.0.0.9:53"]
        );
        std::fs::write(&file, "127.0.0.1\nnot-an-address:x\n").unwrap();
        let e = parse(&given, DnsTransport::Udp).unwrap_err();
        assert!(
            e.starts_with(&format!("@{} line 2: ", file.display())),
            "{e}"
        );
        std::fs::write(&file, "# nothing\n").unwrap();
        assert!(parse(&given, DnsTransport::Udp)
            .unwrap_err()
            .contains("no nameserver"));
        let e = parse(&["@/nonexistent/r.txt".to_string()], DnsTransport::Udp).unwrap_err();
        assert!(e.starts_with("@/nonexistent/r.txt: "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
