//! The simulated internet `tests/world/up.sh` runs (`tests/world/README.md`):
//! where it is, read from `world/world.env` in [`servers_dir()`], and its
//! generator's record of the truth (`expected.jsonl`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::env_file::EnvFile;
use crate::servers::{servers_dir, Servers};

/// Where the world's files and servers are (see `world.env`).
#[derive(Clone, Debug)]
pub struct World {
    /// The world's state directory: zones, configs, logs (`WORLD_DIR`).
    pub dir: PathBuf,
    /// The first two octets of every IPv4 address in it, `127.N` (`WORLD_NET`).
    pub net: String,
    /// The root hints, named.root format (`WORLD_ROOT_HINTS`).
    pub root_hints: PathBuf,
    /// The root servers' addresses, port 53 (`WORLD_ROOTS`).
    pub roots: Vec<SocketAddr>,
    /// The truth, one JSON object per query (`WORLD_EXPECTED`); see [`Expected`].
    pub expected: PathBuf,
    /// The distinct names of `expected.jsonl`, one a line (`WORLD_NAMES`).
    pub names: PathBuf,
    /// Host names for the iterative benchmark, one a line (`WORLD_BENCH_NAMES`).
    pub bench_names: PathBuf,
    /// Every server instance: software, addresses, zones (`WORLD_LAYOUT`).
    pub layout: PathBuf,
    /// unbound resolving from the world's root, with recursion (`WORLD_UNBOUND`).
    pub unbound: SocketAddr,
    /// How many generated leaf zones there are (`WORLD_ZONES`).
    pub zones: u32,
    /// The delay the slow server adds each way (`WORLD_SLOW_DELAY_MS`).
    pub slow_delay: Duration,
}

/// One record of an answer, as `expected.jsonl` and kdig give it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rr {
    /// Owner name, lower case, absolute (trailing dot).
    pub name: String,
    /// Type mnemonic (`A`, `NSEC3`, ...).
    pub rtype: String,
    /// TTL in seconds (a resolver may hand out less than the zone's).
    pub ttl: u32,
    /// RDATA in kdig's presentation form, normalised by [`normalise_data`].
    pub data: String,
}

impl Rr {
    /// The record without its TTL, for comparing answers: (name, type, data).
    pub fn key(&self) -> (String, String, String) {
        (self.name.clone(), self.rtype.clone(), self.data.clone())
    }
}

/// One line of `expected.jsonl`: a question and the answer it must get.
#[derive(Clone, Debug)]
pub struct Expected {
    /// The query name, absolute.
    pub name: String,
    /// The query type (`A`, ..., or `AXFR`).
    pub rtype: String,
    /// The query class: `IN` unless the line says (`CH` for version.bind).
    pub class: String,
    /// The rcode a correct resolver (or the pinned server) returns.
    pub rcode: String,
    /// The answer section (CNAME/DNAME chain first), empty for NXDOMAIN/NODATA.
    pub answers: Vec<Rr>,
    /// Which edge case the line exercises (`cname-loop`, `leaf`, ...).
    pub case: String,
    /// Set for questions to one authoritative server rather than a
    /// resolver (version.bind, AXFR): its address, port 53.
    pub server: Option<String>,
}

/// Collapses every run of blanks to one space and trims the ends, the
/// normal form of `data` in `expected.jsonl` (kdig pads some types).
pub fn normalise_data(data: &str) -> String {
    data.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads `world/world.env` from [`servers_dir()`].
///
/// # Panics
///
/// When the world is not running (tests that need it must fail, not skip)
/// or a key is missing or malformed.
pub fn world() -> World {
    read(&servers_dir(), "world")
}

/// The same world behind an emulated wide-area network (`world-wan`,
/// `DNSLUICE_WORLD_WAN=1 bash tests/world/up.sh`, which
/// `tests/servers/up.sh` runs): every authority 10 to 40 ms of round trip
/// away, 0.5 % of datagrams lost each way; the same truth.
///
/// # Panics
///
/// As [`world()`].
pub fn wan_world() -> World {
    read(&servers_dir(), "world-wan")
}

impl Servers {
    /// The simulated internet that `tests/servers/up.sh` starts beside these
    /// servers (see [`world()`]).
    pub fn world(&self) -> World {
        read(&self.dir, "world")
    }
}

fn read(servers_dir: &Path, name: &str) -> World {
    let path = servers_dir.join(name).join("world.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the test world is not running: run `bash tests/servers/up.sh` or \
             `bash tests/world/up.sh` ({}: {e})",
            path.display()
        )
    });
    parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse(text: &str) -> Result<World, String> {
    let env = EnvFile::parse(text);
    Ok(World {
        dir: env.path("WORLD_DIR")?,
        net: env.value("WORLD_NET")?,
        root_hints: env.path("WORLD_ROOT_HINTS")?,
        roots: env.addrs("WORLD_ROOTS")?,
        expected: env.path("WORLD_EXPECTED")?,
        names: env.path("WORLD_NAMES")?,
        bench_names: env.path("WORLD_BENCH_NAMES")?,
        layout: env.path("WORLD_LAYOUT")?,
        unbound: env.addr("WORLD_UNBOUND")?,
        zones: env.number("WORLD_ZONES")?,
        slow_delay: Duration::from_millis(env.number("WORLD_SLOW_DELAY_MS")?.into()),
    })
}

impl World {
    /// Every line of `expected.jsonl`, in file order (poison cases first).
    ///
    /// # Panics
    ///
    /// When the file is missing or a line is not what gen.py writes.
    pub fn expected(&self) -> Vec<Expected> {
        let text = std::fs::read_to_string(&self.expected)
            .unwrap_or_else(|e| panic!("{}: {e}", self.expected.display()));
        text.lines()
            .enumerate()
            .map(|(n, line)| {
                parse_expected(line)
                    .unwrap_or_else(|e| panic!("{}:{}: {e}", self.expected.display(), n + 1))
            })
            .collect()
    }

    /// The address of `127.N.a.b` in this world.
    pub fn addr(&self, a: u8, b: u8) -> String {
        format!("{}.{a}.{b}", self.net)
    }
}

fn parse_expected(line: &str) -> Result<Expected, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let text = |key: &str| -> Result<String, String> {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("no string `{key}`"))
    };
    let answers = v
        .get("answers")
        .and_then(Value::as_array)
        .ok_or("no list `answers`")?
        .iter()
        .map(|a| {
            let field = |key: &str| {
                a.get(key)
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("an answer without `{key}`"))
            };
            Ok(Rr {
                name: field("name")?.to_ascii_lowercase(),
                rtype: field("type")?.to_owned(),
                ttl: a
                    .get("ttl")
                    .and_then(Value::as_u64)
                    .and_then(|t| u32::try_from(t).ok())
                    .ok_or("an answer without `ttl`")?,
                data: normalise_data(field("data")?),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Expected {
        name: text("name")?,
        rtype: text("type")?,
        class: text("class").unwrap_or_else(|_| "IN".into()),
        rcode: text("rcode")?,
        answers,
        case: text("case").unwrap_or_default(),
        server: text("server").ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_expected_line_and_normalises_data() {
        let line = r#"{"answers": [{"data": "52 22 23 N  4 53 32 E ", "name": "Loc.X.", "ttl": 60, "type": "LOC"}], "case": "rdata", "name": "loc.x.", "rcode": "NOERROR", "type": "LOC"}"#;
        let e = parse_expected(line).unwrap();
        assert_eq!(e.class, "IN");
        assert_eq!(e.server, None);
        assert_eq!(e.answers[0].name, "loc.x.");
        assert_eq!(e.answers[0].data, "52 22 23 N 4 53 32 E");
        let err = parse_expected(r#"{"name": "x.", "type": "A", "answers": []}"#).unwrap_err();
        assert_eq!(err, "no string `rcode`");
    }

    #[test]
    fn parses_world_env_and_names_a_missing_key() {
        let text = "WORLD_DIR=/w\nWORLD_NET=127.53\nWORLD_ROOT_HINTS=/w/named.root\n\
            WORLD_ROOTS=127.53.0.1:53,127.53.0.2:53\nWORLD_EXPECTED=/w/e\nWORLD_NAMES=/w/n\n\
            WORLD_BENCH_NAMES=/w/b\nWORLD_LAYOUT=/w/l\nWORLD_UNBOUND=127.53.99.1:53\n\
            WORLD_ZONES=5000\nWORLD_SLOW_DELAY_MS=300\n";
        let w = parse(text).unwrap();
        assert_eq!(w.roots.len(), 2);
        assert_eq!(w.addr(40, 1), "127.53.40.1");
        let err = parse(&text.replace("WORLD_UNBOUND=", "X=")).unwrap_err();
        assert_eq!(err, "no WORLD_UNBOUND");
    }
}
