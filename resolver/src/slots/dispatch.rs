//! Sending: names waiting for one nameserver (pinned lines) go first, then
//! the unpinned ones, each to the next configured nameserver with a token
//! to spare (a retry avoids the nameserver its last try went to, when there
//! is another), all under `--rate`. A try gets a fresh query id, keeps the
//! ids of the name's last tries, and arms its wait: the nameserver's
//! round-trip estimate, doubled per try, within `--timeout` and the name's
//! budget.

use super::engine::Engine;
use super::nameservers::Waiting;
use super::table::{Phase, Try, TRIES_KEPT};
use std::cmp::Reverse;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Engine {
    /// Sends every waiting name the pacing allows.
    pub(super) fn dispatch(&mut self, now: Instant) {
        self.blocked = false;
        self.dispatch_tcp(now);
        let directed = std::mem::take(&mut self.directed);
        for &ns in &directed {
            self.dispatch_directed(ns, now);
            if !self.nameservers.get(ns).ready.is_empty() {
                self.directed.push(ns);
            }
        }
        while let Some(&(slot, timer)) = self.ready.front() {
            if !self.is_queued(slot, timer) {
                self.ready.pop_front();
                continue;
            }
            if self.past_budget(slot, now) {
                self.ready.pop_front();
                self.end_unanswered(slot, now);
                continue;
            }
            if !self.global_ready(now) {
                return;
            }
            let avoid = self.table.get(slot).last_try().map(|t| t.ns);
            let Some(ns) = self.nameservers.take_unpinned(now, avoid) else {
                self.blocked = true;
                return;
            };
            self.ready.pop_front();
            self.send_try(slot, ns, now);
        }
    }

    /// Sends the names waiting for `ns` alone, as its pacing allows.
    fn dispatch_directed(&mut self, ns: u32, now: Instant) {
        while let Some(&(slot, timer)) = self.nameservers.get(ns).ready.front() {
            if !self.is_queued(slot, timer) {
                self.nameservers.get_mut(ns).ready.pop_front();
                continue;
            }
            if self.past_budget(slot, now) {
                self.nameservers.get_mut(ns).ready.pop_front();
                self.end_unanswered(slot, now);
                continue;
            }
            if !self.global_ready(now) {
                return;
            }
            if !self.nameservers.get_mut(ns).pace.try_take(now) {
                self.blocked = true;
                return;
            }
            self.nameservers.get_mut(ns).ready.pop_front();
            self.send_try(slot, ns, now);
        }
    }

    /// Whether a queue entry is still its slot's (the slot has not moved on).
    fn is_queued(&self, slot: u32, timer: u32) -> bool {
        let s = self.table.get(slot);
        s.phase == Phase::Queued && s.timer == timer
    }

    /// Whether `--rate` lets one more query go now (taking its token when
    /// the caller then sends: see [`Engine::send_try`]).
    fn global_ready(&mut self, now: Instant) -> bool {
        let ready = self.global.as_mut().is_none_or(|g| g.ready(now));
        self.blocked |= !ready;
        ready
    }

    /// Sends the next try of `slot` to `ns`.
    fn send_try(&mut self, slot: u32, ns: u32, now: Instant) {
        if let Some(global) = self.global.as_mut() {
            global.take();
        }
        let addr = self.nameservers.get(ns).addr;
        let s = self.table.get_mut(slot);
        let k = s.tries as usize % TRIES_KEPT;
        if let Some(old) = s.kept[k].take() {
            self.sockets.release(old.socket, old.id, slot);
            if old.waiting {
                self.nameservers.get_mut(old.ns).in_flight -= 1;
            }
        }
        let Some((socket, id, reused)) = self.sockets.hold(slot, &s.query, addr) else {
            let family = if addr.is_ipv4() { "IPv4" } else { "IPv6" };
            let error = format!(
                "no source address for {addr}: no {family} socket (give --local-addr of that family)"
            );
            self.finish(slot, now, None, Some(("ERROR", error)));
            return;
        };
        let s = self.table.get_mut(slot);
        if s.tries == 0 {
            // The name's budget (and its duration) start at its first query,
            // not as it entered the table: under a slow rate a name may wait
            // there longer than its budget.
            s.started = now;
            s.deadline = now + self.config.name_timeout;
        }
        s.kept[k] = Some(Try {
            socket,
            id,
            ns,
            number: s.tries,
            sent: now,
            waiting: true,
            answered: false,
        });
        s.tries += 1;
        s.phase = Phase::Asked;
        s.timer = s.timer.wrapping_add(1);
        let (tries, deadline, timer) = (s.tries, s.deadline, s.timer);
        let server = self.nameservers.get_mut(ns);
        server.in_flight += 1;
        server.stats.queries.fetch_add(1, Ordering::Relaxed);
        let wait = server
            .rtt
            .wait_for_try(tries, self.config.max_wait)
            .min(deadline.saturating_duration_since(now))
            .max(Duration::from_millis(1));
        self.timers.push(Reverse((now + wait, slot, timer)));
        self.out.net.queries_sent.fetch_add(1, Ordering::Relaxed);
        // A socket is "opened" for the counters when it carries its first query.
        if reused {
            self.out
                .run
                .connections_reused
                .fetch_add(1, Ordering::Relaxed);
        } else {
            self.out
                .net
                .connections_opened
                .fetch_add(1, Ordering::Relaxed);
        }
        if tries > 1 {
            self.out.run.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Puts `slot` back on a queue for its next try: a pinned name on its
    /// nameserver's, an unpinned one at the front of the shared one.
    pub(super) fn requeue(&mut self, slot: u32) {
        let s = self.table.get_mut(slot);
        s.phase = Phase::Queued;
        s.timer = s.timer.wrapping_add(1);
        let waiting: Waiting = (slot, s.timer);
        match s.pinned {
            Some(ns) => self.queue_for(ns, waiting, true),
            None => self.ready.push_front(waiting),
        }
    }
}
