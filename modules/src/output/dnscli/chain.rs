//! `filter.dnscli`: the DNS client of `output.dnscli` in the middle of a
//! chain. It takes queries and passes on one [`Object::Response`] per query
//! (the query, the answer or the error, the latency), so the stages after it
//! can select, print or write responses:
//!
//! ```toml
//! [[stage]]
//! module = "filter.dnscli"
//! server = "127.0.0.1:53"
//!
//! [[stage]]
//! module = "output.json"
//! ```
//!
//! Pushed, each response goes on as soon as the next query comes in, and the
//! rest when the input ends. Pulled ([`ResponseProducer`]), each call asks
//! the upstream for queries, sending them, until a response is ready; at the
//! end of the input it waits for the last answers (or their timeouts).
//! Either way every query the client sends gives exactly one response.

use super::outcome::{response_of, Outcome};
use super::{DnsCli, DnsCliOptions};
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::{Object, Producer, Receiver, StageError, StageStats};
use std::collections::VecDeque;

/// The module's name.
pub const MODULE: &str = "filter.dnscli";

/// The pull form: pulls queries from its upstream, sends them, and hands out
/// the responses.
pub struct ResponseProducer {
    upstream: Box<dyn Producer>,
    cli: DnsCli,
    /// Responses ready to hand out, oldest first.
    ready: VecDeque<Outcome>,
    /// The response handed out last (the object borrows it until the next call).
    current: Option<Outcome>,
    /// Responses handed out.
    output: u64,
    /// The upstream has ended and every answer is in.
    done: bool,
}

impl ResponseProducer {
    /// A client with `options` that pulls its queries from `upstream`.
    pub fn new(options: &DnsCliOptions, upstream: Box<dyn Producer>) -> Result<Self, StageError> {
        Ok(ResponseProducer {
            upstream,
            cli: DnsCli::new(options, None)?.keep_outcomes(),
            ready: VecDeque::new(),
            current: None,
            output: 0,
            done: false,
        })
    }
}

impl Producer for ResponseProducer {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        loop {
            if let Some(next) = self.ready.pop_front() {
                self.output += 1;
                let current = self.current.insert(next);
                return Ok(Some(response_of(current, self.cli.server_name())));
            }
            if self.done {
                self.current = None;
                return Ok(None);
            }
            match self.upstream.produce()? {
                Some(mut query) => self.cli.receive(&mut query)?,
                None => {
                    // Waits for every answer (or its timeout), then stops.
                    self.cli.finish()?;
                    self.done = true;
                }
            }
            self.cli.take_ready(&mut self.ready);
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        self.upstream.stats(out);
        let start = out.len();
        self.cli.stats(out);
        if let Some(own) = out.get_mut(start) {
            own.output = self.output;
        }
    }
}

/// The registry entry. The options are `output.dnscli`'s but for
/// `responses`: the responses go to the next stage.
pub fn entry() -> ModuleEntry {
    ModuleEntry::filter(
        MODULE,
        "DNS client in a chain: replay queries over udp, tcp, tls or https and pass on each response (query, answer or error, latency)",
        |o: DnsCliOptions, next| Ok(Box::new(DnsCli::new(&o, None)?.into_filter(next))),
        |o: DnsCliOptions, upstream| Ok(Box::new(ResponseProducer::new(&o, upstream)?)),
    )
}
