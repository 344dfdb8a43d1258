//! Throwaway certificates for TLS tests: a CA and server certificates it signs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// A server certificate for one DNS name, signed by a CA made for it (ECDSA
/// P-256, with ring). The CA certificate is also written to a temporary
/// file ([`TestCert::ca_file`]) for clients that take a `ca_file`; the file
/// is removed when the last clone is dropped.
///
/// Two ways to make verification fail: [`TestCert::for_name`] (same CA,
/// another name: a name mismatch) and another [`TestCert::generate`] (a CA
/// the client does not trust).
#[derive(Clone)]
pub struct TestCert(Arc<Inner>);

struct Inner {
    name: String,
    ca: Arc<Ca>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    key_der: Vec<u8>,
    key_pem: String,
}

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
    pem: String,
    file: PathBuf,
}

impl Drop for Ca {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

impl TestCert {
    /// A new CA and a server certificate for `name` (its only subject
    /// alternative name, so clients must verify against `name`).
    pub fn generate(name: &str) -> TestCert {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // A distinct subject per CA: a client that trusts another testkit CA
        // then fails with "unknown issuer", not a bad signature.
        let unique = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("dnsluice testkit CA {unique}"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        let file = crate::temp_path("ca.pem");
        std::fs::write(&file, cert.pem()).expect("writing the CA file");
        let ca = Ca {
            issuer: Issuer::new(params, key),
            der: cert.der().clone(),
            pem: cert.pem(),
            file,
        };
        Self::signed(Arc::new(ca), name)
    }

    /// A server certificate for another `name`, signed by the same CA: a
    /// client that trusts this CA but expects this certificate's name fails
    /// with a name mismatch.
    pub fn for_name(&self, name: &str) -> TestCert {
        Self::signed(Arc::clone(&self.0.ca), name)
    }

    fn signed(ca: Arc<Ca>, name: &str) -> TestCert {
        let mut params = CertificateParams::new(vec![name.to_owned()]).expect("server name");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &ca.issuer)
            .expect("server certificate");
        TestCert(Arc::new(Inner {
            name: name.to_owned(),
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
            ca,
        }))
    }

    /// The DNS name the server certificate is for.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// A PEM file holding the CA certificate: what a client's `ca_file` option takes.
    pub fn ca_file(&self) -> &Path {
        &self.0.ca.file
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.0.ca.pem
    }

    /// The server certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.0.cert_pem
    }

    /// The server's private key, PKCS#8 PEM.
    pub fn key_pem(&self) -> &str {
        &self.0.key_pem
    }

    /// A rustls server configuration (ring provider) presenting this
    /// certificate and offering `alpn` protocols (e.g. `[b"h2"]`, or none).
    pub fn server_config(&self, alpn: &[&[u8]]) -> ServerConfig {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.0.key_der.clone()));
        let mut config = ServerConfig::builder_with_provider(ring_provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![self.0.cert_der.clone()], key)
            .expect("a valid certificate and key");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }

    /// A rustls client configuration (ring provider) that trusts only this
    /// certificate's CA.
    pub fn client_config(&self) -> ClientConfig {
        let mut roots = RootCertStore::empty();
        roots
            .add(self.0.ca.der.clone())
            .expect("a valid CA certificate");
        ClientConfig::builder_with_provider(ring_provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth()
    }
}

impl std::fmt::Debug for TestCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCert")
            .field("name", &self.0.name)
            .field("ca_file", &self.0.ca.file)
            .finish()
    }
}

fn ring_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
