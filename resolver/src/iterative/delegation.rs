//! Zone cuts: a zone and its nameservers (names, and the addresses known for
//! them), made from a referral; and the order in which a zone's servers are
//! asked (shuffled, as ZDNS does, so load spreads and one bad server does not
//! take every first try; filtered and ordered by address family).

use super::name::Name;
use super::trust::Referral;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

/// One nameserver of a zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NsServer {
    /// Its name.
    pub name: Name,
    /// Its addresses from glue (or hints); empty for a glueless delegation.
    pub addrs: Vec<IpAddr>,
}

/// A zone and its nameservers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delegation {
    /// The zone (the cut's name).
    pub zone: Name,
    /// Its nameservers.
    pub servers: Vec<NsServer>,
}

impl Delegation {
    /// The delegation a referral describes.
    pub fn from_referral(referral: &Referral) -> Delegation {
        Delegation {
            zone: referral.zone.clone(),
            servers: referral
                .nameservers
                .iter()
                .map(|name| NsServer {
                    name: name.clone(),
                    addrs: referral
                        .glue
                        .iter()
                        .filter(|(owner, _)| owner == name)
                        .map(|(_, addr)| *addr)
                        .collect(),
                })
                .collect(),
        }
    }
}

/// Most glueless nameserver names looked up in one step.
const MAX_GLUELESS_PER_STEP: usize = 3;

/// What a step asks of a zone ([`Delegation::plan`]).
pub struct Plan {
    /// The addresses to ask, in order.
    pub candidates: Vec<IpAddr>,
    /// Nameservers without a usable address, to look up in this order
    /// (taken from the end).
    pub glueless: Vec<Name>,
    /// Addresses not asked, and why.
    pub problems: Vec<String>,
}

impl Delegation {
    /// The zone's servers in random order, each one's usable addresses
    /// in `families`' order; at most [`MAX_GLUELESS_PER_STEP`] of those
    /// without one, to look up; the addresses that are never asked, said.
    pub fn plan(&self, families: Families, shuffler: &Shuffler) -> Plan {
        let mut servers = self.servers.clone();
        shuffler.shuffle(&mut servers);
        let mut plan = Plan {
            candidates: Vec::new(),
            glueless: Vec::new(),
            problems: Vec::new(),
        };
        for server in &servers {
            let unaskable: Vec<IpAddr> = (server.addrs.iter().copied())
                .filter(|a| !families.askable(a))
                .collect();
            if !unaskable.is_empty() {
                plan.problems.push(not_askable(&server.name, &unaskable));
            }
            let addrs = families.order(&server.addrs);
            if addrs.is_empty() {
                plan.glueless.push(server.name.clone());
            }
            for addr in addrs {
                if !plan.candidates.contains(&addr) {
                    plan.candidates.push(addr);
                }
            }
        }
        plan.glueless.truncate(MAX_GLUELESS_PER_STEP);
        plan.glueless.reverse();
        plan
    }
}

/// Whether `addr` is this host's or its link's (loopback, link-local),
/// an IPv4 address mapped into IPv6 (`::ffff:127.0.0.1`) as that IPv4
/// address: a dual-stack socket sends to it.
pub fn is_local(addr: &IpAddr) -> bool {
    match addr.to_canonical() {
        IpAddr::V4(a) => a.is_loopback() || a.is_link_local(),
        IpAddr::V6(a) => a.is_loopback() || a.is_unicast_link_local(),
    }
}

/// Why nameserver `ns` is not asked at (some of) `addrs`: the addresses
/// no server has, or that are this host's (see [`Families::askable`]).
pub fn not_askable(ns: &Name, addrs: &[IpAddr]) -> String {
    let listed: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
    format!(
        "{ns} at {}: not asked (unspecified, multicast, broadcast, loopback or link-local)",
        listed.join(", ")
    )
}

/// Which address families the resolver talks to authorities over (`--4`,
/// `--6`, `--prefer-ipv6`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Families {
    /// Use IPv4 addresses.
    pub ipv4: bool,
    /// Use IPv6 addresses.
    pub ipv6: bool,
    /// Try IPv6 addresses before IPv4 ones (else IPv4 first).
    pub prefer_ipv6: bool,
    /// Loopback and link-local addresses may be asked: the roots are such
    /// (a lab world on one host). On the internet they are not (unbound's
    /// `do-not-query-localhost`): glue or an address record pointing there
    /// would turn the walk on this host's own resolver, or a cloud's, and
    /// have it believed for the zone.
    pub local: bool,
}

impl Families {
    /// Whether `addr` may be used: its family is, and [`Families::askable`].
    pub fn allows(&self, addr: &IpAddr) -> bool {
        let family = if addr.is_ipv4() { self.ipv4 } else { self.ipv6 };
        family && self.askable(addr)
    }

    /// Whether a server may be asked at `addr` at all: never at an
    /// unspecified, multicast or broadcast address; at a loopback or
    /// link-local one only when [`Families::local`].
    pub fn askable(&self, addr: &IpAddr) -> bool {
        // An IPv4 address mapped into IPv6 (`::ffff:127.0.0.1`) is that
        // IPv4 address: a dual-stack socket sends to it.
        let never = match addr.to_canonical() {
            IpAddr::V4(a) => a.is_unspecified() || a.is_multicast() || a.is_broadcast(),
            IpAddr::V6(a) => a.is_unspecified() || a.is_multicast(),
        };
        !never && (self.local || !is_local(addr))
    }

    /// The address record types to look up for a glueless nameserver, in order.
    pub fn lookup_types(&self) -> Vec<u16> {
        let mut order = Vec::with_capacity(2);
        let (first, second) = if self.prefer_ipv6 {
            ((self.ipv6, 28), (self.ipv4, 1))
        } else {
            ((self.ipv4, 1), (self.ipv6, 28))
        };
        for (wanted, qtype) in [first, second] {
            if wanted {
                order.push(qtype);
            }
        }
        order
    }

    /// `addrs` that may be used, preferred family first (stable otherwise).
    pub fn order(&self, addrs: &[IpAddr]) -> Vec<IpAddr> {
        let mut usable: Vec<IpAddr> = addrs.iter().copied().filter(|a| self.allows(a)).collect();
        usable.sort_by_key(|a| a.is_ipv4() == self.prefer_ipv6);
        usable
    }
}

/// A shuffle for server order: a cheap generator seeded from the process's
/// random hasher state and a counter (unpredictability is not needed here;
/// query ids and ports are what a spoofer must guess).
pub struct Shuffler {
    state: RandomState,
    counter: AtomicU64,
}

impl Default for Shuffler {
    fn default() -> Self {
        Shuffler {
            state: RandomState::new(),
            counter: AtomicU64::new(0),
        }
    }
}

impl Shuffler {
    /// Shuffles `items` in place (Fisher-Yates).
    pub fn shuffle<T>(&self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let j = (self.state.hash_one(n) % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn families_filter_and_order() {
        let addrs = [ip("::1"), ip("127.0.0.1"), ip("::2")];
        let both = Families {
            ipv4: true,
            ipv6: true,
            prefer_ipv6: false,
            local: true,
        };
        assert_eq!(both.order(&addrs), [ip("127.0.0.1"), ip("::1"), ip("::2")]);
        assert_eq!(both.lookup_types(), [1, 28]);
        let v6_first = Families {
            prefer_ipv6: true,
            ..both
        };
        assert_eq!(
            v6_first.order(&addrs),
            [ip("::1"), ip("::2"), ip("127.0.0.1")]
        );
        assert_eq!(v6_first.lookup_types(), [28, 1]);
        let only4 = Families {
            ipv6: false,
            ..both
        };
        assert_eq!(only4.order(&addrs), [ip("127.0.0.1")]);
        assert_eq!(only4.lookup_types(), [1]);
    }

    #[test]
    fn addresses_no_server_has_are_never_asked_and_local_ones_only_in_a_lab() {
        let internet = Families {
            ipv4: true,
            ipv6: true,
            prefer_ipv6: false,
            local: false,
        };
        let lab = Families {
            local: true,
            ..internet
        };
        let never = ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "ff02::1"];
        for never in never
            .into_iter()
            .chain(["::ffff:0.0.0.0", "::ffff:224.0.0.1"])
        {
            assert!(
                !internet.allows(&ip(never)) && !lab.allows(&ip(never)),
                "{never}"
            );
        }
        for local in [
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "127.0.0.1",
            "127.58.0.1",
            "::1",
            "169.254.169.253",
            "fe80::1",
        ] {
            assert!(
                !internet.allows(&ip(local)) && lab.allows(&ip(local)),
                "{local}"
            );
        }
        for public in ["192.0.2.1", "198.41.0.4", "2001:503:ba3e::2:30", "10.0.0.1"] {
            assert!(internet.allows(&ip(public)), "{public}");
        }
    }

    #[test]
    fn shuffles_are_permutations_that_vary() {
        let shuffler = Shuffler::default();
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..200 {
            let mut items: Vec<u32> = (0..5).collect();
            shuffler.shuffle(&mut items);
            let mut sorted = items.clone();
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2, 3, 4]);
            firsts.insert(items[0]);
        }
        assert_eq!(firsts.len(), 5, "every server comes first sometimes");
    }
}
