//! Owned copies of objects, for stages that must keep an object past the call
//! that handed it over (a pull-side queue, a thread crossing). The buffers are
//! reused: copying into an existing [`OwnedObject`] allocates only when a
//! packet is larger than any before it.
//!
//! Bytes that lie in a [`SharedRegion`] (a memory-mapped capture) need not be
//! copied: [`OwnedObject::copy_from_in`] keeps where they are in the region,
//! and [`OwnedObject::view_in`] reads them back from the same region.

use crate::dns::CompactInfo;
use crate::object::{CaptureMeta, DnsMessage, Flow, Origin, PacketRef};
use crate::shared::{SharedRegion, Span};
use crate::wire::Layers;
use crate::{LinkType, Object, Packet, Text, TextKind};

/// An object that owns its bytes.
#[derive(Clone, Debug)]
pub struct OwnedObject {
    data: HeldBytes,
    meta: CaptureMeta,
    layers: Layers,
    /// The DNS fields, when the object is a DNS message (kept, with its
    /// buffer, for the next one when it is not).
    dns: Option<OwnedDns>,
    /// The text, when the object is a [`Text`] (then the packet fields are
    /// unused; kept, with its buffer, for the next one when it is not).
    text: Option<OwnedText>,
    /// What the object is.
    kind: HeldKind,
}

/// What an [`OwnedObject`] holds now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeldKind {
    Packet,
    Dns,
    Text,
}

#[derive(Clone, Debug)]
struct OwnedText {
    kind: TextKind,
    number: u64,
    text: String,
}

#[derive(Clone, Debug)]
struct OwnedDns {
    bytes: HeldBytes,
    checked: CompactInfo,
    flow: Flow,
    origin: Origin,
}

/// Bytes held by an [`OwnedObject`]: a copy, or where they are in a shared
/// region (then the copy's buffer is kept, unused, for the next copy).
#[derive(Clone, Debug, Default)]
struct HeldBytes {
    copy: Vec<u8>,
    shared: Option<Span>,
}

impl HeldBytes {
    /// Holds `bytes`: by their place in `region` when they lie in it, else a copy.
    #[inline]
    fn set(&mut self, bytes: &[u8], region: Option<&SharedRegion>) {
        self.shared = region.and_then(|region| region.span_of(bytes));
        if self.shared.is_none() {
            self.copy.clear();
            self.copy.extend_from_slice(bytes);
        }
    }

    /// The bytes held, read from `region` (the bytes of the region they were
    /// set with) when they are held by their place in it.
    #[inline]
    fn get<'a>(&'a self, region: &'a [u8]) -> &'a [u8] {
        match self.shared {
            Some(span) => span.of(region),
            None => &self.copy,
        }
    }
}

impl Default for OwnedObject {
    fn default() -> Self {
        OwnedObject {
            data: HeldBytes::default(),
            meta: CaptureMeta {
                frame: 0,
                ts_ns: None,
                len: 0,
                link: LinkType(0),
            },
            layers: Layers::default(),
            dns: None,
            text: None,
            kind: HeldKind::Packet,
        }
    }
}

impl OwnedObject {
    /// Copies `obj` into this one, reusing its buffers. Only packets and DNS
    /// messages are copied: a [`crate::Response`] (which ends chains; no
    /// filter passes one on through a queue) leaves this object as it was.
    pub fn copy_from(&mut self, obj: &Object<'_>) {
        self.copy_from_in(obj, None);
    }

    /// As [`OwnedObject::copy_from`], but bytes lying in `region` are held
    /// by their place in it, not copied: read them back with
    /// [`OwnedObject::view_in`] and the same region.
    pub fn copy_from_in(&mut self, obj: &Object<'_>, region: Option<&SharedRegion>) {
        if let Object::Text(t) = obj {
            let owned = self.text.get_or_insert_with(|| OwnedText {
                kind: t.kind,
                number: t.number,
                text: String::new(),
            });
            owned.kind = t.kind;
            owned.number = t.number;
            owned.text.clear();
            owned.text.push_str(t.text);
            self.kind = HeldKind::Text;
            return;
        }
        let Some(packet) = obj.packet() else { return };
        self.data.set(packet.data, region);
        self.meta = packet.meta;
        self.layers = packet.layers;
        match obj.dns() {
            Some(m) => {
                let dns = self.dns.get_or_insert_with(|| OwnedDns {
                    bytes: HeldBytes::default(),
                    checked: m.checked,
                    flow: m.flow,
                    origin: m.origin,
                });
                dns.bytes.set(m.bytes, region);
                dns.checked = m.checked;
                dns.flow = m.flow;
                dns.origin = m.origin;
                self.kind = HeldKind::Dns;
            }
            None => self.kind = HeldKind::Packet,
        }
    }

    /// A view of the copy, as the object it was copied from.
    pub fn view(&self) -> Object<'_> {
        self.view_in(&[])
    }

    /// A view of a copy made by [`OwnedObject::copy_from_in`] with a region:
    /// `region` is [`SharedRegion::bytes`] of that region.
    pub fn view_in<'a>(&'a self, region: &'a [u8]) -> Object<'a> {
        if let (HeldKind::Text, Some(t)) = (self.kind, &self.text) {
            return Object::Text(Text {
                kind: t.kind,
                number: t.number,
                text: &t.text,
            });
        }
        let packet = Packet {
            data: self.data.get(region),
            meta: self.meta,
            layers: self.layers,
        };
        match (self.kind, &self.dns) {
            (HeldKind::Dns, Some(d)) => Object::Dns(DnsMessage {
                packet: PacketRef::Held(packet),
                bytes: d.bytes.get(region),
                checked: d.checked,
                flow: d.flow,
                origin: d.origin,
            }),
            _ => Object::Packet(packet),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::{publish, RegionFinder, SharedBytes};
    use std::sync::Arc;

    fn meta() -> CaptureMeta {
        CaptureMeta {
            frame: 3,
            ts_ns: Some(5),
            len: 40,
            link: LinkType(1),
        }
    }

    /// Bytes inside a published region are read back from the region
    /// itself (the same address: not copied); bytes elsewhere are copied.
    #[test]
    fn bytes_in_a_region_are_referred_to_and_others_copied() {
        let shared: SharedBytes = Arc::new((0u8..200).collect::<Vec<u8>>());
        publish(&shared);
        let bytes = (*shared).as_ref();
        let packet = Packet::new(&bytes[40..80], meta());
        let mut finder = RegionFinder::default();
        let region = finder.region_of(packet.data).cloned();
        assert!(region.is_some());
        let mut owned = OwnedObject::default();
        owned.copy_from_in(&Object::Packet(packet), region.as_ref());
        let all = region.as_ref().unwrap().bytes();
        let view = owned.view_in(all);
        let data = view.packet().unwrap().data;
        assert_eq!(data, &bytes[40..80]);
        assert!(std::ptr::eq(data.as_ptr(), bytes[40..].as_ptr()), "copied");
        assert_eq!(view.packet().unwrap().meta.frame, 3);

        let elsewhere = bytes[40..80].to_vec();
        let packet = Packet::new(&elsewhere, meta());
        owned.copy_from_in(&Object::Packet(packet), region.as_ref());
        drop(elsewhere);
        let view = owned.view_in(all);
        assert_eq!(view.packet().unwrap().data, &bytes[40..80]);
    }

    /// One copy reused for objects of other kinds in turn views each as
    /// what it was.
    #[test]
    fn a_reused_copy_views_each_object_as_its_own_kind() {
        let bytes = [1u8, 2, 3];
        let line = Object::Text(Text {
            kind: TextKind::Line,
            number: 7,
            text: "example.com",
        });
        let packet = Object::Packet(Packet::new(&bytes, meta()));
        let mut owned = OwnedObject::default();
        for obj in [&line, &packet, &line, &packet] {
            owned.copy_from(obj);
            match (obj, owned.view()) {
                (Object::Text(_), Object::Text(t)) => {
                    assert_eq!((t.number, t.text), (7, "example.com"))
                }
                (Object::Packet(_), Object::Packet(p)) => assert_eq!(p.data, &bytes),
                (_, view) => panic!("{obj:?} viewed as {view:?}"),
            }
        }
    }
}
