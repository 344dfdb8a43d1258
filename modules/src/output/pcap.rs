//! `output.pcap`: writes what reaches it as a capture file, classic pcap
//! (nanosecond or microsecond) or pcapng. A DNS message is written as the
//! packet that carried it (for a reassembled message: the packet that
//! completed it). Reading the file back gives the same bytes and timestamps
//! (the file layouts are in [`crate::format::write`], beside the reader's).

use crate::format::write;
use crate::synth;
use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::{
    CaptureMeta, LinkType, Object, Packet, Receiver, Response, StageError, StageStats,
};
use dnsluice_options::{Choice, Options};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

const MODULE: &str = "output.pcap";

/// Container format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Choice)]
pub enum Format {
    /// Classic pcap (one link type per file).
    Pcap,
    /// pcapng (one interface per link type met).
    Pcapng,
}

/// Timestamp resolution of a classic pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Choice)]
pub enum Resolution {
    /// Nanoseconds (magic 0xa1b23c4d): lossless.
    Ns,
    /// Microseconds (magic 0xa1b2c3d4): what the oldest tools read.
    Us,
}

/// Options of `output.pcap`.
#[derive(Debug, Options)]
pub struct PcapOutputOptions {
    /// The file to write, or `-` for standard output.
    pub path: PathBuf,
    /// The container format.
    #[option(default = Format::Pcap)]
    pub format: Format,
    /// The timestamp resolution of a classic pcap file.
    #[option(default = Resolution::Ns)]
    pub resolution: Resolution,
    /// The snapshot length written in the header(s).
    #[option(default = 262_144, range = 1..=0x7fff_ffff)]
    pub snaplen: u32,
}

/// Writes packets to a capture file.
pub struct PcapWriter {
    path: PathBuf,
    out: BufWriter<Box<dyn Write>>,
    format: Format,
    resolution: Resolution,
    snaplen: u32,
    /// Classic pcap: the file's link type, once the header is written.
    file_link: Option<LinkType>,
    /// pcapng: link types with an interface, by interface id.
    interfaces: Vec<LinkType>,
    written: u64,
    received: u64,
    other_link: u64,
    /// Objects with nothing to write (lines, records, responses from a
    /// client whose server has no address, such as a DoH URL with a host name).
    not_packets: u64,
    /// Where made-up packets are built.
    scratch: Vec<u8>,
    /// Timestamps the format cannot hold (before 1970, or past 2106 in classic pcap), clamped.
    bad_timestamps: u64,
}

impl PcapWriter {
    /// A writer for `options`.
    pub fn create(options: PcapOutputOptions) -> Result<Self, StageError> {
        let sink: Box<dyn Write> = if options.path.as_os_str() == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(File::create(&options.path).map_err(|e| StageError::io(&options.path, e))?)
        };
        let mut writer = PcapWriter {
            path: options.path,
            out: BufWriter::with_capacity(1 << 20, sink),
            format: options.format,
            resolution: options.resolution,
            snaplen: options.snaplen,
            file_link: None,
            interfaces: Vec::new(),
            written: 0,
            received: 0,
            other_link: 0,
            not_packets: 0,
            scratch: Vec::new(),
            bad_timestamps: 0,
        };
        if writer.format == Format::Pcapng {
            writer
                .section_header()
                .map_err(|e| StageError::io(&writer.path, e))?;
        }
        Ok(writer)
    }

    /// The file's timestamps are nanoseconds.
    fn nanos(&self) -> bool {
        self.resolution == Resolution::Ns
    }

    fn pcap_header(&mut self, link: LinkType) -> io::Result<()> {
        let nanos = self.nanos();
        write::pcap_file_header(&mut self.out, nanos, self.snaplen, link)
    }

    fn section_header(&mut self) -> io::Result<()> {
        write::pcapng_section_header(&mut self.out)
    }

    /// The pcapng interface for `link`, writing its IDB the first time.
    fn interface(&mut self, link: LinkType) -> io::Result<u32> {
        if let Some(id) = self.interfaces.iter().position(|l| *l == link) {
            return Ok(id as u32);
        }
        write::pcapng_interface(&mut self.out, link, self.snaplen)?;
        self.interfaces.push(link);
        Ok(self.interfaces.len() as u32 - 1)
    }

    fn write_packet(&mut self, p: &Packet<'_>) -> io::Result<bool> {
        let mut ts = p.meta.ts_ns.unwrap_or(0);
        // Classic pcap holds 32-bit unsigned seconds; pcapng 64-bit unsigned units.
        let limit = match self.format {
            Format::Pcap => write::PCAP_MAX_TS_NS,
            Format::Pcapng => i64::MAX,
        };
        if !(0..=limit).contains(&ts) {
            self.bad_timestamps += 1;
            ts = ts.clamp(0, limit);
        }
        let link = p.meta.link;
        match self.format {
            Format::Pcap => {
                let file_link = *match &self.file_link {
                    Some(link) => link,
                    None => {
                        self.pcap_header(link)?;
                        self.file_link.insert(link)
                    }
                };
                if file_link != link {
                    // A classic pcap file has one link type; say so rather than write a lie.
                    return Ok(false);
                }
                let nanos = self.nanos();
                write::pcap_record(&mut self.out, nanos, ts, link, p.data, p.meta.len)?;
            }
            Format::Pcapng => {
                let interface = self.interface(link)?;
                if p.meta.ts_ns.is_none() && interface == 0 && p.data.len() == p.meta.len as usize {
                    // No timestamp to write: a Simple Packet Block, as it came.
                    write::pcapng_simple_packet(&mut self.out, link, p.data, p.meta.len)?;
                } else {
                    write::pcapng_enhanced_packet(
                        &mut self.out,
                        interface,
                        ts as u64,
                        link,
                        p.data,
                        p.meta.len,
                    )?;
                }
            }
        }
        Ok(true)
    }
}

impl PcapWriter {
    fn write_counted(&mut self, packet: &Packet<'_>) -> Result<(), StageError> {
        match self.write_packet(packet) {
            Ok(true) => self.written += 1,
            Ok(false) => self.other_link += 1,
            Err(e) => return Err(StageError::io(&self.path, e)),
        }
        Ok(())
    }

    /// A client's exchange as two made-up UDP packets (see [`synth`]): the
    /// query when it was sent, the answer (if any) when it came.
    fn write_response(&mut self, r: &Response<'_>) -> Result<(), StageError> {
        let Some(server) = synth::server_address(r.server) else {
            self.not_packets += 1;
            return Ok(());
        };
        let client = synth::client_address(r.client, &server);
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut result = Ok(());
        let answer = r.answer.map(|a| (a, server, client, r.latency_ns as i64));
        for (payload, src, dst, after) in
            std::iter::once((r.query, client, server, 0)).chain(answer)
        {
            synth::udp_packet(src, dst, payload, &mut scratch);
            let meta = CaptureMeta {
                frame: self.written + 1,
                ts_ns: Some(r.sent_ns.saturating_add(after)),
                len: scratch.len() as u32,
                link: LinkType::RAW,
            };
            result = self.write_counted(&Packet::new(&scratch, meta));
            if result.is_err() {
                break;
            }
        }
        self.scratch = scratch;
        result
    }
}

impl Receiver for PcapWriter {
    fn receive(&mut self, obj: &mut Object<'_>) -> Result<(), StageError> {
        self.received += 1;
        if let Object::Response(r) = obj {
            return self.write_response(r);
        }
        let Some(packet) = obj.packet() else {
            self.not_packets += 1;
            return Ok(());
        };
        self.write_counted(packet)
    }

    fn finish(&mut self) -> Result<(), StageError> {
        if self.format == Format::Pcap && self.file_link.is_none() {
            // No packet at all: still a valid (empty) capture file.
            self.pcap_header(LinkType::EN10MB)
                .map_err(|e| StageError::io(&self.path, e))?;
        }
        self.out.flush().map_err(|e| StageError::io(&self.path, e))
    }

    fn stats(&self, out: &mut Vec<StageStats>) {
        let mut stats = StageStats::new(MODULE);
        stats.input = self.received;
        stats.output = self.written;
        stats.add_error("link_type_differs_from_file", self.other_link);
        stats.add_error("not_packets", self.not_packets);
        stats.add_error("timestamp_out_of_range", self.bad_timestamps);
        if self.other_link > 0 {
            stats.warnings.push(format!(
                "{}: {} packets of another link type than the file's were not written (a classic pcap file has one; use format = \"pcapng\")",
                self.path.display(),
                self.other_link
            ));
        }
        out.push(stats);
    }
}

/// The registry entry.
pub fn entry() -> ModuleEntry {
    ModuleEntry::output(
        MODULE,
        "write packets (or the packets carrying DNS messages) to a pcap or pcapng file",
        |o: PcapOutputOptions| Ok(Box::new(PcapWriter::create(o)?)),
    )
    .parallel(Parallel::FilePerThread)
}
