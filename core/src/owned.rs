//! Owned copies of objects, for stages that must keep an object past the call
//! that handed it over (a pull-side queue, a thread crossing). The buffers are
//! reused: copying into an existing [`OwnedObject`] allocates only when a
//! packet is larger than any before it.

use crate::dns::CompactInfo;
use crate::object::{CaptureMeta, DnsMessage, Flow, Origin, PacketRef};
use crate::wire::Layers;
use crate::{LinkType, Object, Packet, Text, TextKind};

/// An object that owns its bytes.
#[derive(Clone, Debug)]
pub struct OwnedObject {
    data: Vec<u8>,
    meta: CaptureMeta,
    layers: Layers,
    dns: Option<OwnedDns>,
    /// Set when the object is a [`Text`] (then the packet fields are unused).
    text: Option<OwnedText>,
}

#[derive(Clone, Debug)]
struct OwnedText {
    kind: TextKind,
    number: u64,
    text: String,
}

#[derive(Clone, Debug)]
struct OwnedDns {
    bytes: Vec<u8>,
    checked: CompactInfo,
    flow: Flow,
    origin: Origin,
}

impl Default for OwnedObject {
    fn default() -> Self {
        OwnedObject {
            data: Vec::new(),
            meta: CaptureMeta {
                frame: 0,
                ts_ns: None,
                len: 0,
                link: LinkType(0),
            },
            layers: Layers::default(),
            dns: None,
            text: None,
        }
    }
}

impl OwnedObject {
    /// Copies `obj` into this one, reusing its buffers. Only packets and DNS
    /// messages are copied: a [`crate::Response`] (which ends chains; no
    /// filter passes one on through a queue) leaves this object as it was.
    pub fn copy_from(&mut self, obj: &Object<'_>) {
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
            return;
        }
        self.text = None;
        let Some(packet) = obj.packet() else { return };
        self.data.clear();
        self.data.extend_from_slice(packet.data);
        self.meta = packet.meta;
        self.layers = packet.layers;
        match obj.dns() {
            Some(m) => {
                let dns = self.dns.get_or_insert_with(|| OwnedDns {
                    bytes: Vec::new(),
                    checked: m.checked,
                    flow: m.flow,
                    origin: m.origin,
                });
                dns.bytes.clear();
                dns.bytes.extend_from_slice(m.bytes);
                dns.checked = m.checked;
                dns.flow = m.flow;
                dns.origin = m.origin;
            }
            None => self.dns = None,
        }
    }

    /// A view of the copy, as the object it was copied from.
    pub fn view(&self) -> Object<'_> {
        if let Some(t) = &self.text {
            return Object::Text(Text {
                kind: t.kind,
                number: t.number,
                text: &t.text,
            });
        }
        let packet = Packet {
            data: &self.data,
            meta: self.meta,
            layers: self.layers,
        };
        match &self.dns {
            Some(d) => Object::Dns(DnsMessage {
                packet: PacketRef::Held(packet),
                bytes: &d.bytes,
                checked: d.checked,
                flow: d.flow,
                origin: d.origin,
            }),
            None => Object::Packet(packet),
        }
    }
}
