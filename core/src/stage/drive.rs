//! The loop that drives a chain: [`drive`] pulls every object from the
//! input's producer and pushes it into the first receiver; [`drive_chain`]
//! lets an input that can push ([`Producer::push_into`]) run that loop
//! itself. Both give way to a watcher ([`Watch`]: a progress bar, interval
//! statistics) and to a stop request, and finish the chain at the end.

use super::{Producer, Pulled, PushTo, Pushed, Receiver};
use crate::{StageError, StageStats};
use std::sync::atomic::{AtomicBool, Ordering};

/// Takes every stage's statistics of a running chain (see [`Watch`]).
pub type Snapshot<'a> = &'a dyn Fn() -> Vec<StageStats>;

/// A look at a running chain: when `due` is set (by a timer), the driver
/// clears it after the current object and calls `call` with the number of
/// objects moved so far and a way to take every stage's statistics. The
/// per-object cost is one relaxed load of `due`.
pub struct Watch<'a> {
    /// Set when `call` is due.
    pub due: &'a AtomicBool,
    /// Called between two objects: `(objects moved, snapshot of the stages' statistics)`.
    pub call: &'a mut dyn FnMut(u64, Snapshot<'_>),
}

/// Pulls every object from `producer` and pushes it into `receiver`, then
/// finishes the receiver. With a `watch`, calls it between objects whenever
/// it is due. Returns the number of objects moved.
///
/// A stop requested ([`crate::stop`]: SIGINT, SIGTERM) ends the loop before
/// the next object, and the receiver is finished as at the end of the input.
///
/// When either side fails (a corrupt input, a failing stage), the receiver
/// is still finished before the error is returned, so that every output
/// writes what it holds of the objects that came before: nothing already
/// processed is lost to the error.
pub fn drive<P, R>(
    producer: &mut P,
    receiver: &mut R,
    watch: Option<Watch<'_>>,
) -> Result<u64, StageError>
where
    P: Producer + ?Sized,
    R: Receiver + ?Sized,
{
    let mut moved = 0u64;
    let pumped = pump(producer, receiver, watch, &mut moved);
    end_drive(producer, receiver, pumped, moved)
}

/// [`drive`] for a receiver behind a trait object (a chain's stages): a
/// producer that pushes ([`Producer::push_into`]) then runs the loop
/// itself, with its own state at hand instead of a call per object.
pub fn drive_chain<P>(
    producer: &mut P,
    receiver: &mut dyn Receiver,
    watch: Option<Watch<'_>>,
) -> Result<u64, StageError>
where
    P: Producer + ?Sized,
{
    let mut moved = 0u64;
    let pumped = pump_pushed(producer, receiver, watch, &mut moved);
    end_drive(producer, receiver, pumped, moved)
}

/// The end of [`drive`]: tells the receiver the input's last capture time,
/// then finishes it; the first error wins.
fn end_drive<P, R>(
    producer: &mut P,
    receiver: &mut R,
    pumped: Result<(), StageError>,
    moved: u64,
) -> Result<u64, StageError>
where
    P: Producer + ?Sized,
    R: Receiver + ?Sized,
{
    tell_input_end(producer, receiver);
    match pumped {
        Ok(()) => {
            receiver.finish()?;
            Ok(moved)
        }
        Err(e) => {
            // What the outputs hold is written out; an error of the finish
            // itself (a second symptom, as a rule) gives way to the first.
            let _ = receiver.finish();
            Err(e)
        }
    }
}

/// Tells the receiver the capture time of the input's last record, when
/// the input knows one (see [`Receiver::clock_at_end`]).
fn tell_input_end<P, R>(producer: &P, receiver: &mut R)
where
    P: Producer + ?Sized,
    R: Receiver + ?Sized,
{
    let mut stats = Vec::new();
    producer.stats(&mut stats);
    let last = stats
        .iter()
        .find_map(|s| s.reading.and_then(|r| r.last_ts_ns));
    if let Some(ts) = last {
        receiver.clock_at_end(ts);
    }
}

/// [`drive`]'s loop: every object from `producer` into `receiver`, counted
/// in `moved`, until the end or the first error.
#[inline(always)]
fn pump<P, R>(
    producer: &mut P,
    receiver: &mut R,
    mut watch: Option<Watch<'_>>,
    moved: &mut u64,
) -> Result<(), StageError>
where
    P: Producer + ?Sized,
    R: Receiver + ?Sized,
{
    if let Some(watch) = watch.as_mut().filter(|_| producer.waits()) {
        return pump_waiting(producer, receiver, watch, moved);
    }
    loop {
        if crate::stop::requested().is_some() {
            return Ok(());
        }
        // Use the object where `produce` wrote it: objects are a few hundred
        // bytes, and moving each one out of the `Result` is a copy per packet.
        let mut next = producer.produce();
        let obj = match &mut next {
            Ok(Some(obj)) => obj,
            Ok(None) => return Ok(()),
            Err(_) => return next.map(|_| ()),
        };
        receiver.receive(obj)?;
        *moved += 1;
        drop(next);
        if let Some(watch) = &mut watch {
            look(producer, receiver, watch, *moved);
        }
    }
}

/// [`pump`] with a producer that may push: it runs the loop until a
/// watcher is due, a stop is requested or the input ends; the driver looks
/// and lets it go on. A producer that does not push is pulled.
fn pump_pushed<P>(
    producer: &mut P,
    receiver: &mut dyn Receiver,
    mut watch: Option<Watch<'_>>,
    moved: &mut u64,
) -> Result<(), StageError>
where
    P: Producer + ?Sized,
{
    loop {
        let due = watch.as_ref().map(|w| w.due);
        let to = PushTo {
            receiver: &mut *receiver,
            due,
            moved: &mut *moved,
        };
        match producer.push_into(to) {
            None => return pump(producer, receiver, watch, moved),
            Some(Ok(Pushed::End)) => return Ok(()),
            Some(Ok(Pushed::Paused)) => {}
            Some(Err(e)) => return Err(e),
        }
        if crate::stop::requested().is_some() {
            return Ok(());
        }
        if let Some(watch) = &mut watch {
            look(producer, receiver, watch, *moved);
        }
    }
}

/// [`pump`] for a producer that [`Producer::waits`]: the watcher is called
/// while it waits too.
fn pump_waiting<P, R>(
    producer: &mut P,
    receiver: &mut R,
    watch: &mut Watch<'_>,
    moved: &mut u64,
) -> Result<(), StageError>
where
    P: Producer + ?Sized,
    R: Receiver + ?Sized,
{
    loop {
        if crate::stop::requested().is_some() {
            return Ok(());
        }
        let mut next = producer.produce_or_wait(watch.due);
        match &mut next {
            Ok(Pulled::Object(obj)) => {
                receiver.receive(obj)?;
                *moved += 1;
            }
            Ok(Pulled::Waiting) => {}
            Ok(Pulled::End) => return Ok(()),
            Err(_) => return next.map(|_| ()),
        }
        drop(next);
        look(producer, receiver, watch, *moved);
    }
}

/// Calls `watch` if it is due.
#[inline(always)]
fn look<P, R>(producer: &P, receiver: &R, watch: &mut Watch<'_>, moved: u64)
where
    P: Producer + ?Sized,
    R: Receiver + ?Sized,
{
    if watch.due.load(Ordering::Relaxed) {
        watch.due.store(false, Ordering::Relaxed);
        let snapshot = || {
            let mut out = Vec::new();
            producer.stats(&mut out);
            receiver.stats(&mut out);
            out
        };
        (watch.call)(moved, &snapshot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Object, Text, TextKind};

    /// Gives `Waiting` (when due), a line, `Waiting` again, then the end.
    struct Slow {
        step: usize,
    }

    impl Producer for Slow {
        fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
            unreachable!("a producer that waits is asked with produce_or_wait")
        }
        fn stats(&self, _: &mut Vec<StageStats>) {}
        fn waits(&self) -> bool {
            true
        }
        fn produce_or_wait(&mut self, due: &AtomicBool) -> Result<Pulled<'_>, StageError> {
            self.step += 1;
            Ok(match self.step {
                1 | 3 if due.load(Ordering::Relaxed) => Pulled::Waiting,
                1..=3 => Pulled::Object(Object::Text(Text {
                    kind: TextKind::Line,
                    number: self.step as u64,
                    text: "a.example",
                })),
                _ => Pulled::End,
            })
        }
    }

    struct Count(u64);

    impl Receiver for Count {
        fn receive(&mut self, _: &mut Object<'_>) -> Result<(), StageError> {
            self.0 += 1;
            Ok(())
        }
        fn stats(&self, _: &mut Vec<StageStats>) {}
    }

    /// Runs `run` into a counter with a watcher that notes how many objects
    /// had moved each time it looked, `due` from the start and, with
    /// `again`, due again at once after each look: (moved, counted, looks).
    fn watched(
        due: bool,
        again: bool,
        run: impl FnOnce(&mut Count, Watch<'_>) -> Result<u64, StageError>,
    ) -> (u64, u64, Vec<u64>) {
        let due = AtomicBool::new(due);
        let mut looked = Vec::new();
        let mut call = |moved: u64, _: Snapshot<'_>| {
            looked.push(moved);
            due.store(again, Ordering::Relaxed);
        };
        let mut receiver = Count(0);
        let watch = Watch {
            due: &due,
            call: &mut call,
        };
        let moved = run(&mut receiver, watch).unwrap();
        (moved, receiver.0, looked)
    }

    #[test]
    fn a_waiting_producer_lets_the_watcher_look_while_it_waits() {
        // Due again at once: every wait gives way.
        let (moved, counted, looked) = watched(true, true, |receiver, watch| {
            drive(&mut Slow { step: 0 }, receiver, Some(watch))
        });
        assert_eq!((moved, counted), (1, 1));
        // After the first wait, the line, the second wait.
        assert_eq!(looked, [0, 1, 1]);
    }

    /// Pushes `left` lines itself, and (standing in for a timer) marks the
    /// watcher due after every third; gives way when it is due.
    struct Pushing {
        left: u64,
    }

    impl Producer for Pushing {
        fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
            unreachable!("a producer that pushes is not pulled")
        }
        fn stats(&self, _: &mut Vec<StageStats>) {}
        fn push_into(&mut self, to: PushTo<'_>) -> Option<Result<Pushed, StageError>> {
            let PushTo {
                receiver,
                due,
                moved,
            } = to;
            let due = due.expect("watched");
            // The driver looks (and clears `due`) before it asks again.
            assert!(!due.load(Ordering::Relaxed), "asked again, not looked");
            while !due.load(Ordering::Relaxed) {
                if self.left == 0 {
                    return Some(Ok(Pushed::End));
                }
                let mut line = Object::Text(Text {
                    kind: TextKind::Line,
                    number: self.left,
                    text: "a.example",
                });
                if let Err(e) = receiver.receive(&mut line) {
                    return Some(Err(e));
                }
                self.left -= 1;
                *moved += 1;
                if moved.is_multiple_of(3) {
                    due.store(true, Ordering::Relaxed);
                }
            }
            Some(Ok(Pushed::Paused))
        }
    }

    #[test]
    fn a_pushing_producer_gives_way_to_the_watcher_and_goes_on() {
        let (moved, counted, looked) = watched(false, false, |receiver, watch| {
            drive_chain(&mut Pushing { left: 10 }, receiver, Some(watch))
        });
        assert_eq!((moved, counted), (10, 10));
        // Looked at after every third line, the watcher clearing `due`.
        assert_eq!(looked, [3, 6, 9]);
    }

    #[test]
    fn a_producer_that_does_not_push_is_pulled_by_the_chain_driver() {
        let (moved, counted, looked) = watched(true, true, |receiver, watch| {
            drive_chain(&mut Slow { step: 0 }, receiver, Some(watch))
        });
        assert_eq!((moved, counted), (1, 1));
        assert_eq!(looked, [0, 1, 1]);
    }
}
