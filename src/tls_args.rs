//! The TLS flags `dnsluice replay` and `dnsluice lookup` share.

use clap::Args;
use std::path::PathBuf;

/// How a client decides whom to trust (TLS and HTTPS).
#[derive(Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// Trust the CA certificates in this PEM file instead of the system's roots.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub ca_file: Option<PathBuf>,
    /// Do not verify the server's certificate. For test servers only.
    #[arg(long)]
    pub insecure: bool,
    /// The name the server's certificate must carry (default: the URL's host or the IP).
    #[arg(long, value_name = "NAME")]
    pub tls_name: Option<String>,
}
