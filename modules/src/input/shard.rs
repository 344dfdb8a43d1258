//! `--shard I/N`, zmap-style: item `k` (a line or a file, counted from 0)
//! belongs to shard `k mod N`, so N machines given 0/N .. N-1/N cover the
//! work exactly once without a broker.

use dnsluice_options::{OptionValue, Shape};
use std::fmt;
use std::str::FromStr;

/// One shard of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 0 ≤ index < count.
    pub index: u64,
    /// How many shards.
    pub count: u64,
}

impl Shard {
    /// The one shard of one: everything.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Whether item `k` (0-based) is this shard's.
    pub fn takes(self, k: u64) -> bool {
        k % self.count == self.index
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let bad = || format!("`{text}` is no shard: write I/N with 0 <= I < N, e.g. 0/4");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl OptionValue for Shard {
    fn shape() -> Shape {
        Shape::Text("a shard, I/N")
    }
    fn from_toml(value: toml::Value) -> Result<Self, String> {
        match value {
            toml::Value::String(text) => text.parse(),
            other => Err(format!("expected a shard such as \"0/4\", found {other}")),
        }
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::String(self.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_splits() {
        let s: Shard = "2/3".parse().unwrap();
        assert_eq!((s.index, s.count), (2, 3));
        let taken: Vec<u64> = (0..9).filter(|&k| s.takes(k)).collect();
        assert_eq!(taken, vec![2, 5, 8]);
        for bad in ["3/3", "1/0", "x/2", "1", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
