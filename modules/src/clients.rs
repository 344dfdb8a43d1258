//! Simulated clients: the capture's source addresses mapped onto N clients, so
//! a replay looks like many clients to the server (as dnsjit's `filter.ipsplit`
//! did), and the same source always speaks through the same client.

use dnsluice_core::Object;
use std::collections::HashMap;
use std::net::IpAddr;

/// Sources remembered one by one; past this many, new sources are hashed.
const MAX_REMEMBERED: usize = 1 << 20;

/// Assigns each source address a client index in `0..clients`: new sources
/// take the clients in turn (so a few sources spread evenly), and a source
/// keeps its client.
#[derive(Debug)]
pub struct ClientMap {
    clients: u32,
    next: u32,
    seen: HashMap<IpAddr, u32>,
}

impl ClientMap {
    /// A map onto `clients` clients (at least one).
    pub fn new(clients: u32) -> Self {
        ClientMap {
            clients: clients.max(1),
            next: 0,
            seen: HashMap::new(),
        }
    }

    /// How many clients there are.
    pub fn clients(&self) -> u32 {
        self.clients
    }

    /// The client for `source` (client 0 when the object has no address).
    pub fn client_for(&mut self, source: Option<IpAddr>) -> u32 {
        if self.clients == 1 {
            return 0;
        }
        let Some(source) = source else { return 0 };
        if let Some(&client) = self.seen.get(&source) {
            return client;
        }
        if self.seen.len() >= MAX_REMEMBERED {
            return hash_onto(source, self.clients);
        }
        let client = self.next;
        self.next = (self.next + 1) % self.clients;
        self.seen.insert(source, client);
        client
    }

    /// The client for the source address of `obj`'s packet.
    pub fn client_for_object(&mut self, obj: &Object<'_>) -> u32 {
        self.client_for(obj.packet().and_then(|p| p.src()))
    }
}

/// A stable hash of an address onto `0..n` (FNV-1a).
pub(crate) fn hash_onto(addr: IpAddr, n: u32) -> u32 {
    let bytes: &[u8] = match &addr {
        IpAddr::V4(a) => &a.octets()[..],
        IpAddr::V6(a) => &a.octets()[..],
    };
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % n
}

/// The DNS query to send for `obj`: a DNS message's bytes, or a packet's
/// transport payload; `None` for a response (QR set), something shorter than
/// a DNS header, or an object that carries no message.
pub fn query_bytes<'a>(obj: &Object<'a>) -> Option<&'a [u8]> {
    let bytes = match obj {
        Object::Dns(m) => m.bytes,
        Object::Packet(p) => p.payload(),
        _ => return None,
    };
    (bytes.len() >= 12 && bytes[2] & 0x80 == 0).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_take_clients_in_turn_and_keep_them() {
        let mut map = ClientMap::new(3);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "::1".parse().unwrap();
        let d: IpAddr = "10.0.0.4".parse().unwrap();
        assert_eq!(map.client_for(Some(a)), 0);
        assert_eq!(map.client_for(Some(b)), 1);
        assert_eq!(map.client_for(Some(a)), 0);
        assert_eq!(map.client_for(Some(c)), 2);
        assert_eq!(map.client_for(Some(d)), 0);
        assert_eq!(map.client_for(None), 0);
        assert!(hash_onto(a, 7) < 7);
    }
}
