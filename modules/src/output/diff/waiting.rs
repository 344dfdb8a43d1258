//! The capture's queries waiting for the capture's own response
//! (`diff --recorded`), bounded: a query is matched by its client, its
//! server, its id and its question; one unanswered after [`WAIT_NS`] of
//! capture time, or pushed out when [`MAX_WAITING`] wait, is counted as a
//! query without a response and forgotten. Unbounded, a capture of a flood
//! of queries never answered (random subdomains at a server that has gone)
//! kept every one of them in memory to the end.

use crate::filter::dns::table::{take_expired, take_quietest, KeyedTable};
use std::net::IpAddr;

/// How long (capture time) a query waits for its response: more than any
/// resolver takes to give up.
pub(super) const WAIT_NS: i64 = 30_000_000_000;
/// Queries waiting at most; past it the oldest are forgotten (counted).
pub(super) const MAX_WAITING: usize = 1 << 20;

/// An address and port (the address unknown for a message not from a packet).
pub(super) type Endpoint = (Option<IpAddr>, u16);

/// (client, server, id, question as on the wire, lowercased).
pub(super) type Key = (Endpoint, Endpoint, u16, Vec<u8>);

/// A query waiting: its message and its capture time.
struct Waiting {
    query: Vec<u8>,
    ts_ns: i64,
}

/// The waiting queries; see the module docs.
#[derive(Default)]
pub(super) struct WaitingQueries {
    table: KeyedTable<Key, Waiting>,
    /// Capture time of the last look for queries waiting too long.
    swept_ns: Option<i64>,
    /// The latest capture time seen (the time of a packet without one).
    latest_ns: i64,
    /// Queries forgotten unanswered so far.
    pub(super) unanswered: u64,
    /// Queries seen again (same client, server, id and question) before a
    /// response: a retry; the latest is kept.
    pub(super) repeated: u64,
}

impl WaitingQueries {
    /// A query seen at `ts_ns`.
    pub(super) fn query(&mut self, key: Key, query: Vec<u8>, ts_ns: Option<i64>) {
        let ts_ns = self.clock(ts_ns);
        self.sweep(ts_ns);
        if self.table.len() >= MAX_WAITING && !self.table.contains_key(&key) {
            self.forget_oldest();
        }
        if self.table.insert(key, Waiting { query, ts_ns }).is_some() {
            self.repeated += 1;
        }
    }

    /// The query a response with `key` answers, if one waits for it.
    pub(super) fn response(&mut self, key: &Key, ts_ns: Option<i64>) -> Option<Vec<u8>> {
        let ts_ns = self.clock(ts_ns);
        self.sweep(ts_ns);
        self.table.remove(key).map(|w| w.query)
    }

    /// At the end: every query still waiting is unanswered.
    pub(super) fn finish(&mut self) {
        self.unanswered += self.table.len() as u64;
        self.table.clear();
    }

    fn clock(&mut self, ts_ns: Option<i64>) -> i64 {
        if let Some(ts) = ts_ns {
            self.latest_ns = self.latest_ns.max(ts);
        }
        ts_ns.unwrap_or(self.latest_ns)
    }

    /// Forgets the queries that waited longer than [`WAIT_NS`] (looked for
    /// at most every quarter of it).
    fn sweep(&mut self, now_ns: i64) {
        if self
            .swept_ns
            .is_some_and(|t| now_ns.saturating_sub(t) < WAIT_NS / 4)
        {
            return;
        }
        self.swept_ns = Some(now_ns);
        let gone = take_expired(&mut self.table, now_ns, WAIT_NS, |w| w.ts_ns);
        self.unanswered += gone.len() as u64;
    }

    /// Forgets the oldest eighth of the table (one pass for many inserts).
    fn forget_oldest(&mut self) {
        let gone = take_quietest(&mut self.table, |w| w.ts_ns);
        self.unanswered += gone.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(client: u8, server: u8, id: u16) -> Key {
        let host = |last: u8| Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)));
        (
            (host(client), 40000),
            (host(server), 53),
            id,
            b"\x07example\x00\x00\x01\x00\x01".to_vec(),
        )
    }

    const S: i64 = 1_000_000_000;

    #[test]
    fn a_response_matches_its_client_server_id_and_question() {
        let mut w = WaitingQueries::default();
        w.query(key(1, 53, 7), b"q".to_vec(), Some(0));
        // The same client and id, to another server: not this query's answer.
        assert_eq!(w.response(&key(1, 54, 7), Some(S)), None);
        assert_eq!(w.response(&key(1, 53, 7), Some(S)), Some(b"q".to_vec()));
        assert_eq!(w.response(&key(1, 53, 7), Some(S)), None);
        w.finish();
        assert_eq!((w.unanswered, w.repeated), (0, 0));
    }

    #[test]
    fn queries_never_answered_are_counted_and_forgotten() {
        let mut w = WaitingQueries::default();
        for id in 0..100 {
            w.query(key(1, 53, id), vec![0; 100], Some(i64::from(id) * S / 10));
        }
        // A retry of id 99 before any response.
        w.query(key(1, 53, 99), vec![1; 100], None);
        assert_eq!(w.repeated, 1);
        assert_eq!(w.table.len(), 100);
        // 40 s on: every one of them waited too long.
        w.query(key(2, 53, 1), vec![0; 100], Some(40 * S));
        assert_eq!(w.unanswered, 100);
        assert_eq!(w.table.len(), 1);
        w.finish();
        assert_eq!(w.unanswered, 101);
    }

    #[test]
    fn a_full_table_forgets_its_oldest() {
        let mut w = WaitingQueries::default();
        for id in 0..MAX_WAITING {
            let id = id as u32;
            w.query(key((id >> 16) as u8, 53, id as u16), Vec::new(), Some(0));
        }
        assert_eq!(w.table.len(), MAX_WAITING);
        w.query(key(255, 53, 1), Vec::new(), Some(1));
        assert_eq!(w.unanswered, (MAX_WAITING / 8) as u64);
        assert_eq!(w.table.len(), MAX_WAITING - MAX_WAITING / 8 + 1);
    }
}
