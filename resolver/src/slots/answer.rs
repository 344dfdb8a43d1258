//! Taking answers. A datagram is a name's answer when its id is one of the
//! name's last tries' on the socket it came in on, it comes from the
//! nameserver that try went to (RFC 5452 §9.1), and it repeats the
//! question; anything else is counted as unmatched and left. An answer to
//! an earlier try that comes late still answers the name. Then:
//!
//! - TC=1 (with the TCP fallback on): the name is asked again over TCP;
//! - an RCODE the run retries (REFUSED and SERVFAIL by default, as massdns
//!   does): kept, and the name asked again after a backoff while its budget
//!   lasts (ending with that answer if it runs out);
//! - anything else ends the name.
//!
//! The nameserver's round trip, latency and pacing learn from each.

use super::engine::Engine;
use super::pace::Verdict;
use super::table::Phase;
use crate::trace::TraceStep;
use dnsluice_core::dns;
use dnsluice_core::sync;
use dnsluice_net::protocol::question::{answers, first_question, id_of};
use std::cmp::Reverse;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Engine {
    /// One datagram read from `socket`, sent by `from`.
    pub(super) fn on_datagram(
        &mut self,
        socket: u16,
        message: &[u8],
        from: SocketAddr,
        now: Instant,
    ) {
        let Some(slot) = self.match_answer(socket, message, from) else {
            self.out
                .net
                .unmatched_responses
                .fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Some((k, t)) = id_of(message).and_then(|id| self.table.get(slot).try_with(socket, id))
        else {
            return;
        };
        if t.answered {
            // A copy of an answer already taken (a refusal keeps its try):
            // the pace saw it once.
            self.out
                .net
                .unmatched_responses
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let elapsed = now.duration_since(t.sent);
        if self.table.get(slot).trace.is_some() {
            let step = self.trace_step(t.ns, t.number, Some(message), None, elapsed, slot);
            if let Some(trace) = self.table.get_mut(slot).trace.as_mut() {
                trace.push(step);
            }
        }
        let s = self.table.get_mut(slot);
        if let Some(kept) = s.kept[k].as_mut() {
            kept.waiting = false;
            kept.answered = true;
        }
        let latest = t.number + 1 == s.tries;
        let ns = self.nameservers.get_mut(t.ns);
        if t.waiting {
            ns.in_flight -= 1;
        }
        ns.rtt.sample(elapsed);
        ns.pace.round_trip(elapsed);
        ns.record_health(true, now);
        sync::lock(&ns.stats.latency).record(elapsed);
        let header = dns::Header::parse(message);
        let truncated = header.is_some_and(|h| h.tc());
        let rcode = header.map_or(0, |h| h.rcode() as u8);
        let slipped = truncated && self.config.tcp_fallback;
        let verdict = if slipped || self.config.retry_rcodes.contains(&rcode) {
            Verdict::Refused
        } else {
            Verdict::Good
        };
        let round = ns.round();
        if !t.waiting {
            // Its wait ran out before it came: that loss was not one.
            ns.pace.answered_late(t.sent);
        }
        ns.pace.observe(verdict, t.sent, now, round);
        if verdict == Verdict::Refused {
            ns.stats.refusals.fetch_add(1, Ordering::Relaxed);
        }
        if slipped {
            self.fall_back_to_tcp(slot, t.ns, now);
        } else if verdict == Verdict::Refused {
            let s = self.table.get_mut(slot);
            s.refusal = Some(message.to_vec());
            // A refusal of an older try while a newer one is out: wait for it.
            if latest && s.phase == Phase::Asked {
                self.after_refusal(slot, t.ns, now);
            }
        } else {
            self.finish(slot, now, Some(message), None);
        }
    }

    /// The slot `message` answers, when it answers one.
    fn match_answer(&self, socket: u16, message: &[u8], from: SocketAddr) -> Option<u32> {
        if message.len() < 12 {
            return None;
        }
        let id = id_of(message)?;
        let slot = self.sockets.owner(socket, id)?;
        let s = self.table.get(slot);
        let (_, t) = s.try_with(socket, id)?;
        let asked_there = self.nameservers.get(t.ns).addr == from;
        (asked_there && answers(first_question(&s.query), message)).then_some(slot)
    }

    /// The latest try was refused: ask again after a backoff (the try's
    /// wait), or end with the refusal when the budget is spent.
    fn after_refusal(&mut self, slot: u32, ns: u32, now: Instant) {
        let s = self.table.get(slot);
        let backoff = self
            .nameservers
            .get(ns)
            .rtt
            .wait_for_try(s.tries, self.config.max_wait);
        if s.tries >= self.config.tries || now + backoff >= s.deadline {
            let refusal = s.refusal.clone();
            self.finish(slot, now, refusal.as_deref(), None);
            return;
        }
        let s = self.table.get_mut(slot);
        s.phase = Phase::Backoff;
        s.timer = s.timer.wrapping_add(1);
        self.timers.push(Reverse((now + backoff, slot, s.timer)));
    }

    /// A trace step for try `number` of `slot` to `ns`.
    pub(super) fn trace_step(
        &self,
        ns: u32,
        number: u32,
        response: Option<&[u8]>,
        error: Option<String>,
        duration: std::time::Duration,
        slot: u32,
    ) -> TraceStep {
        let name = &self.table.get(slot).name;
        let name = name
            .strip_suffix('.')
            .filter(|n| !n.is_empty())
            .unwrap_or(name);
        TraceStep {
            name: name.to_string(),
            qtype: self.config.qtype,
            qclass: dnsluice_net::query::CLASS_IN,
            nameserver: self.nameservers.get(ns).name.to_string(),
            protocol: "udp",
            depth: 1,
            layer: name.to_string(),
            cached: false,
            try_number: number,
            response: response.map(<[u8]>::to_vec),
            error,
            duration,
        }
    }
}
