//! How tries and names end. A try whose wait is over is lost: counted
//! against its nameserver, and the name is asked again (on another
//! nameserver when it is unpinned and there is another) while its budget
//! of tries and time lasts, else it ends as TIMEOUT (or with the refusal
//! it got, if one came: an answer is better than none). A backoff whose
//! time has come puts its name back on a queue. A finished name's record is
//! written here and its slot freed; a truncated one goes to the TCP
//! fallback.

use super::engine::Engine;
use super::fallback::Handover;
use super::pace::Verdict;
use super::table::Phase;
use crate::record::{rcode_of, Outcome};
use std::cmp::Reverse;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Engine {
    /// Ends every try whose wait is over and every backoff whose time came.
    pub(super) fn expire(&mut self, now: Instant) {
        while let Some(&Reverse((due, slot, timer))) = self.timers.peek() {
            if due > now {
                break;
            }
            self.timers.pop();
            let s = self.table.get(slot);
            if s.timer != timer {
                continue;
            }
            match s.phase {
                Phase::Asked => self.try_lost(slot, now),
                Phase::Backoff => self.requeue(slot),
                Phase::Free | Phase::Queued => {}
            }
        }
    }

    /// The latest try of `slot` got no answer in time.
    fn try_lost(&mut self, slot: u32, now: Instant) {
        let s = self.table.get_mut(slot);
        let Some(t) = s.last_try() else {
            return;
        };
        if let Some(kept) = s.kept.iter_mut().flatten().find(|k| k.number == t.number) {
            kept.waiting = false;
        }
        let (tries, deadline) = (s.tries, s.deadline);
        if s.trace.is_some() {
            let step = self.trace_step(
                t.ns,
                t.number,
                None,
                Some("timeout".to_string()),
                now.duration_since(t.sent),
                slot,
            );
            if let Some(trace) = self.table.get_mut(slot).trace.as_mut() {
                trace.push(step);
            }
        }
        let ns = self.nameservers.get_mut(t.ns);
        if t.waiting {
            ns.in_flight -= 1;
        }
        ns.stats.timeouts.fetch_add(1, Ordering::Relaxed);
        ns.record_health(false, now);
        let round = ns.round();
        ns.pace.observe(Verdict::Lost, t.sent, now, round);
        self.out.run.timeouts.fetch_add(1, Ordering::Relaxed);
        if tries < self.config.tries && now < deadline {
            self.requeue(slot);
            return;
        }
        let refusal = self.table.get_mut(slot).refusal.take();
        match refusal {
            Some(answer) => self.finish(slot, now, Some(&answer), None),
            None => {
                let why = if now >= deadline {
                    format!("no answer within the name's budget ({tries} tries)")
                } else {
                    format!("no answer after {tries} tries")
                };
                self.finish(slot, now, None, Some(("TIMEOUT", why)));
            }
        }
    }

    /// Gives back the ids of `slot`'s kept tries (and their places in
    /// flight); the nameserver of the latest try, if any.
    fn release_tries(&mut self, slot: u32) -> Option<u32> {
        let s = self.table.get_mut(slot);
        let last = s.last_try().map(|t| t.ns);
        for t in s.kept.iter_mut().filter_map(Option::take) {
            self.sockets.release(t.socket, t.id, slot);
            if t.waiting {
                self.nameservers.get_mut(t.ns).in_flight -= 1;
            }
        }
        last
    }

    /// Ends `slot` with `answer`, or with `failure` (status, error): writes
    /// its record and frees the slot.
    pub(super) fn finish(
        &mut self,
        slot: u32,
        now: Instant,
        answer: Option<&[u8]>,
        failure: Option<(&'static str, String)>,
    ) {
        let last_ns = self.release_tries(slot);
        let s = self.table.get_mut(slot);
        // The status is written in a buffer kept from name to name.
        let mut status = std::mem::take(&mut self.status_buffer);
        status.clear();
        let error = match (answer, failure) {
            (Some(answer), _) => {
                status.push_str(&rcode_of(answer));
                None
            }
            (None, Some((failed, error))) => {
                status.push_str(failed);
                Some(error)
            }
            (None, None) => {
                status.push_str("ERROR");
                Some("no answer".to_string())
            }
        };
        // The answer's copy goes in a buffer kept from name to name.
        let response = answer.map(|answer| {
            let mut buffer = std::mem::take(&mut self.answer_buffer);
            buffer.clear();
            buffer.extend_from_slice(answer);
            buffer
        });
        let outcome = Outcome {
            status,
            response,
            error,
            attempts: s.tries,
            duration: now.duration_since(s.started),
            nameserver: last_ns.map(|ns| self.nameservers.get(ns).name.clone()),
            protocol: "udp",
            trace: s.trace.take(),
            ..Outcome::default()
        };
        self.out.run.finished(&outcome.status);
        // A record its writer handed back, else a new one.
        let mut record = self.spare.pop().unwrap_or_default();
        record.rewrite(s.index, &s.name, &outcome, &self.config.style);
        self.out.batch.push(record);
        if let Some(buffer) = outcome.response {
            self.answer_buffer = buffer;
        }
        self.status_buffer = outcome.status;
        self.table.give_back(slot);
    }

    /// `slot`'s answer from `ns` was truncated: the TCP fallback asks again;
    /// the slot is freed now.
    pub(super) fn ask_over_tcp(&mut self, slot: u32, ns: u32, now: Instant) {
        self.release_tries(slot);
        self.out.run.tcp_fallbacks.fetch_add(1, Ordering::Relaxed);
        let s = self.table.get_mut(slot);
        let handover = Handover {
            index: s.index,
            name: std::mem::take(&mut s.name),
            query: s.query.clone(),
            server: self.nameservers.get(ns).addr,
            attempts: s.tries,
            started: s.started,
            deadline: s.deadline.max(now),
            trace: s.trace.take(),
        };
        self.table.give_back(slot);
        self.fallback.ask(handover);
    }
}
