//! Many queries in flight on one UDP socket or one TCP/TLS stream, answers
//! matched by id and question (RFC 7766 §6.2.1.1 on streams). The table is
//! [`InFlight`], the framing [`FrameReader`] and [`push_frame`], the
//! dead-stream rule [`Liveness`]; this file moves bytes with tokio.

use crate::error::NetError;
use crate::health::{udp_error_is_transient, Liveness};
use crate::protocol::frame::{push_frame, FrameReader};
use crate::protocol::inflight::{Asked, InFlight};
use crate::protocol::question::{first_question, set_id};
use crate::stats::NetCounters;
use dnsluice_core::sync;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A query waiting for its answer.
struct Waiter {
    /// The query's own id, put back into the answer.
    original_id: u16,
    /// The query's first question (wire form), which the answer must repeat.
    question: Option<Vec<u8>>,
    /// Where the answer goes.
    answer: oneshot::Sender<Vec<u8>>,
}

impl Asked for Waiter {
    fn question(&self) -> Option<&[u8]> {
        self.question.as_deref()
    }
}

/// The queries in flight, and the connection's state.
#[derive(Default)]
struct Table {
    waiting: InFlight<Waiter>,
    /// Set once the connection is unusable, with the reason.
    closed: Option<String>,
    /// Timeouts since the last answer (streams: a dead peer).
    liveness: Liveness,
}

struct AnswerDispatch {
    table: Mutex<Table>,
    counters: Arc<NetCounters>,
}

impl AnswerDispatch {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding this lock cannot leave the table inconsistent
        // (every update is a single insert or remove), so a poisoned lock is used.
        sync::lock(&self.table)
    }

    /// Hands `message` to the query it answers, if one waits for it.
    fn deliver(&self, message: &[u8]) {
        let mut table = self.lock();
        let Ok(waiter) = table.waiting.answer(message) else {
            drop(table);
            NetCounters::bump(&self.counters.unmatched_responses);
            return;
        };
        table.liveness.answered();
        drop(table);
        let mut answer = message.to_vec();
        set_id(&mut answer, waiter.original_id);
        // The asker may have timed out and gone; nothing to do then.
        let _ = waiter.answer.send(answer);
    }

    /// Marks the connection unusable and fails every query in flight.
    fn close(&self, reason: String) {
        let mut table = self.lock();
        if table.closed.is_none() {
            table.closed = Some(reason);
        }
        // Dropping the senders wakes every waiter with "closed".
        table.waiting.drain().for_each(drop);
    }
}

enum Writer {
    Udp(Arc<UdpSocket>),
    Stream(tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>),
}

/// A multiplexed connection; see the module docs.
pub struct Mux {
    shared: Arc<AnswerDispatch>,
    writer: Writer,
    reader: JoinHandle<()>,
}

impl Drop for Mux {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Removes a query's waiter when its exchange ends without an answer (timeout,
/// error, or the future being dropped), unless the id was reused meanwhile.
struct Pending<'a> {
    shared: &'a AnswerDispatch,
    id: u16,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let mut table = self.shared.lock();
        // Ours when its receiver is gone (this exchange's, dropped first).
        if table
            .waiting
            .get(self.id)
            .is_some_and(|w| w.answer.is_closed())
        {
            table.waiting.remove(self.id);
        }
    }
}

/// Bytes asked of the stream per read.
const READ_CHUNK: usize = 16 * 1024;

impl Mux {
    fn shared(counters: Arc<NetCounters>) -> Arc<AnswerDispatch> {
        Arc::new(AnswerDispatch {
            table: Mutex::new(Table::default()),
            counters,
        })
    }

    /// Multiplexes queries over a connected UDP socket.
    pub fn udp(socket: UdpSocket, counters: Arc<NetCounters>) -> Mux {
        let shared = Self::shared(counters);
        let socket = Arc::new(socket);
        let reader = tokio::spawn(read_datagrams(socket.clone(), shared.clone()));
        Mux {
            shared,
            writer: Writer::Udp(socket),
            reader,
        }
    }

    /// Multiplexes queries over a byte stream (TCP or TLS), two-byte length framed.
    pub fn stream<S>(stream: S, counters: Arc<NetCounters>) -> Mux
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let shared = Self::shared(counters);
        let (read_half, write_half): (ReadHalf<S>, WriteHalf<S>) = tokio::io::split(stream);
        let reader = tokio::spawn(read_frames(read_half, shared.clone()));
        Mux {
            shared,
            writer: Writer::Stream(tokio::sync::Mutex::new(Box::new(write_half))),
            reader,
        }
    }

    /// Why the connection is unusable, once it is.
    pub fn closed_reason(&self) -> Option<String> {
        self.shared.lock().closed.clone()
    }

    /// Sends `query` and waits up to `timeout` for the answer.
    pub async fn exchange(&self, query: &[u8], timeout: Duration) -> Result<Vec<u8>, NetError> {
        let (answer_tx, answer_rx) = oneshot::channel();
        let waiter = Waiter {
            original_id: u16::from_be_bytes([query[0], query[1]]),
            question: first_question(query).map(<[u8]>::to_vec),
            answer: answer_tx,
        };
        let id = {
            let mut table = self.shared.lock();
            if let Some(reason) = &table.closed {
                return Err(NetError::Closed(reason.clone()));
            }
            table
                .waiting
                .insert(waiter, None)
                .map_err(|_| NetError::BadQuery("65535 queries already in flight"))?
        };
        // Declared before the future that owns the receiver, so it is dropped
        // after it (locals drop in reverse order), also when cancelled.
        let _pending = Pending {
            shared: &self.shared,
            id,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let answer = async {
            match tokio::time::timeout_at(deadline, self.write(id, query)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    // UDP: a refusal (ICMP) surfacing on send fails this query only.
                    if self.is_stream() || !udp_error_is_transient(&error) {
                        self.shared.close(format!("write failed: {error}"));
                    }
                    return Err(NetError::Send(error));
                }
                Err(_) => {
                    // A frame may be half written: the stream is out of step.
                    self.shared
                        .close("a write did not finish in time".to_string());
                    return Err(NetError::Timeout);
                }
            }
            NetCounters::bump(&self.shared.counters.queries_sent);
            match tokio::time::timeout_at(deadline, answer_rx).await {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(_)) => Err(NetError::Closed(
                    self.closed_reason()
                        .unwrap_or_else(|| "connection closed".to_string()),
                )),
                Err(_) => Err(NetError::Timeout),
            }
        };
        let result = answer.await;
        if matches!(result, Err(NetError::Timeout)) && self.is_stream() {
            let dead = self.shared.lock().liveness.timed_out();
            if dead {
                self.shared.close(Liveness::reason());
            }
        }
        result
    }

    fn is_stream(&self) -> bool {
        matches!(self.writer, Writer::Stream(_))
    }

    async fn write(&self, id: u16, query: &[u8]) -> std::io::Result<()> {
        match &self.writer {
            Writer::Udp(socket) => {
                let mut datagram = query.to_vec();
                set_id(&mut datagram, id);
                socket.send(&datagram).await.map(|_| ())
            }
            Writer::Stream(writer) => {
                let mut frame = Vec::new();
                push_frame(&mut frame, query, id)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                let mut writer = writer.lock().await;
                writer.write_all(&frame).await?;
                writer.flush().await
            }
        }
    }
}

async fn read_datagrams(socket: Arc<UdpSocket>, shared: Arc<AnswerDispatch>) {
    let mut buffer = vec![0u8; 65535];
    loop {
        match socket.recv(&mut buffer).await {
            Ok(len) => shared.deliver(&buffer[..len]),
            // ICMP port unreachable and friends surface here on a connected
            // socket: the queries in flight will time out; keep listening.
            Err(e) if udp_error_is_transient(&e) => continue,
            Err(e) => {
                shared.close(format!("receive failed: {e}"));
                return;
            }
        }
    }
}

async fn read_frames<R: AsyncRead + Unpin>(mut reader: R, shared: Arc<AnswerDispatch>) {
    let mut frames = FrameReader::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    let reason = loop {
        match reader.read(&mut chunk).await {
            Ok(0) if frames.is_mid_message() => {
                break "the connection ended inside a message".to_string()
            }
            Ok(0) => break "the server closed the connection".to_string(),
            Ok(n) => {
                frames.push(&chunk[..n]);
                while let Some(message) = frames.next_message() {
                    shared.deliver(message);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break format!("receive failed: {e}"),
        }
    };
    shared.close(reason);
}
