//! The epoll driver: for callers that run their own threads instead of an
//! async runtime (replay's UDP, TCP and TLS engine). A connect blocks (with a
//! timeout, TLS handshake included) and leaves a non-blocking socket
//! registered on the caller's [`mio::Registry`] under the caller's token; the
//! caller polls, and on each event reads with [`UdpConn::receive`] or
//! [`StreamConn::read_available`] and [`StreamConn::next_message`], and
//! writes with [`UdpConn`]'s and [`StreamConn`]'s senders.
//!
//! What the bytes mean is not decided here: framing is
//! [`crate::protocol::frame`], ids and matching [`crate::protocol::inflight`], the
//! TLS session rustls' sans-I/O state machine from [`TlsClient::session`].
//! A driver talking to many servers (an iterative resolver) keeps one
//! [`Conn`] and one [`crate::protocol::inflight::InFlight`] per server and token.

mod stream;
mod udp;

pub use stream::StreamConn;
pub use udp::{UdpConn, RECV_SCRATCH};

use crate::endpoint::{DnsTransport, Endpoint};
use crate::error::NetError;
use crate::stats::NetCounters;
use crate::tls::TlsClient;
use mio::{Interest, Registry, Token};
use rustls::pki_types::ServerName;
use std::io;
use std::time::Duration;

/// An open socket or connection.
pub enum Conn {
    /// A connected UDP socket.
    Udp(UdpConn),
    /// A TCP connection, TLS or not.
    Stream(Box<StreamConn>),
}

/// How to open connections: what every connect of one client shares.
pub struct Dialer<'a> {
    /// Where the sockets are registered.
    pub registry: &'a Registry,
    /// How long a connect and TLS handshake may take.
    pub connect_timeout: Duration,
    /// The TLS client and the name to verify, for TLS.
    pub tls: Option<(&'a TlsClient, &'a ServerName<'static>)>,
    /// Counts connections opened, TLS handshakes and failures.
    pub counters: &'a NetCounters,
}

impl Dialer<'_> {
    /// Opens a socket or connection to `endpoint` and registers it under
    /// `token` (readable; streams also writable). Blocks for the connect and
    /// the handshake.
    pub fn connect(&self, endpoint: &Endpoint, token: Token) -> Result<Conn, NetError> {
        let result = self.open(endpoint, token);
        match &result {
            Ok(_) => NetCounters::bump(&self.counters.connections_opened),
            Err(_) => NetCounters::bump(&self.counters.connect_failures),
        }
        result
    }

    fn open(&self, endpoint: &Endpoint, token: Token) -> Result<Conn, NetError> {
        let addr = endpoint.addr;
        let name = endpoint.resolver_name();
        let connect_error = |error: io::Error| NetError::Connect {
            addr: name.clone(),
            error,
        };
        match endpoint.transport {
            DnsTransport::Udp => {
                let socket = std::net::UdpSocket::bind(crate::sys::any_local(addr))
                    .map_err(connect_error)?;
                socket.connect(addr).map_err(connect_error)?;
                socket.set_nonblocking(true).map_err(connect_error)?;
                let mut socket = mio::net::UdpSocket::from_std(socket);
                self.registry
                    .register(&mut socket, token, Interest::READABLE)
                    .map_err(connect_error)?;
                Ok(Conn::Udp(UdpConn::new(socket)))
            }
            DnsTransport::Tcp | DnsTransport::Tls => {
                let mut tcp = std::net::TcpStream::connect_timeout(&addr, self.connect_timeout)
                    .map_err(connect_error)?;
                // Queries are small and latency matters more than packet count.
                let _ = tcp.set_nodelay(true);
                let tls = match (self.tls, endpoint.transport) {
                    (Some((client, server_name)), DnsTransport::Tls) => {
                        let session = stream::handshake(
                            &mut tcp,
                            client,
                            server_name,
                            self.connect_timeout,
                            &name,
                        )?;
                        NetCounters::bump(&self.counters.tls_handshakes);
                        Some(session)
                    }
                    (None, DnsTransport::Tls) => {
                        return Err(NetError::TlsSetup("no TLS configuration".into()))
                    }
                    _ => None,
                };
                tcp.set_nonblocking(true).map_err(connect_error)?;
                let mut tcp = mio::net::TcpStream::from_std(tcp);
                self.registry
                    .register(&mut tcp, token, Interest::READABLE | Interest::WRITABLE)
                    .map_err(connect_error)?;
                Ok(Conn::Stream(Box::new(StreamConn::new(tcp, tls))))
            }
            DnsTransport::Https => Err(NetError::TlsSetup(
                "the epoll driver does not speak HTTPS".into(),
            )),
        }
    }
}

impl Conn {
    /// Takes the socket off `registry` (before it is dropped).
    pub fn deregister(mut self, registry: &Registry) {
        let _ = match &mut self {
            Conn::Udp(udp) => registry.deregister(udp.socket_mut()),
            Conn::Stream(stream) => registry.deregister(stream.tcp_mut()),
        };
    }
}
