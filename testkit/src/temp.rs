//! Where tests write: fresh paths under the target directory, so that a
//! test run leaves nothing in /tmp or in the source tree (`cargo clean`
//! removes it all).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The directory the running test binary was built into (`target/debug`):
/// the test binary itself sits in its `deps/`.
pub(crate) fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary is in a directory");
    deps.parent()
        .expect("the test binary is in target/PROFILE/deps")
        .to_path_buf()
}

/// A fresh path of this test process, `target/tmp/dnsluice-tests/PID-N-NAME`
/// (N counts the calls, so tests running at once never share one): nothing
/// is there yet, its parent exists. For a file:
///
/// ```no_run
/// let stats = testkit::temp_path("stats.json");
/// ```
///
/// For a directory of several files, [`temp_dir`].
pub fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // target/debug → target/tmp, where cargo's CARGO_TARGET_TMPDIR is.
    let dir = profile_dir()
        .parent()
        .expect("target/PROFILE is inside the target directory")
        .join("tmp/dnsluice-tests");
    std::fs::create_dir_all(&dir).expect("the tests' scratch directory");
    dir.join(format!("{}-{n}-{name}", std::process::id()))
}

/// A fresh empty directory of this test process: [`temp_path`], created.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = temp_path(name);
    std::fs::create_dir(&dir).expect("a fresh scratch directory");
    dir
}
