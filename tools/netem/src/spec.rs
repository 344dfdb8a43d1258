//! What a link does to traffic, and how it is written on the command line.
//!
//! A link is `LISTEN=TARGET` followed by optional `,key=value` overrides of
//! the defaults the flags set: `127.0.0.2:53=127.0.0.1:5300,delay=10ms,loss=1%`.

use std::net::SocketAddr;
use std::time::Duration;

/// What happens to a query over a client's rate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// Dropped silently (what a loaded server or a policer does).
    Drop,
    /// Answered at once with REFUSED (what some resolvers do under load).
    Refused,
    /// Answered at once with an empty TC=1 response, so the client asks
    /// again over TCP (RRL's "slip").
    Truncate,
}

impl Over {
    fn parse(text: &str) -> Result<Over, String> {
        match text {
            "drop" => Ok(Over::Drop),
            "refused" => Ok(Over::Refused),
            "tc" | "truncate" => Ok(Over::Truncate),
            _ => Err(format!("over: `{text}` is not drop, refused or tc")),
        }
    }

    /// The name used on the command line and in the statistics.
    pub fn name(self) -> &'static str {
        match self {
            Over::Drop => "drop",
            Over::Refused => "refused",
            Over::Truncate => "tc",
        }
    }
}

/// One direction of a link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Path {
    /// Fixed one-way latency.
    pub delay: Duration,
    /// Extra latency drawn uniformly from `0..=jitter` per datagram (UDP
    /// datagrams may then overtake each other; TCP keeps its order).
    pub jitter: Duration,
    /// Probability that a datagram is lost (for TCP: that a chunk waits for
    /// a retransmission).
    pub loss: f64,
}

/// A per-client query rate limit (client: the source address of a query).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Queries per second each client may send.
    pub per_second: f64,
    /// How many queries above the rate a client may send at once.
    pub burst: f64,
    /// What happens to the others.
    pub over: Over,
}

/// One `LISTEN=TARGET` link.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// Where clients send.
    pub listen: SocketAddr,
    /// The server behind it.
    pub target: SocketAddr,
    /// Client to server.
    pub up: Path,
    /// Server to client.
    pub down: Path,
    /// The per-client limit on queries (UDP only: RRL limits UDP, and TCP is
    /// the way out it points clients to).
    pub limit: Option<RateLimit>,
}

/// The defaults every link starts from (the flags), and the links.
#[derive(Clone, Debug)]
pub struct Defaults {
    /// Both directions.
    pub up: Path,
    /// Both directions.
    pub down: Path,
    /// The rate limit, if any.
    pub limit: Option<RateLimit>,
}

impl Default for Defaults {
    fn default() -> Self {
        let path = Path {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
        };
        Defaults {
            up: path,
            down: path,
            limit: None,
        }
    }
}

impl Defaults {
    /// Applies one `key=value` setting (a flag without its dashes, or a
    /// link's override).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let fail = |e: String| format!("{key}: {e}");
        match key {
            "delay" => {
                let d = parse_duration(value).map_err(fail)?;
                self.up.delay = d;
                self.down.delay = d;
            }
            "delay-ms" => {
                let ms: u64 = value
                    .parse()
                    .map_err(|_| fail(format!("not a number: {value}")))?;
                self.up.delay = Duration::from_millis(ms);
                self.down.delay = self.up.delay;
            }
            "jitter" => {
                let d = parse_duration(value).map_err(fail)?;
                self.up.jitter = d;
                self.down.jitter = d;
            }
            "loss" => {
                let p = parse_probability(value).map_err(fail)?;
                self.up.loss = p;
                self.down.loss = p;
            }
            "loss-up" => self.up.loss = parse_probability(value).map_err(fail)?,
            "loss-down" => self.down.loss = parse_probability(value).map_err(fail)?,
            "rate" => {
                let per_second: f64 = value
                    .parse()
                    .ok()
                    .filter(|r: &f64| *r > 0.0 && r.is_finite())
                    .ok_or_else(|| fail(format!("not a positive rate: {value}")))?;
                let limit = self.limit.get_or_insert(RateLimit {
                    per_second,
                    burst: 0.0,
                    over: Over::Drop,
                });
                limit.per_second = per_second;
                if limit.burst == 0.0 {
                    // A twentieth of a second's worth, at least one query.
                    limit.burst = (per_second / 20.0).max(1.0);
                }
            }
            "burst" | "over" => {
                let Some(limit) = self.limit.as_mut() else {
                    return Err(fail("give rate= (or --rate) first".into()));
                };
                if key == "over" {
                    limit.over = Over::parse(value)?;
                } else {
                    limit.burst = value
                        .parse()
                        .ok()
                        .filter(|b: &f64| *b >= 1.0)
                        .ok_or_else(|| fail(format!("not a count of at least 1: {value}")))?;
                }
            }
            _ => return Err(format!("unknown setting `{key}`")),
        }
        Ok(())
    }

    /// Parses `LISTEN=TARGET[,key=value...]` on top of these defaults.
    pub fn link(&self, text: &str) -> Result<Link, String> {
        let mut parts = text.split(',');
        let pair = parts.next().unwrap_or_default();
        let (listen, target) = pair
            .split_once('=')
            .ok_or_else(|| format!("expected LISTEN=TARGET, got `{pair}`"))?;
        let addr = |s: &str| {
            s.parse::<SocketAddr>()
                .map_err(|e| format!("`{s}`: {e} (give IP:PORT)"))
        };
        let (listen, target) = (addr(listen)?, addr(target)?);
        let mut settings = self.clone();
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` in `{text}`: expected key=value"))?;
            settings
                .set(key, value)
                .map_err(|e| format!("{text}: {e}"))?;
        }
        Ok(Link {
            listen,
            target,
            up: settings.up,
            down: settings.down,
            limit: settings.limit,
        })
    }
}

/// `25ms`, `1.5s`, `250us`, or a bare number of milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "ms"),
    };
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| *v >= 0.0 && v.is_finite())
        .ok_or_else(|| format!("not a duration: `{text}`"))?;
    let seconds = match unit {
        "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        _ => return Err(format!("`{text}`: the unit must be s, ms or us")),
    };
    Ok(Duration::from_secs_f64(seconds))
}

/// `1%`, `0.5%` or a fraction `0.01`.
pub fn parse_probability(text: &str) -> Result<f64, String> {
    let value = match text.strip_suffix('%') {
        Some(percent) => percent.parse::<f64>().map(|p| p / 100.0),
        None => text.parse::<f64>(),
    };
    value
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| format!("not a probability (0..1 or 0%..100%): `{text}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_takes_the_defaults_and_its_own_overrides() {
        let mut d = Defaults::default();
        d.set("delay", "25ms").unwrap();
        d.set("loss", "1%").unwrap();
        let link = d
            .link("127.0.0.2:53=127.0.0.1:5300,loss-down=0.5%,rate=2000,over=refused")
            .unwrap();
        assert_eq!(link.listen, "127.0.0.2:53".parse().unwrap());
        assert_eq!(link.up.delay, Duration::from_millis(25));
        assert_eq!(link.down.delay, Duration::from_millis(25));
        assert!((link.up.loss - 0.01).abs() < 1e-12);
        assert!((link.down.loss - 0.005).abs() < 1e-12);
        let limit = link.limit.unwrap();
        assert_eq!((limit.per_second, limit.burst), (2000.0, 100.0));
        assert_eq!(limit.over, Over::Refused);
        // The defaults are untouched by one link's overrides.
        assert!(d.limit.is_none());
    }

    #[test]
    fn bad_settings_say_what_is_wrong() {
        let d = Defaults::default();
        let e = d.link("127.0.0.1:1=127.0.0.1:2,loss=3").unwrap_err();
        assert!(e.contains("not a probability"), "{e}");
        let e = d.link("127.0.0.1:1=127.0.0.1:2,over=drop").unwrap_err();
        assert!(e.contains("rate= (or --rate) first"), "{e}");
        let e = d.link("127.0.0.1:1").unwrap_err();
        assert!(e.contains("LISTEN=TARGET"), "{e}");
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("20").unwrap(), Duration::from_millis(20));
    }
}
