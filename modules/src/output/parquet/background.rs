//! Encoder threads and a writer thread for `output.parquet`: the chain's
//! thread fills one set of column buffers while encoder threads encode and
//! compress the sets before it (the row group's work: about half of what a
//! row costs) and the writer thread splices their row groups into the file
//! in the order they were filled.
//!
//! Sets are handed to the encoders in turn (set k to encoder k mod E), and
//! the writer takes the encoded groups in the same turn, so the file's rows
//! are in the chain's order. A set is handed over only to an idle encoder
//! (a rendezvous), so at most E + 1 sets are buffered: memory stays bounded.

use super::columns::Columns;
use super::encode::{self, EncodedRowGroup};
use super::files::Files;
use dnsluice_core::StageError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What the writer thread has written, for the statistics.
#[derive(Default)]
pub(super) struct Written {
    /// Files opened.
    pub files: AtomicU64,
    /// Rows written.
    pub rows: AtomicU64,
    /// Row groups written.
    pub row_groups: AtomicU64,
}

/// An encoder's result: a row group, or why it could not encode it.
type Encoded = Result<EncodedRowGroup, StageError>;

/// The chain's side of the encoder and writer threads.
pub(super) struct Background {
    /// One per encoder; dropped to let them end.
    encoders: Vec<SyncSender<Box<Columns>>>,
    /// The encoder the next set goes to.
    turn: usize,
    /// Emptied sets, to fill again.
    empty: Receiver<Box<Columns>>,
    encoder_threads: Vec<JoinHandle<()>>,
    writer: Option<JoinHandle<Result<(), StageError>>>,
    /// What it wrote so far.
    pub written: Arc<Written>,
}

impl Background {
    /// Starts `encoders` encoder threads and the writer thread, which owns
    /// `files` from now on.
    pub fn start(mut files: Files, encoders: usize) -> Result<Background, StageError> {
        let encoders = encoders.max(1);
        let (empty_tx, empty) = sync_channel::<Box<Columns>>(encoders + 1);
        let (schema, properties) = (files.descriptor(), files.properties());
        let mut senders = Vec::with_capacity(encoders);
        let mut results = Vec::with_capacity(encoders);
        let mut encoder_threads = Vec::with_capacity(encoders);
        for i in 0..encoders {
            let (tx, rx) = sync_channel::<Box<Columns>>(0);
            let (done_tx, done_rx) = sync_channel::<Encoded>(1);
            let (schema, properties, empty_tx) =
                (schema.clone(), properties.clone(), empty_tx.clone());
            let thread = spawn(&format!("parquet-enc{i}"), move || {
                for mut columns in rx {
                    let encoded = encode::encode(&mut columns, &schema, &properties)
                        .map_err(|e| StageError::other(super::MODULE, e.to_string()));
                    let _ = empty_tx.try_send(columns);
                    if done_tx.send(encoded).is_err() {
                        break;
                    }
                }
            })?;
            senders.push(tx);
            results.push(done_rx);
            encoder_threads.push(thread);
        }
        let written = Arc::new(Written::default());
        let counts = written.clone();
        let publish = move |files: &Files| {
            counts.files.store(files.files, Ordering::Relaxed);
            counts.rows.store(files.rows, Ordering::Relaxed);
            counts.row_groups.store(files.row_groups, Ordering::Relaxed);
        };
        publish(&files);
        let writer = spawn("parquet-writer", move || {
            // Groups in the encoders' turn; an encoder with nothing more
            // means no later group exists either.
            for done in results.iter().cycle() {
                let Ok(encoded) = done.recv() else {
                    break;
                };
                let result = encoded.and_then(|group| files.append(group));
                publish(&files);
                result?;
            }
            files.close()
        })?;
        Ok(Background {
            encoders: senders,
            turn: 0,
            empty,
            encoder_threads,
            writer: Some(writer),
            written,
        })
    }

    /// Hands `columns`' rows to the next encoder and gives back a set to
    /// fill (waiting while that encoder encodes its set before). The
    /// threads' error, when they stopped on one.
    pub fn hand_over(&mut self, columns: Box<Columns>) -> Result<Box<Columns>, StageError> {
        let sent = self.encoders.get(self.turn).map(|tx| tx.send(columns));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.stop().err().unwrap_or_else(|| {
                StageError::other(super::MODULE, "the writer thread has stopped")
            }));
        }
        self.turn = (self.turn + 1) % self.encoders.len();
        Ok(self.empty.try_recv().unwrap_or_default())
    }

    /// Lets the threads encode and write what they have, close the file
    /// and end; the writer's error.
    pub fn stop(&mut self) -> Result<(), StageError> {
        self.encoders.clear();
        for thread in self.encoder_threads.drain(..) {
            let _ = thread.join();
        }
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(StageError::other(
                super::MODULE,
                "the writer thread panicked",
            )),
            None => Ok(()),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Starts a named thread.
fn spawn<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, StageError> {
    dnsluice_core::thread::named(name)
        .spawn(work)
        .map_err(|e| StageError::other(super::MODULE, format!("cannot start a thread: {e}")))
}
