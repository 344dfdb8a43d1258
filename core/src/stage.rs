//! The two stage traits, and (in [`drive`]'s module) the loop that drives a chain.
//!
//! - [`Receiver`] is the push side: an upstream hands it one object at a time.
//! - [`Producer`] is the pull side: a downstream asks it for the next object.
//!   It is a *lending* producer: the object borrows from the producer until
//!   the next call, so inputs hand out views into their mmap or read buffer.
//!
//! A filter that holds its downstream as a receiver is driven from the input
//! (`input → filter → output`); one that holds its upstream as a producer is
//! driven from the end (`output ← filter ← input`). [`drive`] connects the two.

use crate::{Object, StageError, StageStats};
use std::any::Any;
use std::sync::atomic::AtomicBool;

mod drive;

pub use drive::{drive, drive_chain, Snapshot, Watch};

/// Push side: an upstream hands this stage one object.
pub trait Receiver {
    /// Takes one object. The object (and its bytes) is only valid during the
    /// call. It is lent mutably so that a filter can annotate it in place and
    /// pass it on without copying it; a stage that hands one object to several
    /// receivers gives each its own copy.
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError>;

    /// Called once after the last object: flush buffers, then finish downstream.
    fn finish(&mut self) -> Result<(), StageError> {
        Ok(())
    }

    /// Told, just before [`Receiver::finish`], the latest capture time of the
    /// whole input (ns): a split tells each of its threads' chains, whose own
    /// objects may end earlier, so that what times out at the end (a TCP
    /// flow, a datagram's fragments) is decided on the input's clock, as one
    /// thread decides it. A stage that passes objects on passes this on too.
    fn clock_at_end(&mut self, _ts_ns: i64) {}

    /// Appends this stage's counters, then those of the stages it pushes to.
    fn stats(&self, out: &mut Vec<StageStats>);

    /// The stage itself as [`Any`], for an upstream that has a loop of its
    /// own for a stage it knows (a capture reader runs the split's intake
    /// in its walk, without a call per object); `None`, the default, for
    /// the rest.
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        None
    }
}

/// Pull side: a downstream asks this stage for its next object.
pub trait Producer {
    /// The next object, or `None` at the end. The object borrows from the
    /// producer until the next call.
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError>;

    /// Appends the counters of the stages this one pulls from, then its own.
    fn stats(&self, out: &mut Vec<StageStats>);

    /// Whether this producer may wait for its next object (lines on a pipe,
    /// answers in flight) and can give way to a watcher meanwhile
    /// ([`Producer::produce_or_wait`]). The driver asks once.
    fn waits(&self) -> bool {
        false
    }

    /// As [`Producer::produce`], but while it would wait it returns
    /// [`Pulled::Waiting`] once `due` is set, so that the driver can look at
    /// the chain (a progress bar, interval statistics) and ask again. Called
    /// only when [`Producer::waits`]; the default waits as `produce` does.
    fn produce_or_wait(&mut self, due: &AtomicBool) -> Result<Pulled<'_>, StageError> {
        let _ = due;
        Ok(match self.produce()? {
            Some(obj) => Pulled::Object(obj),
            None => Pulled::End,
        })
    }

    /// Hands the rest of the input over to be read in parts, each part by
    /// whichever of a split's threads takes it (`filter.split` put after
    /// the input by `threads = N`), or `None` (the default) when this input
    /// cannot be read so (a stream, a compressed file, records already
    /// read): it then goes on as before. What is handed over is the
    /// input's own (the split knows its type). Once handed over,
    /// [`Producer::produce`] gives no objects: it waits until the last part
    /// is taken, then ends, or fails with the error the parts' reading met
    /// (a corrupt record); [`Producer::stats`] says how far the parts' reading has got.
    fn parts(&mut self) -> Option<InputParts> {
        None
    }

    /// Pushes its objects into `to.receiver` itself, in a loop of its own,
    /// until its input ends, `to.due` is set (a watcher wants a look; it is
    /// cleared by the driver), or a stop is requested; each object pushed
    /// is counted in `to.moved`. `None` (the default): this producer does not
    /// push, and the driver pulls ([`Producer::produce`]).
    fn push_into(&mut self, to: PushTo<'_>) -> Option<Result<Pushed, StageError>> {
        let _ = to;
        None
    }
}

/// Where [`Producer::push_into`] pushes its objects, and what it watches.
pub struct PushTo<'a> {
    /// The chain's first stage.
    pub receiver: &'a mut dyn Receiver,
    /// Set when a watcher wants a look (the driver clears it).
    pub due: Option<&'a AtomicBool>,
    /// Counts every object pushed.
    pub moved: &'a mut u64,
}

/// Why [`Producer::push_into`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// The input ended: no object comes after.
    End,
    /// It paused, a watcher being due or a stop asked: the driver looks
    /// (or stops), then asks it to go on.
    Paused,
}

/// An input handed over to be read in parts (see [`Producer::parts`]).
pub type InputParts = Box<dyn std::any::Any + Send>;

/// What [`Producer::produce_or_wait`] gave.
pub enum Pulled<'a> {
    /// The next object.
    Object(Object<'a>),
    /// The end: no object comes after.
    End,
    /// No object yet, and the watcher is due: ask again after it.
    Waiting,
}

impl<R: Receiver + ?Sized> Receiver for Box<R> {
    #[inline(always)]
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        (**self).receive(obj)
    }
    fn finish(&mut self) -> Result<(), StageError> {
        (**self).finish()
    }
    fn clock_at_end(&mut self, ts_ns: i64) {
        (**self).clock_at_end(ts_ns)
    }
    fn stats(&self, out: &mut Vec<StageStats>) {
        (**self).stats(out)
    }
}

impl<P: Producer + ?Sized> Producer for Box<P> {
    #[inline(always)]
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        (**self).produce()
    }
    fn stats(&self, out: &mut Vec<StageStats>) {
        (**self).stats(out)
    }
    fn waits(&self) -> bool {
        (**self).waits()
    }
    fn produce_or_wait(&mut self, due: &AtomicBool) -> Result<Pulled<'_>, StageError> {
        (**self).produce_or_wait(due)
    }
    fn parts(&mut self) -> Option<InputParts> {
        (**self).parts()
    }
    fn push_into(&mut self, to: PushTo<'_>) -> Option<Result<Pushed, StageError>> {
        (**self).push_into(to)
    }
}

/// A one-to-one filter: looks at each object and annotates it in place (the
/// layer parser fills in offsets). [`MapStage`] turns any
/// `Map` into both a push and a pull stage, so such a filter is written once.
pub trait Map {
    /// Annotates one object before it is passed on.
    fn map(&mut self, obj: &mut Object<'_>);

    /// This filter's counters (`input`/`output` are filled in by [`MapStage`]).
    fn stats(&self) -> StageStats;
}

/// A [`Map`] joined to its neighbour: a [`Receiver`] when `N` is the
/// downstream receiver, a [`Producer`] when `N` is the upstream producer.
pub struct MapStage<M, N> {
    map: M,
    neighbour: N,
    count: u64,
}

impl<M: Map, N> MapStage<M, N> {
    /// Joins `map` to `neighbour`.
    pub fn new(map: M, neighbour: N) -> Self {
        MapStage {
            map,
            neighbour,
            count: 0,
        }
    }

    fn own_stats(&self) -> StageStats {
        let mut stats = self.map.stats();
        stats.input = self.count;
        stats.output = self.count;
        stats
    }
}

impl<M: Map, R: Receiver> Receiver for MapStage<M, R> {
    #[inline]
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.count += 1;
        self.map.map(obj);
        self.neighbour.receive(obj)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.neighbour.finish()
    }

    fn clock_at_end(&mut self, ts_ns: i64) {
        self.neighbour.clock_at_end(ts_ns);
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        out.push(self.own_stats());
        self.neighbour.stats(out);
    }
}

impl<M: Map, P: Producer> Producer for MapStage<M, P> {
    #[inline]
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        // Annotated where `produce` wrote it and returned as it is: no `?`,
        // whose re-wrapping would copy the (few hundred bytes) object.
        let mut next = self.neighbour.produce();
        if let Ok(Some(obj)) = &mut next {
            self.count += 1;
            self.map.map(obj);
        }
        next
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        self.neighbour.stats(out);
        out.push(self.own_stats());
    }
}

/// A flat-map filter: may pass on any number of objects for each one it takes
/// (none for a packet that is not DNS, several for a TCP segment holding
/// several messages, one later for the last of several fragments), and may
/// hold state until the end ([`FlatMap::flush`]). [`FlatMapStage`] makes it a
/// push and a pull stage.
pub trait FlatMap {
    /// Takes one object and hands what it produces to `out` (the object itself
    /// may be passed on, annotated or not). Generic over the receiver, so that
    /// a boxed downstream is called through its own vtable, once, rather than
    /// through the box's and then its own.
    fn process<R: Receiver + ?Sized>(
        &mut self,
        obj: &mut Object<'_>,
        out: &mut R,
    ) -> Result<(), StageError>;

    /// The pull side's fast path: when all that processing `obj` would do
    /// is turn it into one object (a UDP datagram holding one DNS message),
    /// returns that object (counting it as [`FlatMap::process`] would; it
    /// borrows what `obj` borrows). [`FlatMapStage`] hands it on as its own
    /// result, built where the caller wants it: no queue, no copy. Returns
    /// `None` to have [`FlatMap::process`] handle `obj` (the default).
    fn process_one<'a>(&mut self, _obj: &Object<'a>) -> Option<Object<'a>> {
        None
    }

    /// Called after the last object: hand on or report what is still held.
    fn flush<R: Receiver + ?Sized>(&mut self, _out: &mut R) -> Result<(), StageError> {
        Ok(())
    }

    /// The input's latest capture time, before the flush (see [`Receiver::clock_at_end`]).
    fn clock_at_end(&mut self, _ts_ns: i64) {}

    /// This filter's counters (`input` is filled in by [`FlatMapStage`]; the
    /// filter counts its own `output`).
    fn stats(&self) -> StageStats;
}

/// A [`FlatMap`] joined to its neighbour: a [`Receiver`] when `N` is the
/// downstream receiver, a [`Producer`] when `N` is the upstream producer.
///
/// On the pull side the one output the filter makes of an object
/// ([`FlatMap::process_one`]) is returned as it is made; what
/// [`FlatMap::process`] produces is copied into a queue of reused
/// [`crate::OwnedObject`]s and handed out one per call. The push side hands
/// everything on directly, without copying.
pub struct FlatMapStage<F, N> {
    filter: F,
    neighbour: N,
    count: u64,
    queue: std::collections::VecDeque<crate::OwnedObject>,
    spare: Vec<crate::OwnedObject>,
    current: crate::OwnedObject,
    ended: bool,
}

impl<F: FlatMap, N> FlatMapStage<F, N> {
    /// Joins `filter` to `neighbour`.
    pub fn new(filter: F, neighbour: N) -> Self {
        FlatMapStage {
            filter,
            neighbour,
            count: 0,
            queue: Default::default(),
            spare: Vec::new(),
            current: Default::default(),
            ended: false,
        }
    }

    fn own_stats(&self) -> StageStats {
        let mut stats = self.filter.stats();
        stats.input = self.count;
        stats
    }
}

impl<F: FlatMap, R: Receiver> Receiver for FlatMapStage<F, R> {
    #[inline]
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.count += 1;
        self.filter.process(obj, &mut self.neighbour)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.filter.flush(&mut self.neighbour)?;
        self.neighbour.finish()
    }

    fn clock_at_end(&mut self, ts_ns: i64) {
        self.filter.clock_at_end(ts_ns);
        self.neighbour.clock_at_end(ts_ns);
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        out.push(self.own_stats());
        self.neighbour.stats(out);
    }
}

/// Copies what a filter produces into a queue (the pull side of [`FlatMapStage`]).
struct Collector<'q> {
    queue: &'q mut std::collections::VecDeque<crate::OwnedObject>,
    spare: &'q mut Vec<crate::OwnedObject>,
}

impl Receiver for Collector<'_> {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        let mut slot = self.spare.pop().unwrap_or_default();
        slot.copy_from(obj);
        self.queue.push_back(slot);
        Ok(())
    }

    fn stats(&self, _out: &mut Vec<StageStats>) {}
}

impl<F: FlatMap, P: Producer> Producer for FlatMapStage<F, P> {
    #[allow(unsafe_code)]
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        loop {
            if let Some(next) = self.queue.pop_front() {
                let done = std::mem::replace(&mut self.current, next);
                self.spare.push(done);
                return Ok(Some(self.current.view()));
            }
            if self.ended {
                return Ok(None);
            }
            let neighbour: *mut P = &mut self.neighbour;
            // SAFETY: `neighbour` points to `self.neighbour`, which `self`'s
            // exclusive borrow covers, and nothing else touches it until the
            // object is dead: the object is either returned (ending the call,
            // so it borrows `self` as the signature says) or dropped by the
            // end of this loop turn, before the next `produce`. A plain
            // `self.neighbour.produce()` is refused only because today's
            // borrow checker extends a conditionally returned borrow over the
            // whole loop (NLL "problem case #3"; the Polonius checker accepts it).
            // Matched where `produce` wrote it (no `?`, which would copy the object).
            let mut next = unsafe { &mut *neighbour }.produce();
            match &mut next {
                Ok(Some(obj)) => {
                    self.count += 1;
                    // Built straight into the return value: returning
                    // `next` after changing it in place copied the whole
                    // object (a `memcpy` call, 19 % of a pulled dns chain).
                    if let Some(one) = self.filter.process_one(obj) {
                        return Ok(Some(one));
                    }
                    let mut collector = Collector {
                        queue: &mut self.queue,
                        spare: &mut self.spare,
                    };
                    self.filter.process(obj, &mut collector)?;
                }
                Err(_) => return next,
                Ok(None) => {
                    self.ended = true;
                    let mut collector = Collector {
                        queue: &mut self.queue,
                        spare: &mut self.spare,
                    };
                    self.filter.flush(&mut collector)?;
                }
            }
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        self.neighbour.stats(out);
        out.push(self.own_stats());
    }
}
