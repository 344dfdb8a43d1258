//! DNS-over-HTTPS (RFC 8484) over one HTTP/2 connection, one stream per query.

use super::ClientSetup;
use crate::base64url;
use crate::endpoint::Endpoint;
use crate::error::NetError;
use crate::protocol::question::same_question;
use crate::stats::NetCounters;
use bytes::Bytes;
use dnsluice_core::sync;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

/// The media type of DNS messages in HTTP (RFC 8484 §6).
const DNS_MESSAGE: &str = "application/dns-message";

/// Largest response body accepted (a DNS message cannot be larger).
const MAX_BODY: usize = 65535;

/// How DoH queries are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, dnsluice_options::Choice)]
pub enum DohMethod {
    /// The message is the request body (RFC 8484 §4.1).
    #[default]
    Post,
    /// The message is base64url in the `dns` query parameter (cacheable).
    Get,
}

/// An HTTP/2 connection carrying DNS queries.
pub struct HttpsConnection {
    sender: h2::client::SendRequest<Bytes>,
    /// `https://authority/path`, the base of every request.
    uri: String,
    method: DohMethod,
    addr: String,
    closed: Arc<Mutex<Option<String>>>,
    driver: JoinHandle<()>,
    counters: Arc<NetCounters>,
}

impl Drop for HttpsConnection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl HttpsConnection {
    /// Runs the HTTP/2 handshake over `io` (a TLS stream that negotiated h2).
    pub async fn handshake<T>(
        io: T,
        endpoint: &Endpoint,
        setup: &ClientSetup,
    ) -> Result<HttpsConnection, NetError>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let addr = endpoint.resolver_name();
        let (sender, connection) = h2::client::handshake(io)
            .await
            .map_err(|e| NetError::Http {
                addr: addr.clone(),
                message: e.to_string(),
            })?;
        let closed = Arc::new(Mutex::new(None));
        let closed_by_driver = closed.clone();
        let driver = tokio::spawn(async move {
            let reason = match connection.await {
                Ok(()) => "the server closed the HTTP/2 connection".to_string(),
                Err(e) => format!("HTTP/2 connection failed: {e}"),
            };
            *sync::lock(&closed_by_driver) = Some(reason);
        });
        let authority = match &endpoint.host {
            Some(host) => format!("{host}:{}", endpoint.addr.port()),
            None => endpoint.addr.to_string(),
        };
        Ok(HttpsConnection {
            sender,
            uri: format!("https://{authority}{}", endpoint.path),
            method: setup.doh_method,
            addr,
            closed,
            driver,
            counters: setup.counters.clone(),
        })
    }

    /// Why the connection is unusable, once it is.
    pub fn closed_reason(&self) -> Option<String> {
        sync::lock(&self.closed).clone()
    }

    fn http_error(&self, message: impl ToString) -> NetError {
        NetError::HttpRequest {
            addr: self.addr.clone(),
            message: message.to_string(),
        }
    }

    /// Sends `query` on a new stream and reads the answer.
    pub async fn exchange(&self, query: &[u8]) -> Result<Vec<u8>, NetError> {
        if let Some(reason) = self.closed_reason() {
            return Err(NetError::Closed(reason));
        }
        self.request(query).await
    }

    async fn request(&self, query: &[u8]) -> Result<Vec<u8>, NetError> {
        let builder = http::Request::builder().header(http::header::ACCEPT, DNS_MESSAGE);
        let request = match self.method {
            DohMethod::Post => builder
                .method(http::Method::POST)
                .uri(&self.uri)
                .header(http::header::CONTENT_TYPE, DNS_MESSAGE),
            DohMethod::Get => {
                let mut uri = format!("{}?dns=", self.uri);
                base64url::encode_into(query, &mut uri);
                builder.method(http::Method::GET).uri(uri)
            }
        }
        .body(())
        .map_err(|e| self.http_error(e))?;
        let mut sender = self
            .sender
            .clone()
            .ready()
            .await
            .map_err(|e| self.closed_or(e))?;
        let body_follows = self.method == DohMethod::Post;
        let (response, mut body_tx) = sender
            .send_request(request, !body_follows)
            .map_err(|e| self.closed_or(e))?;
        if body_follows {
            body_tx
                .send_data(Bytes::copy_from_slice(query), true)
                .map_err(|e| self.closed_or(e))?;
        }
        NetCounters::bump(&self.counters.queries_sent);
        let response = response.await.map_err(|e| self.closed_or(e))?;
        let status = response.status();
        let mut body = response.into_body();
        let mut message = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| self.closed_or(e))?;
            let _ = body.flow_control().release_capacity(chunk.len());
            if message.len() + chunk.len() > MAX_BODY {
                return Err(self.http_error("response body larger than a DNS message"));
            }
            message.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(self.http_error(format!("HTTP status {status}")));
        }
        if message.len() < 12 {
            return Err(self.http_error("response body shorter than a DNS header"));
        }
        // Only one answer can come on a stream, so nothing else is waited
        // for; but a body that is not the answer to this query (a query,
        // another id, another question: a proxy's mix-up) is no answer.
        if message[2] & 0x80 == 0
            || message.get(..2) != query.get(..2)
            || !same_question(query, &message)
        {
            return Err(self.http_error("the response answers another query"));
        }
        Ok(message)
    }

    /// An h2 error: "closed" when the connection went away; a failure of this
    /// request alone when the server refused just this stream
    /// (REFUSED_STREAM: try again, the connection is fine); anything else
    /// (a stream cancelled or reset for another reason, a protocol error)
    /// makes the connection suspect, so it is not used again.
    fn closed_or(&self, error: h2::Error) -> NetError {
        if error.is_io() || error.is_go_away() {
            let reason = format!("HTTP/2 connection lost: {error}");
            *sync::lock(&self.closed) = Some(reason.clone());
            NetError::Closed(reason)
        } else if error.reason() == Some(h2::Reason::REFUSED_STREAM) {
            self.http_error(error)
        } else {
            let message = error.to_string();
            *sync::lock(&self.closed) = Some(format!("HTTP/2 connection suspect after: {message}"));
            NetError::Http {
                addr: self.addr.clone(),
                message,
            }
        }
    }
}
