//! The log of where each object went, from the split to an ordered merger
//! ([`RouteLog`] on the split's side, [`RouteInbox`] on the merger's).
//!
//! The split sends its log each time it hands batches over (a few hundred
//! [`Route`]s) and starts a new one; the merger sends each log back once it
//! has followed it, so the split refills the same vectors instead of
//! growing a new one every time (which cost a run of the TCP capture about
//! 300,000 reallocations, each log freed on the merger's thread).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};

/// `count` objects in a row went to lane `lane`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Route {
    /// The worker's index.
    pub lane: u32,
    /// How many objects, in order.
    pub count: u32,
}

/// Logs the split's merger can fall behind by before the split waits.
const LOGS: usize = 64;

/// The split's side: the log being written and the way to the merger.
pub(super) struct RouteLog {
    log: Vec<Route>,
    to_merger: SyncSender<Vec<Route>>,
    returned: Receiver<Vec<Route>>,
}

/// The merger's side: the logs in the order they were sent.
pub(super) struct RouteInbox {
    from_split: Receiver<Vec<Route>>,
    back: SyncSender<Vec<Route>>,
}

/// A log and the inbox it sends to.
pub(super) fn route_channel() -> (RouteLog, RouteInbox) {
    let (to_merger, from_split) = sync_channel(LOGS);
    // Room for every log there is: giving one back never waits.
    let (back, returned) = sync_channel(LOGS + 2);
    let log = RouteLog {
        log: Vec::new(),
        to_merger,
        returned,
    };
    (log, RouteInbox { from_split, back })
}

impl RouteLog {
    /// Notes that the next object went to lane `lane`.
    #[inline]
    pub fn note(&mut self, lane: usize) {
        match self.log.last_mut() {
            Some(route) if route.lane as usize == lane => route.count += 1,
            _ => self.log.push(Route {
                lane: lane as u32,
                count: 1,
            }),
        }
    }

    /// Sends the log to the merger (nothing when it is empty) and starts
    /// the next in a vector the merger gave back. `before_waiting` runs
    /// when the merger is behind and the send must wait; false when the
    /// merger has stopped.
    pub fn send(&mut self, before_waiting: impl FnOnce()) -> bool {
        if self.log.is_empty() {
            return true;
        }
        let next = self.returned.try_recv().unwrap_or_default();
        let full = std::mem::replace(&mut self.log, next);
        match self.to_merger.try_send(full) {
            Ok(()) => true,
            Err(TrySendError::Full(full)) => {
                before_waiting();
                self.to_merger.send(full).is_ok()
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

impl RouteInbox {
    /// The next log, waiting for it; `None` once the split has dropped its
    /// side (no more objects come).
    pub fn next(&self) -> Option<Vec<Route>> {
        self.from_split.recv().ok()
    }

    /// Gives a followed log back to the split, emptied.
    pub fn give_back(&self, mut log: Vec<Route>) {
        log.clear();
        let _ = self.back.try_send(log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of a lane become one route; logs arrive whole and in order; a
    /// log given back is written again (its room kept, not a new vector).
    #[test]
    fn logs_arrive_in_order_and_their_vectors_come_back() {
        let (mut log, inbox) = route_channel();
        let room = || panic!("room for 64 logs");
        for lane in [0, 0, 1, 0, 2, 2, 2] {
            log.note(lane);
        }
        assert!(log.send(room));
        // 100 routes: lanes taking turns.
        for object in 0..100 {
            log.note(object % 2);
        }
        assert!(log.send(room));
        let route = |lane, count| Route { lane, count };
        assert_eq!(
            inbox.next().unwrap(),
            vec![route(0, 2), route(1, 1), route(0, 1), route(2, 3)]
        );
        let turns = inbox.next().unwrap();
        assert_eq!(turns.len(), 100);
        assert!(turns
            .iter()
            .enumerate()
            .all(|(i, r)| *r == route(i as u32 % 2, 1)));
        inbox.give_back(turns);
        // The log being written took no vector back; the next one does.
        log.note(2);
        assert!(log.send(room));
        assert_eq!(inbox.next().unwrap(), vec![route(2, 1)]);
        log.note(0);
        assert!(log.send(room));
        let reused = inbox.next().unwrap();
        assert_eq!(reused, vec![route(0, 1)]);
        assert!(
            reused.capacity() >= 100,
            "a new vector (room for {}), not the one given back",
            reused.capacity()
        );
        drop(log);
        assert_eq!(inbox.next(), None);
    }
}
