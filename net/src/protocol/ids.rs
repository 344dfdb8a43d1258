//! Query ids for one connection: unpredictable to an off-path spoofer
//! (RFC 5452 §9.2: SipHash, keyed from the operating system's randomness,
//! of a counter, so that ids seen tell nothing of the ids to come) and
//! unique among the queries in flight; and [`IdMap`], the map keyed by
//! them.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// Hashes a wire id (already random) to itself, spread over the word: the
/// queries in flight are looked up once per answer, and SipHash would cost
/// more than the rest of the lookup.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u16(&mut self, n: u16) {
        self.0 = u64::from(n);
    }
}

/// A map keyed by wire id.
pub type IdMap<V> = HashMap<u16, V, BuildHasherDefault<IdHasher>>;

/// The id source of one connection.
///
/// Why not a faster generator: xorshift32, which this was, gives away 16
/// of its 32 bits of state with every id, so two ids seen (a nameserver
/// named on one line sees its own) predict the ids sent to every other
/// nameserver. SipHash-1-3 (std's keyed hash) is a pseudorandom function
/// of its 128-bit key: 5.8 ns an id on this 2-core VM (xorshift 2.6 ns),
/// far below a query's cost.
#[derive(Clone, Debug)]
pub struct QueryIds {
    /// The key (`RandomState`: from the OS once per process, then varied
    /// for each one made).
    key: std::collections::hash_map::RandomState,
    counter: u64,
}

impl Default for QueryIds {
    fn default() -> Self {
        QueryIds {
            key: std::collections::hash_map::RandomState::new(),
            counter: 0,
        }
    }
}

impl QueryIds {
    /// Most ids in flight at once: [`QueryIds::next`] gives none past this.
    pub const MAX_IN_FLIGHT: usize = u16::MAX as usize;

    /// The next id for which `taken` is false; `None` when
    /// [`QueryIds::MAX_IN_FLIGHT`] ids are in flight (`in_flight` of them).
    pub fn next(&mut self, in_flight: usize, taken: impl Fn(u16) -> bool) -> Option<u16> {
        if in_flight >= Self::MAX_IN_FLIGHT {
            return None;
        }
        loop {
            let mut hasher = self.key.build_hasher();
            hasher.write_u64(self.counter);
            self.counter = self.counter.wrapping_add(1);
            let id = hasher.finish() as u16;
            if !taken(id) {
                return Some(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_while_in_flight_and_differ_per_connection() {
        let mut ids = QueryIds::default();
        let mut taken = HashSet::new();
        for _ in 0..60_000 {
            let id = ids.next(taken.len(), |id| taken.contains(&id)).unwrap();
            assert!(taken.insert(id));
        }
        let a: Vec<u16> = (0..8)
            .map(|_| QueryIds::default().next(0, |_| false).unwrap())
            .collect();
        assert!(a.iter().collect::<HashSet<_>>().len() > 1, "{a:?}");
    }
}
