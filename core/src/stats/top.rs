//! The most frequent keys of a stream (top qnames, top clients), as a
//! bounded counter reports them: each count with how much it may overstate.

/// One listed key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopEntry {
    /// The key as text (a name, an address).
    pub key: String,
    /// Its estimated count: at least the true count, at most `error` more.
    pub count: u64,
    /// How much `count` may overstate the true count.
    pub error: u64,
}

/// A bounded top-k list (space-saving: see `filter.top`), most frequent first.
///
/// Guarantees, for `counted` = N items and `capacity` = m counters: a listed
/// key's true count is in `count - error ..= count`; a key not listed was
/// seen at most `unlisted_max` times: the largest count cut from the list
/// (0 when none was), or the table's bound (0 until it filled, then at most
/// N / m), whichever is larger. A list as long as the table (`entries =
/// capacity`) so lists every key seen more than N / m times.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopList {
    /// The most frequent keys kept, most frequent first (at most the list length asked for).
    pub entries: Vec<TopEntry>,
    /// Items counted (N).
    pub counted: u64,
    /// Counters the table holds (m).
    pub capacity: u64,
    /// The most any key not in the table may have been seen.
    pub unlisted_max: u64,
    /// The list length asked for: a merge keeps as many entries.
    pub length: usize,
}

impl TopList {
    /// Adds `other`, a list of another part of the same stream (another
    /// thread's): counts of a key in both add up; a key missing from one
    /// side may have been seen up to that side's `unlisted_max` times there,
    /// which is added to its count and to its error, so the guarantees hold
    /// for the merged stream. Keeps `keep` entries, or the list length asked
    /// for if more.
    pub fn absorb(&mut self, other: &TopList, keep: usize) {
        let mut merged: Vec<TopEntry> =
            Vec::with_capacity(self.entries.len() + other.entries.len());
        for mine in &self.entries {
            let theirs = other.entries.iter().find(|e| e.key == mine.key);
            merged.push(match theirs {
                Some(t) => TopEntry {
                    key: mine.key.clone(),
                    count: mine.count + t.count,
                    error: mine.error + t.error,
                },
                None => TopEntry {
                    key: mine.key.clone(),
                    count: mine.count + other.unlisted_max,
                    error: mine.error + other.unlisted_max,
                },
            });
        }
        for theirs in &other.entries {
            if !self.entries.iter().any(|e| e.key == theirs.key) {
                merged.push(TopEntry {
                    key: theirs.key.clone(),
                    count: theirs.count + self.unlisted_max,
                    error: theirs.error + self.unlisted_max,
                });
            }
        }
        merged.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        let kept = keep.max(self.length).max(other.length);
        // A key cut from the merged list was counted at most its count here.
        let cut = merged.get(kept).map_or(0, |e| e.count);
        merged.truncate(kept);
        self.entries = merged;
        self.counted += other.counted;
        self.capacity = self.capacity.max(other.capacity);
        self.unlisted_max = (self.unlisted_max + other.unlisted_max).max(cut);
        self.length = self.length.max(other.length);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, count: u64, error: u64) -> TopEntry {
        TopEntry {
            key: key.into(),
            count,
            error,
        }
    }

    #[test]
    fn merged_lists_keep_their_bounds() {
        let mut a = TopList {
            entries: vec![entry("x", 10, 0), entry("y", 5, 1)],
            counted: 20,
            capacity: 2,
            unlisted_max: 2,
            length: 2,
        };
        let b = TopList {
            entries: vec![entry("x", 4, 0), entry("z", 7, 3)],
            counted: 15,
            capacity: 2,
            unlisted_max: 3,
            length: 2,
        };
        a.absorb(&b, 3);
        assert_eq!(
            a.entries,
            vec![entry("x", 14, 0), entry("z", 9, 5), entry("y", 8, 4)]
        );
        assert_eq!((a.counted, a.unlisted_max), (35, 5));
    }

    #[test]
    fn keys_cut_from_a_merged_list_raise_its_bound() {
        let mut a = TopList {
            entries: vec![entry("x", 5, 0), entry("y", 3, 0)],
            length: 2,
            ..TopList::default()
        };
        let b = TopList {
            entries: vec![entry("z", 4, 0), entry("w", 4, 0)],
            length: 2,
            ..TopList::default()
        };
        a.absorb(&b, 2);
        // Ties by text: w before z; z (4) and y (3) are cut, so a key not
        // listed may have been seen 4 times.
        assert_eq!(a.entries, vec![entry("x", 5, 0), entry("w", 4, 0)]);
        assert_eq!(a.unlisted_max, 4);
    }
}
