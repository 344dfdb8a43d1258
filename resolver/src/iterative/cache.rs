//! The one cache all workers share: zone cuts (a zone's nameservers and
//! their glue), answers, and negative answers (RFC 2308), each until its TTL
//! runs out, in at most `--cache-size` entries, least recently used evicted
//! first.
//!
//! It is split into shards by a hash of the key, each an LRU list behind its
//! own lock, so workers resolving different names seldom wait for each other
//! (there is no lock over the whole cache). Only what the trust rules let
//! through is stored ([`super::trust`]); failures (SERVFAIL, timeouts, lame
//! servers) are never cached, so one bad moment of a server cannot turn into
//! a run of failures for every later name (ZDNS issue #411).

use super::delegation::Delegation;
use super::message::{types, Rr};
use super::name::Name;
use super::trust::Verdict;
use dnsluice_core::sync;
use lru::LruCache;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shards (a power of two).
const SHARDS: usize = 64;
/// The longest any answer or delegation is kept (unbound's `cache-max-ttl`).
const MAX_TTL: u32 = 86_400;
/// The longest a negative answer is kept (unbound's `cache-max-negative-ttl`).
const MAX_NEGATIVE_TTL: u32 = 3_600;

/// The kind a key stands for beside the record types.
const KIND_NXDOMAIN: u16 = 0;
const KIND_DELEGATION: u16 = 65_535;

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    name: Name,
    /// A QTYPE, [`KIND_NXDOMAIN`] or [`KIND_DELEGATION`].
    kind: u16,
    class: u16,
}

#[derive(Clone)]
enum Value {
    Verdict(Arc<Verdict>),
    Delegation(Arc<Delegation>),
}

struct Entry {
    value: Value,
    stored: Instant,
    ttl: u32,
}

/// What the cache counted.
#[derive(Default)]
pub struct CacheCounters {
    /// Answers found in the cache.
    pub hits: AtomicU64,
    /// Answers looked for and not found.
    pub misses: AtomicU64,
    /// Zone cuts found (the walk started below the root).
    pub delegation_hits: AtomicU64,
    /// Entries stored.
    pub stored: AtomicU64,
}

/// The shared cache; see the module docs.
pub struct Cache {
    shards: Box<[Mutex<LruCache<Key, Entry>>]>,
    hasher: RandomState,
    /// The counters.
    pub counters: CacheCounters,
}

impl Cache {
    /// A cache of at most `capacity` entries (at least one per shard).
    pub fn new(capacity: usize) -> Cache {
        let per_shard =
            NonZeroUsize::new(capacity.div_ceil(SHARDS).max(1)).unwrap_or(NonZeroUsize::MIN);
        Cache {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
            hasher: RandomState::new(),
            counters: CacheCounters::default(),
        }
    }

    fn shard(&self, key: &Key) -> std::sync::MutexGuard<'_, LruCache<Key, Entry>> {
        let index = self.hasher.hash_one(key) as usize & (SHARDS - 1);
        // Every update is one insert or removal: a poisoned lock is consistent.
        sync::lock(&self.shards[index])
    }

    /// The live entry for `key`, and how many seconds of its TTL are gone.
    fn get(&self, key: &Key) -> Option<(Value, u32)> {
        let mut shard = self.shard(key);
        let entry = shard.get(key)?;
        let age = entry.stored.elapsed();
        if age >= Duration::from_secs(u64::from(entry.ttl)) {
            shard.pop(key);
            return None;
        }
        Some((entry.value.clone(), age.as_secs() as u32))
    }

    fn put(&self, key: Key, value: Value, ttl: u32) {
        if ttl == 0 {
            return;
        }
        self.counters.stored.fetch_add(1, Ordering::Relaxed);
        self.shard(&key).put(
            key,
            Entry {
                value,
                stored: Instant::now(),
                ttl,
            },
        );
    }

    /// What is known of `(name, qtype, class)`: an answer, a chain to
    /// follow, or a negative answer; TTLs aged. Counts a hit or a miss.
    pub fn answer(&self, name: &Name, qtype: u16, class: u16) -> Option<Verdict> {
        let mut kinds = vec![qtype, KIND_NXDOMAIN];
        if qtype != types::CNAME {
            kinds.push(types::CNAME);
        }
        for kind in kinds {
            let key = Key {
                name: name.clone(),
                kind,
                class,
            };
            if let Some((Value::Verdict(verdict), age)) = self.get(&key) {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                return Some(aged(&verdict, age));
            }
        }
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Stores a final verdict for `(name, qtype, class)`: answers until
    /// their TTL, negative answers until their SOA's (none without one).
    /// A name that does not exist is stored for every type, and a CNAME at
    /// the name for every other type too.
    pub fn put_answer(&self, name: &Name, qtype: u16, class: u16, verdict: &Verdict) {
        let (ttl, extra_kind) = match verdict {
            Verdict::Answer(records) => (min_ttl(records, MAX_TTL), None),
            Verdict::Alias { chain, .. } => (min_ttl(chain, MAX_TTL), None),
            Verdict::NoData { chain, soa } => (negative_ttl(chain, soa.as_ref()), None),
            Verdict::NxDomain { chain, soa } => {
                let nx_here = chain.is_empty().then_some(KIND_NXDOMAIN);
                (negative_ttl(chain, soa.as_ref()), nx_here)
            }
            Verdict::Referral(_) | Verdict::Lame(_) => return,
        };
        let value = Value::Verdict(Arc::new(verdict.clone()));
        if let Some(kind) = extra_kind {
            self.put(key(name, kind, class), value.clone(), ttl);
        }
        self.put(key(name, qtype, class), value, ttl);
        // The first CNAME of a chain answers every type at its owner.
        let first = match verdict {
            Verdict::Answer(records) => records.first(),
            Verdict::Alias { chain, .. }
            | Verdict::NoData { chain, .. }
            | Verdict::NxDomain { chain, .. } => chain.first(),
            _ => None,
        };
        if let Some(cname) = first.filter(|rr| rr.rtype == types::CNAME && rr.owner == *name) {
            if let Some(target) = cname.target() {
                if qtype != types::CNAME {
                    let alias = Verdict::Alias {
                        chain: vec![cname.clone()],
                        target,
                    };
                    self.put(
                        key(name, types::CNAME, class),
                        Value::Verdict(Arc::new(alias)),
                        cname.ttl.min(MAX_TTL),
                    );
                }
            }
        }
    }

    /// The deepest zone cut known at or above `name` (class IN).
    pub fn closest_delegation(&self, name: &Name) -> Option<Arc<Delegation>> {
        for zone in name.ancestors() {
            if zone.is_root() {
                break;
            }
            if let Some((Value::Delegation(d), _)) = self.get(&key(&zone, KIND_DELEGATION, 1)) {
                self.counters
                    .delegation_hits
                    .fetch_add(1, Ordering::Relaxed);
                return Some(d);
            }
        }
        None
    }

    /// Stores a zone cut for `ttl` seconds.
    pub fn put_delegation(&self, delegation: Arc<Delegation>, ttl: u32) {
        self.put(
            key(&delegation.zone, KIND_DELEGATION, 1),
            Value::Delegation(delegation.clone()),
            ttl.min(MAX_TTL),
        );
    }

    /// Entries held now (expired ones not yet evicted included).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| sync::lock(s).len()).sum()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn key(name: &Name, kind: u16, class: u16) -> Key {
    Key {
        name: name.clone(),
        kind,
        class,
    }
}

fn min_ttl(records: &[Rr], cap: u32) -> u32 {
    records.iter().map(|rr| rr.ttl).min().unwrap_or(0).min(cap)
}

/// RFC 2308 §5: the SOA's TTL or MINIMUM, the lesser; nothing without an SOA.
fn negative_ttl(chain: &[Rr], soa: Option<&Rr>) -> u32 {
    let Some(negative) = soa.and_then(Rr::negative_ttl) else {
        return 0;
    };
    let chain_ttl = if chain.is_empty() {
        u32::MAX
    } else {
        min_ttl(chain, u32::MAX)
    };
    negative.min(chain_ttl).min(MAX_NEGATIVE_TTL)
}

/// `verdict` with every TTL lowered by `age` seconds.
fn aged(verdict: &Verdict, age: u32) -> Verdict {
    let mut copy = verdict.clone();
    let lower = |records: &mut Vec<Rr>| {
        for rr in records {
            rr.ttl = rr.ttl.saturating_sub(age);
        }
    };
    match &mut copy {
        Verdict::Answer(records) | Verdict::Alias { chain: records, .. } => lower(records),
        Verdict::NoData { chain, soa } | Verdict::NxDomain { chain, soa } => {
            lower(chain);
            if let Some(soa) = soa {
                soa.ttl = soa.ttl.saturating_sub(age);
            }
        }
        Verdict::Referral(_) | Verdict::Lame(_) => {}
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn a(owner: &str, ttl: u32) -> Rr {
        Rr {
            owner: n(owner),
            rtype: types::A,
            class: 1,
            ttl,
            rdata: Box::new([127, 0, 0, 1]),
        }
    }

    fn soa(owner: &str, ttl: u32, minimum: u32) -> Rr {
        let mut rdata = b"\x00\x00".to_vec();
        rdata.extend_from_slice(&[0; 16]);
        rdata.extend_from_slice(&minimum.to_be_bytes());
        Rr {
            owner: n(owner),
            rtype: types::SOA,
            class: 1,
            ttl,
            rdata: rdata.into(),
        }
    }

    #[test]
    fn answers_are_kept_per_type_and_class() {
        let cache = Cache::new(1000);
        let www = n("www.example");
        cache.put_answer(&www, 1, 1, &Verdict::Answer(vec![a("www.example", 300)]));
        assert_eq!(
            cache.answer(&www, 1, 1),
            Some(Verdict::Answer(vec![a("www.example", 300)]))
        );
        assert_eq!(cache.answer(&www, 28, 1), None);
        assert_eq!(cache.answer(&www, 1, 3), None);
        assert_eq!(cache.counters.hits.load(Ordering::Relaxed), 1);
        assert_eq!(cache.counters.misses.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn negative_answers_follow_rfc_2308() {
        let cache = Cache::new(1000);
        let gone = n("gone.example");
        // NXDOMAIN: kept for every type, for min(SOA TTL, MINIMUM).
        let nx = Verdict::NxDomain {
            chain: vec![],
            soa: Some(soa("example", 600, 60)),
        };
        cache.put_answer(&gone, 1, 1, &nx);
        assert_eq!(cache.answer(&gone, 15, 1), Some(nx));
        // A negative answer without an SOA is not kept at all.
        let bare = Verdict::NoData {
            chain: vec![],
            soa: None,
        };
        cache.put_answer(&n("x.example"), 1, 1, &bare);
        assert_eq!(cache.answer(&n("x.example"), 1, 1), None);
        assert_eq!(negative_ttl(&[], Some(&soa("example", 600, 60))), 60);
        assert_eq!(negative_ttl(&[], Some(&soa("example", 30, 60))), 30);
        assert_eq!(
            negative_ttl(&[], Some(&soa("example", 99_999, 99_999))),
            3600
        );
    }

    #[test]
    fn zero_ttls_and_expiry() {
        let cache = Cache::new(1000);
        cache.put_answer(
            &n("z.example"),
            1,
            1,
            &Verdict::Answer(vec![a("z.example", 0)]),
        );
        assert_eq!(cache.answer(&n("z.example"), 1, 1), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn the_closest_cut_wins_and_the_size_is_bounded() {
        let cache = Cache::new(SHARDS);
        for zone in ["example", "sub.example"] {
            cache.put_delegation(
                Arc::new(Delegation {
                    zone: n(zone),
                    servers: vec![],
                }),
                3600,
            );
        }
        let got = cache.closest_delegation(&n("a.b.sub.example")).unwrap();
        assert_eq!(got.zone, n("sub.example"));
        assert_eq!(cache.closest_delegation(&n("other")), None);
        for i in 0..10 * SHARDS {
            cache.put_answer(
                &n(&format!("h{i}.example")),
                1,
                1,
                &Verdict::Answer(vec![a(&format!("h{i}.example"), 60)]),
            );
        }
        assert!(cache.len() <= SHARDS, "{} entries", cache.len());
    }

    #[test]
    fn a_cname_answers_other_types_at_its_owner() {
        let cache = Cache::new(1000);
        let cname = Rr {
            owner: n("alias.example"),
            rtype: types::CNAME,
            class: 1,
            ttl: 300,
            rdata: n("real.example").wire().into(),
        };
        let verdict = Verdict::Answer(vec![cname.clone(), a("real.example", 300)]);
        cache.put_answer(&n("alias.example"), 1, 1, &verdict);
        assert_eq!(
            cache.answer(&n("alias.example"), 28, 1),
            Some(Verdict::Alias {
                chain: vec![cname],
                target: n("real.example")
            })
        );
    }
}
