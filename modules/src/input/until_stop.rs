//! Reading what may stay open and quiet (standard input, a named pipe, a
//! terminal): [`UntilStop`] ends its reads, as at the stream's end, once a
//! stop is asked for (SIGINT, SIGTERM) while it waits for bytes.
//!
//! The binary's signal handler has the kernel restart an interrupted call
//! (`SA_RESTART`: elsewhere an interrupted read or write would fail the
//! run), so a read of a quiet pipe would go on waiting after the signal,
//! until more bytes or the writer's end came: `replay -` fed by a program
//! that had nothing more to say ignored SIGTERM. Instead the descriptor is
//! watched ([`readable`]) a tenth of a second at a time, and the request
//! looked at in between. A regular file is never waited for, and is read
//! as it is.

use dnsluice_core::stop;
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;

/// How long one look at the descriptor waits, ms: a stop is seen within
/// this much of its request.
const LOOK_MS: i32 = 100;

/// A reader of a stream that ends (`Ok(0)`) once a stop is asked for
/// while it waits for bytes.
pub struct UntilStop<R> {
    inner: R,
    fd: RawFd,
    /// Whether a stop was asked for ([`asked`]; the tests' own flag).
    stopped: fn() -> bool,
}

/// Whether the run was asked to stop.
fn asked() -> bool {
    stop::requested().is_some()
}

impl<R: Read> Read for UntilStop<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while !readable(self.fd, LOOK_MS) {
            if (self.stopped)() {
                return Ok(0);
            }
        }
        self.inner.read(buf)
    }
}

/// An input opened for reading: read until a stop when it may wait.
pub struct Source {
    /// Its bytes.
    pub reader: Box<dyn Read + Send>,
    /// Its descriptor (valid while `reader` lives), to watch.
    pub fd: RawFd,
    /// What the file system says of it.
    pub metadata: io::Result<Metadata>,
}

impl Source {
    /// Whether it is a regular file (whose reads never wait).
    pub fn regular(&self) -> bool {
        self.metadata.as_ref().is_ok_and(|m| m.is_file())
    }
}

/// Opens `path` (`-`: standard input) for reading, until a stop when it
/// is not a regular file (a pipe, a terminal, a socket). Standard input is
/// read through a descriptor of its own, not through Rust's buffered
/// `Stdin`: bytes that buffer took would be there to read while the
/// descriptor's watch saw none.
pub fn open(path: &Path) -> io::Result<Source> {
    let file = if path.as_os_str() == "-" {
        File::from(io::stdin().as_fd().try_clone_to_owned()?)
    } else {
        File::open(path)?
    };
    let (fd, metadata) = (file.as_raw_fd(), file.metadata());
    let regular = metadata.as_ref().is_ok_and(|m| m.is_file());
    let reader: Box<dyn Read + Send> = if regular {
        Box::new(file)
    } else {
        Box::new(UntilStop {
            inner: file,
            fd,
            stopped: asked,
        })
    };
    Ok(Source {
        reader,
        fd,
        metadata,
    })
}

/// Whether `fd` has data (or its end, or an error, which the read then
/// says) within `ms` milliseconds. A signal that interrupts the wait is no
/// data: the caller looks at why, and waits again.
pub(crate) fn readable(fd: RawFd, ms: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own, for the duration of the call.
    let ready = unsafe { libc::poll(&mut poll, 1, ms) };
    ready > 0 || (ready < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A pipe: its reading end and its writing end.
    fn pipe() -> (std::fs::File, std::fs::File) {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills the two descriptors, which we then own.
        unsafe {
            use std::os::fd::FromRawFd;
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        }
    }

    /// This test's stop request (the run's would stop other tests' chains).
    static STOP: AtomicBool = AtomicBool::new(false);

    #[test]
    fn a_quiet_pipe_reads_as_ended_once_a_stop_is_asked_for_and_not_before() {
        let (read_end, mut write_end) = pipe();
        let fd = read_end.as_raw_fd();
        let mut reader = UntilStop {
            inner: read_end,
            fd,
            stopped: || STOP.load(Ordering::Relaxed),
        };
        write_end.write_all(b"abc").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(reader.read(&mut buf).unwrap(), 3);
        // Nothing more comes, the writer stays: a stop a little later ends
        // the read, which until then waited.
        let asked = std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(300));
            STOP.store(true, Ordering::Relaxed);
        });
        let started = std::time::Instant::now();
        assert_eq!(reader.read(&mut buf).unwrap(), 0);
        let waited = started.elapsed();
        asked.join().unwrap();
        assert!(
            waited >= std::time::Duration::from_millis(250),
            "{waited:?}"
        );
        assert!(waited < std::time::Duration::from_secs(2), "{waited:?}");
        drop(write_end);
    }

    #[test]
    fn a_regular_file_is_read_as_it_is() {
        let path = std::env::temp_dir().join(format!("until-stop-{}", std::process::id()));
        std::fs::write(&path, b"xyz").unwrap();
        let mut source = open(&path).unwrap();
        assert!(source.regular());
        let mut text = String::new();
        source.reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "xyz");
        std::fs::remove_file(&path).unwrap();
    }
}
