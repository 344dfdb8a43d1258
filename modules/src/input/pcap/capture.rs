//! The libpcap capture handle behind `input.pcap` (cargo feature `libpcap`).

use super::{PcapOptions, MODULE};
use dnsluice_core::{CaptureMeta, LinkType, Object, Packet, Producer, StageError, StageStats};
use pcap::{Activated, Capture, Precision};

/// A libpcap capture handle as a producer.
pub struct LibpcapInput {
    source: String,
    capture: Capture<dyn Activated>,
    link: LinkType,
    frames: u64,
    limit: u64,
    warnings: Vec<String>,
    done: bool,
}

fn pcap_error(source: &str, e: pcap::Error) -> StageError {
    StageError::other(MODULE, format!("{source}: {e}"))
}

impl LibpcapInput {
    /// Opens the file or interface the options name.
    pub fn open(o: PcapOptions) -> Result<Self, StageError> {
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
                        c.promisc(o.promisc)
                            .snaplen(o.snaplen)
                            .precision(Precision::Nano)
                            .immediate_mode(true)
                            .open()
                    })
                    .map_err(|e| pcap_error(interface, e))?;
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
            source,
            capture,
            link,
            frames: 0,
            limit: o.count,
            warnings: Vec::new(),
            done: false,
        })
    }
}

impl Producer for LibpcapInput {
    fn produce(&mut self) -> Result<Option<Object<'_>>, StageError> {
        if self.done || (self.limit > 0 && self.frames >= self.limit) {
            return Ok(None);
        }
        match self.capture.next_packet() {
            Ok(packet) => {
                self.frames += 1;
                let ts = packet.header.ts;
                // With nanosecond precision libpcap puts nanoseconds in tv_usec.
                // (time_t and suseconds_t are i64 here but not on every platform.)
                #[allow(clippy::useless_conversion)]
                let ts_ns = i64::from(ts.tv_sec) * 1_000_000_000 + i64::from(ts.tv_usec);
                let meta = CaptureMeta {
                    frame: self.frames,
                    ts_ns: Some(ts_ns),
                    len: packet.header.len.max(packet.header.caplen),
                    link: self.link,
                };
                Ok(Some(Object::Packet(Packet::new(packet.data, meta))))
            }
            Err(pcap::Error::NoMorePackets) => {
                self.done = true;
                Ok(None)
            }
            Err(e) if e.to_string().contains("truncated") => {
                // A file cut off mid-record: keep what was read, say so, end cleanly.
                self.done = true;
                self.warnings.push(format!(
                    "{}: {e}; the {} complete records were read",
                    self.source, self.frames
                ));
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(pcap_error(&self.source, e))
            }
        }
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.frames;
        stats.output = self.frames;
        if !self.warnings.is_empty() {
            stats.add_error("truncated_file", 1);
        }
        stats.warnings = self.warnings.clone();
        out.push(stats);
    }
}
