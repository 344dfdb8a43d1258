//! The in-flight table: one slot per name being resolved (massdns's hash
//! map of lookups), allocated once for the run's depth and reused, so a
//! name in flight costs a few hundred bytes and no allocation once the
//! table is warm. A slot keeps its name, its query (built once), its
//! budget, and the ids of its last [`TRIES_KEPT`] tries: an answer to an
//! earlier try that comes late still answers the name.

use super::super::trace::TraceStep;
use std::time::Instant;

/// Tries whose ids a slot keeps (an answer to any of them is taken).
pub const TRIES_KEPT: usize = 4;

/// One try of a name: where it went and when.
#[derive(Clone, Copy, Debug)]
pub struct Try {
    /// The socket it left on.
    pub socket: u16,
    /// Its query id.
    pub id: u16,
    /// The nameserver asked.
    pub ns: u32,
    /// Which try of the name it is (0 for the first).
    pub number: u32,
    /// When it was sent.
    pub sent: Instant,
    /// Still counted in its nameserver's queries in flight (no answer, not
    /// timed out).
    pub waiting: bool,
    /// An answer came (a refusal keeps the try, whose copies would come
    /// again: counted once).
    pub answered: bool,
}

/// Where a slot's name stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No name.
    Free,
    /// Waiting for its turn to be sent (on a ready queue).
    Queued,
    /// A try is out; its timer runs.
    Asked,
    /// Waiting before the next try (after a refusal); its timer runs.
    Backoff,
}

/// One name in the table.
#[derive(Debug)]
pub struct Slot {
    /// Where it stands.
    pub phase: Phase,
    /// The input line's index.
    pub index: u64,
    /// The name as given.
    pub name: String,
    /// The query, id 0 (each try writes its own).
    pub query: Vec<u8>,
    /// The nameserver the line named, if it named one.
    pub pinned: Option<u32>,
    /// When the name came in.
    pub started: Instant,
    /// When its time budget runs out.
    pub deadline: Instant,
    /// Tries sent.
    pub tries: u32,
    /// The last tries, at `tries % TRIES_KEPT`.
    pub kept: [Option<Try>; TRIES_KEPT],
    /// Which timer of the slot is the live one (older ones are ignored).
    pub timer: u32,
    /// A refusal (REFUSED, SERVFAIL) it got and may end with.
    pub refusal: Option<Vec<u8>>,
    /// Every exchange, when records carry a trace.
    pub trace: Option<Vec<TraceStep>>,
}

impl Slot {
    fn empty(now: Instant) -> Slot {
        Slot {
            phase: Phase::Free,
            index: 0,
            name: String::new(),
            query: Vec::new(),
            pinned: None,
            started: now,
            deadline: now,
            tries: 0,
            kept: [None; TRIES_KEPT],
            timer: 0,
            refusal: None,
            trace: None,
        }
    }

    /// The most recent try.
    pub fn last_try(&self) -> Option<Try> {
        let k = (self.tries as usize + TRIES_KEPT - 1) % TRIES_KEPT;
        self.kept[k].filter(|_| self.tries > 0)
    }

    /// The kept try that went out on `socket` with `id`.
    pub fn try_with(&self, socket: u16, id: u16) -> Option<(usize, Try)> {
        self.kept.iter().enumerate().find_map(|(k, t)| {
            t.filter(|t| t.socket == socket && t.id == id)
                .map(|t| (k, t))
        })
    }
}

/// Every slot of the run.
pub struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Table {
    /// A table of `depth` free slots.
    pub fn new(depth: usize, now: Instant) -> Table {
        Table {
            slots: (0..depth).map(|_| Slot::empty(now)).collect(),
            free: (0..depth as u32).rev().collect(),
        }
    }

    /// A free slot, if there is one (its strings keep their capacity).
    pub fn take(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Frees `slot`: its id, strings and trace go back for the next name.
    pub fn give_back(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.phase = Phase::Free;
        s.kept = [None; TRIES_KEPT];
        s.refusal = None;
        s.trace = None;
        s.timer = s.timer.wrapping_add(1);
        self.free.push(slot);
    }

    /// Slots in use.
    pub fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether a slot is free.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// Slot `slot`.
    pub fn get(&self, slot: u32) -> &Slot {
        &self.slots[slot as usize]
    }

    /// Slot `slot`, to change.
    pub fn get_mut(&mut self, slot: u32) -> &mut Slot {
        &mut self.slots[slot as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_keep_the_last_tries() {
        let now = Instant::now();
        let mut table = Table::new(2, now);
        let a = table.take().unwrap();
        let b = table.take().unwrap();
        assert!(table.take().is_none() && !table.has_room());
        assert_eq!(table.in_use(), 2);
        let slot = table.get_mut(a);
        for n in 0..6u16 {
            let k = slot.tries as usize % TRIES_KEPT;
            slot.kept[k] = Some(Try {
                socket: 0,
                id: n,
                ns: 0,
                number: slot.tries,
                sent: now,
                waiting: true,
                answered: false,
            });
            slot.tries += 1;
        }
        assert_eq!(slot.last_try().unwrap().id, 5);
        // Tries 2..=5 are kept; 0 and 1 were overwritten.
        assert!(slot.try_with(0, 1).is_none());
        assert_eq!(slot.try_with(0, 2).unwrap().1.id, 2);
        let timer = slot.timer;
        table.give_back(a);
        assert_eq!(table.get(a).timer, timer.wrapping_add(1));
        assert!(table.get(a).kept.iter().all(Option::is_none));
        assert_eq!(table.take(), Some(a));
        table.give_back(b);
        assert_eq!(table.in_use(), 1);
    }
}
