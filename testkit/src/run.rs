//! Running the dnsluice binary, and the check every test makes of a run
//! that must succeed.

use std::fmt::Display;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::temp::{profile_dir, temp_path};

/// The dnsluice binary cargo built for the tests running now
/// (`target/debug/dnsluice`, beside the tests' `deps/`).
pub fn dnsluice_exe() -> PathBuf {
    profile_dir().join(format!("dnsluice{}", std::env::consts::EXE_SUFFIX))
}

/// A command for the dnsluice binary: add arguments, then run it with
/// [`run_ok`] (or `.output()`, `.spawn()` when it may fail or runs alongside).
pub fn dnsluice() -> Command {
    // spawns: (dnsluice: built by this workspace)
    Command::new(dnsluice_exe())
}

/// Runs `command` to its end (stdout and stderr captured) and asserts that it
/// succeeded, with the command line and its stderr in the failure message.
/// Returns its output for the checks that follow.
#[track_caller]
pub fn run_ok(command: &mut Command) -> Output {
    let started = command.output();
    succeeded(command, started)
}

/// The output of `command`'s run, `started`, once asserted to have started
/// and succeeded ([`run_ok`]'s checks).
#[track_caller]
fn succeeded(command: &Command, started: std::io::Result<Output>) -> Output {
    let out = started.unwrap_or_else(|e| panic!("{command:?} could not start: {e}"));
    assert_ok(&out, format_args!("{command:?}"));
    out
}

/// [`run_ok`] for a file this test has just written and made executable.
/// A child of another test thread, forked while the file was still open for
/// writing and not yet started, holds that descriptor for an instant, and
/// the kernel refuses to run a file open for writing ("Text file busy");
/// this tries again, 10 ms apart, for up to a second.
#[track_caller]
pub fn run_new_executable_ok(command: &mut Command) -> Output {
    let mut tries = 0;
    loop {
        match command.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < BUSY_TRIES => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            started => return succeeded(command, started),
        }
    }
}

/// How often [`run_new_executable_ok`] tries a busy file again.
const BUSY_TRIES: u32 = 100;

/// Asserts that a run that has ended succeeded, for runs [`run_ok`] cannot
/// make (a spawned child's `wait_with_output`, [`run_pipeline`](crate::run_pipeline)):
/// the failure message gives `what` (the command, the case), the exit status and the run's stderr.
#[track_caller]
pub fn assert_ok(out: &Output, what: impl Display) {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sends SIGTERM to `child`, which must still be running, and waits for
/// it to end (at most 20 s, else the test fails): its status, and how long
/// it took after the signal.
#[track_caller]
pub fn sigterm_and_wait(child: &mut Child) -> (ExitStatus, Duration) {
    assert!(
        child.try_wait().expect("wait for a child").is_none(),
        "the run ended before the signal"
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let signalled = Instant::now();
    let status = wait_within(child, Duration::from_secs(20)).expect("the run did not stop");
    (status, signalled.elapsed())
}

/// Waits for `child` to end, at most `limit`: `None` when it was still
/// running then (it is killed and reaped).
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The number written just before `words` in `text` (`"(8192 objects
/// handed"`, words `" objects handed"`: 8192), failing the test when there
/// is none.
#[track_caller]
pub fn number_before(text: &str, words: &str) -> u64 {
    text.split(words)
        .next()
        .filter(|before| before.len() < text.len())
        .and_then(|before| {
            let start = before
                .rfind(|c: char| !c.is_ascii_digit())
                .map_or(0, |i| i + 1);
            before[start..].parse().ok()
        })
        .unwrap_or_else(|| panic!("no number before {words:?} in: {text}"))
}

/// Starts `command` (standard output discarded, standard error kept),
/// sends it SIGTERM once it has run for `after`, and waits for it to end
/// (failing the test if it is still running 30 s on, or if it ended
/// before the signal): how it ended, and what it wrote to stderr.
#[track_caller]
pub fn stopped_by_sigterm(command: &mut Command, after: Duration) -> (ExitStatus, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    std::thread::sleep(after);
    assert!(
        child.try_wait().expect("wait for a child").is_none(),
        "the run ended within {after:?}, before the signal (an input too short for this machine)"
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = wait_within(&mut child, Duration::from_secs(30)).expect("the run did not stop");
    let stderr = std::io::read_to_string(child.stderr.take().expect("stderr piped"))
        .expect("read the run's stderr");
    (status, stderr)
}

/// Runs `command` to its end as `Command::output` does (no standard
/// input; its output captured), but a run still going after `limit` is
/// killed and fails the test, with what it wrote to stderr: threads that
/// wait on each other fail a test instead of hanging the test run.
#[track_caller]
pub fn output_within(command: &mut Command, limit: Duration) -> Output {
    let (out_path, err_path) = (temp_path("stdout"), temp_path("stderr"));
    let file = |path: &PathBuf| File::create(path).expect("a file for the run's output");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(file(&out_path))
        .stderr(file(&err_path))
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} could not start: {e}"));
    let status = wait_within(&mut child, limit);
    let read = |path: &PathBuf| {
        let bytes = std::fs::read(path).unwrap_or_default();
        let _ = std::fs::remove_file(path);
        bytes
    };
    let (stdout, stderr) = (read(&out_path), read(&err_path));
    let Some(status) = status else {
        panic!(
            "{command:?} was still running after {limit:?} (killed): {}",
            String::from_utf8_lossy(&stderr)
        );
    };
    Output {
        status,
        stdout,
        stderr,
    }
}

/// What the kernel counted for a child process that ended ([`wait_usage`]).
#[derive(Debug)]
pub struct Usage {
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its user and system processor time, all threads.
    pub cpu: Duration,
    /// Its peak resident memory, in bytes.
    pub max_rss_bytes: u64,
    /// Its standard error, when piped.
    pub stderr: String,
}

/// Reads `child`'s standard error (when piped) to its end, then reaps it
/// with `wait4`, which gives the kernel's account of its resources (what
/// `Child::wait` does not).
pub fn wait_usage(mut child: Child) -> Usage {
    use std::io::Read;
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain out-parameters; `child` is consumed here and never
    // waited for through `Child` (so it is reaped once, by this call).
    #[allow(unsafe_code)]
    let (waited, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        (libc::wait4(pid, &mut status, 0, &mut usage), usage)
    };
    // Dropping a `Child` neither waits nor kills: it closes our ends of its pipes.
    drop(child);
    assert_eq!(waited, pid, "wait4 of {pid}");
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Usage {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        max_rss_bytes: usage.ru_maxrss as u64 * 1024,
        stderr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A script still open for writing somewhere (here: by this test, for
    /// 50 ms) cannot be started at first; the runner waits until it can.
    #[test]
    fn a_new_executable_runs_once_no_one_holds_it_open() {
        let dir = crate::temp_dir("busy-executable");
        let file = dir.join("tool.sh");
        std::fs::write(&file, "#!/bin/sh\necho ran \"$1\"\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        let held = File::options().append(true).open(&file).unwrap();
        // spawns: sh (the script's shebang line)
        let busy = Command::new(&file).output().map(|_| ()).unwrap_err();
        assert_eq!(busy.kind(), std::io::ErrorKind::ExecutableFileBusy);
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        // spawns: sh (the script's shebang line, once no one holds it open)
        let out = run_new_executable_ok(Command::new(&file).arg("once"));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran once\n");
        release.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
