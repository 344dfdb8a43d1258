//! The receiver thread: waits on every link at once (epoll, through mio),
//! reads what arrived, matches each answer to its query by id and question,
//! flushes stream writes the socket could not take before, and sweeps the
//! timeouts every tick.

use super::link::Done;
use super::link::{Answered, LinkState, Pending};
use super::shared::Core;
use super::sweep::{sweep, tick};
use crate::output::dnscli::tally::full_rcode_of;
use dnsluice_core::sync::lock;
use dnsluice_net::poll_driver::{Conn, RECV_SCRATCH};
use dnsluice_net::{DnsTransport, NetCounters};
use mio::{Events, Poll};
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// After a poll that found something, this many polls in a row look
/// without sleeping before the receiver sleeps in `epoll_wait`: while
/// answers stream in, the next one usually arrives within them, and each
/// sleep and wake-up costs a context switch (measured over UDP against knot:
/// 2.8-3.1 instead of 2.9-3.4 µs of CPU per query, and more queries per second).
const IDLE_POLLS: u32 = 4;

/// What one turn of the loop gathered, handed on at its end.
#[derive(Default)]
struct Gathered {
    done: Vec<Done>,
    retries: Vec<Pending>,
}

/// The receiver thread's loop, until the engine stops.
pub(super) fn receive_loop(core: &Core, mut poll: Poll) {
    let mut events = Events::with_capacity(256);
    // Room for a batch of datagrams of any size (UDP), or one large read (TCP).
    let mut scratch = vec![0u8; RECV_SCRATCH];
    let mut gathered = Gathered::default();
    let tick = tick(core.plan.timeout);
    let mut next_sweep = Instant::now() + tick;
    // Empty polls in a row so far; below IDLE_POLLS the next poll does not sleep.
    let mut idle = 0u32;
    loop {
        let wait = if idle < IDLE_POLLS {
            Duration::ZERO
        } else {
            next_sweep.saturating_duration_since(Instant::now())
        };
        let polled = poll.poll(&mut events, Some(wait));
        if events.is_empty() {
            idle += 1;
        } else {
            idle = 0;
        }
        if let Err(e) = polled {
            if e.kind() != io::ErrorKind::Interrupted {
                // Nothing can be received any more: fail what is in flight.
                for link in &core.links {
                    let mut state = lock(&link.state);
                    let failed =
                        state.close(link.transport, &format!("epoll: {e}"), &core.counters);
                    gathered.done.extend(failed);
                }
            }
        }
        for event in events.iter() {
            let Some(link) = core.links.get(event.token().0) else {
                continue;
            };
            let mut state = lock(&link.state);
            handle_event(
                core,
                &mut state,
                link.transport,
                event.is_writable(),
                &mut scratch,
                &mut gathered,
            );
        }
        if Instant::now() >= next_sweep {
            sweep(core, &mut gathered.done);
            next_sweep = Instant::now() + tick;
        }
        let n = gathered.done.len();
        if n > 0 {
            core.finish_all(std::mem::take(&mut gathered.done), n);
        }
        if !gathered.retries.is_empty() {
            lock(&core.retries).append(&mut gathered.retries);
            core.window.wake_sender(true);
        }
        if core.abort.load(Ordering::SeqCst)
            || (core.stop.load(Ordering::SeqCst) && core.window.count() == 0)
        {
            return;
        }
    }
}

/// Reads (and for streams, flushes) one link after an event.
fn handle_event(
    core: &Core,
    state: &mut LinkState,
    transport: DnsTransport,
    writable: bool,
    scratch: &mut [u8],
    gathered: &mut Gathered,
) {
    // Out of the state while it is read, so answers can be matched against
    // the state's table.
    let closed = match state.conn.take() {
        None => return,
        Some(Conn::Udp(udp)) => {
            let result = udp.receive(scratch, |message| {
                deliver(core, state, transport, message, gathered)
            });
            state.conn = Some(Conn::Udp(udp));
            result
        }
        Some(Conn::Stream(mut stream)) => {
            let mut result = Ok(());
            if writable {
                if let Err(e) = stream.flush() {
                    result = Err(format!("write failed: {e}"));
                }
            }
            if result.is_ok() {
                result = stream.read_available(scratch);
            }
            // Whole messages, even when the stream then ended.
            while let Some(message) = stream.next_message() {
                deliver(core, state, transport, message, gathered);
            }
            state.conn = Some(Conn::Stream(stream));
            result
        }
    };
    if let Err(reason) = closed {
        if let Some(conn) = state.conn.take() {
            conn.deregister(&core.registry);
            NetCounters::bump(&core.counters.connections_closed);
        }
        gathered
            .done
            .extend(state.close(transport, &reason, &core.counters));
    }
}

/// Matches `message` to the query waiting for it on `state`.
fn deliver(
    core: &Core,
    state: &mut LinkState,
    transport: DnsTransport,
    message: &[u8],
    gathered: &mut Gathered,
) {
    let Ok(pending) = state.inflight.answer(message) else {
        NetCounters::bump(&core.counters.unmatched_responses);
        return;
    };
    let truncated = message[2] & 0x02 != 0;
    if truncated && transport == DnsTransport::Udp && core.plan.tcp_retry {
        lock(&core.tally).tcp_retry();
        let mut pending = pending;
        pending.retried = true;
        gathered.retries.push(pending);
        return;
    }
    let answered = Answered {
        rcode: full_rcode_of(message),
        latency: pending.started.elapsed(),
    };
    let answer = core.keep().then(|| {
        let mut answer = message.to_vec();
        answer[..2].copy_from_slice(&pending.query[..2]);
        answer
    });
    gathered.done.push(Done {
        pending,
        result: Ok(answer),
        answered: Some(answered),
        transport,
    });
}
