//! The key of a TCP flow in the reassembler's table ([`FlowKey`]), and how
//! it is hashed.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;

/// One direction of a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

/// Hashed as three numbers (each address as 128 bits, the two ports as
/// 32), not field by field: a derived hash of two `IpAddr`s makes eight
/// writes to the hasher (a tag and a length before each address's bytes),
/// and the reassembler hashes a key two to four times a segment.
impl Hash for FlowKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u128(address_bits(self.src));
        state.write_u128(address_bits(self.dst));
        state.write_u32(u32::from(self.sport) << 16 | u32::from(self.dport));
    }
}

/// An address as a number (an IPv4 address below 2^32).
fn address_bits(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that differ in one field alone hash apart: every field goes
    /// into the hash (a field left out would put the flows that differ by
    /// it in one bucket chain).
    #[test]
    fn every_field_of_a_flow_key_goes_into_its_hash() {
        use std::hash::BuildHasher;
        let hasher = foldhash::fast::FixedState::with_seed(1);
        let address = |text: &str| text.parse::<IpAddr>().unwrap();
        let base = FlowKey {
            src: address("192.0.2.1"),
            dst: address("192.0.2.53"),
            sport: 1000,
            dport: 53,
        };
        let variants = [
            FlowKey {
                sport: 1001,
                ..base
            },
            FlowKey { dport: 54, ..base },
            FlowKey {
                src: address("192.0.2.2"),
                ..base
            },
            FlowKey {
                dst: address("192.0.2.54"),
                ..base
            },
            FlowKey {
                src: address("2001:db8::1"),
                ..base
            },
            FlowKey {
                dst: address("2001:db8::35"),
                ..base
            },
        ];
        for variant in variants {
            assert_ne!(
                hasher.hash_one(variant),
                hasher.hash_one(base),
                "{variant:?}"
            );
        }
    }
}
