//! Query ids for one connection: unpredictable to an off-path spoofer
//! (xorshift32 seeded from the operating system's randomness) and unique among
//! the queries in flight.

use std::hash::{BuildHasher, Hasher};

/// The id source of one connection.
#[derive(Clone, Debug)]
pub struct QueryIds {
    state: u32,
}

impl Default for QueryIds {
    fn default() -> Self {
        // `RandomState` is seeded from the OS once per process and varied per call.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(0x5eed);
        QueryIds {
            state: (hasher.finish() as u32) | 1,
        }
    }
}

impl QueryIds {
    /// The next id for which `taken` is false; `None` when all 65535 ids the
    /// generator yields are in flight (`in_flight` of them).
    pub fn next(&mut self, in_flight: usize, taken: impl Fn(u16) -> bool) -> Option<u16> {
        if in_flight >= usize::from(u16::MAX) {
            return None;
        }
        loop {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 17;
            self.state ^= self.state << 5;
            let id = (self.state >> 8) as u16;
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
