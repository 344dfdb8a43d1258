//! The tokio driver: connections to one nameserver, of every transport, with
//! many queries in flight, for async callers (the lookups; DoH everywhere).
//! Framing, ids, matching and the dead-connection rule come from
//! [`crate::protocol`] and [`crate::health`]; this module only moves bytes.

mod https;
mod mux;
mod transfer;

use crate::endpoint::{DnsTransport, Endpoint};
use crate::error::NetError;
use crate::stats::NetCounters;
use crate::tls::{Alpn, TlsClient, TlsOptions};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpStream, UdpSocket};

pub use https::DohMethod;
pub use transfer::{transfer, Transfer, MAX_TRANSFER_BYTES};

/// An answer and how long it took.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The response message, with the query's id restored.
    pub response: Vec<u8>,
    /// From just before the query was written to when the answer was read.
    pub latency: Duration,
}

/// What every connection of one client shares: TLS setup, timeouts, counters.
#[derive(Clone)]
pub struct ClientSetup {
    /// The transport.
    pub transport: DnsTransport,
    /// The TLS client (TLS and HTTPS only).
    tls: Option<TlsClient>,
    /// How long a connect (and TLS handshake) may take.
    pub connect_timeout: Duration,
    /// POST or GET, for HTTPS.
    pub doh_method: DohMethod,
    /// Counters every connection updates.
    pub counters: Arc<NetCounters>,
    /// Source addresses, used in turn (none: any address).
    local_addrs: Arc<[IpAddr]>,
    next_local: Arc<AtomicUsize>,
}

impl ClientSetup {
    /// Prepares to connect over `transport`; loads the CA file or the system roots
    /// once, here, for TLS and HTTPS.
    pub fn new(
        transport: DnsTransport,
        tls_options: &TlsOptions,
        connect_timeout: Duration,
        doh_method: DohMethod,
        counters: Arc<NetCounters>,
    ) -> Result<ClientSetup, NetError> {
        let tls = match transport {
            DnsTransport::Tls => Some(TlsClient::new(tls_options, Alpn::Dot)?),
            DnsTransport::Https => Some(TlsClient::new(tls_options, Alpn::H2)?),
            DnsTransport::Udp | DnsTransport::Tcp => None,
        };
        Ok(ClientSetup {
            transport,
            tls,
            connect_timeout,
            doh_method,
            counters,
            local_addrs: Arc::new([]),
            next_local: Arc::default(),
        })
    }

    /// Connections leave from these addresses, in turn (a connection to a
    /// server of a family none of them has fails, saying so).
    pub fn with_local_addrs(mut self, addrs: &[IpAddr]) -> ClientSetup {
        self.local_addrs = addrs.into();
        self
    }

    /// The source address for a connection to `server`: the next of the
    /// given ones of its family, or any address when none were given.
    pub(crate) fn local_for(&self, server: SocketAddr) -> Result<SocketAddr, NetError> {
        if self.local_addrs.is_empty() {
            return Ok(crate::sys::any_local(server));
        }
        let family: Vec<IpAddr> = self
            .local_addrs
            .iter()
            .copied()
            .filter(|ip| ip.is_ipv4() == server.is_ipv4())
            .collect();
        if family.is_empty() {
            return Err(NetError::Setup(format!(
                "no --local-addr of {server}'s address family"
            )));
        }
        let k = self.next_local.fetch_add(1, Ordering::Relaxed) % family.len();
        Ok(SocketAddr::new(family[k], 0))
    }
}

/// An open connection (or, for UDP, a connected socket) to one nameserver.
pub enum Connection {
    /// UDP, TCP or TLS: queries matched to answers by id and question.
    Multiplexed(mux::Mux),
    /// DNS-over-HTTPS: one HTTP/2 stream per query.
    Https(https::HttpsConnection),
}

/// Opens a connection to `endpoint` with `setup`.
pub async fn connect(endpoint: &Endpoint, setup: &ClientSetup) -> Result<Connection, NetError> {
    let result = tokio::time::timeout(setup.connect_timeout, open(endpoint, setup)).await;
    let result = match result {
        Ok(r) => r,
        Err(_) => Err(NetError::Connect {
            addr: endpoint.resolver_name(),
            error: std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"),
        }),
    };
    match &result {
        Ok(_) => NetCounters::bump(&setup.counters.connections_opened),
        Err(_) => NetCounters::bump(&setup.counters.connect_failures),
    }
    result
}

async fn open(endpoint: &Endpoint, setup: &ClientSetup) -> Result<Connection, NetError> {
    let name = endpoint.resolver_name();
    match endpoint.transport {
        DnsTransport::Udp => {
            let local = setup.local_for(endpoint.addr)?;
            let socket = udp_socket(local, endpoint.addr)
                .await
                .map_err(|error| NetError::Connect { addr: name, error })?;
            Ok(Connection::Multiplexed(mux::Mux::udp(
                socket,
                setup.counters.clone(),
            )))
        }
        DnsTransport::Tcp => {
            let tcp = tcp_connect(setup.local_for(endpoint.addr)?, endpoint.addr, &name).await?;
            Ok(Connection::Multiplexed(mux::Mux::stream(
                tcp,
                setup.counters.clone(),
            )))
        }
        DnsTransport::Tls => {
            let tls = tls_connect(endpoint, setup, &name).await?;
            Ok(Connection::Multiplexed(mux::Mux::stream(
                tls,
                setup.counters.clone(),
            )))
        }
        DnsTransport::Https => {
            let tls = tls_connect(endpoint, setup, &name).await?;
            let negotiated_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            if !negotiated_h2 {
                return Err(NetError::Http {
                    addr: name,
                    message: "the server did not agree to HTTP/2 (ALPN h2)".to_string(),
                });
            }
            let connection = https::HttpsConnection::handshake(tls, endpoint, setup).await?;
            Ok(Connection::Https(connection))
        }
    }
}

async fn udp_socket(local: SocketAddr, server: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = UdpSocket::bind(local).await?;
    socket.connect(server).await?;
    Ok(socket)
}

async fn tcp_connect(
    local: SocketAddr,
    addr: SocketAddr,
    name: &str,
) -> Result<TcpStream, NetError> {
    let connect_error = |error| NetError::Connect {
        addr: name.to_string(),
        error,
    };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(connect_error)?;
    if !local.ip().is_unspecified() {
        socket.bind(local).map_err(connect_error)?;
    }
    let tcp = socket.connect(addr).await.map_err(connect_error)?;
    // Queries are small and latency matters more than packet count.
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

async fn tls_connect(
    endpoint: &Endpoint,
    setup: &ClientSetup,
    name: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, NetError> {
    let tls = setup
        .tls
        .as_ref()
        .ok_or_else(|| NetError::TlsSetup("no TLS configuration".to_string()))?;
    let server_name = tls.server_name(endpoint)?;
    let tcp = tcp_connect(setup.local_for(endpoint.addr)?, endpoint.addr, name).await?;
    let connector = tokio_rustls::TlsConnector::from(tls.config());
    let stream =
        connector
            .connect(server_name, tcp)
            .await
            .map_err(|error| NetError::Handshake {
                addr: name.to_string(),
                error,
            })?;
    NetCounters::bump(&setup.counters.tls_handshakes);
    Ok(stream)
}

impl Connection {
    /// Sends `query` and waits up to `timeout` for its answer. Many calls may run
    /// at once on one connection. On UDP, TCP and TLS the query's id is replaced
    /// on the wire by one unique on this connection and restored in the answer;
    /// on HTTPS each query has its own stream and travels as it is.
    pub async fn exchange(&self, query: &[u8], timeout: Duration) -> Result<Exchange, NetError> {
        if query.len() < 12 {
            return Err(NetError::BadQuery("shorter than a DNS header"));
        }
        if query.len() > usize::from(u16::MAX) {
            return Err(NetError::BadQuery("longer than 65535 bytes"));
        }
        let started = Instant::now();
        let response = match self {
            Connection::Multiplexed(mux) => mux.exchange(query, timeout).await?,
            Connection::Https(https) => {
                match tokio::time::timeout(timeout, https.exchange(query)).await {
                    Ok(result) => result?,
                    Err(_) => return Err(NetError::Timeout),
                }
            }
        };
        Ok(Exchange {
            response,
            latency: started.elapsed(),
        })
    }

    /// Why the connection can no longer be used, once it cannot.
    pub fn broken(&self) -> Option<String> {
        match self {
            Connection::Multiplexed(mux) => mux.closed_reason(),
            Connection::Https(https) => https.closed_reason(),
        }
    }
}
