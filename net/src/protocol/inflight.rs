//! The queries in flight on one connection: each gets a wire id unique among
//! them ([`QueryIds`]), an answer is matched by that id and by repeating the
//! query's question ([`answers`]; RFC 5452 §9.1, RFC 7766 §7: answers on a
//! stream may come in any order), and deadlines are kept in sending order so
//! that finding the queries that timed out looks only at the front.
//!
//! Plain data, no clock of its own and no I/O: a driver puts a query in with
//! [`InFlight::insert`], writes it with the id it got, hands every message it
//! reads to [`InFlight::answer`], and asks [`InFlight::expired`] now and then.

use super::ids::{IdMap, QueryIds};
use super::question::{answers, id_of};
use std::collections::VecDeque;
use std::time::Instant;

/// What a driver keeps for a query in flight: the table needs its question.
pub trait Asked {
    /// The query's first question (as [`super::question::first_question`]
    /// gives it), or `None` for a query without one.
    fn question(&self) -> Option<&[u8]>;
}

/// All the ids are taken: [`QueryIds::MAX_IN_FLIGHT`] queries are in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{} queries already in flight", QueryIds::MAX_IN_FLIGHT)]
pub struct IdsExhausted;

/// Why a message read from the connection answers nothing in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// Shorter than a DNS header.
    TooShort,
    /// No query in flight has its id (late after a timeout, or spoofed).
    UnknownId,
    /// The id is in flight but the question differs (or is missing where
    /// the query had none): not the answer; the query still waits.
    WrongQuestion,
}

struct Entry<T> {
    value: T,
    /// Tells this query's deadline from that of an earlier one with the same id.
    seq: u64,
}

/// The table; see the module docs.
pub struct InFlight<T> {
    waiting: IdMap<Entry<T>>,
    /// (deadline, wire id, seq), in insertion order.
    deadlines: VecDeque<(Instant, u16, u64)>,
    ids: QueryIds,
    seq: u64,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight {
            waiting: IdMap::default(),
            deadlines: VecDeque::new(),
            ids: QueryIds::default(),
            seq: 0,
        }
    }
}

impl<T: Asked> InFlight<T> {
    /// Puts `value` in flight and returns the wire id to send it with. With
    /// a `deadline` (not earlier than any given before: every query of a
    /// driver has the same timeout), [`InFlight::expired`] hands it back once
    /// that has passed. When every id is taken, `value` comes back with the error.
    pub fn insert(
        &mut self,
        value: T,
        deadline: Option<Instant>,
    ) -> Result<u16, (IdsExhausted, T)> {
        let waiting = &self.waiting;
        let Some(id) = self.ids.next(waiting.len(), |id| waiting.contains_key(&id)) else {
            return Err((IdsExhausted, value));
        };
        self.seq += 1;
        if let Some(deadline) = deadline {
            self.deadlines.push_back((deadline, id, self.seq));
        }
        self.waiting.insert(
            id,
            Entry {
                value,
                seq: self.seq,
            },
        );
        Ok(id)
    }

    /// The query `message` answers, taken out of the table; the message is
    /// left as it is (its id is the wire id: the driver puts the query's own
    /// back when it hands the answer on).
    pub fn answer(&mut self, message: &[u8]) -> Result<T, Unmatched> {
        if message.len() < 12 {
            return Err(Unmatched::TooShort);
        }
        let id = id_of(message).ok_or(Unmatched::TooShort)?;
        let entry = self.waiting.get(&id).ok_or(Unmatched::UnknownId)?;
        if !answers(entry.value.question(), message) {
            return Err(Unmatched::WrongQuestion);
        }
        self.remove(id).ok_or(Unmatched::UnknownId)
    }
}

impl<T> InFlight<T> {
    /// The query in flight with wire id `id`.
    pub fn get(&self, id: u16) -> Option<&T> {
        self.waiting.get(&id).map(|e| &e.value)
    }

    /// Takes the query with wire id `id` out (it ended without an answer).
    pub fn remove(&mut self, id: u16) -> Option<T> {
        self.waiting.remove(&id).map(|e| e.value)
    }

    /// The next query whose deadline is before `now`, taken out; `None`
    /// when there is none. Deadlines of queries that have left meanwhile are
    /// dropped on the way.
    pub fn expired(&mut self, now: Instant) -> Option<T> {
        while let Some(&(deadline, id, seq)) = self.deadlines.front() {
            let live = self.waiting.get(&id).is_some_and(|e| e.seq == seq);
            if !live {
                self.deadlines.pop_front();
                continue;
            }
            if deadline > now {
                return None;
            }
            self.deadlines.pop_front();
            return self.remove(id);
        }
        None
    }

    /// Takes every query out (the connection is gone).
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.deadlines.clear();
        self.waiting.drain().map(|(_, e)| e.value)
    }

    /// Queries in flight.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::query::{build, QueryOptions};
    use crate::protocol::question::{first_question, set_id};
    use std::time::Duration;

    /// A query as a driver keeps it: its bytes, with its own id.
    #[derive(Debug)]
    struct Query(Vec<u8>);

    impl Asked for Query {
        fn question(&self) -> Option<&[u8]> {
            first_question(&self.0)
        }
    }

    fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
        let mut q = Vec::new();
        let no_edns = QueryOptions {
            edns_udp_size: None,
            ..QueryOptions::default()
        };
        build(id, name, qtype, &no_edns, &mut q).unwrap();
        q
    }

    /// The response a server sends to `query` sent with `wire_id`: QR=1,
    /// RD=1, RA=1, the question repeated (RFC 1035 §4.1.1, §4.1.2).
    fn response_to(query: &[u8], wire_id: u16) -> Vec<u8> {
        let mut r = query.to_vec();
        set_id(&mut r, wire_id);
        r[2] = 0x81;
        r[3] = 0x80;
        r
    }

    #[test]
    fn an_answer_matches_by_id_and_question_and_a_wrong_question_is_not_it() {
        let mut table = InFlight::default();
        let asked = query(0x1234, "www.example.com", 1);
        let id = table.insert(Query(asked.clone()), None).unwrap();
        // Same id, another name (RFC 5452 §9.1: a spoofer's guess): rejected,
        // and the query still waits.
        let other = response_to(&query(0, "www.example.org", 1), id);
        assert_eq!(table.answer(&other).err(), Some(Unmatched::WrongQuestion));
        // Same id and name, another type (AAAA): rejected too.
        let aaaa = response_to(&query(0, "www.example.com", 28), id);
        assert_eq!(table.answer(&aaaa).err(), Some(Unmatched::WrongQuestion));
        // Another id: unknown.
        let stray = response_to(&asked, id.wrapping_add(1));
        assert_eq!(table.answer(&stray).err(), Some(Unmatched::UnknownId));
        assert_eq!(table.answer(&asked[..11]).err(), Some(Unmatched::TooShort));
        assert_eq!(table.len(), 1);
        // The real answer, its name in other case (RFC 4343): matched, and
        // it carries the query with its own id.
        let mut real = response_to(&asked, id);
        real[13..16].copy_from_slice(b"WwW");
        let answered = table.answer(&real).unwrap();
        assert_eq!(&answered.0[..2], &[0x12, 0x34]);
        assert!(table.is_empty());
        // Answered once: the same answer again matches nothing.
        assert_eq!(table.answer(&real).err(), Some(Unmatched::UnknownId));
    }

    #[test]
    fn a_header_without_question_matches_by_id_alone() {
        let mut table = InFlight::default();
        let id = table
            .insert(Query(query(7, "example.com", 1)), None)
            .unwrap();
        // FORMERR with QDCOUNT 0: the id decides.
        let [hi, lo] = id.to_be_bytes();
        let formerr = [hi, lo, 0x81, 0x01, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(table.answer(&formerr).is_ok());
    }

    #[test]
    fn ids_run_out_at_the_limit_and_come_back_when_one_leaves() {
        let mut table = InFlight::default();
        let q = query(1, "a.", 1);
        let mut ids = Vec::with_capacity(QueryIds::MAX_IN_FLIGHT);
        for _ in 0..QueryIds::MAX_IN_FLIGHT {
            ids.push(table.insert(Query(q.clone()), None).unwrap());
        }
        // All distinct.
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), QueryIds::MAX_IN_FLIGHT);
        let (error, back) = table.insert(Query(q.clone()), None).unwrap_err();
        assert_eq!(error, IdsExhausted);
        assert_eq!(back.0, q);
        assert_eq!(IdsExhausted.to_string(), "65535 queries already in flight");
        // One answered: one id free again, and not one still in flight.
        let gone = ids[100];
        assert!(table.answer(&response_to(&q, gone)).is_ok());
        let again = table.insert(Query(q.clone()), None).unwrap();
        assert!(!ids.iter().any(|&id| id == again && id != gone));
    }

    #[test]
    fn deadlines_expire_in_order_and_answered_ones_are_skipped() {
        let mut table = InFlight::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let q = |n: &str| Query(query(0, n, 1));
        let a = table.insert(q("a."), Some(t0 + ms(10))).unwrap();
        let b = table.insert(q("b."), Some(t0 + ms(20))).unwrap();
        let _c = table.insert(q("c."), Some(t0 + ms(30))).unwrap();
        assert!(table.expired(t0 + ms(5)).is_none());
        // `a` answered: its deadline is skipped; `b` times out at 20 ms.
        assert!(table.answer(&response_to(&query(0, "a.", 1), a)).is_ok());
        let late = table.expired(t0 + ms(25)).unwrap();
        assert_eq!(first_question(&late.0), first_question(&query(0, "b.", 1)));
        assert!(table.expired(t0 + ms(25)).is_none());
        assert!(table.get(b).is_none());
        assert_eq!(table.len(), 1);
        assert_eq!(table.drain().count(), 1);
        assert!(table.expired(t0 + ms(99)).is_none());
    }

    #[test]
    fn an_old_deadline_does_not_time_out_a_new_query_with_the_same_id() {
        let mut table = InFlight::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let q = query(0, "a.", 1);
        let first = table.insert(Query(q.clone()), Some(t0 + ms(10))).unwrap();
        assert!(table.answer(&response_to(&q, first)).is_ok());
        // Insert (and drop) until the answered query's id comes round again.
        let mut tries = 0u32;
        loop {
            let id = table.insert(Query(q.clone()), Some(t0 + ms(50))).unwrap();
            if id == first {
                break;
            }
            table.remove(id);
            tries += 1;
            assert!(tries < 10_000_000, "the id never came back");
        }
        // The first query's deadline (10 ms) is not the new one's (50 ms).
        assert!(table.expired(t0 + ms(20)).is_none());
        assert_eq!(table.len(), 1);
        assert!(table.expired(t0 + ms(60)).is_some());
    }
}
