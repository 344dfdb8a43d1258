//! TLS client setup: certificates verified by default. [`TlsClient`] is built
//! once per client (the CA file or the system roots loaded once) and gives
//! each driver what it needs: the configuration and server name for
//! tokio-rustls, or a sans-I/O [`ClientConnection`] for a driver that moves
//! the bytes itself.

use crate::endpoint::Endpoint;
use crate::error::NetError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::PathBuf;
use std::sync::Arc;

/// How a TLS client decides whom to trust (tls and https): the option group
/// every DNS client module shares.
#[derive(Clone, Debug, Default, dnsluice_options::Options)]
pub struct TlsOptions {
    /// Trust the CA certificates in this PEM file instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Do not verify the server's certificate. For test servers only.
    #[option(default)]
    pub insecure: bool,
    /// The name the server's certificate must carry (also sent as SNI).
    ///
    /// By default the DoH URL's host, else the server's IP address.
    #[option(rename = "tls_name")]
    pub server_name: Option<String>,
}

/// The application protocol a TLS client offers (ALPN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    /// `dot`: DNS-over-TLS (RFC 7858 §3.2's registration).
    Dot,
    /// `h2`: HTTP/2, for DNS-over-HTTPS.
    H2,
}

impl Alpn {
    /// The protocol id on the wire.
    pub fn id(self) -> &'static [u8] {
        match self {
            Alpn::Dot => b"dot",
            Alpn::H2 => b"h2",
        }
    }
}

/// A TLS client's configuration and how it names servers; cheap to clone.
#[derive(Clone, Debug)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    options: TlsOptions,
}

impl TlsClient {
    /// Loads the trust anchors `options` ask for and offers `alpn`.
    pub fn new(options: &TlsOptions, alpn: Alpn) -> Result<TlsClient, NetError> {
        Ok(TlsClient {
            config: client_config(options, &[alpn.id()])?,
            options: options.clone(),
        })
    }

    /// The rustls configuration.
    pub fn config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }

    /// The name `endpoint`'s certificate must carry (and the SNI sent): the
    /// override, else a DoH URL's host, else the IP address.
    pub fn server_name(&self, endpoint: &Endpoint) -> Result<ServerName<'static>, NetError> {
        server_name(&self.options, endpoint.host.as_deref(), endpoint.addr.ip())
    }

    /// A new TLS session with `name` as rustls' state machine: the driver
    /// feeds it the bytes it reads and writes out what it produces.
    pub fn session(&self, name: &ServerName<'static>) -> Result<ClientConnection, NetError> {
        ClientConnection::new(self.config.clone(), name.clone())
            .map_err(|e| NetError::TlsSetup(e.to_string()))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Builds a client configuration offering `alpn` (e.g. `h2` for DoH, `dot` for DoT).
pub fn client_config(options: &TlsOptions, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, NetError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| NetError::TlsSetup(e.to_string()))?;
    let mut config = if options.insecure {
        // Said once a process, even with -q: nothing else shows it.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "dnsluice: warning: insecure: TLS server certificates are not verified \
                 (anyone on the path can answer)"
            );
        });
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(root_store(options)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

fn root_store(options: &TlsOptions) -> Result<RootCertStore, NetError> {
    let mut roots = RootCertStore::empty();
    match &options.ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| NetError::TlsSetup(format!("{}: {e}", path.display())))?;
            for cert in certs {
                let cert =
                    cert.map_err(|e| NetError::TlsSetup(format!("{}: {e}", path.display())))?;
                roots
                    .add(cert)
                    .map_err(|e| NetError::TlsSetup(format!("{}: {e}", path.display())))?;
            }
            if roots.is_empty() {
                return Err(NetError::TlsSetup(format!(
                    "{}: no certificate in the file",
                    path.display()
                )));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system certificate rustls cannot parse is skipped, as browsers do.
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(NetError::TlsSetup(
                    "no system root certificates found (install ca-certificates, or give a CA file)"
                        .to_string(),
                ));
            }
        }
    }
    Ok(roots)
}

/// The server name to verify: the override, else `host`, else the IP address.
pub fn server_name(
    options: &TlsOptions,
    host: Option<&str>,
    ip: std::net::IpAddr,
) -> Result<ServerName<'static>, NetError> {
    match options.server_name.as_deref().or(host) {
        Some(name) => ServerName::try_from(name.to_string())
            .map_err(|e| NetError::TlsSetup(format!("server name `{name}`: {e}"))),
        None => Ok(ServerName::IpAddress(ip.into())),
    }
}

/// Accepts any certificate: what `insecure = true` asks for.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
