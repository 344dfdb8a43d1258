//! Where a stream lives: `nats://HOST:PORT/STREAM` (or `tls://` for a
//! TLS-only broker), several `HOST:PORT`s separated by commas for a
//! cluster. A URL never carries a user or password: those come from a
//! credentials file or the environment ([`super::connect`]).

use std::fmt;

/// The default NATS client port.
pub const DEFAULT_PORT: u16 = 4222;

/// A parsed stream address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsAddress {
    /// `true` for `tls://`: TLS is required.
    pub tls: bool,
    /// `HOST:PORT` of each server to try.
    pub servers: Vec<String>,
    /// The stream's name (also its subject), when the URL has a path.
    pub stream: Option<String>,
}

impl NatsAddress {
    /// Parses `text`; the error says what is wrong with it (never echoing a password).
    pub fn parse(text: &str) -> Result<NatsAddress, String> {
        let (tls, rest) = if let Some(rest) = text.strip_prefix("nats://") {
            (false, rest)
        } else if let Some(rest) = text.strip_prefix("tls://") {
            (true, rest)
        } else {
            return Err(format!(
                "`{}` is no NATS address: write nats://HOST:PORT/STREAM or tls://HOST:PORT/STREAM",
                redact(text)
            ));
        };
        let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
        // Anywhere, not only before the first `/`: a password may hold one
        // (`nats://bob:pa/ss@host`), and a later error would show it.
        if rest.contains('@') {
            return Err(format!(
                "`{}`: no user or password in the URL (it would show in `ps` and in logs): \
                 give a credentials file (creds) or set NATS_USER and NATS_PASSWORD",
                redact(text)
            ));
        }
        let mut servers = Vec::new();
        for host in hosts.split(',') {
            if host.is_empty() {
                return Err(format!("`{}`: a server address is empty", redact(text)));
            }
            let with_port = if has_port(host) {
                host.to_string()
            } else {
                format!("{host}:{DEFAULT_PORT}")
            };
            servers.push(with_port);
        }
        let stream = match path.trim_end_matches('/') {
            "" => None,
            name => {
                check_stream_name(name).map_err(|e| format!("`{}`: {e}", redact(text)))?;
                Some(name.to_string())
            }
        };
        Ok(NatsAddress {
            tls,
            servers,
            stream,
        })
    }

    /// Parses `text`, which must name a stream.
    pub fn parse_stream(text: &str) -> Result<NatsAddress, String> {
        let address = Self::parse(text)?;
        if address.stream.is_none() {
            return Err(format!(
                "`{}` names no stream: write nats://HOST:PORT/STREAM",
                redact(text)
            ));
        }
        Ok(address)
    }

    /// The stream's name; empty when the URL has none.
    pub fn stream(&self) -> &str {
        self.stream.as_deref().unwrap_or("")
    }

    /// The server URLs for the client (`nats://` or `tls://` each).
    pub fn server_urls(&self) -> Vec<String> {
        let scheme = if self.tls { "tls" } else { "nats" };
        self.servers
            .iter()
            .map(|s| format!("{scheme}://{s}"))
            .collect()
    }
}

impl fmt::Display for NatsAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "tls" } else { "nats" };
        write!(f, "{scheme}://{}", self.servers.join(","))?;
        if let Some(stream) = &self.stream {
            write!(f, "/{stream}")?;
        }
        Ok(())
    }
}

/// `host:port`, `[v6]:port` have a port; `host`, `[v6]` do not.
fn has_port(host: &str) -> bool {
    match host.rfind(']') {
        Some(end) => host[end..].contains(':'),
        None => host.contains(':'),
    }
}

/// JetStream stream names: no `.`, `*`, `>`, path separators or whitespace.
pub fn check_stream_name(name: &str) -> Result<(), String> {
    let bad = name
        .chars()
        .find(|c| matches!(c, '.' | '*' | '>' | '/' | '\\') || c.is_whitespace() || c.is_control());
    match bad {
        Some(c) => Err(format!("stream name `{name}` may not contain {c:?}")),
        None if name.len() > 255 => Err(format!("stream name `{name}` is over 255 bytes")),
        None => Ok(()),
    }
}

/// `text` with anything between `//` and `@` replaced, for error messages.
fn redact(text: &str) -> String {
    match (text.find("//"), text.rfind('@')) {
        (Some(start), Some(at)) if start + 2 < at => {
            format!("{}//***{}", &text[..start], &text[at..])
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_echoed_even_with_a_slash_in_it() {
        for url in [
            "nats://bob:pa/ss@127.0.0.1:4222/W",
            "nats://bob:secret@127.0.0.1:4222/W.X",
            "tls://bob:p@ss/w@127.0.0.1/",
        ] {
            let e = NatsAddress::parse(url).unwrap_err();
            assert!(
                !e.contains("pa/ss") && !e.contains("secret") && !e.contains("p@ss"),
                "{e}"
            );
            assert!(e.contains("no user or password in the URL"), "{e}");
        }
    }

    #[test]
    fn parses_servers_stream_and_scheme() {
        let a = NatsAddress::parse("nats://127.0.0.1:5222/WORK").unwrap();
        assert_eq!(a.servers, vec!["127.0.0.1:5222"]);
        assert_eq!(a.stream(), "WORK");
        assert!(!a.tls);
        let a = NatsAddress::parse("tls://h1,h2:4443,[::1]/R").unwrap();
        assert!(a.tls);
        assert_eq!(a.servers, vec!["h1:4222", "h2:4443", "[::1]:4222"]);
        assert_eq!(a.server_urls()[1], "tls://h2:4443");
        assert_eq!(a.to_string(), "tls://h1:4222,h2:4443,[::1]:4222/R");
        assert_eq!(NatsAddress::parse("nats://h").unwrap().stream, None);
    }

    #[test]
    fn refuses_secrets_bad_names_and_schemes() {
        let e = NatsAddress::parse("nats://bob:s3cret@h:1/W").unwrap_err();
        assert!(e.contains("no user or password"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        let e = NatsAddress::parse("nats://h/a.b").unwrap_err();
        assert!(e.contains("may not contain '.'"), "{e}");
        let e = NatsAddress::parse("http://h/W").unwrap_err();
        assert!(e.contains("no NATS address"), "{e}");
        let e = NatsAddress::parse_stream("nats://h:1").unwrap_err();
        assert!(e.contains("names no stream"), "{e}");
    }
}
