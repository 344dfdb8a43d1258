//! # dnsluice-core
//!
//! The engine every dnsluice module plugs into:
//!
//! - [`object`]: the objects that flow through a chain ([`Object`], [`Packet`]),
//!   zero-copy views over captured bytes;
//! - [`wire`]: bounds-checked views and the layer parser (link → IP → UDP/TCP);
//! - [`stage`]: the two traits, [`Receiver`] (push) and [`Producer`] (pull);
//! - [`stats`]: per-stage counters reported at the end of a run, and their
//!   differences over intervals;
//! - [`registry`]: dotted module names → constructors taking typed options;
//! - [`pipeline`]: TOML pipelines with file/line/key errors, and chain building.
//!
//! See `ARCHITECTURE.md` at the repository root for the five-minute tour.
//!
//! Unsafe code is denied everywhere but in one place, allowed there by name:
//! [`FlatMapStage`]'s pull side hands on the object its upstream lent when a
//! filter turns it into its one output, a borrow the borrow checker cannot
//! yet see is sound (see the comment there).

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod dns;
pub mod error;
pub mod merge;
pub mod object;
pub mod owned;
pub mod pipeline;
pub mod registry;
pub mod shared;
pub mod stage;
pub mod stats;
pub mod stop;
pub mod sync;
pub mod thread;
pub mod time;
pub mod wire;

pub use dnsluice_options as options;
pub use error::StageError;
pub use object::{
    CaptureMeta, DnsMessage, Flow, Object, Origin, Packet, PacketRef, Response, Text, TextKind,
};
pub use owned::OwnedObject;
pub use registry::{ModuleEntry, Registry, Role};
pub use stage::{
    drive, drive_chain, FlatMap, FlatMapStage, InputParts, Map, MapStage, Producer, Pulled, PushTo,
    Pushed, Receiver, Watch,
};
pub use stats::{Histogram, Reading, StageStats, TopEntry, TopList};
pub use wire::LinkType;
