//! The options of `filter.split` ([`SplitOptions`]) and how it spreads
//! objects ([`By`]).

use dnsluice_options::{Choice, Options};

/// Options of `filter.split`.
#[derive(Debug, Clone, Options)]
pub struct SplitOptions {
    /// Worker threads, each running its own copy of the rest of the chain.
    #[option(default = 2, range = 1..=1024)]
    pub threads: u32,
    /// How objects are spread over the workers.
    #[option(default = By::RoundRobin)]
    pub by: By,
    /// Objects queued per worker (bounded: the split waits when it is full).
    /// An idle worker sleeps until half of it waits: the deeper, the fewer
    /// wake-ups (a few microseconds each, on both sides).
    #[option(default = 16384, range = 1..=(1 << 20))]
    pub queue: u32,
    /// Objects handed to a worker at once.
    #[option(default = 256, range = 1..=65536)]
    pub batch: u32,
    /// When the threads share one output stream: write it in the order the
    /// split saw the objects (as one thread would), not as batches come.
    #[option(default = true)]
    pub ordered: bool,
    /// List the split itself in the statistics (`threads = N` does not: the
    /// summary names the threads instead).
    #[option(default = true)]
    pub report: bool,
    /// The splitting thread runs the first copy of the chain itself (no copy
    /// for its objects, one thread fewer; `threads = N` does this): batches
    /// the workers have no room for, and a smaller share of the flows than
    /// theirs (7/8 of an equal share on 2 threads, none from 9). Off, every
    /// copy has a thread of its own and the splitting thread only reads and
    /// hands over.
    #[option(default = false)]
    pub inline: bool,
}

/// How objects are spread over the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Choice)]
pub enum By {
    /// A batch to each worker in turn.
    RoundRobin,
    /// By a hash of the client's address: a client's queries and answers stay on one thread
    /// (a fragmented answer too when the split comes after `filter.dns`; before it, a
    /// fragment has no ports and goes by its source, the server).
    Client,
    /// TCP, fragments and the rest by a hash of the two addresses (both
    /// directions and every fragment stay on one thread); DNS datagrams that
    /// stand alone in batches, in turn.
    Flow,
}
