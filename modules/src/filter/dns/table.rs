//! Bounded tables keyed by flow, datagram or query, shared by TCP
//! reassembly, IP defragmentation and `output.diff`'s waiting queries: drop what has been quiet too long, and when full, make
//! room in one go (so a flood of new keys costs amortised constant time per
//! packet, not a scan of the table each).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// A table keyed by what packets carry (addresses, ports, IP ids), hashed
/// with foldhash under a random seed per table: packets cannot choose keys
/// that collide (the seed is not theirs to know), and hashing a key costs
/// a few multiplications, where the standard library's SipHash took a
/// quarter of a TCP-heavy run's time (`perf`, 100,000 connections).
pub type KeyedTable<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Whether something whose time is `then` is past `timeout` at `now` (the
/// test of every timeout here, swept, checked on arrival or at the end).
pub fn idle_past(now: i64, then: i64, timeout: i64) -> bool {
    now.saturating_sub(then) > timeout
}

/// Removes the entries whose time (`time_of`) is more than `timeout` before `now`.
pub fn take_expired<K: Eq + Hash, V, S: BuildHasher>(
    table: &mut HashMap<K, V, S>,
    now: i64,
    timeout: i64,
    time_of: impl Fn(&V) -> i64,
) -> Vec<(K, V)> {
    table
        .extract_if(|_, v| idle_past(now, time_of(v), timeout))
        .collect()
}

/// Removes the quietest eighth of the entries (at least one), by `time_of`.
pub fn take_quietest<K: Eq + Hash, V, S: BuildHasher>(
    table: &mut HashMap<K, V, S>,
    time_of: impl Fn(&V) -> i64,
) -> Vec<(K, V)> {
    let mut times: Vec<i64> = table.values().map(&time_of).collect();
    let count = (times.len() / 8).max(1).min(times.len());
    if count == 0 {
        return Vec::new();
    }
    // The count-th quietest time: every entry quieter goes, and of those
    // at it as many as make the count.
    let (quieter, &mut cut, _) = times.select_nth_unstable(count - 1);
    let mut ties = count - quieter.iter().filter(|&&t| t < cut).count();
    table
        .extract_if(|_, v| {
            let t = time_of(v);
            let take = t < cut || (t == cut && ties > 0);
            ties -= usize::from(t == cut && take);
            take
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each table has its own seed: the same key hashes differently in two
    /// tables (so no capture can be made whose keys collide in every run).
    #[test]
    fn each_keyed_table_hashes_under_its_own_seed() {
        let (a, b) = (
            KeyedTable::<u64, ()>::default(),
            KeyedTable::<u64, ()>::default(),
        );
        let differ = (0..8u64)
            .filter(|k| a.hasher().hash_one(k) != b.hasher().hash_one(k))
            .count();
        assert_eq!(differ, 8);
    }

    #[test]
    fn expired_and_quietest() {
        let mut t: HashMap<u32, i64> = (0..16).map(|k| (k, i64::from(k) * 10)).collect();
        let mut gone: Vec<u32> = take_expired(&mut t, 100, 50, |v| *v)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        gone.sort();
        assert_eq!(gone, [0, 1, 2, 3, 4]); // times 0..40 are more than 50 before 100
        let mut quiet: Vec<u32> = take_quietest(&mut t, |v| *v)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        quiet.sort();
        assert_eq!(quiet, [5]); // 11 left: an eighth rounds down to 1
        assert_eq!(t.len(), 10);
    }

    /// Of entries tied at the cut, only as many as make the count go; an
    /// entry quieter than the cut always goes, wherever the table keeps it.
    #[test]
    fn the_quietest_go_first_whatever_the_ties() {
        for seed in 0..20u32 {
            let mut t: HashMap<u32, i64> = (0..16).map(|k| (k * 97 + seed, 5)).collect();
            t.insert(1_000_000 + seed, 1);
            let taken = take_quietest(&mut t, |v| *v);
            assert_eq!(taken.len(), 2, "17 entries: an eighth is 2");
            assert!(taken.iter().any(|(_, v)| *v == 1), "{taken:?}");
        }
    }
}
