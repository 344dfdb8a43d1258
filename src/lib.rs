//! # dnsluice
//!
//! The command-line front end of the dnsluice engine. The binary is a thin
//! `main` over [`cli::main`]; a program that adds its own modules builds a
//! registry with them and calls [`cli::main`] the same way (see
//! `examples/custom-module`).

#![warn(missing_docs)]

pub mod cli;
pub mod cpu_report;
pub mod diff;
pub mod flags;
pub mod html;
pub mod intervals;
pub mod lookup;
pub mod metrics;
pub mod progress;
pub mod queue;
pub mod reference;
pub mod replay;
pub mod report;
pub mod running;
pub mod signals;
pub mod ticker;
pub mod watch;

pub use dnsluice_core as core;
pub use dnsluice_modules as modules;
