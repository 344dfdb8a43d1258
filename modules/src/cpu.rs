//! Processor time by thread: the threads a run starts (a split's threads
//! and its merger, a mapped capture's helper, a decompressing thread) note
//! as they end how much processor time they used ([`note_at_end`]), so that
//! the run's summary can say where the cores went (`dnsluice run` prints it
//! and `--stats-json` holds it): which thread limits a run on many cores is
//! then read off the summary, not guessed.
//!
//! The time is the kernel's per-thread clock (`CLOCK_THREAD_CPUTIME_ID`:
//! user and system time of that thread alone); [`process`] gives the
//! whole process's. Notes go to one list per
//! process, which the summary takes ([`take_noted`]); a process running
//! several chains at once sees them all in one list, and the list keeps the
//! last [`MAX_NOTED`] so that a long-lived process cannot grow it.

use std::sync::Mutex;
use std::time::Duration;

/// How many notes the list keeps (the latest).
pub const MAX_NOTED: usize = 4096;

/// The processor time one thread used, noted as it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadCpu {
    /// The thread's name (`split-0`, `split-merge`, `mmpcap-helper`, ...).
    pub name: String,
    /// User and system time of that thread.
    pub cpu: Duration,
}

static NOTED: Mutex<Vec<ThreadCpu>> = Mutex::new(Vec::new());

/// The calling thread's processor time so far (user and system); zero
/// where the platform has no per-thread clock.
pub fn this_thread() -> Duration {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec; the call writes only it.
        #[allow(unsafe_code)]
        let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0;
        if ok {
            let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
            let nanos = u32::try_from(now.tv_nsec).unwrap_or(0);
            return Duration::new(seconds, nanos);
        }
    }
    Duration::ZERO
}

/// The whole process's processor time so far (user and system, all its
/// threads: `getrusage`); zero where it cannot be read.
pub fn process() -> Duration {
    #[cfg(unix)]
    {
        // SAFETY: `usage` is a valid, writable rusage; the call writes only it.
        #[allow(unsafe_code)]
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            (libc::getrusage(libc::RUSAGE_SELF, &mut usage) == 0).then_some(usage)
        };
        if let Some(usage) = usage {
            let time = |t: libc::timeval| {
                Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
                    + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
            };
            return time(usage.ru_utime) + time(usage.ru_stime);
        }
    }
    Duration::ZERO
}

/// Notes the calling thread's name and processor time when dropped: made at
/// the start of a thread's work and kept to its end.
#[must_use = "the note is taken when this is dropped, at the end of the thread's work"]
pub struct NoteAtEnd(());

/// Notes the calling thread's processor time at the end of its work (when
/// the returned guard is dropped).
pub fn note_at_end() -> NoteAtEnd {
    NoteAtEnd(())
}

impl Drop for NoteAtEnd {
    fn drop(&mut self) {
        let name = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        note(ThreadCpu {
            name,
            cpu: this_thread(),
        });
    }
}

/// Adds `thread` to the list (dropping the oldest past [`MAX_NOTED`]).
pub fn note(thread: ThreadCpu) {
    let mut noted = dnsluice_core::sync::lock(&NOTED);
    if noted.len() >= MAX_NOTED {
        noted.remove(0);
    }
    noted.push(thread);
}

/// Takes every note made so far (the list is left empty).
pub fn take_noted() -> Vec<ThreadCpu> {
    std::mem::take(&mut *dnsluice_core::sync::lock(&NOTED))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins until this thread's clock has run `at_least`.
    fn burn(at_least: Duration) {
        let start = this_thread();
        while this_thread() - start < at_least {
            std::hint::black_box(0u64.wrapping_add(1));
        }
    }

    #[test]
    fn a_thread_notes_its_own_time_and_not_its_sleep() {
        let handle = std::thread::Builder::new()
            .name("cpu-test-busy".into())
            .spawn(|| {
                let _note = note_at_end();
                burn(Duration::from_millis(30));
                std::thread::sleep(Duration::from_millis(200));
            })
            .unwrap();
        handle.join().unwrap();
        let noted = take_noted();
        let ours: Vec<_> = noted.iter().filter(|t| t.name == "cpu-test-busy").collect();
        assert_eq!(ours.len(), 1, "{noted:?}");
        // Its burn, not its sleep: at least 30 ms, far less than the 230 ms it lived.
        assert!(ours[0].cpu >= Duration::from_millis(30), "{ours:?}");
        assert!(ours[0].cpu < Duration::from_millis(150), "{ours:?}");
    }
}
