//! Running the dnsluice binary, and the check every test makes of a run
//! that must succeed.

use std::fmt::Display;
use std::path::PathBuf;
use std::process::{Command, Output};

use crate::temp::profile_dir;

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
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?} could not start: {e}"));
    assert_ok(&out, format_args!("{command:?}"));
    out
}

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
