//! `input.dnstap`: dnstap, as DNS servers export their traffic (unbound's
//! `dnstap-enable`, knot's `mod-dnstap`, dnsdist's `DnstapLogAction`,
//! BIND, knot-resolver), read from a Frame Streams file (or standard input)
//! or collected from the servers themselves on a unix socket or TCP.
//!
//! Each dnstap message becomes a DNS message object ([`Object::Dns`]): the
//! wire message the frame's type says it carries, its addresses, ports,
//! transport and time, and the dnstap type and socket protocol in its
//! origin ([`Origin::Dnstap`]), in a made-up raw IP packet
//! ([`message`]), so every filter and output takes it as it takes a
//! message from a capture (`filter.select`, `output.json`, `output.pcap`,
//! Lua). A frame that is not usable is counted by kind (`errors` in the
//! summary), never fatal.
//!
//! [`Origin::Dnstap`]: dnsluice_core::Origin::Dnstap

mod listen;
pub mod message;

use crate::format::dnstap::{Dnstap, CONTENT_TYPE, TYPE_MESSAGE};
use crate::format::framestream::reader::{FrameStreamReader, Next};
use crate::format::framestream::{Frame, START, STOP};
use crate::format::stream::BufferedStream;
use crate::input::decompress::{decompressed, DecoderAt};
use dnsluice_core::dns::check;
use dnsluice_core::object::{CaptureMeta, DnsMessage, Flow, PacketRef};
use dnsluice_core::registry::ModuleEntry;
use dnsluice_core::wire::parse_layers;
use dnsluice_core::{LinkType, Object, Packet, Producer, StageError, StageStats};
use dnsluice_options::Options;
use listen::{Address, Collector, Event};
use message::Made;
use prost::Message as _;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

const MODULE: &str = "input.dnstap";

/// The longest a collector waits for a frame before it looks again whether
/// the run was stopped.
const STOP_LOOK: Duration = Duration::from_millis(100);

/// Options of `input.dnstap`: one of `path`, `unix` and `tcp`.
#[derive(Debug, Options)]
pub struct DnstapOptions {
    /// A Frame Streams file of dnstap (as knot's `mod-dnstap`,
    /// `fstrm_capture` or `dnstap-ldns -w` write it; compressed ones too),
    /// or `-` for standard input.
    pub path: Option<PathBuf>,
    /// Listen on this unix socket for servers to connect and send dnstap
    /// (bidirectional Frame Streams).
    pub unix: Option<PathBuf>,
    /// Listen on this TCP address (`IP:PORT`) for servers to connect.
    pub tcp: Option<String>,
    /// With `unix` or `tcp`: end once this many senders (connections that
    /// started a stream) have closed (0: never).
    #[option(default = 0)]
    pub connections: u64,
    /// With `unix` or `tcp`: end when nothing has come for this long (0s: never).
    #[option(default = Duration::ZERO)]
    pub idle_timeout: Duration,
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::input(
        MODULE,
        "read dnstap: a Frame Streams file or stdin, or collect from servers on a unix socket or TCP",
        |o: DnstapOptions| Ok(Box::new(DnstapInput::open(o)?)),
    )
}

enum Source {
    File(FrameStreamReader),
    Collector {
        collector: Collector,
        /// The payload of the frame being made into an object.
        data: Vec<u8>,
        open: u64,
        closed: u64,
        end_after: u64,
        idle: Option<Duration>,
        last: Instant,
    },
}

/// Makes frames into packets, and counts what it could not.
#[derive(Default)]
struct Decoder {
    /// The frame being decoded, reused (its buffers keep their capacity).
    decoded: Dnstap,
    /// The made-up packet of the current message.
    packet: Vec<u8>,
    /// Data frames read.
    frames: u64,
    /// Unusable frames and bytes, by kind.
    malformed: BTreeMap<&'static str, u64>,
}

impl Decoder {
    fn count(&mut self, kind: &'static str) {
        *self.malformed.entry(kind).or_insert(0) += 1;
    }

    /// Decodes a data frame's payload into the packet; `None` when
    /// unusable (counted).
    fn decode(&mut self, payload: &[u8]) -> Option<Made> {
        self.frames += 1;
        self.decoded.clear();
        if self.decoded.merge(payload).is_err() {
            self.count("bad_protobuf");
            return None;
        }
        if self.decoded.r#type != TYPE_MESSAGE {
            self.count("not_a_message_frame");
            return None;
        }
        let Some(m) = &self.decoded.message else {
            self.count("no_message");
            return None;
        };
        match message::make(m, &mut self.packet) {
            Ok(made) => Some(made),
            Err(kind) => {
                self.count(kind);
                None
            }
        }
    }
}

/// Reads dnstap frames and hands out DNS messages; see the module docs.
pub struct DnstapInput {
    name: PathBuf,
    source: Source,
    decoder: Decoder,
    messages: u64,
    warnings: Vec<String>,
    done: bool,
    /// A file's stream was started (START) and not yet stopped (STOP): a
    /// file that ends so was not finished by its writer.
    unstopped: bool,
}

impl DnstapInput {
    /// Opens the file, or starts listening.
    pub fn open(o: DnstapOptions) -> Result<Self, StageError> {
        let given = [o.path.is_some(), o.unix.is_some(), o.tcp.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(StageError::config(
                MODULE,
                "give exactly one of `path` (a file), `unix` (a socket to listen on) and `tcp` (an address to listen on)",
            ));
        }
        let idle = (!o.idle_timeout.is_zero()).then_some(o.idle_timeout);
        let (name, source) = if let Some(path) = o.path {
            (path.clone(), Source::File(open_file(&path)?))
        } else {
            let address = match (o.unix, o.tcp) {
                (Some(path), _) => Address::Unix(path),
                (_, Some(tcp)) => Address::Tcp(tcp.parse().map_err(|e| {
                    StageError::option(MODULE, Some("tcp"), format!("{tcp:?}: {e}"))
                })?),
                _ => unreachable!("one of them is given"),
            };
            let name = match &address {
                Address::Unix(path) => path.clone(),
                Address::Tcp(addr) => PathBuf::from(addr.to_string()),
            };
            let collector = listen::listen(&address).map_err(|e| StageError::io(&name, e))?;
            let source = Source::Collector {
                collector,
                data: Vec::new(),
                open: 0,
                closed: 0,
                end_after: o.connections,
                idle,
                last: Instant::now(),
            };
            (name, source)
        };
        Ok(DnstapInput {
            name,
            source,
            decoder: Decoder::default(),
            messages: 0,
            warnings: Vec::new(),
            done: false,
            unstopped: false,
        })
    }

    /// The next usable message (in the decoder's packet), from the file or
    /// the collector; `None` at the end.
    fn next_message(&mut self) -> Result<Option<Made>, StageError> {
        while !self.done {
            let made = match &mut self.source {
                Source::File(reader) => {
                    let offset = reader.offset();
                    let next = reader
                        .next_frame()
                        .map_err(|e| StageError::io(&self.name, e))?;
                    match next {
                        Next::Frame(Frame::Data(data)) => self.decoder.decode(data),
                        Next::Frame(Frame::Control(c)) => {
                            self.unstopped = match c.kind {
                                START => true,
                                STOP => false,
                                _ => self.unstopped,
                            };
                            if c.kind == START && !c.names(CONTENT_TYPE) {
                                self.decoder.count("unsupported_content_type");
                                self.warnings.push(format!(
                                    "{}: at byte offset {offset}: the stream is not dnstap (content type {:?})",
                                    self.name.display(),
                                    c.content_types()
                                        .map(String::from_utf8_lossy)
                                        .collect::<Vec<_>>()
                                ));
                            }
                            None
                        }
                        Next::Malformed(e) => {
                            self.decoder.count(e.kind());
                            None
                        }
                        Next::End { partial } => {
                            if partial > 0 {
                                self.decoder.count("truncated_frame");
                            }
                            // A compressed stream cut off says so even
                            // where the cut falls between two frames.
                            let what = match (reader.end_note(), partial) {
                                // Whole frames, but the writer never said it
                                // was done (killed, or still writing).
                                (None, 0) if self.unstopped => Some(
                                    "it ends without the STOP frame that ends a stream \
                                     (its writer was stopped before it finished, or is still writing)"
                                        .to_string(),
                                ),
                                (None, 0) => None,
                                (Some(note), 0) => Some(note),
                                (Some(note), _) => Some(format!(
                                    "{note}; the {partial} bytes of an incomplete frame before the cut were ignored"
                                )),
                                (None, _) => Some(format!(
                                    "the {partial} bytes from byte offset {offset} are an incomplete frame and were ignored"
                                )),
                            };
                            if let Some(what) = what {
                                self.warnings.push(format!(
                                    "{}: file cut off: {what}; the {} frames before it were read",
                                    self.name.display(),
                                    self.decoder.frames
                                ));
                            }
                            self.done = true;
                            None
                        }
                    }
                }
                Source::Collector {
                    collector,
                    data,
                    open,
                    closed,
                    end_after,
                    idle,
                    last,
                } => {
                    if *end_after > 0 && *closed >= *end_after {
                        self.done = true;
                        continue;
                    }
                    // Waited for in slices: a stop (SIGINT, SIGTERM) ends
                    // the wait, as the end of the input does.
                    let wait = match idle {
                        None => STOP_LOOK,
                        Some(idle) => idle.saturating_sub(last.elapsed()).min(STOP_LOOK),
                    };
                    let event = match collector.events.recv_timeout(wait) {
                        Ok(event) => Some(event),
                        Err(RecvTimeoutError::Timeout)
                            if dnsluice_core::stop::requested().is_none()
                                && idle.is_none_or(|idle| last.elapsed() < idle) =>
                        {
                            continue;
                        }
                        Err(_) => None,
                    };
                    *last = Instant::now();
                    match event {
                        None => {
                            self.done = true;
                            None
                        }
                        Some(Event::Opened) => {
                            *open += 1;
                            None
                        }
                        Some(Event::Closed) => {
                            *closed += 1;
                            None
                        }
                        Some(Event::Malformed(kind)) => {
                            self.decoder.count(kind);
                            None
                        }
                        Some(Event::Data(payload)) => {
                            *data = payload;
                            self.decoder.decode(data)
                        }
                    }
                }
            };
            if made.is_some() {
                self.messages += 1;
                return Ok(made);
            }
        }
        Ok(None)
    }
}

impl Producer for DnstapInput {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        let Some(made) = self.next_message()? else {
            return Ok(None);
        };
        let data = &self.decoder.packet[..];
        let meta = CaptureMeta {
            frame: self.decoder.frames,
            ts_ns: made.ts_ns,
            len: data.len() as u32,
            link: LinkType::RAW,
        };
        let mut packet = Packet::new(data, meta);
        packet.layers = parse_layers(LinkType::RAW, data, meta.len);
        let bytes = &data[made.at..made.at + made.len];
        Ok(Some(Object::Dns(DnsMessage {
            packet: PacketRef::Held(packet),
            bytes,
            checked: check(bytes, false),
            flow: Flow {
                sport: made.ports.0,
                dport: made.ports.1,
                transport: made.transport,
            },
            origin: made.origin,
        })))
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.decoder.frames;
        stats.output = self.messages;
        if let Source::Collector { open, .. } = &self.source {
            stats.add_counter("connections", *open);
        }
        for (kind, n) in &self.decoder.malformed {
            stats.add_error(kind, *n);
        }
        stats.warnings = self.warnings.clone();
        out.push(stats);
    }
}

fn open_file(path: &std::path::Path) -> Result<FrameStreamReader, StageError> {
    let source = super::until_stop::open(path).map_err(|e| StageError::io(path, e))?;
    let (reader, regular) = (source.reader, source.metadata.is_ok_and(|m| m.is_file()));
    let thread = super::decoder_thread::decoder_gets_a_thread();
    let opened = decompressed(reader, DecoderAt::choose(thread, regular))
        .map_err(|e| StageError::io(path, e))?;
    let stream = BufferedStream::new(opened.reader, 1 << 20)
        .decompressed_from(opened.compression, opened.cut_off);
    Ok(FrameStreamReader::new(stream))
}
