//! `dnsluice-netem`: a WAN emulator for tests and benchmarks on loopback.
//!
//! The kernel here has no `netem` qdisc, so real-network conditions are
//! made in user space: each link forwards UDP and TCP from a listening
//! address to a target, with a one-way latency (fixed plus jitter) and a
//! loss rate per direction, and optionally a per-client query rate limit
//! whose excess is dropped or answered REFUSED or TC=1 (RRL's "slip").
//! Losses are drawn from a seeded random source, so a run repeats. What it
//! did is counted by cause ([`stats`]), with the kernel's own count of
//! drops on its sockets beside ([`kernel`]): the emulator must lose nothing
//! it was not told to.
//!
//! [`udp`] is one epoll loop with `recvmmsg`/`sendmmsg` and large socket
//! buffers; [`tcp`] is a thread per direction of each connection. [`spec`]
//! parses what a link does; [`slip`] makes a limiter's answers.

#![warn(missing_docs)]

pub mod kernel;
pub mod rng;
pub mod slip;
pub mod spec;
pub mod stats;
pub mod sys;
pub mod tcp;
pub mod udp;

#[cfg(test)]
mod tests;

use spec::Link;
use stats::LinkStats;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Which protocols to forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocols {
    /// Forward UDP.
    pub udp: bool,
    /// Forward TCP.
    pub tcp: bool,
}

/// A running emulator: its links' counters, and the stop switch of its UDP loop.
pub struct Emulator {
    links: Vec<(Link, Arc<LinkStats>)>,
    locals: Arc<Mutex<Vec<SocketAddr>>>,
    stop: Arc<AtomicBool>,
    udp: Option<JoinHandle<io::Result<()>>>,
}

impl Emulator {
    /// Binds every link and starts forwarding. A port that cannot be bound
    /// is an error naming it.
    pub fn start(links: Vec<Link>, protocols: Protocols, seed: u64) -> io::Result<Emulator> {
        let links: Vec<(Link, Arc<LinkStats>)> = links
            .into_iter()
            .map(|link| (link, Arc::default()))
            .collect();
        let locals = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        // Every port is bound before anything starts, so that a start that
        // fails leaves nothing listening.
        let listeners = if protocols.tcp {
            links
                .iter()
                .map(|(link, _)| tcp::bind(link))
                .collect::<io::Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let udp = if protocols.udp {
            Some(udp::Udp::bind(&links, seed, locals.clone())?)
        } else {
            None
        };
        for (listener, (link, stats)) in listeners.into_iter().zip(&links) {
            tcp::spawn(listener, link.clone(), stats.clone(), seed)?;
        }
        let udp = if let Some(udp) = udp {
            let stop = stop.clone();
            Some(
                std::thread::Builder::new()
                    .name("netem-udp".into())
                    .spawn(move || udp.run(&stop))?,
            )
        } else {
            None
        };
        Ok(Emulator {
            links,
            locals,
            stop,
            udp,
        })
    }

    /// The counters of link `i` (in the order given).
    pub fn stats(&self, i: usize) -> &LinkStats {
        &self.links[i].1
    }

    /// Datagrams the kernel dropped on the emulator's UDP sockets.
    pub fn kernel_drops(&self) -> u64 {
        kernel::udp_drops(&lock(&self.locals))
    }

    /// Every link's counters and the kernel's drops, as JSON ([`stats::to_json`]).
    pub fn to_json(&self) -> String {
        let links: Vec<(String, String, &LinkStats)> = self
            .links
            .iter()
            .map(|(l, s)| (l.listen.to_string(), l.target.to_string(), &**s))
            .collect();
        stats::to_json(&links, self.kernel_drops())
    }

    /// Stops the UDP loop (TCP connections end with their peers).
    pub fn stop(mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.udp.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the UDP loop panicked")),
            None => Ok(()),
        }
    }
}

/// Locks `mutex`, taking the value of a poisoned one (a panicking holder
/// leaves a plain list, still valid).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
