//! The space-saving algorithm (Metwally, Agrawal, El Abbadi, "Efficient
//! computation of frequent and top-k elements in data streams", 2005):
//! the most frequent keys of a stream in a fixed number of counters.
//!
//! With `m` counters, a key already counted is incremented; a new key
//! takes over the counter with the smallest count `min`, starting at
//! `min + 1` with an error of `min`. So a kept key's count overstates its
//! true count by at most its error, every error is at most N / m after N
//! items, and a key seen more than N / m times is always kept. Memory is
//! fixed (`m` keys, twice: in the table and the index); each item costs one
//! hash lookup and a sift in a min-heap of the counts (O(log m), usually
//! none: a frequent key's count is larger than its children's already).

use rustc_hash::FxHashMap;
use std::hash::Hash;

/// One counter.
#[derive(Clone, Debug)]
struct Slot<K> {
    key: K,
    count: u64,
    error: u64,
    /// Where the slot is in the heap.
    heap_at: usize,
}

/// The counters; see the module docs.
#[derive(Clone, Debug)]
pub struct SpaceSaving<K> {
    capacity: usize,
    slots: Vec<Slot<K>>,
    /// Slot indices, a min-heap by count.
    heap: Vec<usize>,
    index: FxHashMap<K, usize>,
    counted: u64,
}

impl<K: Clone + Eq + Hash> SpaceSaving<K> {
    /// Room for `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        SpaceSaving {
            capacity,
            slots: Vec::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
            index: FxHashMap::with_capacity_and_hasher(capacity, Default::default()),
            counted: 0,
        }
    }

    /// Counts one occurrence of `key`.
    #[inline]
    pub fn offer(&mut self, key: &K) {
        self.counted += 1;
        if let Some(&slot) = self.index.get(key) {
            self.slots[slot].count += 1;
            let at = self.slots[slot].heap_at;
            self.sift_down(at);
            return;
        }
        self.take_over(key);
    }

    /// A key not counted yet: a free counter, or the smallest one's.
    #[cold]
    fn take_over(&mut self, key: &K) {
        if self.slots.len() < self.capacity {
            let slot = self.slots.len();
            self.slots.push(Slot {
                key: key.clone(),
                count: 1,
                error: 0,
                heap_at: self.heap.len(),
            });
            self.heap.push(slot);
            self.index.insert(key.clone(), slot);
            let at = self.heap.len() - 1;
            self.sift_up(at);
            return;
        }
        let slot = self.heap[0];
        let old = &mut self.slots[slot];
        self.index.remove(&old.key);
        old.error = old.count;
        old.count += 1;
        old.key = key.clone();
        self.index.insert(key.clone(), slot);
        self.sift_down(0);
    }

    fn count_at(&self, heap_at: usize) -> u64 {
        self.slots[self.heap[heap_at]].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.slots[self.heap[a]].heap_at = a;
        self.slots[self.heap[b]].heap_at = b;
    }

    fn sift_down(&mut self, mut at: usize) {
        loop {
            let left = 2 * at + 1;
            if left >= self.heap.len() {
                return;
            }
            let right = left + 1;
            let smaller = if right < self.heap.len() && self.count_at(right) < self.count_at(left) {
                right
            } else {
                left
            };
            if self.count_at(smaller) >= self.count_at(at) {
                return;
            }
            self.swap(at, smaller);
            at = smaller;
        }
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.count_at(parent) <= self.count_at(at) {
                return;
            }
            self.swap(at, parent);
            at = parent;
        }
    }

    /// Items counted.
    pub fn counted(&self) -> u64 {
        self.counted
    }

    /// Counters held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The most a key not kept may have been seen: the smallest count once
    /// every counter is taken, else 0.
    pub fn unlisted_max(&self) -> u64 {
        if self.slots.len() < self.capacity {
            0
        } else {
            self.heap.first().map_or(0, |&s| self.slots[s].count)
        }
    }

    /// The `k` largest counts, largest first: `(key, count, error)`; ties in
    /// the order `order` gives the keys.
    pub fn top(
        &self,
        k: usize,
        order: impl Fn(&K, &K) -> std::cmp::Ordering,
    ) -> Vec<(&K, u64, u64)> {
        let mut all: Vec<&Slot<K>> = self.slots.iter().collect();
        all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| order(&a.key, &b.key)));
        all.into_iter()
            .take(k)
            .map(|s| (&s.key, s.count, s.error))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn exact_while_every_key_fits() {
        let mut s = SpaceSaving::new(10);
        for (key, n) in [(1u32, 5), (2, 3), (3, 9)] {
            for _ in 0..n {
                s.offer(&key);
            }
        }
        let top: Vec<(u32, u64, u64)> = s
            .top(2, |a, b| a.cmp(b))
            .into_iter()
            .map(|(k, c, e)| (*k, c, e))
            .collect();
        assert_eq!(top, vec![(3, 9, 0), (1, 5, 0)]);
        assert_eq!(s.unlisted_max(), 0);
    }

    /// A stream with a known answer (its generator's own record): a few
    /// heavy keys among many light ones, interleaved, through few counters.
    #[test]
    fn bounds_hold_with_few_counters() {
        let mut truth: HashMap<u32, u64> = HashMap::new();
        let mut s = SpaceSaving::new(50);
        let mut x: u64 = 12345;
        for i in 0..100_000u64 {
            // Every 4th item is one of 5 heavy keys; the rest spread over 10,000.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = if i % 4 == 0 {
                (x >> 33) as u32 % 5
            } else {
                1000 + (x >> 33) as u32 % 10_000
            };
            *truth.entry(key).or_default() += 1;
            s.offer(&key);
        }
        let n = s.counted();
        assert_eq!(n, 100_000);
        let bound = n / 50;
        let kept = s.top(50, |a, b| a.cmp(b));
        for (key, count, error) in &kept {
            let t = truth[key];
            assert!(
                t <= *count && *count <= t + error,
                "{key}: {t} vs {count}±{error}"
            );
            assert!(*error <= bound, "error {error} over N/m {bound}");
        }
        let unlisted = s.unlisted_max();
        assert!(unlisted <= bound);
        for (key, t) in &truth {
            if *t > bound {
                assert!(
                    kept.iter().any(|(k, _, _)| *k == key),
                    "{key} seen {t} > N/m not kept"
                );
            }
            if !kept.iter().any(|(k, _, _)| *k == key) {
                assert!(*t <= unlisted, "{key}: {t} > unlisted_max {unlisted}");
            }
        }
        let heavy: Vec<u32> = kept.iter().take(5).map(|(k, _, _)| **k).collect();
        let mut sorted = heavy.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
    }
}
