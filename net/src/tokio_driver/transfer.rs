//! Zone transfers (AXFR, RFC 5936): one query on a fresh TCP (or TLS,
//! RFC 9103) connection, then messages read until the closing SOA. Which
//! messages belong and when the transfer ends is [`TransferState`]'s rule;
//! this file moves the bytes.

use super::{tcp_connect, tls_connect, ClientSetup};
use crate::endpoint::{DnsTransport, Endpoint};
use crate::error::NetError;
use crate::protocol::frame::{push_frame, FrameReader};
use crate::protocol::ids::QueryIds;
use crate::protocol::question::set_id;
use crate::protocol::transfer::{Progress, TransferState};
use crate::stats::NetCounters;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Most bytes one transfer may bring (a bound on memory, far above any
/// real zone this tool is pointed at).
pub const MAX_TRANSFER_BYTES: usize = 256 << 20;

/// The messages of a whole transfer, in the order they came.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// Every message, the first opening with the SOA, the last closing with it.
    pub messages: Vec<Vec<u8>>,
    /// From just before the query was written to the closing SOA.
    pub latency: Duration,
}

/// Transfers what `query` (an AXFR query; its id is replaced by an
/// unpredictable one, RFC 5452 §9.2) asks for from `endpoint`: over
/// TLS for a TLS endpoint, else over TCP (whatever the transport of the
/// other queries). `timeout` bounds the connect and each wait for more bytes.
pub async fn transfer(
    endpoint: &Endpoint,
    setup: &ClientSetup,
    query: &[u8],
    timeout: Duration,
) -> Result<Transfer, NetError> {
    let name = endpoint.resolver_name();
    let connect_timed_out = || NetError::Connect {
        addr: name.clone(),
        error: std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"),
    };
    let connected = match endpoint.transport {
        DnsTransport::Udp | DnsTransport::Tcp => {
            let local = setup.local_for(endpoint.addr)?;
            let tcp = tokio::time::timeout(timeout, tcp_connect(local, endpoint.addr, &name))
                .await
                .map_err(|_| connect_timed_out());
            match tcp {
                Ok(Ok(stream)) => Ok(exchange(stream, setup, query, timeout).await),
                Ok(Err(e)) | Err(e) => Err(e),
            }
        }
        DnsTransport::Tls => {
            let tls = tokio::time::timeout(timeout, tls_connect(endpoint, setup, &name))
                .await
                .map_err(|_| connect_timed_out());
            match tls {
                Ok(Ok(stream)) => Ok(exchange(stream, setup, query, timeout).await),
                Ok(Err(e)) | Err(e) => Err(e),
            }
        }
        DnsTransport::Https => {
            return Err(NetError::BadQuery(
                "a zone transfer needs TCP or TLS, not HTTPS",
            ))
        }
    };
    match connected {
        Ok(result) => {
            NetCounters::bump(&setup.counters.connections_opened);
            result
        }
        Err(error) => {
            NetCounters::bump(&setup.counters.connect_failures);
            Err(error)
        }
    }
}

/// Sends `query` on `stream` and reads the transfer's messages.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    setup: &ClientSetup,
    query: &[u8],
    timeout: Duration,
) -> Result<Transfer, NetError> {
    if query.len() < 12 {
        return Err(NetError::BadQuery("shorter than a DNS header"));
    }
    let id = QueryIds::default().next(0, |_| false).unwrap_or(1);
    let mut query = query.to_vec();
    set_id(&mut query, id);
    let mut frame = Vec::with_capacity(query.len() + 2);
    push_frame(&mut frame, &query, id)
        .map_err(|_| NetError::BadQuery("longer than 65535 bytes"))?;
    let started = Instant::now();
    let written = async {
        stream.write_all(&frame).await?;
        stream.flush().await
    };
    match tokio::time::timeout(timeout, written).await {
        Ok(Ok(())) => NetCounters::bump(&setup.counters.queries_sent),
        Ok(Err(error)) => return Err(NetError::Send(error)),
        Err(_) => return Err(NetError::Timeout),
    }
    let mut state = TransferState::new(&query);
    let mut frames = FrameReader::new();
    let mut messages = Vec::new();
    let mut total = 0usize;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match tokio::time::timeout(timeout, stream.read(&mut chunk)).await {
            Err(_) => return Err(NetError::Timeout),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(Err(e)) => return Err(NetError::Closed(format!("receive failed: {e}"))),
            Ok(Ok(0)) => {
                return Err(NetError::Closed(format!(
                    "the server closed the connection after {} of the transfer's messages",
                    messages.len()
                )))
            }
            Ok(Ok(n)) => n,
        };
        total += n;
        if total > MAX_TRANSFER_BYTES {
            return Err(NetError::BadQuery(
                "the transfer is larger than 256 MiB, the most one may be",
            ));
        }
        frames.push(&chunk[..n]);
        while let Some(message) = frames.next_message() {
            let progress = state.feed(message).map_err(NetError::Transfer)?;
            messages.push(message.to_vec());
            if progress == Progress::Done {
                return Ok(Transfer {
                    messages,
                    latency: started.elapsed(),
                });
            }
        }
    }
}
