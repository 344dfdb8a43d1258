//! The libpcap capture handle behind `input.pcap` (cargo feature `libpcap`).

use super::{PcapOptions, MODULE};
use crate::input::until_stop::readable;
use dnsluice_core::stop;
use dnsluice_core::{
    CaptureMeta, LinkType, Object, Packet, Producer, Pulled, StageError, StageStats,
};
use pcap::{Activated, Capture, PacketHeader, Precision};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// How long a wait for a packet on a live interface lasts before a stop
/// (SIGINT, SIGTERM) and the watcher (a progress bar, interval statistics)
/// are looked at, ms.
const LIVE_WAIT_MS: i32 = 100;

/// A libpcap capture handle as a producer.
pub struct LibpcapInput {
    capture: Capture<dyn Activated>,
    read: Read,
    /// A live interface's descriptor, read without blocking: libpcap gives
    /// no packet when none is ready (or when what was ready was not for its
    /// filter), and the input waits on the descriptor itself, so that a stop
    /// or the watcher is not held up by a quiet interface.
    live: Option<RawFd>,
    /// The last live packet, copied out of libpcap's buffer into a reused
    /// one: a packet borrowed from libpcap could not leave the loop that
    /// waits (the loop calls libpcap again), a copy can.
    held: Vec<u8>,
    /// What the kernel counted for a live capture, as last asked (while
    /// waiting, every [`KERNEL_STATS_EVERY`] packets, and at the end).
    kernel: Option<pcap::Stat>,
}

/// Live packets between two looks at the kernel's counts.
const KERNEL_STATS_EVERY: u64 = 1 << 16;

/// What has been read, apart from the handle (so that a packet borrowed
/// from the handle can be counted here).
struct Read {
    source: String,
    link: LinkType,
    frames: u64,
    limit: u64,
    warnings: Vec<String>,
    done: bool,
}

/// What one look at a live interface found.
enum Live {
    /// A packet, its bytes in `held`.
    Packet(PacketHeader),
    /// None yet, and the watcher is due.
    Waiting,
    /// The end (libpcap has no more) or an error, already recorded.
    Over,
}

fn pcap_error(source: &str, e: pcap::Error) -> StageError {
    StageError::other(MODULE, format!("{source}: {e}"))
}

impl LibpcapInput {
    /// Opens the file or interface the options name.
    pub fn open(o: PcapOptions) -> Result<Self, StageError> {
        let mut live = None;
        let (source, mut capture): (String, Capture<dyn Activated>) = match (&o.path, &o.interface)
        {
            (Some(path), None) => {
                let name = path.display().to_string();
                let capture = Capture::from_file_with_precision(path, Precision::Nano)
                    .map_err(|e| pcap_error(&name, e))?;
                (name, capture.into())
            }
            (None, Some(interface)) => {
                let capture = Capture::from_device(interface.as_str())
                    .and_then(|c| {
                        let c = c
                            .promisc(o.promisc)
                            .snaplen(o.snaplen)
                            .precision(Precision::Nano)
                            .immediate_mode(true);
                        match o.buffer_kib {
                            0 => c,
                            kib => {
                                c.buffer_size((u64::from(kib) * 1024).min(i32::MAX as u64) as i32)
                            }
                        }
                        .open()
                    })
                    .and_then(|c| c.setnonblock())
                    .map_err(|e| pcap_error(interface, e))?;
                live = Some(capture.as_raw_fd());
                (interface.clone(), capture.into())
            }
            _ => {
                return Err(StageError::option(
                    MODULE,
                    None,
                    "give exactly one of `path` (a file) and `interface` (live capture)",
                ))
            }
        };
        if let Some(filter) = &o.filter {
            capture.filter(filter, true).map_err(|e| {
                StageError::option(MODULE, Some("filter"), format!("`{filter}`: {e}"))
            })?;
        }
        let link = LinkType(capture.get_datalink().0 as u32);
        Ok(LibpcapInput {
            capture,
            read: Read {
                source,
                link,
                frames: 0,
                limit: o.count,
                warnings: Vec::new(),
                done: false,
            },
            live,
            held: Vec::new(),
            kernel: None,
        })
    }
}

impl Read {
    /// The capture's metadata for a packet with this header, counted.
    fn next_meta(&mut self, header: &PacketHeader) -> CaptureMeta {
        self.frames += 1;
        let ts = header.ts;
        // With nanosecond precision libpcap puts nanoseconds in tv_usec.
        // (time_t and suseconds_t are i64 here but not on every platform.)
        #[allow(clippy::useless_conversion)]
        let ts_ns = nanoseconds(i64::from(ts.tv_sec), i64::from(ts.tv_usec));
        CaptureMeta {
            frame: self.frames,
            ts_ns,
            len: header.len.max(header.caplen),
            link: self.link,
        }
    }

    /// Ends the input on libpcap's error `e`: the end of a file, a file cut
    /// off (a warning: what was read is kept), or an error.
    fn end_on(&mut self, e: pcap::Error) -> Result<(), StageError> {
        self.done = true;
        match e {
            pcap::Error::NoMorePackets => Ok(()),
            e if e.to_string().contains("truncated") => {
                self.warnings.push(format!(
                    "{}: {e}; the {} complete records were read",
                    self.source, self.frames
                ));
                Ok(())
            }
            e => Err(pcap_error(&self.source, e)),
        }
    }

    fn at_end(&self) -> bool {
        self.done || (self.limit > 0 && self.frames >= self.limit)
    }
}

impl LibpcapInput {
    /// Waits for the next packet on the live interface `fd` and copies it
    /// into `held`; gives way when a stop is asked for (the end) or, with
    /// `due`, when the watcher is due.
    fn wait_live(&mut self, fd: RawFd, due: Option<&AtomicBool>) -> Result<Live, StageError> {
        if self.read.frames.is_multiple_of(KERNEL_STATS_EVERY) {
            self.note_kernel();
        }
        loop {
            match self.capture.next_packet() {
                Ok(packet) => {
                    self.held.clear();
                    self.held.extend_from_slice(packet.data);
                    return Ok(Live::Packet(*packet.header));
                }
                Err(pcap::Error::TimeoutExpired) => {
                    self.note_kernel();
                    if stop::requested().is_some() {
                        self.read.done = true;
                        return Ok(Live::Over);
                    }
                    if due.is_some_and(|due| due.load(Ordering::Relaxed)) {
                        return Ok(Live::Waiting);
                    }
                    readable(fd, LIVE_WAIT_MS);
                }
                Err(e) => return self.read.end_on(e).map(|()| Live::Over),
            }
        }
    }

    /// Asks the kernel what it counted for the live capture.
    fn note_kernel(&mut self) {
        if self.live.is_some() {
            self.kernel = self.capture.stats().ok().or(self.kernel);
        }
    }

    /// The packet `wait_live` copied into `held`, with its `header`.
    fn held_packet(&mut self, header: PacketHeader) -> Object<'_> {
        let meta = self.read.next_meta(&header);
        Object::Packet(Packet::new(&self.held, meta))
    }
}

impl Producer for LibpcapInput {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        if self.read.at_end() {
            self.note_kernel();
            return Ok(None);
        }
        if let Some(fd) = self.live {
            return Ok(match self.wait_live(fd, None)? {
                Live::Packet(header) => Some(self.held_packet(header)),
                Live::Waiting | Live::Over => None,
            });
        }
        match self.capture.next_packet() {
            Ok(packet) => {
                let header = *packet.header;
                let meta = self.read.next_meta(&header);
                Ok(Some(Object::Packet(Packet::new(packet.data, meta))))
            }
            Err(e) => self.read.end_on(e).map(|()| None),
        }
    }

    fn waits(&self) -> bool {
        self.live.is_some()
    }

    fn produce_or_wait(&mut self, due: &AtomicBool) -> Result<Pulled<'_>, StageError> {
        let Some(fd) = self.live else {
            return Ok(self.produce()?.map_or(Pulled::End, Pulled::Object));
        };
        if self.read.at_end() {
            self.note_kernel();
            return Ok(Pulled::End);
        }
        Ok(match self.wait_live(fd, Some(due))? {
            Live::Packet(header) => Pulled::Object(self.held_packet(header)),
            Live::Waiting => Pulled::Waiting,
            Live::Over => Pulled::End,
        })
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.read.frames;
        stats.output = self.read.frames;
        if !self.read.warnings.is_empty() {
            stats.add_error("truncated_file", 1);
        }
        stats.warnings = self.read.warnings.clone();
        if let Some(kernel) = self.kernel {
            // Matched by the filter, and lost before we could read them.
            stats.add_counter("received_by_filter", u64::from(kernel.received));
            stats.add_error("dropped_by_kernel", u64::from(kernel.dropped));
            stats.add_error("dropped_by_interface", u64::from(kernel.if_dropped));
            if kernel.dropped > 0 {
                stats.warnings.push(format!(
                    "{}: the kernel dropped {} packets the capture did not read in time \
                     (more buffer_kib, or a narrower filter)",
                    self.read.source, kernel.dropped
                ));
            }
        }
        out.push(stats);
    }
}

/// A time of `seconds` and `nanos` as nanoseconds since 1970; `None` past
/// what an `i64` holds (about the year 2262), as the native readers say of
/// such times. (A pcapng timestamp of 64 bits in microseconds reaches far
/// beyond: it overflowed here.)
fn nanoseconds(seconds: i64, nanos: i64) -> Option<i64> {
    seconds.checked_mul(1_000_000_000)?.checked_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::{epb, idb, shb};
    use dnsluice_core::Producer;
    use dnsluice_options::Options;

    #[test]
    fn times_past_what_nanoseconds_hold_are_none() {
        assert_eq!(
            nanoseconds(1_700_000_000, 5),
            Some(1_700_000_000_000_000_005)
        );
        assert_eq!(nanoseconds(72_057_594_037, 927_936), None);
        assert_eq!(nanoseconds(i64::MIN / 2, 0), None);
    }

    /// A pcapng packet whose microseconds since 1970 need 57 bits: libpcap
    /// hands it over with 72 billion seconds, which made nanoseconds
    /// overflow (a panic in a debug build, a wrapped time otherwise).
    #[test]
    fn a_packet_from_the_far_future_reads_without_a_time() {
        let mut file = shb(false);
        file.extend(idb(false, 1, 65535, &[]));
        let frame = [0u8; 60];
        file.extend(epb(false, 0, 1 << 56, &frame, 60));
        file.extend(epb(false, 0, 1_700_000_000_000_000, &frame, 60));
        let path = std::env::temp_dir().join(format!("far-future-{}.pcapng", std::process::id()));
        std::fs::write(&path, &file).unwrap();
        let options = PcapOptions::from_table(toml::Table::from_iter([(
            "path".to_string(),
            toml::Value::String(path.display().to_string()),
        )]))
        .unwrap();
        let mut input = LibpcapInput::open(options).unwrap();
        let mut times = Vec::new();
        while let Some(object) = input.produce().unwrap() {
            times.push(object.packet().map(|p| p.meta.ts_ns));
        }
        std::fs::remove_file(&path).unwrap();
        assert_eq!(times, [Some(None), Some(Some(1_700_000_000_000_000_000))]);
    }
}
