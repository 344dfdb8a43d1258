//! The trace of a walk (`--result-verbosity trace`): each query's step,
//! and each step the cache answered, as ZDNS writes them.

use super::super::delegation::Delegation;
use super::super::message::Asked;
use super::super::name::Name;
use super::super::trust::{Lame, Verdict};
use super::Walk;
use crate::trace::TraceStep;
use dnsluice_core::dns::mnemonic;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

impl Walk<'_> {
    /// Adds a query's step to the trace, when tracing.
    pub(super) fn note_step(
        &mut self,
        depth: u32,
        sent: Sent<'_>,
        response: Option<Vec<u8>>,
        error: Option<&String>,
    ) {
        if !self.tracing {
            return;
        }
        self.steps.push(TraceStep {
            name: trace_name(sent.name),
            qtype: sent.qtype,
            qclass: sent.qclass,
            nameserver: SocketAddr::new(sent.addr, self.r.config.port).to_string(),
            protocol: self.protocol.unwrap_or(self.r.transport.protocol_name()),
            depth: depth + 1,
            layer: sent.zone.zone.to_text(),
            cached: false,
            try_number: sent.try_number,
            response,
            error: error.cloned(),
            duration: sent.started.elapsed(),
        });
    }

    /// Adds a cache hit to the trace, when tracing.
    pub(super) fn note_cached(
        &mut self,
        depth: u32,
        name: &Name,
        asked: &Asked,
        verdict: &Verdict,
    ) {
        if !self.tracing {
            return;
        }
        self.steps.push(TraceStep {
            name: trace_name(name),
            qtype: asked.qtype,
            qclass: asked.qclass,
            depth: depth + 1,
            cached: true,
            error: matches!(verdict, Verdict::Lame(_)).then(|| describe(verdict)),
            ..TraceStep::default()
        });
    }
}

/// A query as its trace step names it.
pub(super) struct Sent<'z> {
    pub zone: &'z Delegation,
    pub name: &'z Name,
    pub qtype: u16,
    pub qclass: u16,
    pub addr: IpAddr,
    pub try_number: u32,
    pub started: Instant,
}

/// A name as traces write it: without the trailing dot (`.` for the root).
fn trace_name(name: &Name) -> String {
    let text = name.to_text();
    match text.strip_suffix('.') {
        Some(bare) if !bare.is_empty() => bare.to_string(),
        _ => text,
    }
}

/// A verdict in a few words, for traces and errors.
pub(super) fn describe(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Answer(records) => format!("answer ({} records)", records.len()),
        Verdict::Alias { target, .. } => format!("CNAME to {target}"),
        Verdict::NoData { .. } => "NODATA".to_string(),
        Verdict::NxDomain { .. } => "NXDOMAIN".to_string(),
        Verdict::Referral(referral) => format!("referral to {}", referral.zone),
        Verdict::Lame(Lame::Rcode(rcode)) => format!("lame: {}", mnemonic::rcode(*rcode)),
        Verdict::Lame(Lame::UpwardReferral) => "lame: upward referral".to_string(),
        Verdict::Lame(Lame::Empty) => "lame: no answer and no authority".to_string(),
    }
}
