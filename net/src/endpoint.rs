//! Where a nameserver is and how to reach it.

use crate::error::NetError;
use dnsluice_options::{Choice, ChoiceValue};
use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// How DNS messages travel to a nameserver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Choice)]
pub enum DnsTransport {
    /// Plain DNS over UDP.
    Udp,
    /// Plain DNS over TCP, pipelined (RFC 7766).
    Tcp,
    /// DNS-over-TLS (RFC 7858), pipelined.
    #[choice(alias = "dot")]
    Tls,
    /// DNS-over-HTTPS (RFC 8484) over HTTP/2.
    #[choice(alias = "doh")]
    Https,
}

impl DnsTransport {
    /// The port a nameserver listens on when none is given.
    pub fn default_port(self) -> u16 {
        match self {
            DnsTransport::Udp | DnsTransport::Tcp => 53,
            DnsTransport::Tls => 853,
            DnsTransport::Https => 443,
        }
    }

    /// The option value naming this transport (`udp`, `tcp`, `tls`, `https`).
    pub fn as_str(self) -> &'static str {
        self.name()
    }

    /// The name ZDNS uses in its `protocol` field (`udp`, `tcp`, `DoT`, `DoH`).
    pub fn protocol_name(self) -> &'static str {
        match self {
            DnsTransport::Udp => "udp",
            DnsTransport::Tcp => "tcp",
            DnsTransport::Tls => "DoT",
            DnsTransport::Https => "DoH",
        }
    }

    /// Whether queries travel over a connection that is worth keeping.
    pub fn is_stream(self) -> bool {
        !matches!(self, DnsTransport::Udp)
    }
}

/// One nameserver: its socket address, the transport, and for HTTPS the URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Where to connect.
    pub addr: SocketAddr,
    /// How to talk to it.
    pub transport: DnsTransport,
    /// The host name of a DoH URL (for TLS's server name and HTTP's authority),
    /// `None` when the nameserver was given as an address.
    pub host: Option<String>,
    /// The HTTP path of a DoH URL (`/dns-query` by default).
    pub path: String,
}

impl Endpoint {
    /// Parses `IP`, `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT`, or for HTTPS a URL
    /// `https://HOST[:PORT][/PATH]`; the port defaults by transport.
    pub fn parse(text: &str, transport: DnsTransport) -> Result<Endpoint, NetError> {
        let bad = |why: &str| NetError::BadEndpoint {
            text: text.to_string(),
            why: why.to_string(),
        };
        let text_trimmed = text.trim();
        if text_trimmed.is_empty() {
            return Err(bad("empty nameserver"));
        }
        let (authority, path, transport) = match text_trimmed.strip_prefix("https://") {
            Some(rest) => {
                if transport != DnsTransport::Https {
                    return Err(bad(
                        "a URL names a DNS-over-HTTPS server: use --transport https",
                    ));
                }
                match rest.find('/') {
                    Some(slash) => (&rest[..slash], rest[slash..].to_string(), transport),
                    None => (rest, "/dns-query".to_string(), transport),
                }
            }
            None => (text_trimmed, "/dns-query".to_string(), transport),
        };
        let default_port = transport.default_port();
        // A bare address, IPv4 or IPv6, without a port.
        if let Ok(ip) = IpAddr::from_str(authority) {
            return Ok(Endpoint {
                addr: SocketAddr::new(ip, default_port),
                transport,
                host: None,
                path,
            });
        }
        if let Ok(addr) = SocketAddr::from_str(authority) {
            return Ok(Endpoint {
                addr,
                transport,
                host: None,
                path,
            });
        }
        if let Some(rest) = authority.strip_prefix('[') {
            let inner = rest
                .strip_suffix(']')
                .ok_or_else(|| bad("an IPv6 address in brackets lacks its `]`"))?;
            let ip = IpAddr::from_str(inner).map_err(|_| bad("not an IPv6 address"))?;
            return Ok(Endpoint {
                addr: SocketAddr::new(ip, default_port),
                transport,
                host: None,
                path,
            });
        }
        // A host name, with or without a port: resolved once, here.
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse::<u16>()
                    .map_err(|_| bad("the port is not a number 0-65535"))?,
            ),
            None => (authority, default_port),
        };
        if host.is_empty() || host.contains(':') {
            return Err(bad("expected IP, IP:PORT, [IPv6]:PORT or HOST:PORT"));
        }
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve `{host}`: {e}")))?
            .next()
            .ok_or_else(|| bad(&format!("`{host}` has no address")))?;
        Ok(Endpoint {
            addr,
            transport,
            host: Some(host.to_string()),
            path,
        })
    }

    /// How results name this resolver: `ip:port`, or the URL for HTTPS.
    pub fn resolver_name(&self) -> String {
        match self.transport {
            DnsTransport::Https => {
                let host = match &self.host {
                    Some(h) => h.clone(),
                    None => match self.addr.ip() {
                        IpAddr::V6(ip) => format!("[{ip}]"),
                        IpAddr::V4(ip) => ip.to_string(),
                    },
                };
                format!("https://{host}:{}{}", self.addr.port(), self.path)
            }
            _ => self.addr.to_string(),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.resolver_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, transport: DnsTransport) -> Endpoint {
        Endpoint::parse(text, transport).unwrap()
    }

    #[test]
    fn default_ports_follow_the_transport() {
        assert_eq!(
            parse("127.0.0.1", DnsTransport::Udp).addr.to_string(),
            "127.0.0.1:53"
        );
        assert_eq!(
            parse("127.0.0.1", DnsTransport::Tls).addr.to_string(),
            "127.0.0.1:853"
        );
        assert_eq!(parse("::1", DnsTransport::Tcp).addr.to_string(), "[::1]:53");
        assert_eq!(
            parse("[::1]", DnsTransport::Tls).addr.to_string(),
            "[::1]:853"
        );
    }

    #[test]
    fn explicit_ports_and_urls() {
        assert_eq!(
            parse("127.0.0.2:5300", DnsTransport::Tcp).addr.to_string(),
            "127.0.0.2:5300"
        );
        assert_eq!(
            parse("[::1]:5300", DnsTransport::Udp).addr.to_string(),
            "[::1]:5300"
        );
        let doh = parse("https://127.0.0.1:8443/q", DnsTransport::Https);
        assert_eq!(doh.addr.to_string(), "127.0.0.1:8443");
        assert_eq!(doh.path, "/q");
        assert_eq!(doh.resolver_name(), "https://127.0.0.1:8443/q");
        let doh = parse("https://localhost", DnsTransport::Https);
        assert_eq!(doh.addr.port(), 443);
        assert_eq!(doh.path, "/dns-query");
        assert_eq!(doh.host.as_deref(), Some("localhost"));
    }

    #[test]
    fn bad_endpoints_say_why() {
        for (text, transport, why) in [
            ("", DnsTransport::Udp, "empty"),
            ("127.0.0.1:99999", DnsTransport::Udp, "port"),
            ("https://127.0.0.1", DnsTransport::Udp, "--transport https"),
            ("[::1", DnsTransport::Udp, "IPv6"),
        ] {
            let err = Endpoint::parse(text, transport).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
