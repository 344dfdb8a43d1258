//! SIGINT and SIGTERM stop a run cleanly: the handler asks the drivers to
//! stop ([`dnsluice_core::stop`]), which then finish their chains as at the
//! end of the input, so every output is closed (a Parquet file gets its
//! footer). The first signal resets the handler of both: a second SIGINT
//! or SIGTERM, either after either, ends the process at once, as without a
//! handler.

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid value; the handler does only
        // an atomic store, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    dnsluice_core::stop::request(signal);
    for either in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: signal(2) is async-signal-safe; SIG_DFL is a valid handler.
        unsafe {
            libc::signal(either, libc::SIG_DFL);
        }
    }
}

/// The exit code of a run a signal stopped (128 + the signal, as a shell
/// reports a process the signal ended), when one did.
pub fn exit_code() -> Option<std::process::ExitCode> {
    dnsluice_core::stop::signal()
        .map(|s| std::process::ExitCode::from((128 + s).clamp(0, 255) as u8))
}
