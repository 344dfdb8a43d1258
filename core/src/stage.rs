//! The two stage traits and the loop that drives a chain.
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

/// Push side: an upstream hands this stage one object.
pub trait Receiver {
    /// Takes one object. The object (and its bytes) is only valid during the call.
    fn receive(&mut self, obj: &Object<'_>) -> Result<(), StageError>;

    /// Called once after the last object: flush buffers, then finish downstream.
    fn finish(&mut self) -> Result<(), StageError> {
        Ok(())
    }

    /// Appends this stage's counters, then those of the stages it pushes to.
    fn stats(&self, out: &mut Vec<StageStats>);
}

/// Pull side: a downstream asks this stage for its next object.
pub trait Producer {
    /// The next object, or `None` at the end. The object borrows from the
    /// producer until the next call.
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError>;

    /// Appends the counters of the stages this one pulls from, then its own.
    fn stats(&self, out: &mut Vec<StageStats>);
}

impl<R: Receiver + ?Sized> Receiver for Box<R> {
    fn receive(&mut self, obj: &Object<'_>) -> Result<(), StageError> {
        (**self).receive(obj)
    }
    fn finish(&mut self) -> Result<(), StageError> {
        (**self).finish()
    }
    fn stats(&self, out: &mut Vec<StageStats>) {
        (**self).stats(out)
    }
}

impl<P: Producer + ?Sized> Producer for Box<P> {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        (**self).produce()
    }
    fn stats(&self, out: &mut Vec<StageStats>) {
        (**self).stats(out)
    }
}

/// How often (in objects) [`drive`] calls its progress callback.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// Pulls every object from `producer` and pushes it into `receiver`, then
/// finishes the receiver. Calls `progress` with the object count every
/// [`PROGRESS_EVERY`] objects. Returns the number of objects moved.
pub fn drive<P, R>(
    producer: &mut P,
    receiver: &mut R,
    mut progress: Option<&mut dyn FnMut(u64)>,
) -> Result<u64, StageError>
where
    P: Producer + ?Sized,
    R: Receiver + ?Sized,
{
    let mut moved = 0u64;
    while let Some(obj) = producer.produce()? {
        receiver.receive(&obj)?;
        moved += 1;
        if moved.is_multiple_of(PROGRESS_EVERY) {
            if let Some(report) = progress.as_mut() {
                report(moved);
            }
        }
    }
    receiver.finish()?;
    Ok(moved)
}

/// A one-to-one filter: looks at each object and annotates it in place (a
/// layer parser fills in offsets, a DNS parser its view). [`MapStage`] turns any
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
    fn receive(&mut self, obj: &Object<'_>) -> Result<(), StageError> {
        self.count += 1;
        let mut out = *obj;
        self.map.map(&mut out);
        self.neighbour.receive(&out)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.neighbour.finish()
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        out.push(self.own_stats());
        self.neighbour.stats(out);
    }
}

impl<M: Map, P: Producer> Producer for MapStage<M, P> {
    #[inline]
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        let mut next = self.neighbour.produce()?;
        if let Some(obj) = next.as_mut() {
            self.count += 1;
            self.map.map(obj);
        }
        Ok(next)
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        self.neighbour.stats(out);
        out.push(self.own_stats());
    }
}
