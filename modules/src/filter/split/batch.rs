//! A batch of objects crossing to a worker thread ([`Batch`]).
//!
//! The usual object at a split right after a capture input (where
//! `threads = N` puts it) is a packet whose layers are not parsed yet and
//! whose bytes lie in a shared region (the map of a mapped capture, a
//! block of a buffered reader's, `format::blocks`): it crosses as where its bytes are, its
//! capture facts and its place in the input, packed into 40 bytes (an
//! [`Entry`], written with one push: every line the split writes is one the
//! worker's core must fetch; a whole copied object is 280 bytes and a
//! buffer of its own). Any other
//! object is copied whole into one of the batch's reused [`OwnedObject`]s
//! (its bytes still by their place, when they lie in the region).

use crate::input::mmpcap::parts::PartRecord;
use crate::input::mmpcap::prefetch;
use dnsluice_core::shared::{RegionFinder, SharedRegion};
use dnsluice_core::{CaptureMeta, LinkType, Object, OwnedObject, Packet};

/// [`Entry::frame`] of an entry that stands for a whole copy.
const COPIED: u64 = u64::MAX;
/// [`Entry::ts_ns`] of a packet whose record has no capture time.
const NO_TIME: i64 = i64::MIN;

/// One object of a batch and its place in the input: a packet of the
/// batch's region, by where its bytes are and its capture facts (the link
/// type is the batch's), or ([`COPIED`] as its frame) the batch's copy at
/// index `at`.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The object's place in the input (the split's count before it): what
    /// an ordered merger merges the lanes' bytes by.
    key: u64,
    /// Offset of the packet's bytes in the region; a copy's index.
    at: u64,
    /// The packet's frame number, or [`COPIED`].
    frame: u64,
    /// Its capture time, or [`NO_TIME`].
    ts_ns: i64,
    /// Its captured bytes.
    caplen: u32,
    /// Its length on the wire.
    wire_len: u32,
}

impl Entry {
    /// The entry of an unparsed packet (its captured bytes `data`, its
    /// capture facts `meta`) of `region` on link `link`, placed at `key`,
    /// when its facts fit one (they do but for frame numbers and times no
    /// capture has: those are copied).
    #[inline(always)]
    fn of(
        data: &[u8],
        meta: &CaptureMeta,
        region: &SharedRegion,
        link: Option<LinkType>,
        key: u64,
    ) -> Option<Entry> {
        let span = region.span_of(data)?;
        let fits = Some(meta.link) == link && meta.frame != COPIED && meta.ts_ns != Some(NO_TIME);
        Some(Entry {
            key,
            at: span.at as u64,
            frame: meta.frame,
            ts_ns: meta.ts_ns.unwrap_or(NO_TIME),
            caplen: u32::try_from(span.len).ok()?,
            wire_len: meta.len,
        })
        .filter(|_| fits)
    }

    /// The entry of the batch's copy at index `at`, placed at `key`.
    fn copied(at: usize, key: u64) -> Entry {
        Entry {
            key,
            at: at as u64,
            frame: COPIED,
            ts_ns: NO_TIME,
            caplen: 0,
            wire_len: 0,
        }
    }

    /// The packet this entry stands for, its bytes read from `region`.
    #[inline]
    fn packet<'a>(&self, region: &'a [u8], link: LinkType) -> Packet<'a> {
        // In the region: an entry is made only of bytes found in it.
        let at = self.at as usize;
        let data = &region[at..at + self.caplen as usize];
        let meta = CaptureMeta {
            frame: self.frame,
            ts_ns: (self.ts_ns != NO_TIME).then_some(self.ts_ns),
            len: self.wire_len,
            link,
        };
        Packet::new(data, meta)
    }
}

/// Objects for one worker, handed over together.
#[derive(Default)]
pub(super) struct Batch {
    /// The objects and their places, in the order the split saw them.
    entries: Vec<Entry>,
    /// How far the split had got when it handed the batch over: the lane's
    /// next objects are placed at or after this.
    pub upto: u64,
    /// The whole copies; the first `copied` are this batch's.
    copies: Vec<OwnedObject>,
    copied: usize,
    /// The region the objects' bytes are read from, where they lie in it
    /// (kept alive by the batch while the worker reads them).
    region: Option<SharedRegion>,
    /// The link type of the packets held by their place.
    link: Option<LinkType>,
}

impl Batch {
    /// How many objects the batch holds.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch holds no object.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds `obj`, placed at `key` in the input. The first object of a
    /// batch sets its region (the one `regions` finds its bytes in, if any)
    /// and its link type; packets of that region and link are held by their
    /// place, others copied.
    #[inline(always)]
    pub fn push(&mut self, obj: &Object<'_>, key: u64, regions: &mut RegionFinder) {
        if self.entries.is_empty() {
            self.start(obj, regions);
        }
        match self.entry_of(obj, key) {
            Some(entry) => self.entries.push(entry),
            None => self.push_copy(obj, key),
        }
    }

    /// The entry that holds `obj`, placed at `key`, by its place in the
    /// batch's region, if one can.
    #[inline(always)]
    fn entry_of(&self, obj: &Object<'_>, key: u64) -> Option<Entry> {
        match (obj, &self.region) {
            (Object::Packet(packet), Some(region)) if packet.layers.is_unparsed() => {
                Entry::of(packet.data, &packet.meta, region, self.link, key)
            }
            _ => None,
        }
    }

    /// Adds the packet of `record` (a record of a mapped capture read in
    /// parts, its bytes at `record.at` in `region`, the map) by its place,
    /// without a packet made of it: true when it fits an entry (the batch's
    /// region and link, a frame number and time an entry holds); false,
    /// nothing added, otherwise: then [`Batch::push`].
    #[inline(always)]
    pub fn push_record(&mut self, record: &PartRecord, region: &SharedRegion) -> bool {
        let meta = record.meta();
        if self.entries.is_empty() {
            self.region = Some(region.clone());
            self.link = Some(meta.link);
        }
        let caplen = u32::try_from(record.info.caplen).ok();
        let fits = self.region.as_ref().is_some_and(|own| own.is(region))
            && self.link == Some(meta.link)
            && meta.frame != COPIED
            && meta.ts_ns != Some(NO_TIME);
        match caplen {
            Some(caplen) if fits => {
                self.entries.push(Entry {
                    key: record.key,
                    at: record.at as u64,
                    frame: meta.frame,
                    ts_ns: meta.ts_ns.unwrap_or(NO_TIME),
                    caplen,
                    wire_len: meta.len,
                });
                true
            }
            _ => false,
        }
    }

    /// Adds `obj`, placed at `key`, when that needs no call: the batch has
    /// begun, `obj` is a packet of its region and link held by its place,
    /// and the entries have room. False (nothing added) otherwise: then
    /// [`Batch::push`].
    #[inline(always)]
    pub fn try_push(&mut self, obj: &Object<'_>, key: u64) -> bool {
        match obj {
            Object::Packet(packet) if packet.layers.is_unparsed() => {
                self.try_push_read(packet.data, &packet.meta, key)
            }
            _ => false,
        }
    }

    /// [`Batch::try_push`] for a packet just read, not made yet (see
    /// [`Entry::of`]).
    #[inline(always)]
    pub fn try_push_read(&mut self, data: &[u8], meta: &CaptureMeta, key: u64) -> bool {
        if self.entries.is_empty() || self.entries.len() == self.entries.capacity() {
            return false;
        }
        let Some(region) = &self.region else {
            return false;
        };
        match Entry::of(data, meta, region, self.link, key) {
            Some(entry) => {
                self.entries.push(entry);
                true
            }
            None => false,
        }
    }

    /// Whether `obj` is a packet whose bytes lie in a shared region other
    /// than the one this batch's packets lie in (a buffered reader's next
    /// block): it would cross as a whole copy, so the batch is handed over
    /// first and the packet begins the next.
    pub fn is_left_behind_by(&self, obj: &Object<'_>, regions: &mut RegionFinder) -> bool {
        let (Some(own), Some(packet)) = (&self.region, obj.packet()) else {
            return false;
        };
        !self.entries.is_empty()
            && regions
                .region_of(packet.data)
                .is_some_and(|found| !found.is(own))
    }

    /// Takes the region and link type of a batch's first object.
    #[inline(never)]
    fn start(&mut self, obj: &Object<'_>, regions: &mut RegionFinder) {
        let packet = obj.packet();
        self.region = packet.and_then(|p| regions.region_of(p.data)).cloned();
        self.link = packet.map(|p| p.meta.link);
    }

    /// Adds a whole copy of `obj` (its bytes by their place when they lie
    /// in the batch's region).
    #[cold]
    #[inline(never)]
    fn push_copy(&mut self, obj: &Object<'_>, key: u64) {
        if self.copied == self.copies.len() {
            self.copies.push(OwnedObject::default());
        }
        self.copies[self.copied].copy_from_in(obj, self.region.as_ref());
        self.entries.push(Entry::copied(self.copied, key));
        self.copied += 1;
    }

    /// Hands each object and its place in the input to `each`, in order,
    /// until it fails; then empties the batch (its buffers kept for the next).
    pub fn drain<E>(
        &mut self,
        mut each: impl FnMut(u64, &mut Object<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let bytes = self
            .region
            .as_ref()
            .map(SharedRegion::bytes)
            .unwrap_or_default();
        let link = self.link.unwrap_or(LinkType(0));
        let mut result = Ok(());
        for (index, entry) in self.entries.iter().enumerate() {
            if let Some(ahead) = self.entries.get(index + PREFETCH_AHEAD) {
                prefetch_entry(ahead, bytes);
            }
            let mut obj = match entry.frame {
                COPIED => self.copies[entry.at as usize].view_in(bytes),
                _ => Object::Packet(entry.packet(bytes, link)),
            };
            result = each(entry.key, &mut obj);
            if result.is_err() {
                break;
            }
        }
        self.entries.clear();
        self.copied = 0;
        result
    }
}

/// How many entries ahead [`Batch::drain`] asks for a packet's bytes. The
/// thread that handed the batch over read them last, on another core (on
/// this VM a cache line's round trip between the cores takes up to ~390 ns;
/// see `benches/threads.sh`), so they are asked for while the chain runs
/// the packets before: 3 % of TCP's CPU on 2 threads (`docs/benchmarks.md`).
const PREFETCH_AHEAD: usize = 8;

/// Asks for the first two cache lines of the packet `entry` holds by its
/// place in `region` (nothing for a copy: its bytes are the batch's own).
#[inline(always)]
fn prefetch_entry(entry: &Entry, region: &[u8]) {
    if entry.frame != COPIED {
        let at = entry.at as usize;
        prefetch(region, at);
        prefetch(region, at + 64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::shared::{publish, SharedBytes};
    use dnsluice_core::wire::Network;
    use dnsluice_core::{Text, TextKind};
    use std::sync::Arc;

    fn meta(frame: u64) -> CaptureMeta {
        CaptureMeta {
            frame,
            ts_ns: Some(frame as i64 * 10),
            len: 60,
            link: LinkType(1),
        }
    }

    /// A mapped region of the bytes 0 to 255, published for batches to find.
    fn region() -> SharedBytes {
        let shared: SharedBytes = Arc::new((0u8..=255).collect::<Vec<u8>>());
        publish(&shared);
        shared
    }

    /// A packet of `bytes` whose layers a stage before has parsed.
    fn parsed(bytes: &[u8]) -> Packet<'_> {
        let mut parsed = Packet::new(bytes, meta(3));
        parsed.layers.network = Network::Ipv4;
        parsed.layers.sport = 53;
        parsed
    }

    /// Capture facts of frame 4 on another link than the others'.
    fn cooked() -> CaptureMeta {
        CaptureMeta {
            link: LinkType::LINUX_SLL,
            ..meta(4)
        }
    }

    /// A line of text (not a packet).
    fn line() -> Object<'static> {
        Object::Text(Text {
            kind: TextKind::Line,
            number: 7,
            text: "seven",
        })
    }

    /// Packets of a region (one without a capture time, one with its layers
    /// parsed, one on another link, one at a time no entry can hold), a
    /// packet from elsewhere and a line come out in order, each as it went
    /// in, the region's bytes at their own addresses (not copied); only the
    /// first two cross as entries. Led by the line, every object is copied
    /// and comes out the same.
    #[test]
    fn a_batch_gives_back_every_object_in_order() {
        let shared = region();
        let bytes = (*shared).as_ref();
        let elsewhere = vec![9u8; 20];
        let untimed = CaptureMeta {
            ts_ns: None,
            ..meta(2)
        };
        let ancient = CaptureMeta {
            ts_ns: Some(NO_TIME),
            ..meta(5)
        };
        let line = line();
        let packets = [
            Object::Packet(Packet::new(&bytes[10..40], meta(1))),
            Object::Packet(Packet::new(&bytes[40..100], untimed)),
            Object::Packet(parsed(&bytes[100..150])),
            Object::Packet(Packet::new(&bytes[150..160], cooked())),
            Object::Packet(Packet::new(&bytes[160..170], ancient)),
            Object::Packet(Packet::new(&elsewhere, meta(6))),
        ];
        let led_by_packets: Vec<Object<'_>> = packets.iter().copied().chain([line]).collect();
        let led_by_a_line: Vec<Object<'_>> = [line].into_iter().chain(packets).collect();
        let mut batch = Batch::default();
        let mut regions = RegionFinder::default();
        for (round, (objects, copies)) in [
            (&led_by_packets, 5),
            (&led_by_a_line, 7),
            (&led_by_packets, 5),
        ]
        .into_iter()
        .enumerate()
        {
            for (key, obj) in objects.iter().enumerate() {
                batch.push(obj, 100 * round as u64 + key as u64, &mut regions);
            }
            assert_eq!(batch.len(), 7);
            assert_eq!(batch.copied, copies, "round {round}");
            let mut seen = Vec::new();
            let mut keys = Vec::new();
            batch
                .drain(|key, obj| {
                    keys.push(key);
                    seen.push(format!("{obj:?}"));
                    // Led by a packet, the batch reads the region's bytes where they lie.
                    if let Some(packet) = obj.packet().filter(|p| p.meta.frame <= 5 && copies == 5)
                    {
                        let at =
                            (packet.data.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
                        assert!(at < bytes.len(), "round {round}: copied");
                    }
                    Ok::<_, ()>(())
                })
                .unwrap();
            let expected: Vec<String> = objects.iter().map(|o| format!("{o:?}")).collect();
            assert_eq!(seen, expected, "round {round}");
            let placed: Vec<u64> = (0..7).map(|k| 100 * round as u64 + k).collect();
            assert_eq!(keys, placed, "round {round}: each object's place");
            assert!(batch.is_empty());
        }
    }

    /// The quick push takes a packet only when an entry holds it, the batch
    /// has begun (its region known) and its entries have room without
    /// growing; anything else it leaves, adding nothing, for `push`.
    #[test]
    fn a_quick_push_takes_only_what_an_entry_holds() {
        let shared = region();
        let bytes = (*shared).as_ref();
        let elsewhere = vec![9u8; 20];
        let good = |frame: u64| Object::Packet(Packet::new(&bytes[10..40], meta(frame)));
        let mut batch = Batch::default();
        let mut regions = RegionFinder::default();
        assert!(!batch.try_push(&good(1), 0), "not begun");
        assert!(batch.is_empty());
        batch.push(&good(1), 0, &mut regions);
        for refused in [
            Object::Packet(parsed(&bytes[100..150])),
            Object::Packet(Packet::new(&bytes[150..160], cooked())),
            Object::Packet(Packet::new(&elsewhere, meta(6))),
            line(),
        ] {
            assert!(!batch.try_push(&refused, 1), "{refused:?}");
        }
        assert_eq!(batch.len(), 1);
        let room = batch.entries.capacity();
        for frame in 2..=room as u64 {
            assert!(batch.try_push(&good(frame), frame), "frame {frame}");
        }
        assert!(!batch.try_push(&good(99), 99), "full: no growing");
        assert_eq!(batch.len(), room);
        let mut frames = Vec::new();
        batch
            .drain(|key, obj| {
                frames.push((key, obj.packet().map(|p| p.meta.frame)));
                Ok::<_, ()>(())
            })
            .unwrap();
        let expected: Vec<(u64, Option<u64>)> = (1..=room as u64)
            .map(|f| (if f == 1 { 0 } else { f }, Some(f)))
            .collect();
        assert_eq!(frames, expected);
        assert!(!batch.try_push(&good(1), 0), "drained: it begins again");
    }

    /// Packets read through a buffered stream (reads of 256 bytes, so its
    /// block changes every few records) cross by their place: a batch is
    /// handed over when the reader moves on to another block, and every
    /// packet comes out with the bytes the capture holds, none copied,
    /// read from blocks the stream has moved on from since.
    #[test]
    fn packets_of_a_buffered_read_cross_by_place_across_its_blocks() {
        use crate::format::stream::{pcap_of_sizes, BufferedStream};
        use crate::input::CaptureReader;
        use dnsluice_core::Producer;
        let sizes: Vec<usize> = (0..200).map(|i| 20 + i % 41).collect();
        let capture = pcap_of_sizes(&sizes);
        let stream = BufferedStream::new(Box::new(std::io::Cursor::new(capture)), 256).shared();
        let mut reader = CaptureReader::new("input.fpcap", "test".into(), stream).unwrap();
        let mut regions = RegionFinder::default();
        let mut handed_over = Vec::new();
        let mut batch = Batch::default();
        let mut key = 0;
        while let Some(obj) = reader.produce().unwrap() {
            if batch.is_left_behind_by(&obj, &mut regions) {
                handed_over.push(std::mem::take(&mut batch));
            }
            batch.push(&obj, key, &mut regions);
            key += 1;
        }
        handed_over.push(batch);
        assert!(handed_over.len() > 30, "{} batches", handed_over.len());
        let mut seen = Vec::new();
        for mut batch in handed_over {
            assert_eq!(batch.copied, 0, "copied");
            batch
                .drain(|key, obj| {
                    let data = obj.packet().map(|p| p.data).unwrap_or_default();
                    let index = key as usize;
                    assert_eq!(data, vec![index as u8; sizes[index]], "record {index}");
                    seen.push(key);
                    Ok::<_, ()>(())
                })
                .unwrap();
        }
        assert_eq!(seen, (0..200).collect::<Vec<u64>>());
    }

    /// An entry is 40 bytes (the worker fetches every line of them).
    #[test]
    fn an_entry_is_40_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 40);
    }
}
