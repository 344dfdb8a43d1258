//! A writer thread for `output.parquet`: the chain's thread fills one set
//! of column buffers while this thread encodes, compresses and writes the
//! one before (the row group's work: about half of what a row costs). One
//! set is handed over at a time (a rendezvous channel), so at most two sets
//! are buffered: memory stays bounded.

use super::columns::Columns;
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

/// The chain's side of the writer thread.
pub(super) struct Background {
    full: Option<SyncSender<Box<Columns>>>,
    empty: Receiver<Box<Columns>>,
    handle: Option<JoinHandle<Result<(), StageError>>>,
    /// What it wrote so far.
    pub written: Arc<Written>,
}

impl Background {
    /// Starts the thread, which owns `files` from now on.
    pub fn start(mut files: Files) -> Result<Background, StageError> {
        let (full, full_rx) = sync_channel::<Box<Columns>>(0);
        let (empty_tx, empty) = sync_channel::<Box<Columns>>(2);
        let written = Arc::new(Written::default());
        let counts = written.clone();
        let publish = move |files: &Files| {
            counts.files.store(files.files, Ordering::Relaxed);
            counts.rows.store(files.rows, Ordering::Relaxed);
            counts.row_groups.store(files.row_groups, Ordering::Relaxed);
        };
        publish(&files);
        let handle = std::thread::Builder::new()
            .name("parquet-writer".into())
            .spawn(move || {
                for mut columns in full_rx {
                    let result = files.write(&mut columns);
                    publish(&files);
                    result?;
                    let _ = empty_tx.try_send(columns);
                }
                files.close()
            })
            .map_err(|e| StageError::other(super::MODULE, format!("cannot start a thread: {e}")))?;
        Ok(Background {
            full: Some(full),
            empty,
            handle: Some(handle),
            written,
        })
    }

    /// Hands `columns`' rows to the thread and gives back a set to fill
    /// (waiting while the thread writes the set before). The thread's error,
    /// when it stopped on one.
    pub fn hand_over(&mut self, columns: Box<Columns>) -> Result<Box<Columns>, StageError> {
        let sent = self.full.as_ref().map(|tx| tx.send(columns));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.stop().err().unwrap_or_else(|| {
                StageError::other(super::MODULE, "the writer thread has stopped")
            }));
        }
        Ok(self.empty.try_recv().unwrap_or_default())
    }

    /// Lets the thread write what it has, close the file and end; its error.
    pub fn stop(&mut self) -> Result<(), StageError> {
        self.full = None;
        match self.handle.take().map(JoinHandle::join) {
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
