//! `dnsluice-netem`: see the library docs and `--help`.

#![allow(unsafe_code)]

use dnsluice_netem::spec::Defaults;
use dnsluice_netem::{Emulator, Protocols};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const USAGE: &str = "\
usage: dnsluice-netem [SETTINGS] [--seed N] [--stats FILE] [--udp-only | --tcp-only] LINK...

Forwards UDP and TCP from each LINK's LISTEN address to its TARGET as a
wide-area network would: latency, jitter, loss and per-client rate limits.
For tests and benchmarks on loopback (the kernel here has no netem qdisc).

LINK:  LISTEN=TARGET[,key=value...]    e.g. 127.0.0.2:53=127.0.0.1:5300,loss=2%
SETTINGS (the defaults of every link; a LINK overrides them with key=value):
  --delay D       one-way latency, each way: 25ms, 0.1s, 500us (a bare number is ms)
  --delay-ms N    the same, in milliseconds
  --jitter D      up to D more per datagram, drawn uniformly (UDP may reorder;
                  TCP keeps its order)
  --loss P        loss each way: 1% or 0.01; --loss-up (queries) and
                  --loss-down (responses) for one way. A lost TCP chunk waits
                  for a retransmission (200 ms and a round trip) instead.
  --rate R        per-client limit on UDP queries, queries/s (client: the
                  source IP); --burst N above it at once (default R/20)
  --over drop|refused|tc   what queries over the limit get: nothing (default),
                  REFUSED, or an empty TC=1 answer (RRL's slip)
  --seed N        the random source of losses and jitter (default 1): the
                  same seed and the same traffic give the same losses
  --stats FILE    the counters by cause, per link, as JSON (and the kernel's
                  drops on the emulator's sockets, which must stay 0),
                  rewritten every 100 ms and at exit (SIGTERM, SIGINT)

The server sees each client's own loopback address (the emulator binds its
upstream sockets to it), so a server's own per-client limits still work.";

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dnsluice-netem: {e}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut defaults = Defaults::default();
    let mut protocols = Protocols {
        udp: true,
        tcp: true,
    };
    let (mut seed, mut stats_file, mut links) = (1u64, None, Vec::new());
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--udp-only" => protocols.tcp = false,
            "--tcp-only" => protocols.udp = false,
            flag if flag.starts_with("--") => {
                let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
                match &flag[2..] {
                    "seed" => {
                        seed = value
                            .parse()
                            .map_err(|_| format!("--seed: not a number: {value}"))?
                    }
                    "stats" => stats_file = Some(value),
                    key => defaults.set(key, &value).map_err(|e| format!("--{e}"))?,
                }
            }
            link => links.push(link.to_string()),
        }
    }
    if links.is_empty() {
        return Err("no LISTEN=TARGET given".into());
    }
    let links = links
        .iter()
        .map(|text| defaults.link(text))
        .collect::<Result<Vec<_>, _>>()?;
    for link in &links {
        eprintln!(
            "dnsluice-netem: {} -> {}: {:?} (+{:?}) up, {:?} (+{:?}) down, loss {}% / {}%{}",
            link.listen,
            link.target,
            link.up.delay,
            link.up.jitter,
            link.down.delay,
            link.down.jitter,
            link.up.loss * 100.0,
            link.down.loss * 100.0,
            link.limit.map_or(String::new(), |l| format!(
                ", limit {}/s per client (burst {}, over: {})",
                l.per_second,
                l.burst,
                l.over.name()
            )),
        );
    }
    raise_open_file_limit();
    let emulator = Emulator::start(links, protocols, seed).map_err(|e| e.to_string())?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGINT,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    while !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(path) = &stats_file {
            write_stats(path, &emulator)?;
        }
    }
    if let Some(path) = &stats_file {
        write_stats(path, &emulator)?;
    }
    eprint!("dnsluice-netem: {}", emulator.to_json());
    emulator.stop().map_err(|e| e.to_string())
}

/// Raises the soft limit on open files to the hard limit: the emulator keeps
/// a socket per client of each link.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; setrlimit only reads it.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Replaces `path` with the current counters (written aside, then renamed,
/// so a reader never sees half a file).
fn write_stats(path: &str, emulator: &Emulator) -> Result<(), String> {
    let partial = format!("{path}.partial");
    std::fs::write(&partial, emulator.to_json())
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| format!("--stats {path}: {e}"))
}
