//! The hard caps `--rate` and `--rate-per-nameserver` for the lookups the
//! workers run (TCP, TLS, HTTPS, the modules, `--iterative`, the `fifo`
//! and `random` schedulers): every query takes a turn, and turns are
//! handed out one at a time at the rate, without a burst, so no second
//! sees more than the rate and one query (plus what the timer's
//! millisecond puts together). The UDP engine of `slots/` paces with its
//! own buckets (`slots/pace.rs`, adaptive under the same caps).
//!
//! A new name starts only when no turn is taken ahead of now: the queries
//! of names already running (retries, a module's next question, the steps
//! of an iterative walk) go first, and a name's budget (`--name-timeout`)
//! starts once it has its first turn, so names waiting for the rate to
//! let them go do not time out (as in the UDP engine). Written here, not
//! taken from a crate (`governor`): a reservation under a lock is all it
//! takes, and the two kinds of turn (a new name waits for an empty
//! queue, a running one queues) are ours.

use dnsluice_core::sync;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How far ahead of now a new name may take its turn: the timer wakes a
/// sleeper at its millisecond, so turns closer together than that are
/// taken at one wake-up (without this, a rate above 1,000/s would start
/// one name a millisecond).
const TIMER_SLACK: Duration = Duration::from_millis(1);

/// A turn woken this late is taken again (see [`Caps::take`]).
const LATE_WAKE: Duration = Duration::from_millis(5);

/// Turns at a fixed rate; see the module docs.
#[derive(Debug)]
pub struct Turns {
    spacing: Duration,
    /// When the next turn may be had.
    next: Mutex<Instant>,
    /// New names wait for their first turn one at a time, in order (a
    /// thousand workers all waking at each turn would cost more than the
    /// queries).
    gate: tokio::sync::Mutex<()>,
}

impl Turns {
    /// Turns at `rate` a second (a positive, finite rate).
    pub fn new(rate: f64) -> Turns {
        Turns {
            spacing: Duration::from_secs_f64(1.0 / rate.max(1e-9)),
            next: Mutex::new(Instant::now()),
            gate: tokio::sync::Mutex::new(()),
        }
    }
}

async fn sleep_until(at: Instant) {
    if at > Instant::now() {
        tokio::time::sleep_until(at.into()).await;
    }
}

/// The caps one query is under: the run's and its nameserver's. A query
/// takes a turn of each at one time (the latest of their next turns), so
/// a wait for one cap does not save up turns of the other.
#[derive(Clone, Copy, Default)]
pub struct Caps<'a> {
    /// `--rate`.
    pub run: Option<&'a Turns>,
    /// `--rate-per-nameserver`, for this query's nameserver.
    pub nameserver: Option<&'a Turns>,
}

impl Caps<'_> {
    /// Whether there is any cap.
    pub fn any(&self) -> bool {
        self.run.is_some() || self.nameserver.is_some()
    }

    /// Takes the next turn of every cap at `now` or after: when the query
    /// may leave. With `free_within`, only when no cap has a turn taken
    /// further ahead than that; with `not_after`, only a turn at or before
    /// it (else `Err`: when one may be had; nothing is taken).
    fn reserve(
        &self,
        now: Instant,
        free_within: Option<Duration>,
        not_after: Option<Instant>,
    ) -> Result<Instant, Instant> {
        // Locked in one order (the nameserver's, then the run's) by all.
        let mut nameserver = self.nameserver.map(|t| (t.spacing, sync::lock(&t.next)));
        let mut run = self.run.map(|t| (t.spacing, sync::lock(&t.next)));
        let latest = [&nameserver, &run]
            .into_iter()
            .flatten()
            .map(|(_, next)| **next)
            .max()
            .unwrap_or(now);
        if free_within.is_some_and(|slack| latest > now + slack) {
            return Err(latest);
        }
        let at = latest.max(now);
        if not_after.is_some_and(|deadline| at > deadline) {
            return Err(at);
        }
        for (spacing, next) in [&mut nameserver, &mut run].into_iter().flatten() {
            **next = at + *spacing;
        }
        Ok(at)
    }

    /// Waits for a new name's first turn under every cap: until none has
    /// a turn taken ahead. New names wait one at a time (per nameserver
    /// when it is capped, so a slow one holds back only its own).
    pub async fn take_first(&self) {
        let Some(gate) = self.nameserver.or(self.run).map(|t| &t.gate) else {
            return;
        };
        let at = {
            let _gate = gate.lock().await;
            loop {
                match self.reserve(Instant::now(), Some(TIMER_SLACK), None) {
                    Ok(at) => break at,
                    Err(free_at) => sleep_until(free_at).await,
                }
            }
        };
        // The gate is open again for the next name while this one waits
        // for its turn (within the timer's slack).
        self.wait_for(at).await;
    }

    /// Waits for a query's turn under every cap, unless `first` still
    /// holds the name's first turn (taken before its budget started),
    /// which this query then uses.
    pub async fn take(&self, first: &FirstTurn) {
        self.take_before(first, None).await;
    }

    /// [`Caps::take`], but only a turn at or before `deadline` (a query's
    /// budget): `false`, and no turn taken, when the next one comes later
    /// (the query would leave after its name's time, and its turn be lost
    /// to the others).
    pub async fn take_before(&self, first: &FirstTurn, deadline: Option<Instant>) -> bool {
        if first.use_it() || !self.any() {
            return true;
        }
        match self.reserve(Instant::now(), None, deadline) {
            Ok(at) => {
                self.wait_for(at).await;
                true
            }
            Err(_) => false,
        }
    }

    /// Sleeps until the turn `at`; a turn woken [`LATE_WAKE`] after it
    /// (the machine or the runtime stalled, and the turns of the stall
    /// would all go at once) is taken again from now, once.
    async fn wait_for(&self, at: Instant) {
        sleep_until(at).await;
        let now = Instant::now();
        if now > at + LATE_WAKE {
            let again = self.reserve(now, None, None).unwrap_or_else(|at| at);
            sleep_until(again).await;
        }
    }
}

/// A name's first turn, taken before its budget started, until its first
/// query uses it.
#[derive(Debug, Default)]
pub struct FirstTurn(AtomicBool);

impl FirstTurn {
    /// A first turn taken (`true`) or none (`false`: the run has no cap).
    pub fn new(taken: bool) -> FirstTurn {
        FirstTurn(AtomicBool::new(taken))
    }

    /// Uses the first turn: whether it was still there.
    pub fn use_it(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps<'a>(run: Option<&'a Turns>, nameserver: Option<&'a Turns>) -> Caps<'a> {
        Caps { run, nameserver }
    }

    #[test]
    fn turns_are_one_spacing_apart_from_now_on() {
        let turns = Turns::new(100.0);
        let run = caps(Some(&turns), None);
        let now = Instant::now() + Duration::from_secs(1);
        let first = run.reserve(now, None, None).unwrap();
        let second = run.reserve(now, None, None).unwrap();
        let third = run.reserve(now, None, None).unwrap();
        assert_eq!(first, now);
        assert_eq!(second - first, Duration::from_millis(10));
        assert_eq!(third - second, Duration::from_millis(10));
        // An idle spell is not saved up: the next turn is now, one only.
        let later = now + Duration::from_secs(5);
        assert_eq!(run.reserve(later, None, None), Ok(later));
        assert_eq!(
            run.reserve(later, None, None),
            Ok(later + Duration::from_millis(10))
        );
    }

    #[test]
    fn a_new_name_waits_while_turns_are_taken_ahead() {
        let turns = Turns::new(100.0);
        let run = caps(Some(&turns), None);
        let now = Instant::now() + Duration::from_secs(1);
        for _ in 0..3 {
            run.reserve(now, None, None).unwrap();
        }
        // Three turns taken: the next is 30 ms ahead, more than the slack.
        let free_at = now + Duration::from_millis(30);
        assert_eq!(run.reserve(now, Some(TIMER_SLACK), None), Err(free_at));
        assert_eq!(run.reserve(free_at, Some(TIMER_SLACK), None), Ok(free_at));
        // Within the timer's slack a new name takes the turn after it.
        let fast = Turns::new(100_000.0);
        let fast = caps(Some(&fast), None);
        assert_eq!(fast.reserve(now, Some(TIMER_SLACK), None), Ok(now));
        assert_eq!(
            fast.reserve(now, Some(TIMER_SLACK), None),
            Ok(now + Duration::from_micros(10))
        );
    }

    #[test]
    fn both_caps_give_one_turn_at_the_later_of_theirs() {
        // The run's cap is busy 1 s ahead; a nameserver capped at 10/s
        // gets its queries 100 ms apart after it, not saved up meanwhile.
        let (run, nameserver) = (Turns::new(1000.0), Turns::new(10.0));
        let both = caps(Some(&run), Some(&nameserver));
        let now = Instant::now() + Duration::from_secs(1);
        let busy = now + Duration::from_secs(1);
        *sync::lock(&run.next) = busy;
        let first = both.reserve(now, None, None).unwrap();
        let second = both.reserve(now, None, None).unwrap();
        assert_eq!(first, busy);
        assert_eq!(second - first, Duration::from_millis(100));
        // The run's next turn follows the later of the two.
        assert_eq!(*sync::lock(&run.next), second + Duration::from_millis(1));
    }

    #[test]
    fn a_turn_after_the_deadline_is_not_taken() {
        let run = Turns::new(10.0);
        let run = caps(Some(&run), None);
        let now = Instant::now();
        assert_eq!(run.reserve(now, None, Some(now)), Ok(now));
        // The next turn is 100 ms ahead: not before a deadline 50 ms away,
        // and refusing it takes nothing (the turn after is still it).
        let deadline = Some(now + Duration::from_millis(50));
        let next = now + Duration::from_millis(100);
        assert_eq!(run.reserve(now, None, deadline), Err(next));
        assert_eq!(run.reserve(now, None, Some(next)), Ok(next));
    }

    #[test]
    fn the_first_turn_is_used_once() {
        let first = FirstTurn::new(true);
        assert!(first.use_it());
        assert!(!first.use_it());
        assert!(!FirstTurn::new(false).use_it());
    }
}
