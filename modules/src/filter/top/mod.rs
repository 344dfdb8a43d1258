//! `filter.top`: the most frequent query names, clients and servers, in
//! bounded memory. Every object passes on unchanged; DNS messages are
//! counted (queries by default: a query's source is its client, its
//! destination its server; a response's the other way round).
//!
//! Each list is a [`SpaceSaving`] table of `capacity` counters (m). After N
//! messages a listed count overstates the true count by at most its error
//! (shown beside it), every error is at most N / m, and any key seen more
//! than N / m times is kept in the table; a key not listed was seen at most
//! `unlisted_max` times (the largest count cut from the list, or the
//! table's bound). Names are compared case-insensitively (lowercased).
//!
//! ```toml
//! [[stage]]
//! module = "filter.top"
//! entries = 20        # per list, in the statistics
//! capacity = 4096     # counters per list: error at most N / capacity
//! ```

mod space_saving;

pub use space_saving::SpaceSaving;

use dnsluice_core::dns::name;
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::{Map, Object, StageStats, TopEntry, TopList};
use dnsluice_options::{Choice, Options};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

const MODULE: &str = "filter.top";

/// Options of `filter.top`.
#[derive(Debug, Clone, Options)]
pub struct TopOptions {
    /// Entries each list reports (most frequent first).
    #[option(default = 20, range = 1..=10_000)]
    pub entries: u32,
    /// Counters each list keeps (m): a listed count is at most N / m over
    /// the true one after N messages. Names take about 600 bytes a counter.
    #[option(default = 4096, range = 1..=1_000_000)]
    pub capacity: u32,
    /// Which messages are counted.
    #[option(default = Counted::Queries)]
    pub messages: Counted,
}

/// Which messages `filter.top` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Choice)]
pub enum Counted {
    /// Queries (QR=0): the source is the client.
    Queries,
    /// Responses (QR=1): the destination is the client.
    Responses,
    /// Both.
    All,
}

/// A query name in wire form, lowercased and uncompressed (root label included).
#[derive(Clone)]
struct NameKey {
    len: u8,
    bytes: [u8; name::MAX_NAME],
}

impl NameKey {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The first question's name of `msg`, or `None` when it has none or it
    /// does not parse.
    fn of_question(msg: &[u8]) -> Option<NameKey> {
        let qdcount = u16::from_be_bytes([*msg.get(4)?, *msg.get(5)?]);
        if qdcount == 0 {
            return None;
        }
        let mut key = NameKey {
            len: 0,
            bytes: [0; name::MAX_NAME],
        };
        let mut at = 0usize;
        let mut fits = true;
        name::walk(msg, 12, |label| {
            if at + 1 + label.len() < name::MAX_NAME {
                key.bytes[at] = label.len() as u8;
                for (to, b) in key.bytes[at + 1..].iter_mut().zip(label) {
                    *to = b.to_ascii_lowercase();
                }
                at += 1 + label.len();
            } else {
                fits = false;
            }
        })
        .ok()?;
        // The root label: a zero already there.
        key.len = (at + 1) as u8;
        fits.then_some(key)
    }

    fn to_text(&self) -> String {
        name::to_string(self.as_bytes(), 0).unwrap_or_else(|_| "(unreadable)".into())
    }
}

impl PartialEq for NameKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for NameKey {}

impl Hash for NameKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
    }
}

/// The stage; see the module docs.
pub struct Top {
    entries: usize,
    counted: Counted,
    qnames: SpaceSaving<NameKey>,
    clients: SpaceSaving<IpAddr>,
    servers: SpaceSaving<IpAddr>,
    objects: u64,
    messages: u64,
    without_qname: u64,
}

impl Top {
    /// A stage with `options`.
    pub fn new(options: &TopOptions) -> Top {
        let m = options.capacity as usize;
        Top {
            entries: options.entries as usize,
            counted: options.messages,
            qnames: SpaceSaving::new(m),
            clients: SpaceSaving::new(m),
            servers: SpaceSaving::new(m),
            objects: 0,
            messages: 0,
            without_qname: 0,
        }
    }

    #[inline]
    fn count(&mut self, msg: &dnsluice_core::DnsMessage<'_>) {
        let Some(&flags) = msg.bytes.get(2) else {
            return;
        };
        let response = flags & 0x80 != 0;
        let wanted = match self.counted {
            Counted::Queries => !response,
            Counted::Responses => response,
            Counted::All => true,
        };
        if !wanted {
            return;
        }
        self.messages += 1;
        match NameKey::of_question(msg.bytes) {
            Some(key) => self.qnames.offer(&key),
            None => self.without_qname += 1,
        }
        let packet = msg.packet.get();
        let (client, server) = if response {
            (packet.dst(), packet.src())
        } else {
            (packet.src(), packet.dst())
        };
        if let Some(client) = client {
            self.clients.offer(&client);
        }
        if let Some(server) = server {
            self.servers.offer(&server);
        }
    }
}

/// A table's report: its `k` largest counts with their errors. Keys tied
/// at the cut are taken, and the list's ties ordered, by their text: what
/// a merge of several threads' lists does ([`TopList::absorb`]), so that
/// one thread lists what two list when the counts are the same. A key left
/// out, of the list or of the table, was seen at most `unlisted_max` times:
/// the largest count cut from the list, or the table's own bound.
fn list<K: Clone + Eq + Hash + Ord>(
    table: &SpaceSaving<K>,
    k: usize,
    text: impl Fn(&K) -> String,
) -> TopList {
    let ranked = table.top(usize::MAX, |a, b| a.cmp(b));
    let entry = |&(key, count, error): &(&K, u64, u64)| TopEntry {
        key: text(key),
        count,
        error,
    };
    let mut entries: Vec<TopEntry> = match k.checked_sub(1).and_then(|last| ranked.get(last)) {
        // More keys than the list holds: every key counted above the last
        // listed count, then the keys tied with it, by their text.
        Some(&(_, last_count, _)) => {
            let above = ranked.iter().take_while(|r| r.1 > last_count);
            let tied = ranked
                .iter()
                .skip_while(|r| r.1 > last_count)
                .take_while(|r| r.1 == last_count);
            above.chain(tied).map(entry).collect()
        }
        None => ranked.iter().take(k).map(entry).collect(),
    };
    entries.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    entries.truncate(k);
    let cut = ranked.get(entries.len()).map_or(0, |&(_, count, _)| count);
    TopList {
        entries,
        counted: table.counted(),
        capacity: table.capacity() as u64,
        unlisted_max: table.unlisted_max().max(cut),
        length: k,
    }
}

impl PartialOrd for NameKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for NameKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Map for Top {
    #[inline]
    fn map(&mut self, obj: &mut Object<'_>) {
        self.objects += 1;
        if let Object::Dns(msg) = obj {
            self.count(msg);
        }
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new(MODULE);
        stats.add_counter("messages_counted", self.messages);
        stats.add_counter("without_qname", self.without_qname);
        let k = self.entries;
        stats
            .top
            .insert("qnames".into(), list(&self.qnames, k, NameKey::to_text));
        stats
            .top
            .insert("clients".into(), list(&self.clients, k, IpAddr::to_string));
        stats
            .top
            .insert("servers".into(), list(&self.servers, k, IpAddr::to_string));
        stats
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::map(
        MODULE,
        "count the most frequent query names, clients and servers in bounded memory (space-saving)",
        |o: TopOptions| Ok(Top::new(&o)),
    )
    // Each thread counts its part; the lists merge with their error bounds.
    .parallel(Parallel::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &[u8]) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(name);
        m.extend_from_slice(&[0, 1, 0, 1]);
        m
    }

    #[test]
    fn names_are_lowercased_and_printed() {
        let a = NameKey::of_question(&query(b"\x03WwW\x07Example\x03cOm\x00")).unwrap();
        let b = NameKey::of_question(&query(b"\x03www\x07example\x03com\x00")).unwrap();
        assert!(a == b);
        assert_eq!(a.to_text(), "www.example.com.");
        let root = NameKey::of_question(&query(b"\x00")).unwrap();
        assert_eq!(root.to_text(), ".");
        let mut none = query(b"\x00");
        none[5] = 0;
        assert!(NameKey::of_question(&none).is_none());
        assert!(NameKey::of_question(&query(b"\x05ab")).is_none(), "cut off");
    }
}
