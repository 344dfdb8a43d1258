//! `dnsluice-delay-proxy`: a slow nameserver for tests. See the library docs.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "\
usage: dnsluice-delay-proxy [--delay-ms N] [--udp-only | --tcp-only] LISTEN=TARGET...

Forwards UDP and TCP from each LISTEN address to its TARGET, holding every
datagram and every TCP chunk N ms (default 20) in each direction.
Example: dnsluice-delay-proxy 127.0.0.2:53530=127.0.0.1:53530";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dnsluice-delay-proxy: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let (mut delay_ms, mut udp, mut tcp) = (20u64, true, true);
    let mut pairs = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--delay-ms" => {
                let value = args.next().ok_or("--delay-ms needs a value")?;
                delay_ms = value
                    .parse()
                    .map_err(|_| format!("--delay-ms: not a number: {value}"))?;
            }
            "--udp-only" => tcp = false,
            "--tcp-only" => udp = false,
            pair => {
                let (listen, target) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("expected LISTEN=TARGET, got `{pair}`"))?;
                let parse = |s: &str| s.parse::<SocketAddr>().map_err(|e| format!("`{s}`: {e}"));
                pairs.push((parse(listen)?, parse(target)?));
            }
        }
    }
    if pairs.is_empty() {
        return Err("no LISTEN=TARGET given".into());
    }
    let delay = Duration::from_millis(delay_ms);
    for (listen, target) in pairs {
        if udp {
            dnsluice_delay_proxy::spawn_udp(listen, target, delay)
                .map_err(|e| format!("udp {listen}: {e}"))?;
        }
        if tcp {
            dnsluice_delay_proxy::spawn_tcp(listen, target, delay)
                .map_err(|e| format!("tcp {listen}: {e}"))?;
        }
        eprintln!("dnsluice-delay-proxy: {listen} -> {target}, {delay_ms} ms each way");
    }
    loop {
        std::thread::park();
    }
}
