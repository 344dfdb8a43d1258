//! A batch of objects crossing to a worker thread ([`Batch`]).
//!
//! The usual object at a split right after a mapped capture (where
//! `threads = N` puts it) is a packet whose layers are not parsed yet and
//! whose bytes lie in the map: it crosses as where its bytes are and its
//! capture facts (48 bytes, an [`Entry::Mapped`]), not as a whole copied
//! object (280 bytes and a buffer of its own, which the other core must
//! fetch line by line; measured, crossing with the layers too, 128 bytes,
//! cost more than testing that there are none). Any other object is copied
//! whole into one of the batch's reused [`OwnedObject`]s (its bytes still
//! by their place, when they lie in the region).

use dnsluice_core::shared::{SharedRegion, Span};
use dnsluice_core::{CaptureMeta, Object, OwnedObject, Packet};

/// One object of a batch.
#[derive(Clone, Copy, Debug)]
enum Entry {
    /// A packet with no layers parsed, its bytes at `span` of the region.
    Mapped { span: Span, meta: CaptureMeta },
    /// Any other object: the batch's copy at this index.
    Copied(u32),
}

/// Objects for one worker, handed over together.
#[derive(Default)]
pub(super) struct Batch {
    /// The objects, in the order the split saw them.
    entries: Vec<Entry>,
    /// The whole copies; the first `copied` are this batch's.
    copies: Vec<OwnedObject>,
    copied: usize,
    /// The region the objects' bytes are read from, where they lie in it
    /// (kept alive by the batch while the worker reads them).
    region: Option<SharedRegion>,
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

    /// Adds `obj`. The first object of a batch sets its region (`region`,
    /// the one its bytes lie in, if any); bytes in the batch's region are
    /// held by their place, others copied.
    #[inline]
    pub fn push(&mut self, obj: &Object<'_>, region: Option<&SharedRegion>) {
        if self.entries.is_empty() {
            self.region = region.cloned();
        }
        if let Object::Packet(packet) = obj {
            let span = self.region.as_ref().and_then(|r| r.span_of(packet.data));
            if let (Some(span), true) = (span, packet.layers.is_empty()) {
                self.entries.push(Entry::Mapped {
                    span,
                    meta: packet.meta,
                });
                return;
            }
        }
        if self.copied == self.copies.len() {
            self.copies.push(OwnedObject::default());
        }
        self.copies[self.copied].copy_from_in(obj, self.region.as_ref());
        self.entries.push(Entry::Copied(self.copied as u32));
        self.copied += 1;
    }

    /// Hands each object to `each`, in order, until it fails; then empties
    /// the batch (its buffers kept for the next).
    pub fn drain<E>(
        &mut self,
        mut each: impl FnMut(&mut Object<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let bytes = self
            .region
            .as_ref()
            .map(SharedRegion::bytes)
            .unwrap_or_default();
        let mut result = Ok(());
        for entry in &self.entries {
            let mut obj = match *entry {
                Entry::Mapped { span, meta } => Object::Packet(Packet::new(span.of(bytes), meta)),
                Entry::Copied(at) => self.copies[at as usize].view_in(bytes),
            };
            result = each(&mut obj);
            if result.is_err() {
                break;
            }
        }
        self.entries.clear();
        self.copied = 0;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnsluice_core::shared::{publish, RegionFinder, SharedBytes};
    use dnsluice_core::{LinkType, Text, TextKind};
    use std::sync::Arc;

    fn meta(frame: u64) -> CaptureMeta {
        CaptureMeta {
            frame,
            ts_ns: Some(frame as i64 * 10),
            len: 60,
            link: LinkType(1),
        }
    }

    /// Packets from a region (one with its layers parsed), a packet from
    /// elsewhere and a line come out in order, each as it went in, the
    /// region's bytes at their own addresses (not copied).
    #[test]
    fn a_batch_gives_back_every_object_in_order() {
        let shared: SharedBytes = Arc::new((0u8..=255).collect::<Vec<u8>>());
        publish(&shared);
        let bytes = (*shared).as_ref();
        let region = RegionFinder::default().region_of(bytes).cloned();
        let elsewhere = vec![9u8; 20];
        let mut parsed = Packet::new(&bytes[100..150], meta(3));
        parsed.layers.sport = 53;
        let objects = [
            Object::Packet(Packet::new(&bytes[10..40], meta(1))),
            Object::Packet(Packet::new(&bytes[40..100], meta(2))),
            Object::Packet(parsed),
            Object::Packet(Packet::new(&elsewhere, meta(4))),
            Object::Text(Text {
                kind: TextKind::Line,
                number: 5,
                text: "five",
            }),
        ];
        let mut batch = Batch::default();
        for round in 0..2 {
            for obj in &objects {
                batch.push(obj, region.as_ref());
            }
            assert_eq!(batch.len(), 5);
            let mut seen = Vec::new();
            batch
                .drain(|obj| {
                    seen.push(format!("{obj:?}"));
                    if let Some(packet) = obj.packet().filter(|p| p.meta.frame <= 3) {
                        let at = packet.data.as_ptr() as usize - bytes.as_ptr() as usize;
                        assert!(at < bytes.len(), "round {round}: copied");
                    }
                    Ok::<_, ()>(())
                })
                .unwrap();
            let expected: Vec<String> = objects.iter().map(|o| format!("{o:?}")).collect();
            assert_eq!(seen, expected, "round {round}");
            assert!(batch.is_empty());
        }
    }
}
