//! `KEY=VALUE` files as `tests/servers/up.sh` and `tests/world/up.sh` write
//! them (`servers.env`, `world/world.env`): typed look-ups that name the key
//! that is missing or malformed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The keys of one env file; blank lines and `#` comments are skipped.
pub(crate) struct EnvFile<'a>(HashMap<&'a str, &'a str>);

impl<'a> EnvFile<'a> {
    /// Splits `text` into its keys.
    pub(crate) fn parse(text: &'a str) -> Self {
        EnvFile(
            text.lines()
                .map(str::trim)
                .filter(|line| !line.is_empty() && !line.starts_with('#'))
                .filter_map(|line| line.split_once('='))
                .collect(),
        )
    }

    /// The raw value of `key`.
    pub(crate) fn get(&self, key: &str) -> Result<&'a str, String> {
        self.0.get(key).copied().ok_or_else(|| format!("no {key}"))
    }

    /// The value of `key` as a string.
    pub(crate) fn value(&self, key: &str) -> Result<String, String> {
        self.get(key).map(str::to_owned)
    }

    /// The value of `key` as a path.
    pub(crate) fn path(&self, key: &str) -> Result<PathBuf, String> {
        self.get(key).map(PathBuf::from)
    }

    /// The value of `key` as a number.
    pub(crate) fn number(&self, key: &str) -> Result<u32, String> {
        self.get(key)?
            .parse::<u32>()
            .map_err(|e| format!("{key}: {e}"))
    }

    /// The value of `key` as a comma-separated list of socket addresses.
    pub(crate) fn addrs(&self, key: &str) -> Result<Vec<SocketAddr>, String> {
        self.get(key)?
            .split(',')
            .map(|a| a.parse().map_err(|e| format!("{key}: `{a}`: {e}")))
            .collect()
    }

    /// The value of `key` as exactly one socket address.
    pub(crate) fn addr(&self, key: &str) -> Result<SocketAddr, String> {
        let mut one = self.addrs(key)?;
        match one.len() {
            1 => Ok(one.remove(0)),
            n => Err(format!("{key}: expected one address, got {n}")),
        }
    }

    /// The value of `key` as a comma-separated list of strings.
    pub(crate) fn list(&self, key: &str) -> Result<Vec<String>, String> {
        self.get(key)
            .map(|v| v.split(',').map(str::to_owned).collect())
    }
}
