//! The options of iterative resolution, part of `lookup.dns`'s (flattened:
//! `iterative = true`, `--iterative`), and the configuration made from them.

use super::delegation::{is_local, Delegation, Families};
use super::hints;
use dnsluice_net::Endpoint;
use dnsluice_options::Options;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How names are resolved from the root.
#[derive(Debug, Clone, Options)]
pub struct IterativeOptions {
    /// Resolve each name from the root servers down, following referrals,
    /// instead of asking the nameservers (ZDNS's --iterative); the
    /// --name-servers, if given, are then the root servers.
    #[option(default)]
    pub iterative: bool,
    /// Root servers from this file (the named.root format BIND and unbound
    /// read); without it --name-servers, else the IANA root servers built in.
    #[option(default)]
    pub root_hints: Option<PathBuf>,
    /// Most referrals followed for one name, nested nameserver lookups
    /// counted (ZDNS's --max-depth).
    #[option(default = 10, range = 1..=64)]
    pub max_depth: u32,
    /// How long one step (one zone: its servers in turn) may take.
    #[option(default = Duration::from_secs(8), range = Duration::from_millis(1)..=Duration::from_secs(3600))]
    pub iteration_timeout: Duration,
    /// Entries in the shared cache of zone cuts, answers and negative answers.
    #[option(default = 100_000, range = 1..=100_000_000)]
    pub cache_size: usize,
    /// Talk to authoritative servers over IPv4 only.
    #[option(default, flag_alias = "4")]
    pub ipv4_only: bool,
    /// Talk to authoritative servers over IPv6 only.
    #[option(default, flag_alias = "6")]
    pub ipv6_only: bool,
    /// Try a nameserver's IPv6 addresses before its IPv4 ones (IPv4 first by default).
    #[option(default, flag_alias = "prefer-ipv6-iteration")]
    pub prefer_ipv6: bool,
    /// The port every authoritative server is asked on: 53 on the Internet
    /// (glue carries addresses only); a lab world may serve on another.
    #[option(default = 53, range = 1..=65_535)]
    pub authority_port: u16,
}

/// Iterative resolution as configured.
#[derive(Clone, Debug)]
pub struct IterativeConfig {
    /// Where each walk starts.
    pub roots: Delegation,
    /// The address families used.
    pub families: Families,
    /// Most referrals per name.
    pub max_depth: u32,
    /// Per step.
    pub iteration_timeout: Duration,
    /// Per name.
    pub name_timeout: Duration,
    /// Cache entries.
    pub cache_size: usize,
    /// The authorities' port.
    pub port: u16,
}

impl IterativeOptions {
    /// The configuration, `None` when `iterative` is off; `name_servers` are
    /// the roots when no hints file is given; `name_timeout` is the budget of
    /// one name (`lookup.dns`'s). The error names the key.
    pub fn to_config(
        &self,
        name_servers: &[Endpoint],
        name_timeout: Duration,
    ) -> Result<Option<IterativeConfig>, (&'static str, String)> {
        if !self.iterative {
            return Ok(None);
        }
        if self.ipv4_only && self.ipv6_only {
            return Err(("ipv6_only", "give --4 or --6, not both".to_string()));
        }
        let roots = match &self.root_hints {
            Some(path) => hints::read(path).map_err(|e| ("root_hints", e.to_string()))?,
            None if !name_servers.is_empty() => {
                if let Some(other) = name_servers
                    .iter()
                    .find(|e| e.addr.port() != self.authority_port)
                {
                    return Err((
                        "name_servers",
                        format!(
                            "{other}: iterative resolution asks every server on port {} \
                             (--authority-port; glue carries addresses only)",
                            self.authority_port
                        ),
                    ));
                }
                let addrs: Vec<IpAddr> = name_servers.iter().map(|e| e.addr.ip()).collect();
                hints::from_addresses(&addrs)
            }
            None => hints::iana(),
        };
        // Roots on this host (a lab world): its servers are local too.
        let local = (roots.servers.iter().flat_map(|s| &s.addrs)).any(is_local);
        Ok(Some(IterativeConfig {
            roots,
            families: Families {
                ipv4: !self.ipv6_only,
                ipv6: !self.ipv4_only,
                prefer_ipv6: self.prefer_ipv6,
                local,
            },
            max_depth: self.max_depth,
            iteration_timeout: self.iteration_timeout,
            name_timeout,
            cache_size: self.cache_size,
            port: self.authority_port,
        }))
    }
}
