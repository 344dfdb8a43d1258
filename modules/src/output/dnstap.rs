//! `output.dnstap`: writes DNS messages as dnstap in Frame Streams: to a
//! file (or standard output) that `dnstap-ldns -r`, `fstrm_dump` and
//! `input.dnstap` read, or to a collector's unix socket or TCP address
//! (the bidirectional handshake: READY, ACCEPT, START ... STOP, FINISH).
//!
//! A message read from dnstap keeps its type and socket protocol; any other
//! DNS message (from a capture, say) gets the type of `role` — a query
//! `ROLE_QUERY`, a response `ROLE_RESPONSE` — and UDP or TCP from its
//! flow. The side that sent a query is the query side: its source address
//! and port are `query_address` and `query_port`; for a response it is the
//! destination. A client's exchange ([`Object::Response`], from
//! `filter.dnscli`) is one `TOOL_RESPONSE` holding the query and the answer
//! (a `TOOL_QUERY` when there was no answer), with the made-up client
//! address of [`crate::synth`].

use crate::format::dnstap::{self, Dnstap, Message, CONTENT_TYPE, TYPE_MESSAGE};
use crate::format::framestream::reader::{FrameStreamReader, Next};
use crate::format::framestream::{self, Frame, ACCEPT, FINISH, READY, START, STOP};
use crate::format::stream::BufferedStream;
use crate::synth;
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::wire::Transport;
use dnsluice_core::{DnsMessage, Object, Origin, Receiver, Response, StageError, StageStats};
use dnsluice_options::{Choice, Options};
use prost::Message as _;
use std::io::{self, BufWriter, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

const MODULE: &str = "output.dnstap";

/// How long a collector may take to answer READY (ACCEPT) or STOP (FINISH).
const REPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whose view the messages are written from (the dnstap type's first word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Choice)]
pub enum DnstapRole {
    /// AUTH_QUERY / AUTH_RESPONSE: an authoritative server's traffic.
    Auth,
    /// RESOLVER_QUERY / RESOLVER_RESPONSE: a resolver's queries upstream.
    Resolver,
    /// CLIENT_QUERY / CLIENT_RESPONSE: a server's clients.
    Client,
    /// FORWARDER_QUERY / FORWARDER_RESPONSE.
    Forwarder,
    /// STUB_QUERY / STUB_RESPONSE.
    Stub,
    /// TOOL_QUERY / TOOL_RESPONSE: a tool's own queries.
    Tool,
}

/// Options of `output.dnstap`: one of `path`, `unix` and `tcp`.
#[derive(Debug, Options)]
pub struct DnstapOutputOptions {
    /// The Frame Streams file to write, or `-` for standard output.
    pub path: Option<PathBuf>,
    /// Send to the collector listening on this unix socket.
    pub unix: Option<PathBuf>,
    /// Send to the collector listening on this TCP address (`IP:PORT`).
    pub tcp: Option<String>,
    /// The type of messages that do not come from dnstap.
    #[option(default = DnstapRole::Client)]
    pub role: DnstapRole,
    /// The `identity` written in every frame (none when not given).
    pub identity: Option<String>,
    /// The `version` written in every frame.
    #[option(default = concat!("dnsluice ", env!("CARGO_PKG_VERSION")).to_string())]
    pub version: String,
}

/// Writes dnstap; see the module docs.
pub struct DnstapWriter {
    name: PathBuf,
    out: BufWriter<Box<dyn Write>>,
    /// The collector's replies, on a socket.
    replies: Option<FrameStreamReader>,
    role: DnstapRole,
    frame: Dnstap,
    encoded: Vec<u8>,
    received: u64,
    written: u64,
    not_dns: u64,
    no_address: u64,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        MODULE,
        "write DNS messages as dnstap (Frame Streams) to a file, stdout or a collector's socket",
        |o: DnstapOutputOptions| Ok(Box::new(DnstapWriter::create(o)?)),
    )
    .parallel(Parallel::FilePerThread)
}

impl DnstapWriter {
    /// Opens the file or connects to the collector, and writes START.
    pub fn create(o: DnstapOutputOptions) -> Result<Self, StageError> {
        let given = [o.path.is_some(), o.unix.is_some(), o.tcp.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(StageError::config(
                MODULE,
                "give exactly one of `path` (a file), `unix` and `tcp` (a collector to send to)",
            ));
        }
        let (name, sink, replies): (PathBuf, Box<dyn Write>, Option<Box<dyn Read + Send>>) =
            if let Some(path) = o.path {
                let sink: Box<dyn Write> = if path.as_os_str() == "-" {
                    Box::new(io::stdout())
                } else {
                    Box::new(std::fs::File::create(&path).map_err(|e| StageError::io(&path, e))?)
                };
                (path, sink, None)
            } else if let Some(path) = o.unix {
                let stream = UnixStream::connect(&path).map_err(|e| StageError::io(&path, e))?;
                let reader = stream.try_clone().map_err(|e| StageError::io(&path, e))?;
                reader
                    .set_read_timeout(Some(REPLY_WAIT))
                    .map_err(|e| StageError::io(&path, e))?;
                (path, Box::new(stream), Some(Box::new(reader)))
            } else {
                let tcp = o.tcp.unwrap_or_default();
                let addr: SocketAddr = tcp.parse().map_err(|e| {
                    StageError::option(MODULE, Some("tcp"), format!("{tcp:?}: {e}"))
                })?;
                let name = PathBuf::from(&tcp);
                let stream = TcpStream::connect(addr).map_err(|e| StageError::io(&name, e))?;
                let reader = stream.try_clone().map_err(|e| StageError::io(&name, e))?;
                reader
                    .set_read_timeout(Some(REPLY_WAIT))
                    .map_err(|e| StageError::io(&name, e))?;
                (name, Box::new(stream), Some(Box::new(reader)))
            };
        let mut writer = DnstapWriter {
            name,
            out: BufWriter::with_capacity(1 << 16, sink),
            replies: replies.map(|r| FrameStreamReader::new(BufferedStream::new(r, 4096))),
            role: o.role,
            frame: Dnstap {
                identity: o.identity.map(String::into_bytes),
                version: Some(o.version.into_bytes()),
                message: Some(Message::default()),
                r#type: TYPE_MESSAGE,
            },
            encoded: Vec::new(),
            received: 0,
            written: 0,
            not_dns: 0,
            no_address: 0,
        };
        if writer.replies.is_some() {
            writer.control(READY)?;
            writer.expect(ACCEPT)?;
        }
        writer.control(START)?;
        Ok(writer)
    }

    fn io_error(&self, e: io::Error) -> StageError {
        StageError::io(&self.name, e)
    }

    /// Writes a control frame (and sends it, on a socket).
    fn control(&mut self, kind: u32) -> Result<(), StageError> {
        self.encoded.clear();
        let content_type = (kind == READY || kind == START).then_some(CONTENT_TYPE);
        framestream::push_control(kind, content_type, &mut self.encoded);
        let result = self.out.write_all(&self.encoded);
        let result = result.and_then(|_| self.out.flush());
        result.map_err(|e| self.io_error(e))
    }

    /// Reads the collector's reply, which must be a `kind` control frame.
    fn expect(&mut self, kind: u32) -> Result<(), StageError> {
        let Some(replies) = &mut self.replies else {
            return Ok(());
        };
        let got = match replies.next_frame() {
            Ok(Next::Frame(Frame::Control(c)))
                if c.kind == kind && (kind != ACCEPT || c.names(CONTENT_TYPE)) =>
            {
                return Ok(());
            }
            Ok(Next::Frame(Frame::Control(c))) => format!("control frame {}", c.kind),
            Ok(Next::Frame(Frame::Data(_))) => "a data frame".to_string(),
            Ok(Next::Malformed(e)) => format!("a malformed frame ({})", e.kind()),
            Ok(Next::End { .. }) => "the connection closed".to_string(),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                format!("nothing within {} s", REPLY_WAIT.as_secs())
            }
            Err(e) => e.to_string(),
        };
        let want = if kind == ACCEPT {
            "ACCEPT of protobuf:dnstap.Dnstap"
        } else {
            "FINISH"
        };
        Err(StageError::format(
            &self.name,
            format!("the collector answered with {got}, not {want}"),
        ))
    }

    /// Fills the frame's message for a DNS message; `false` when it has no addresses.
    fn fill_dns(&mut self, m: &DnsMessage<'_>) -> bool {
        let p = m.packet.get();
        let (Some(src), Some(dst)) = (p.src(), p.dst()) else {
            return false;
        };
        let response = m.bytes.get(2).is_some_and(|b| b & 0x80 != 0);
        let (kind, protocol) = match m.origin {
            Origin::Dnstap {
                message_type,
                protocol,
            } => (i32::from(message_type), i32::from(protocol)),
            _ => {
                let base = self.role as i32 * 2 + 1;
                let protocol = match m.flow.transport {
                    Transport::Tcp => dnstap::PROTOCOL_TCP,
                    _ => dnstap::PROTOCOL_UDP,
                };
                (base + i32::from(response), protocol)
            }
        };
        let src = SocketAddr::new(src, m.flow.sport);
        let dst = SocketAddr::new(dst, m.flow.dport);
        let as_response = dnstap::is_response_type(kind);
        let (query_side, response_side) = if as_response { (dst, src) } else { (src, dst) };
        let msg = self.frame.message.get_or_insert_with(Message::default);
        set_peers(msg, kind, protocol, query_side, response_side);
        let (sec, nsec) = split_time(p.meta.ts_ns);
        let bytes = Some(m.bytes);
        if as_response {
            set(&mut msg.response_message, bytes);
            (msg.response_time_sec, msg.response_time_nsec) = (sec, nsec);
            set(&mut msg.query_message, None);
            (msg.query_time_sec, msg.query_time_nsec) = (None, None);
        } else {
            set(&mut msg.query_message, bytes);
            (msg.query_time_sec, msg.query_time_nsec) = (sec, nsec);
            set(&mut msg.response_message, None);
            (msg.response_time_sec, msg.response_time_nsec) = (None, None);
        }
        true
    }

    /// Fills the frame's message for a client's exchange.
    fn fill_response(&mut self, r: &Response<'_>) -> bool {
        let Some(server) = synth::server_address(r.server) else {
            return false;
        };
        let client = synth::client_address(r.client, &server);
        let protocol = match r.transport {
            "udp" => 1,
            "tcp" => 2,
            "tls" => 3,
            _ => 4,
        };
        let kind = if r.answer.is_some() { 12 } else { 11 };
        let msg = self.frame.message.get_or_insert_with(Message::default);
        set_peers(msg, kind, protocol, client, server);
        set(&mut msg.query_message, Some(r.query));
        (msg.query_time_sec, msg.query_time_nsec) = split_time(Some(r.sent_ns));
        set(&mut msg.response_message, r.answer);
        (msg.response_time_sec, msg.response_time_nsec) = match r.answer {
            Some(_) => split_time(Some(r.sent_ns.saturating_add(r.latency_ns as i64))),
            None => (None, None),
        };
        true
    }

    fn write_frame(&mut self) -> Result<(), StageError> {
        self.encoded.clear();
        self.encoded.extend_from_slice(&[0; 4]);
        if self.frame.encode(&mut self.encoded).is_err() {
            unreachable!("a Vec grows as needed");
        }
        let len = (self.encoded.len() - 4) as u32;
        self.encoded[..4].copy_from_slice(&len.to_be_bytes());
        let result = self.out.write_all(&self.encoded);
        result.map_err(|e| self.io_error(e))?;
        self.written += 1;
        Ok(())
    }
}

/// Sets a reused bytes field (keeping its buffer).
fn set(field: &mut Option<Vec<u8>>, value: Option<&[u8]>) {
    match value {
        Some(bytes) => {
            let buf = field.get_or_insert_with(Vec::new);
            buf.clear();
            buf.extend_from_slice(bytes);
        }
        None => *field = None,
    }
}

fn set_peers(msg: &mut Message, kind: i32, protocol: i32, query: SocketAddr, response: SocketAddr) {
    msg.r#type = kind;
    msg.socket_family = Some(match query.ip() {
        IpAddr::V4(_) => dnstap::FAMILY_INET,
        IpAddr::V6(_) => dnstap::FAMILY_INET6,
    });
    msg.socket_protocol = (protocol > 0).then_some(protocol);
    let q = msg.query_address.get_or_insert_with(Vec::new);
    dnstap::address_bytes(query.ip(), q);
    let r = msg.response_address.get_or_insert_with(Vec::new);
    dnstap::address_bytes(response.ip(), r);
    msg.query_port = Some(u32::from(query.port()));
    msg.response_port = Some(u32::from(response.port()));
}

/// Nanoseconds since the epoch as dnstap's seconds and nanoseconds.
fn split_time(ts_ns: Option<i64>) -> (Option<u64>, Option<u32>) {
    match ts_ns {
        Some(ns) if ns >= 0 => (
            Some((ns / 1_000_000_000) as u64),
            Some((ns % 1_000_000_000) as u32),
        ),
        _ => (None, None),
    }
}

impl Receiver for DnstapWriter {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.received += 1;
        let filled = match obj {
            Object::Dns(m) => self.fill_dns(m),
            Object::Response(r) => self.fill_response(r),
            _ => {
                self.not_dns += 1;
                return Ok(());
            }
        };
        if !filled {
            self.no_address += 1;
            return Ok(());
        }
        self.write_frame()
    }

    fn finish(&mut self) -> Result<(), StageError> {
        self.control(STOP)?;
        self.expect(FINISH)
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.received;
        stats.output = self.written;
        stats.add_error("not_dns_messages", self.not_dns);
        stats.add_error("no_address", self.no_address);
        out.push(stats);
    }
}
