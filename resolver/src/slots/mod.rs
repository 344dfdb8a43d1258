//! The UDP lookup engine: massdns's design (one event loop, a deep table of
//! names in flight, a few sockets, retries that lose nothing) with the
//! politeness massdns lacks (pacing per nameserver that adapts to drops and
//! refusals, `--rate`, `--rate-per-nameserver`).
//!
//! A name is a slot of the in-flight table ([`table`]), not a task: the
//! table's depth (`--inflight`, 10,000 by default) is what keeps a network
//! busy, since names per second are about the depth over the round trip.
//! Queries leave on a few unconnected sockets ([`sockets`], bound to
//! `--local-addr`s in turn), each try with its own id; an answer is matched
//! by socket, id, sender and question. A try waits for its answer as long
//! as its nameserver's round trip says ([`rtt`]), doubled per try, within
//! `--timeout`; a lost or refused try is asked again (on another nameserver
//! of the set when the name is unpinned) while the name's budget
//! (`--retries`, `--name-timeout`) lasts, and every name ends with exactly
//! one record. Each nameserver is paced ([`pace`]). TC=1 answers are asked
//! again over TCP ([`fallback`]).
//!
//! The engine runs on a thread of its own ([`engine`]: the loop;
//! [`dispatch`]: sending; [`answer`]: taking answers; [`expire`]: timeouts
//! and records); [`SlotEngine`] is its handle: names go in through a
//! channel (the thread is woken only when it waits for names), records
//! come back through the channel the caller gave.

mod answer;
mod dispatch;
mod engine;
mod expire;
mod fallback;
mod nameservers;
pub mod pace;
pub mod rtt;
mod sockets;
pub mod table;

use super::config::LookupConfig;
use super::qtype::LookupType;
use super::record::Batch;
use super::stats::RunCounters;
use dnsluice_net::{ClientSetup, DnsTransport, NetCounters};
use engine::{Engine, EngineConfig, Output, WAKER};
use fallback::Fallback;
use nameservers::Nameservers;
pub use nameservers::Published;
use pace::{Pace, PaceConfig};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// A name as the handle sends it: in place when it is short (most are),
/// so sending a name allocates nothing (and the engine frees nothing the
/// handle's thread allocated).
pub enum JobName {
    /// Up to [`JobName::INLINE`] bytes, in place.
    Short {
        /// How many bytes of `bytes` are the name.
        len: u8,
        /// The name's bytes (UTF-8).
        bytes: [u8; JobName::INLINE],
    },
    /// A longer name.
    Long(String),
}

impl JobName {
    /// Names up to this many bytes travel in place.
    pub const INLINE: usize = 64;

    /// `name`, in place when it fits.
    pub fn new(name: &str) -> JobName {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= Self::INLINE => {
                let mut bytes = [0u8; Self::INLINE];
                bytes[..name.len()].copy_from_slice(name.as_bytes());
                JobName::Short { len, bytes }
            }
            _ => JobName::Long(name.to_string()),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        match self {
            // Copied from a `&str` whole, so valid UTF-8.
            JobName::Short { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            JobName::Long(name) => name,
        }
    }
}

/// What the handle sends the engine.
pub enum Msg {
    /// A name to resolve.
    Job {
        /// Its input line's index.
        index: u64,
        /// The name.
        name: JobName,
        /// The nameserver its line named.
        pinned: Option<SocketAddr>,
    },
    /// No more names: finish those in the table, then stop.
    Close,
    /// Records their writer is done with, to write new ones in (their
    /// strings are freed on the thread that made them, and reused).
    Spent(Vec<super::record::Finished>),
}

/// Whether `config` is a lookup the UDP engine runs: UDP, one record type,
/// from the given nameservers, the sticky scheduler.
pub fn runs(config: &LookupConfig) -> bool {
    config.transport == DnsTransport::Udp
        && config.iterative.is_none()
        && matches!(config.qtype, LookupType::Single(_))
        && config.scheduler == super::Scheduler::Sticky
}

/// The handle of a running engine; see the module docs.
pub struct SlotEngine {
    inbox: mpsc::Sender<Msg>,
    waker: Arc<mio::Waker>,
    hungry: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Fallback>>,
    published: Published,
    in_table: Arc<AtomicU64>,
    locals: Vec<SocketAddr>,
}

impl SlotEngine {
    /// Binds the sockets and starts the engine's thread. Records go to
    /// `results`; the counters to `run` and `net`. Fails with a message
    /// naming the problem (a `--local-addr` that cannot be bound).
    pub fn start(
        config: &LookupConfig,
        run: Arc<RunCounters>,
        net: Arc<NetCounters>,
        results: mpsc::Sender<Batch>,
    ) -> Result<SlotEngine, String> {
        let LookupType::Single(qtype) = config.qtype else {
            return Err("the UDP engine asks one record type".into());
        };
        let poll = mio::Poll::new().map_err(|e| format!("cannot start the lookup engine: {e}"))?;
        let waker = Arc::new(
            mio::Waker::new(poll.registry(), WAKER)
                .map_err(|e| format!("cannot start the lookup engine: {e}"))?,
        );
        let per_address = sockets::sockets_for(config.depth, table::TRIES_KEPT);
        let sockets = sockets::SocketSet::bind(&config.local_addrs, per_address, poll.registry())?;
        let locals = sockets.locals();
        let published: Published = Arc::new(Mutex::new(Vec::new()));
        let now = Instant::now();
        let pace = PaceConfig {
            max_rate: config.rate_per_nameserver.unwrap_or(f64::INFINITY),
            adaptive: config.adaptive_rate,
        };
        let nameservers = Nameservers::new(&config.nameservers, pace, published.clone(), now);
        let global = config.rate.map(|rate| {
            Pace::new(
                PaceConfig {
                    max_rate: rate,
                    adaptive: false,
                },
                now,
            )
        });
        let setup = ClientSetup::new(
            DnsTransport::Tcp,
            &config.tls,
            config.timeout,
            config.doh_method,
            net.clone(),
        )
        .map_err(|e| e.to_string())?
        .with_local_addrs(&config.local_addrs);
        let fallback = Fallback::new(
            setup,
            results.clone(),
            run.clone(),
            config.style,
            config.timeout,
        );
        let (inbox, receiver) = mpsc::channel();
        let hungry = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let in_table = Arc::new(AtomicU64::new(0));
        let engine = Engine::new(
            EngineConfig {
                qtype,
                query: config.query,
                tries: 1 + config.retries,
                name_timeout: config.name_timeout,
                max_wait: config.timeout,
                retry_rcodes: config.retry_rcodes.clone(),
                tcp_fallback: config.tcp_fallback,
                style: config.style,
            },
            poll,
            sockets,
            config.depth.max(1),
            nameservers,
            receiver,
            hungry.clone(),
            stop.clone(),
            Output {
                results,
                batch: Vec::new(),
                run,
                net,
                in_table: in_table.clone(),
            },
            global,
            fallback,
        );
        let thread = dnsluice_core::thread::named("dnsluice-lookup")
            .spawn(move || engine.run())
            .map_err(|e| format!("cannot start the lookup engine: {e}"))?;
        Ok(SlotEngine {
            inbox,
            waker,
            hungry,
            stop,
            thread: Some(thread),
            published,
            in_table,
            locals,
        })
    }

    /// Hands the engine a name (`pinned`: the nameserver its line named).
    pub fn submit(&self, index: u64, name: &str, pinned: Option<SocketAddr>) {
        self.send(Msg::Job {
            index,
            name: JobName::new(name),
            pinned,
        });
        if self.hungry.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    /// Hands back records the caller is done with.
    pub fn give_back(&self, records: Vec<super::record::Finished>) {
        self.send(Msg::Spent(records));
    }

    /// No more names.
    pub fn close(&self) {
        self.send(Msg::Close);
        let _ = self.waker.wake();
    }

    fn send(&self, msg: Msg) {
        // The engine only stops after Close, when stopped, or on a poll
        // failure it reports: a name sent then gets no record, and the caller's wait
        // for it ends when the results channel closes.
        let _ = self.inbox.send(msg);
    }

    /// Every nameserver's name and counters, in order of first use (the
    /// list grows as pinned lines name new ones).
    pub fn published(&self) -> Published {
        self.published.clone()
    }

    /// Names in the table now.
    pub fn in_table(&self) -> u64 {
        self.in_table.load(Ordering::Relaxed)
    }

    /// The addresses the engine's sockets are bound to.
    pub fn locals(&self) -> &[SocketAddr] {
        &self.locals
    }

    /// Waits for the engine's thread; then ends the TCP fallback (the caller
    /// has every record by then).
    pub fn shutdown(mut self) {
        self.close();
        if let Some(thread) = self.thread.take() {
            if let Ok(fallback) = thread.join() {
                drop(fallback);
            }
        }
    }
}

impl Drop for SlotEngine {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = self.waker.wake();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JobName;

    #[test]
    fn names_travel_in_place_when_short_and_whole_either_way() {
        let short = "n12345.lookup.test";
        assert!(matches!(JobName::new(short), JobName::Short { .. }));
        assert_eq!(JobName::new(short).as_str(), short);
        let exactly = "ä".repeat(32); // 64 bytes of two-byte characters
        assert!(matches!(JobName::new(&exactly), JobName::Short { .. }));
        assert_eq!(JobName::new(&exactly).as_str(), exactly);
        let long = format!("{}.example", "a".repeat(63));
        assert!(matches!(JobName::new(&long), JobName::Long(_)));
        assert_eq!(JobName::new(&long).as_str(), long);
    }
}
