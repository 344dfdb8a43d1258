//! The nameservers of a run as the engine sees them: where each is, how
//! fast it may be asked ([`Pace`]), its round trip ([`RoundTrip`]), its
//! queries in flight, the names waiting for it alone (pinned lines and
//! retries sent its way), its health, and the counters the probe reads.

use super::pace::{Pace, PaceConfig};
use super::rtt::RoundTrip;
use crate::stats::NameserverStats;
use dnsluice_net::Endpoint;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Timeouts in a row after which a nameserver is set aside for unpinned names.
const FAILURES_TO_COOL: u32 = 3;
/// How long a nameserver is set aside.
const COOLING: Duration = Duration::from_secs(5);

/// A name waiting for its turn: its slot and the slot's timer at queueing
/// (a stale entry, whose slot has moved on, is skipped).
pub type Waiting = (u32, u32);

/// One nameserver.
pub struct Nameserver {
    /// Its address.
    pub addr: SocketAddr,
    /// `ip:port`, as records and statistics name it.
    pub name: Arc<str>,
    /// The counters the probe reads.
    pub stats: Arc<NameserverStats>,
    /// How fast it may be asked.
    pub pace: Pace,
    /// Its round trip.
    pub rtt: RoundTrip,
    /// Queries sent to it that wait for their answer.
    pub in_flight: u32,
    /// Names to be sent to it and no other.
    pub ready: VecDeque<Waiting>,
    failures_in_row: u32,
    cooling_until: Option<Instant>,
}

impl Nameserver {
    /// How long a round of its pacing lasts: as long as it takes to see a
    /// query lost (its wait for an answer), at least two round trips.
    pub fn round(&self) -> Duration {
        let srtt = self.rtt.srtt().unwrap_or(super::rtt::FIRST_WAIT);
        self.rtt.wait(Duration::from_secs(1)).max(2 * srtt)
    }

    /// Records an answer (`true`) or a timeout: timeouts in a row set it aside.
    pub fn record_health(&mut self, answered: bool, now: Instant) {
        if answered {
            self.failures_in_row = 0;
            return;
        }
        self.stats.failures.fetch_add(1, Ordering::Relaxed);
        self.failures_in_row += 1;
        if self.failures_in_row >= FAILURES_TO_COOL {
            self.cooling_until = Some(now + COOLING);
        }
    }

    /// Whether it failed repeatedly and recently.
    pub fn is_cooling(&self, now: Instant) -> bool {
        self.cooling_until.is_some_and(|t| now < t)
    }

    /// Publishes the gauges (rate, in flight, round trip) for the probe.
    pub fn publish(&self) {
        let s = &self.stats;
        let rate = self.pace.rate();
        s.rate.store(
            if rate.is_finite() { rate as u64 } else { 0 },
            Ordering::Relaxed,
        );
        s.in_flight
            .store(u64::from(self.in_flight), Ordering::Relaxed);
        let srtt = self.rtt.srtt().map_or(0, |d| d.as_micros() as u64);
        s.srtt_us.store(srtt, Ordering::Relaxed);
    }
}

/// The list the probe reads: every nameserver's name and counters, in order.
pub type Published = Arc<Mutex<Vec<(String, Arc<NameserverStats>)>>>;

/// Every nameserver of the run: the configured ones first, then the ones
/// pinned lines named.
pub struct Nameservers {
    list: Vec<Nameserver>,
    by_addr: HashMap<SocketAddr, u32>,
    configured: usize,
    cursor: usize,
    pace: PaceConfig,
    published: Published,
}

impl Nameservers {
    /// The configured nameservers, paced as `pace` says.
    pub fn new(
        configured: &[Endpoint],
        pace: PaceConfig,
        published: Published,
        now: Instant,
    ) -> Self {
        let mut set = Nameservers {
            list: Vec::new(),
            by_addr: HashMap::new(),
            configured: 0,
            cursor: 0,
            pace,
            published,
        };
        for endpoint in configured {
            set.get_or_add(endpoint.addr, now);
        }
        set.configured = set.list.len();
        set
    }

    /// The nameserver at `addr`, added on first sight.
    pub fn get_or_add(&mut self, addr: SocketAddr, now: Instant) -> u32 {
        if let Some(&id) = self.by_addr.get(&addr) {
            return id;
        }
        let id = self.list.len() as u32;
        let name: Arc<str> = dnsluice_net::Endpoint {
            addr,
            transport: dnsluice_net::DnsTransport::Udp,
            host: None,
            path: String::new(),
        }
        .resolver_name()
        .into();
        let stats = Arc::new(NameserverStats::default());
        dnsluice_core::sync::lock(&self.published).push((name.to_string(), stats.clone()));
        self.list.push(Nameserver {
            addr,
            name,
            stats,
            pace: Pace::new(self.pace, now),
            rtt: RoundTrip::default(),
            in_flight: 0,
            ready: VecDeque::new(),
            failures_in_row: 0,
            cooling_until: None,
        });
        self.by_addr.insert(addr, id);
        id
    }

    /// Nameserver `id`.
    pub fn get(&self, id: u32) -> &Nameserver {
        &self.list[id as usize]
    }

    /// Nameserver `id`, to change.
    pub fn get_mut(&mut self, id: u32) -> &mut Nameserver {
        &mut self.list[id as usize]
    }

    /// A configured nameserver for an unpinned name that may be asked now,
    /// its token taken: the next in turn with a token to spare, skipping
    /// those set aside (unless all are) and, when there is another,
    /// `avoid` (the one the name's last try went to).
    pub fn take_unpinned(&mut self, now: Instant, avoid: Option<u32>) -> Option<u32> {
        let n = self.configured;
        if n == 0 {
            return None;
        }
        let all_cooling = self.list[..n].iter().all(|ns| ns.is_cooling(now));
        for pass in 0..2 {
            for k in 0..n {
                let id = (self.cursor + k) % n;
                let ns = &mut self.list[id];
                let avoided = pass == 0 && n > 1 && avoid == Some(id as u32);
                if avoided || (ns.is_cooling(now) && !all_cooling) {
                    continue;
                }
                if ns.pace.try_take(now) {
                    self.cursor = id + 1;
                    return Some(id as u32);
                }
            }
            if avoid.is_none() {
                break;
            }
        }
        None
    }

    /// Every nameserver, to go through.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Nameserver)> {
        self.list
            .iter_mut()
            .enumerate()
            .map(|(i, ns)| (i as u32, ns))
    }
}
