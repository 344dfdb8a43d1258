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
}

impl Families {
    /// Whether `addr` may be used.
    pub fn allows(&self, addr: &IpAddr) -> bool {
        if addr.is_ipv4() {
            self.ipv4
        } else {
            self.ipv6
        }
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
