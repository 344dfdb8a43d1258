//! `dnsluice lookup`: bulk resolution of names read one per line, ZDNS-style.

use crate::report::Progress;
use anyhow::{bail, Context, Result};
use clap::Args;
use dnsluice_modules::lookup::stage::LookupOptions;
use dnsluice_modules::lookup::{Finished, LookupEngine};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The flags of `dnsluice lookup`.
#[derive(Args, Debug)]
#[command(
    after_long_help = "Input: one name per line, or `name,nameserver` to pin a line to a \
nameserver. Output: exactly one JSON record per input name (ZDNS's shape: name, class, status, \
timestamp, data.answers/authorities/additionals/protocol/resolver, plus nameserver, attempts, \
duration_ms and error), in completion order.\n\n\
Examples:\n  \
  dnsluice lookup A --name-servers 127.0.0.1:53 --input names.txt\n  \
  dnsluice lookup MX --name-servers 9.9.9.9 --transport tls --input - < names.txt\n  \
  dnsluice lookup ALOOKUP --name-servers https://127.0.0.1:8443/dns-query --transport https --ca-file ca.pem"
)]
pub struct LookupArgs {
    /// Record type: A, AAAA, NS, MX, TXT, SOA, PTR, CNAME, SRV, CAA, HTTPS, ANY,
    /// TYPEnnn, or ALOOKUP (A and AAAA, following CNAMEs).
    #[arg(default_value = "A")]
    pub qtype: String,
    /// Nameservers for names not pinned to one, comma-separated: IP, IP:PORT,
    /// [IPv6]:PORT, or for https a URL https://HOST:PORT/PATH. Default: the
    /// nameservers of /etc/resolv.conf.
    #[arg(long, value_delimiter = ',', value_name = "NS")]
    pub name_servers: Vec<String>,
    /// udp, tcp, tls (DNS-over-TLS) or https (DNS-over-HTTPS).
    #[arg(long, default_value = "udp")]
    pub transport: String,
    /// Workers (each keeps its own connections).
    #[arg(long, default_value_t = 100)]
    pub threads: usize,
    /// Names each worker resolves at once, pipelined on its connection.
    #[arg(long, default_value_t = 1)]
    pub inflight: usize,
    /// Tries after the first, on timeout or failure.
    #[arg(long, default_value_t = 1)]
    pub retries: u32,
    /// Per query, in milliseconds.
    #[arg(long, default_value_t = 3000, value_name = "MS")]
    pub timeout: u64,
    /// sticky (per-nameserver priority queues + a global queue, connections
    /// kept), fifo (next line in order; re-dial on a change of nameserver) or
    /// random (a new connection per query).
    #[arg(long, default_value = "sticky")]
    pub scheduler: String,
    /// Sticky: wait this long for work on the home queue before stealing.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub steal_wait: u64,
    /// Certificates (tls, https).
    #[command(flatten)]
    pub tls: crate::tls_args::TlsArgs,
    /// DoH request method: post or get.
    #[arg(long, default_value = "post")]
    pub doh_method: String,
    /// Do not ask again over TCP when a UDP answer is truncated.
    #[arg(long)]
    pub no_tcp_fallback: bool,
    /// EDNS UDP payload size to advertise; 0 sends no EDNS record.
    #[arg(long, default_value_t = 1232, value_name = "BYTES")]
    pub udp_size: u16,
    /// Names to look up; `-` is standard input.
    #[arg(long, default_value = "-", value_name = "FILE")]
    pub input: PathBuf,
    /// Where the records go; `-` is standard output.
    #[arg(long, default_value = "-", value_name = "FILE")]
    pub output: PathBuf,
    /// Also write the counters as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// No summary on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The nameservers in `/etc/resolv.conf`, for when none are given.
fn system_nameservers() -> Vec<String> {
    std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver")).then(|| words.next().map(str::to_string))?
        })
        .collect()
}

fn open_input(path: &Path) -> Result<Box<dyn BufRead>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufReader::new(io::stdin())));
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
}

fn open_output(path: &Path) -> Result<Box<dyn Write>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufWriter::new(io::stdout())));
    }
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(BufWriter::with_capacity(1 << 16, file)))
}

/// Writes records, one per line, remembering the first write error.
struct RecordWriter {
    out: Box<dyn Write>,
    error: Option<io::Error>,
}

impl RecordWriter {
    fn write(&mut self, done: Finished) {
        if self.error.is_some() {
            return;
        }
        let result = self
            .out
            .write_all(done.json.as_bytes())
            .and_then(|()| self.out.write_all(b"\n"));
        if let Err(e) = result {
            self.error = Some(e);
        }
    }
}

/// Runs `dnsluice lookup`.
pub fn run(args: LookupArgs) -> Result<ExitCode> {
    let mut name_servers = args.name_servers.clone();
    if name_servers.is_empty() {
        name_servers = system_nameservers();
    }
    let options = LookupOptions {
        qtype: args.qtype.clone(),
        name_servers,
        transport: args.transport.clone(),
        threads: args.threads,
        inflight: args.inflight,
        retries: args.retries,
        timeout_ms: args.timeout,
        scheduler: args.scheduler.clone(),
        steal_wait_ms: args.steal_wait,
        ca_file: args.tls.ca_file.clone(),
        insecure: args.tls.insecure,
        tls_name: args.tls.tls_name.clone(),
        doh_method: args.doh_method.clone(),
        tcp_fallback: !args.no_tcp_fallback,
        recursion_desired: true,
        edns_udp_size: args.udp_size,
        dnssec_ok: false,
    };
    let config = options.to_config().map_err(|e| anyhow::anyhow!("{e}"))?;
    if config.nameservers.is_empty() {
        eprintln!(
            "dnsluice: warning: no nameservers (none given, none in /etc/resolv.conf): \
             only lines pinned to a nameserver can be resolved"
        );
    }
    let input = open_input(&args.input)?;
    let mut output = RecordWriter {
        out: open_output(&args.output)?,
        error: None,
    };
    let mut engine = LookupEngine::start(config)?;
    let started = Instant::now();
    let mut progress = Progress::counting(started, "names");
    for line in input.split(b'\n') {
        let line = line.with_context(|| format!("cannot read {}", args.input.display()))?;
        if output.error.is_some() {
            // The output is gone (a closed pipe, a full disk): stop resolving.
            break;
        }
        let text = String::from_utf8_lossy(&line);
        engine.submit(&text, &mut |done| output.write(done));
        while let Some(done) = engine.try_result() {
            output.write(done);
        }
        progress.update(engine.finished_count());
    }
    engine.close_input();
    while let Some(done) = engine.next_result() {
        output.write(done);
        progress.update(engine.finished_count());
    }
    progress.clear();
    let summary = engine.summary();
    engine.shutdown();
    if let Some(e) = output.error.or_else(|| output.out.flush().err()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Ok(ExitCode::SUCCESS);
        }
        bail!("cannot write {}: {e}", args.output.display());
    }
    if !args.quiet {
        eprint!("{}", summary.to_text());
    }
    if let Some(path) = &args.stats_json {
        std::fs::write(path, summary.to_json())
            .with_context(|| format!("cannot write stats to {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
