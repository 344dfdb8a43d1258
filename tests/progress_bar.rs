//! The progress bar of `run`, `replay`, `lookup` and `queue get`: drawn on stderr when it
//! is a terminal (here a pseudo-terminal made with openpty, 120 columns),
//! with the count, the rate, and — the total being known from the file —
//! the percentage and an ETA; erased before the summary, which is the same
//! as without a bar; and absent when stderr is a pipe.

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::{Command, Stdio};
use testkit::corpus::corpus_dir;
use testkit::{dnsluice, run_ok, temp_path};

/// Runs `command` with stderr on a new pseudo-terminal; everything written
/// to the terminal, and whether the command succeeded.
fn on_a_terminal(mut command: Command) -> (String, bool) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the integers we own and
    // reads the window size; no name buffer or termios is passed.
    let made = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(made, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    let (mut master, slave) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
    command
        .env("TERM", "xterm-256color")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave));
    let mut child = command.spawn().expect("dnsluice runs");
    // Our copy of the terminal's other end goes with the command, so reading
    // ends (EIO) when the child closes its own.
    drop(command);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let ok = child.wait().unwrap().success();
    (String::from_utf8_lossy(&seen).replace("\r\n", "\n"), ok)
}

/// Runs `command` with stderr on a pipe; stderr and whether it succeeded.
fn on_a_pipe(mut command: Command) -> (String, bool) {
    let out = command
        .stdin(Stdio::null())
        .output()
        .expect("dnsluice runs");
    (
        String::from_utf8_lossy(&out.stderr).to_string(),
        out.status.success(),
    )
}

/// What the terminal shows after the bar was erased: the text after the
/// last escape sequence (the erase), from the start of its line.
fn after_the_bar(screen: &str) -> &str {
    let last_escape = screen
        .rfind('\x1b')
        .expect("escape sequences on a terminal");
    let rest = &screen[last_escape..];
    // Past the sequence itself (ESC [ params letter).
    let end = rest
        .char_indices()
        .skip(2)
        .find(|(_, c)| c.is_ascii_alphabetic())
        .map_or(rest.len(), |(i, _)| i + 1);
    &rest[end..]
}

/// The words of a summary with every number replaced by `#` (counts are
/// the same in two runs, times and rates are not), without the lines'
/// `counts` labels (long lines wrap where their words end) and the pacing's
/// lateness counters (a paced run is late by chance, bar or not).
fn words(text: &str) -> Vec<String> {
    shape(text)
        .split_whitespace()
        .filter(|w| *w != "counts" && !w.starts_with("late=") && !w.starts_with("max_drift_us="))
        .map(str::to_string)
        .collect()
}

/// `text` with every number replaced by `#`.
fn shape(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

/// Checks one command: a bar with `unit`, a percentage and an ETA on a
/// terminal, the same summary after it as on a pipe, and nothing drawn on a pipe.
fn check(make: &dyn Fn() -> Command, unit: &str, summary_starts: &str) {
    let (screen, ok) = on_a_terminal(make());
    assert!(ok, "{screen}");
    for shown in [unit, "%", "ETA", "/s"] {
        assert!(
            screen.contains(shown),
            "no `{shown}` in the bar: {screen:?}"
        );
    }
    let bars = screen.matches(unit).count();
    assert!(bars >= 2, "the bar was drawn {bars} times: {screen:?}");
    let (piped, ok) = on_a_pipe(make());
    assert!(ok, "{piped}");
    assert!(
        !piped.contains('\x1b') && !piped.contains('\r') && !piped.contains("ETA"),
        "something drawn on a pipe: {piped:?}"
    );
    assert!(piped.starts_with(summary_starts), "{piped}");
    let summary = after_the_bar(&screen);
    assert_eq!(
        words(summary),
        words(&piped),
        "the summary after the bar is the pipe's: {summary:?}"
    );
}

#[test]
fn run_draws_a_bar_on_a_terminal_only() {
    let capture = corpus_dir().join("live_mini_en10mb.pcap");
    let pipeline = temp_path("paced.toml");
    // 1517 records at 1000/s: the bar is redrawn every 200 ms for 1.5 s.
    std::fs::write(
        &pipeline,
        format!(
            "[[stage]]\nmodule = \"input.mmpcap\"\npath = \"{}\"\n[[stage]]\nmodule = \"filter.timing\"\nrate = 1000.0\n\
             [[stage]]\nmodule = \"filter.layer\"\n[[stage]]\nmodule = \"output.null\"\n",
            capture.display()
        ),
    )
    .unwrap();
    let make = || {
        let mut c = dnsluice();
        c.arg("run").arg(&pipeline);
        c
    };
    check(&make, "records", "dnsluice: ");
}

#[test]
fn replay_draws_a_bar_on_a_terminal_only() {
    let capture = temp_path("progress.pcap");
    testkit::replay::write_capture(&capture, &testkit::replay::zone_queries(1500, 4));
    let server = testkit::servers().knot.to_string();
    let make = || {
        let mut c = dnsluice();
        c.arg("replay")
            .arg(&capture)
            .args(["--server", &server, "--rate", "1000"]);
        c
    };
    check(&make, "queries sent", "replay: 1500 sent, 1500 answered");
}

/// A file `name` of `count` names the test servers' zone answers.
fn zone_names(name: &str, count: u32) -> std::path::PathBuf {
    let zone = &testkit::servers().zone;
    let path = temp_path(name);
    let text: String = (0..count).map(|i| format!("n{i}.{zone}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn lookup_draws_a_bar_on_a_terminal_only() {
    let servers = testkit::servers();
    let names = zone_names("progress-names.txt", 600);
    // The slow nameserver (40 ms a query) with 4 workers of 4 queries each: about 1.5 s.
    let slow = servers.slow.to_string();
    let make = || {
        let mut c = dnsluice();
        c.args([
            "lookup",
            "A",
            "--name-servers",
            &slow,
            "--workers",
            "4",
            "--inflight-per-worker",
            "4",
        ])
        .arg("--input")
        .arg(&names)
        .args(["--output", "/dev/null"]);
        c
    };
    check(&make, "names", "lookup: 600 names");
}

#[test]
fn queue_get_draws_a_bar_on_a_terminal_only() {
    let servers = testkit::servers();
    let names = zone_names("progress-queue-names.txt", 600);
    let workers = std::cell::RefCell::new(Vec::new());
    let round = std::cell::Cell::new(0);
    // Each command reads a stream of its own while a worker fills it through
    // the slow nameserver (40 ms a query, 16 at once: about 1.5 s), in items
    // of 10 lines, so results come all along.
    let make = || {
        round.set(round.get() + 1);
        let stream = |kind: &str| {
            format!(
                "nats://{}/progress_{kind}_{}_{}",
                servers.nats,
                std::process::id(),
                round.get()
            )
        };
        let (work, results) = (stream("w"), stream("r"));
        run_ok(
            dnsluice()
                .args(["queue", "put", &work, "--batch", "10"])
                .arg(&names),
        );
        let worker = dnsluice()
            .args(["lookup", "A", "--name-servers", &servers.slow.to_string()])
            .args(["--workers", "4", "--inflight-per-worker", "4"])
            .args([
                "--input",
                &work,
                "--output",
                &results,
                "--idle-exit",
                "1",
                "-q",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        workers.borrow_mut().push(worker);
        let mut c = dnsluice();
        c.args([
            "queue",
            "get",
            &results,
            "--expect",
            "600",
            "-o",
            "/dev/null",
        ]);
        c
    };
    check(&make, "results", "dnsluice: got 600 results");
    for mut worker in workers.into_inner() {
        assert!(worker.wait().unwrap().success());
    }
}

/// A shard's bar counts the shard's names only, so it goes past half way
/// (its total was every line of the file, and it stopped at 50 %).
#[test]
fn a_shards_bar_counts_its_own_names() {
    let servers = testkit::servers();
    let names = zone_names("progress-shard-names.txt", 600);
    let mut command = dnsluice();
    command
        .args(["lookup", "A", "--name-servers", &servers.slow.to_string()])
        // 8 names at once of 40 ms each: about 1.5 s for the shard's 300.
        .args(["--inflight", "8", "--shard", "0/2"])
        .arg("--input")
        .arg(&names)
        .args(["--output", "/dev/null"]);
    let (screen, ok) = on_a_terminal(command);
    assert!(ok, "{screen}");
    let most = screen
        .split('%')
        .filter_map(|before| before.rsplit(' ').next()?.parse::<u32>().ok())
        .max();
    assert!(most.is_some_and(|p| p > 50), "{most:?}: {screen:?}");
}
