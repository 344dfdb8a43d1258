//! Named threads. Every thread the workspace starts is named through
//! [`named`] (a tokio runtime's `thread_name` within [`MAX_NAME`] too), so that the name the run's summary gives it (Rust's own copy)
//! and the one its metrics give it (`/proc/self/task/*/stat`, which Linux
//! cuts to [`MAX_NAME`] bytes) are the same: a longer name, cut, could
//! also fall together with another thread's (`parquet-encode10` and
//! `parquet-encode1`), and their processor time be added up as one.

/// The longest thread name Linux keeps whole (16 bytes with the NUL).
pub const MAX_NAME: usize = 15;

/// A thread builder named `name`, which must fit in [`MAX_NAME`] bytes.
///
/// # Panics
///
/// In debug builds (the tests), when `name` is longer: a name that would
/// be cut is a bug to fix where it is made, not something to hide.
pub fn named(name: impl Into<String>) -> std::thread::Builder {
    let name = name.into();
    debug_assert!(
        name.len() <= MAX_NAME,
        "thread name {name:?} is longer than Linux keeps ({MAX_NAME} bytes)"
    );
    std::thread::Builder::new().name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux's own word on the name: the kernel's copy, read back from
    /// `/proc`, is the whole name at the limit.
    #[test]
    fn a_name_at_the_limit_is_kept_whole_by_the_kernel() {
        let name = "a-fifteen-bytes";
        assert_eq!(name.len(), MAX_NAME);
        let kernel = named(name)
            .spawn(|| std::fs::read_to_string("/proc/thread-self/comm"))
            .unwrap()
            .join()
            .unwrap()
            .expect("/proc/thread-self/comm");
        assert_eq!(kernel.trim_end(), name);
    }

    #[test]
    #[should_panic(expected = "longer than Linux keeps")]
    #[cfg(debug_assertions)]
    fn a_longer_name_is_refused() {
        let _ = named("parquet-encode10");
    }
}
