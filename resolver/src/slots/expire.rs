//! How tries and names end. A try whose wait is over is lost: counted
//! against its nameserver, and the name is asked again (on another
//! nameserver when it is unpinned and there is another) while its budget
//! of tries and time lasts, else it ends as TIMEOUT (or with the refusal
//! it got, if one came: an answer is better than none). A backoff whose
//! time has come puts its name back on a queue. A finished name's record is
//! written here and its slot freed; a truncated one goes to the TCP
//! fallback, when the caps let its query go.

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
        self.end_unanswered(slot, now);
    }

    /// Whether a name queued for another try ran out of budget while it
    /// waited for the rate to let it go: it is then ended
    /// ([`Engine::end_unanswered`]) rather than sent a try that could not
    /// be waited for.
    pub(super) fn past_budget(&self, slot: u32, now: Instant) -> bool {
        let s = self.table.get(slot);
        s.tries > 0 && now >= s.deadline
    }

    /// Ends `slot` without an answer to keep: with the last refusal kept,
    /// else TIMEOUT.
    pub(super) fn end_unanswered(&mut self, slot: u32, now: Instant) {
        let s = self.table.get_mut(slot);
        let (tries, deadline) = (s.tries, s.deadline);
        let refusal = s.refusal.take();
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

    /// `slot`'s answer from `ns` was truncated: asked again over TCP at
    /// once or, under a cap of the user's (`--rate`, `--rate-per-nameserver`),
    /// when the caps let one more query go (a query over TCP is a query
    /// too); until then it waits in its slot.
    pub(super) fn fall_back_to_tcp(&mut self, slot: u32, ns: u32, now: Instant) {
        if self.tcp_waiting.is_empty() && self.tcp_turn(ns, now) {
            self.ask_over_tcp(slot, ns, now);
            return;
        }
        self.release_tries(slot);
        let s = self.table.get_mut(slot);
        s.phase = Phase::Queued;
        s.timer = s.timer.wrapping_add(1);
        self.tcp_waiting.push_back((slot, s.timer, ns));
        self.blocked = true;
    }

    /// Asks the truncated names waiting for the caps over TCP, in order, as
    /// the caps allow (one whose nameserver has no token left waits, and
    /// those of other nameservers go on); one whose budget ran out
    /// meanwhile ends unanswered.
    pub(super) fn dispatch_tcp(&mut self, now: Instant) {
        if self.tcp_waiting.is_empty() {
            return;
        }
        let mut waiting = std::mem::take(&mut self.tcp_waiting);
        let mut run_out = false;
        for (slot, timer, ns) in waiting.drain(..) {
            let s = self.table.get(slot);
            if s.timer != timer || s.phase != Phase::Queued {
                continue;
            }
            if now >= s.deadline {
                self.end_unanswered(slot, now);
                continue;
            }
            // Once the run's cap has no token, the rest wait in order.
            run_out = run_out || !self.global.as_mut().is_none_or(|g| g.ready(now));
            if !run_out && self.tcp_turn(ns, now) {
                self.ask_over_tcp(slot, ns, now);
            } else {
                self.tcp_waiting.push_back((slot, timer, ns));
            }
        }
        self.blocked |= !self.tcp_waiting.is_empty();
    }

    /// Whether the caps let a query over TCP to `ns` go now (taking their
    /// tokens when they do). The adaptive rate of an uncapped nameserver
    /// paces UDP only.
    fn tcp_turn(&mut self, ns: u32, now: Instant) -> bool {
        if !self.global.as_mut().is_none_or(|g| g.ready(now)) {
            return false;
        }
        let pace = &mut self.nameservers.get_mut(ns).pace;
        if pace.capped() && !pace.take_aside(now) {
            return false;
        }
        if let Some(global) = self.global.as_mut() {
            global.take();
        }
        true
    }

    /// `slot`'s answer from `ns` was truncated: the TCP fallback asks again;
    /// the slot is freed now.
    fn ask_over_tcp(&mut self, slot: u32, ns: u32, now: Instant) {
        self.release_tries(slot);
        self.out.run.tcp_fallbacks.fetch_add(1, Ordering::Relaxed);
        // Its nameserver's queries count it, as the run's do.
        let server = self.nameservers.get(ns);
        server.stats.queries.fetch_add(1, Ordering::Relaxed);
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
