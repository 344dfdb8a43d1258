//! Many queries in flight on one UDP socket or one TCP/TLS stream, answers
//! matched by id and question (RFC 7766 §6.2.1.1 on streams).

use crate::error::NetError;
use crate::ids::QueryIds;
use crate::query::{first_question, question_eq};
use crate::stats::NetCounters;
use std::collections::HashMap;
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
    question: Vec<u8>,
    /// Where the answer goes.
    answer: oneshot::Sender<Vec<u8>>,
}

/// The queries in flight, by wire id.
struct Table {
    waiting: HashMap<u16, Waiter>,
    /// Where wire ids come from.
    ids: QueryIds,
    /// Set once the connection is unusable, with the reason.
    closed: Option<String>,
    /// Queries that timed out since the last answer (streams: a dead peer).
    timeouts_in_row: u32,
}

impl Table {
    fn next_id(&mut self) -> Option<u16> {
        let waiting = &self.waiting;
        self.ids.next(waiting.len(), |id| waiting.contains_key(&id))
    }
}

struct Shared {
    table: Mutex<Table>,
    counters: Arc<NetCounters>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding this lock cannot leave the table inconsistent
        // (every update is a single insert or remove), so a poisoned lock is used.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `message` to the query it answers, if one waits for it.
    fn deliver(&self, mut message: Vec<u8>) {
        if message.len() < 12 {
            NetCounters::bump(&self.counters.unmatched_responses);
            return;
        }
        let id = u16::from_be_bytes([message[0], message[1]]);
        let mut table = self.lock();
        let matches = match table.waiting.get(&id) {
            Some(waiter) => match first_question(&message) {
                Some(question) => question_eq(question, &waiter.question),
                // No question at all (FORMERR and friends): the id decides.
                None => u16::from_be_bytes([message[4], message[5]]) == 0,
            },
            None => false,
        };
        if !matches {
            NetCounters::bump(&self.counters.unmatched_responses);
            return;
        }
        if let Some(waiter) = table.waiting.remove(&id) {
            table.timeouts_in_row = 0;
            drop(table);
            message[..2].copy_from_slice(&waiter.original_id.to_be_bytes());
            // The asker may have timed out and gone; nothing to do then.
            let _ = waiter.answer.send(message);
        }
    }

    /// Marks the connection unusable and fails every query in flight.
    fn close(&self, reason: String) {
        let mut table = self.lock();
        if table.closed.is_none() {
            table.closed = Some(reason);
        }
        // Dropping the senders wakes every waiter with "closed".
        table.waiting.clear();
    }
}

enum Writer {
    Udp(Arc<UdpSocket>),
    Stream(tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>),
}

/// A multiplexed connection; see the module docs.
pub struct Mux {
    shared: Arc<Shared>,
    writer: Writer,
    reader: JoinHandle<()>,
}

impl Drop for Mux {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Stream timeouts in a row, with no answer between them, after which the
/// connection is taken for dead and closed (a black-holed peer).
const DEAD_AFTER_TIMEOUTS: u32 = 3;

/// Removes a query's waiter when its exchange ends without an answer (timeout,
/// error, or the future being dropped), unless the id was reused meanwhile.
struct Pending<'a> {
    shared: &'a Shared,
    id: u16,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let mut table = self.shared.lock();
        // Ours when its receiver is gone (this exchange's, dropped first).
        if table
            .waiting
            .get(&self.id)
            .is_some_and(|w| w.answer.is_closed())
        {
            table.waiting.remove(&self.id);
        }
    }
}

impl Mux {
    fn shared(counters: Arc<NetCounters>) -> Arc<Shared> {
        Arc::new(Shared {
            table: Mutex::new(Table {
                waiting: HashMap::new(),
                ids: QueryIds::default(),
                closed: None,
                timeouts_in_row: 0,
            }),
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
        let question = first_question(query).unwrap_or_default().to_vec();
        let original_id = u16::from_be_bytes([query[0], query[1]]);
        let (answer_tx, answer_rx) = oneshot::channel();
        let id = {
            let mut table = self.shared.lock();
            if let Some(reason) = &table.closed {
                return Err(NetError::Closed(reason.clone()));
            }
            let id = table
                .next_id()
                .ok_or(NetError::BadQuery("65535 queries already in flight"))?;
            table.waiting.insert(
                id,
                Waiter {
                    original_id,
                    question,
                    answer: answer_tx,
                },
            );
            id
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
                    if self.is_stream() || error.kind() != std::io::ErrorKind::ConnectionRefused {
                        self.shared.close(format!("write failed: {error}"));
                    }
                    // UDP: a refusal (ICMP) surfacing on send fails this query only.
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
            let mut table = self.shared.lock();
            table.timeouts_in_row += 1;
            if table.timeouts_in_row >= DEAD_AFTER_TIMEOUTS {
                drop(table);
                self.shared.close(format!(
                    "{DEAD_AFTER_TIMEOUTS} queries in a row got no answer: the connection looks dead"
                ));
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
                datagram[..2].copy_from_slice(&id.to_be_bytes());
                socket.send(&datagram).await.map(|_| ())
            }
            Writer::Stream(writer) => {
                let mut frame = Vec::with_capacity(query.len() + 2);
                frame.extend_from_slice(&(query.len() as u16).to_be_bytes());
                frame.extend_from_slice(query);
                frame[2..4].copy_from_slice(&id.to_be_bytes());
                let mut writer = writer.lock().await;
                writer.write_all(&frame).await?;
                writer.flush().await
            }
        }
    }
}

async fn read_datagrams(socket: Arc<UdpSocket>, shared: Arc<Shared>) {
    let mut buffer = vec![0u8; 65535];
    loop {
        match socket.recv(&mut buffer).await {
            Ok(len) => shared.deliver(buffer[..len].to_vec()),
            // ICMP port unreachable and friends surface here on a connected
            // socket: the queries in flight will time out; keep listening.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(e) => {
                shared.close(format!("receive failed: {e}"));
                return;
            }
        }
    }
}

async fn read_frames<R: AsyncRead + Unpin>(mut reader: R, shared: Arc<Shared>) {
    let reason = loop {
        let mut prefix = [0u8; 2];
        if let Err(e) = reader.read_exact(&mut prefix).await {
            break if e.kind() == std::io::ErrorKind::UnexpectedEof {
                "the server closed the connection".to_string()
            } else {
                format!("receive failed: {e}")
            };
        }
        let len = usize::from(u16::from_be_bytes(prefix));
        let mut message = vec![0u8; len];
        if let Err(e) = reader.read_exact(&mut message).await {
            break format!("the connection ended inside a message: {e}");
        }
        shared.deliver(message);
    };
    shared.close(reason);
}
