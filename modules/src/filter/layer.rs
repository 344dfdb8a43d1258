//! `filter.layer`: parses link → IP (through any tunnels) → UDP/TCP and
//! annotates each packet with its layer offsets
//! ([`dnsluice_core::wire::Layers`], of the innermost packet). Every packet
//! passes on, non-IP and malformed ones included; problems are counted by kind.

use dnsluice_core::registry::{ModuleEntry, Parallel};
use dnsluice_core::wire::{parse_layers_into, LayerError, Layers, Network};
use dnsluice_core::{Map, Object, StageStats};

/// The layer parser with its counters.
#[derive(Debug, Default)]
pub struct Layer {
    errors: [u64; LayerError::ALL.len()],
    ipv4: u64,
    ipv6: u64,
    non_ip: u64,
    fragments: u64,
    truncated: u64,
    unsupported_link: u64,
    tunneled: u64,
}

impl Layer {
    /// A layer parser with zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts a packet that is not of the common kind (see
    /// [`parse_layers_into`]): out of line, so that the common path stays small.
    #[inline(never)]
    fn count(&mut self, layers: &Layers) {
        match layers.network {
            Network::Ipv4 => self.ipv4 += 1,
            Network::Ipv6 => self.ipv6 += 1,
            Network::UnsupportedLink => self.unsupported_link += 1,
            // The link header itself did not parse: counted as an error below.
            Network::Unparsed => {}
            Network::NonIp(_) | Network::Llc => self.non_ip += 1,
        }
        if let Some(e) = layers.error {
            self.errors[e.index()] += 1;
        }
        if layers.fragment.is_some_and(|f| !f.atomic) {
            self.fragments += 1;
        }
        self.truncated += u64::from(layers.truncated);
        self.tunneled += u64::from(layers.tunnels > 0);
    }
}

impl Map for Layer {
    #[inline(always)]
    fn map(&mut self, obj: &mut Object<'_>) {
        // A packet as the input made it: the common case, tested first.
        let packet = match obj {
            Object::Packet(packet) => packet,
            other => match other.packet_mut() {
                Some(packet) => packet,
                None => return,
            },
        };
        let (link, data, len) = (packet.meta.link, packet.data, packet.meta.len);
        if parse_layers_into(link, data, len, &mut packet.layers) {
            // Ethernet, IPv4, UDP or TCP, whole, no error: nothing else to count.
            self.ipv4 += 1;
        } else {
            self.count(&packet.layers);
        }
    }

    fn stats(&self) -> StageStats {
        let mut stats = StageStats::new("filter.layer");
        for (kind, n) in LayerError::ALL.iter().zip(self.errors) {
            stats.add_error(kind.as_str(), n);
        }
        stats.add_counter("ipv4", self.ipv4);
        stats.add_counter("ipv6", self.ipv6);
        stats.add_counter("non_ip", self.non_ip);
        stats.add_counter("ip_fragments", self.fragments);
        stats.add_counter("snaplen_truncated", self.truncated);
        stats.add_counter("unsupported_link", self.unsupported_link);
        stats.add_counter("tunneled", self.tunneled);
        stats
    }
}

/// The registry entry (no options: any key is an error).
pub fn entry() -> ModuleEntry {
    ModuleEntry::map(
        "filter.layer",
        "parse link (Ethernet/VLAN/MPLS/PPPoE, NULL, LOOP, raw, Linux cooked, PPP, NFLOG, PKTAP, 802.11, radiotap), IPv4/IPv6, tunnels (GRE, ERSPAN, VXLAN, Geneve, GTP-U, IP-in-IP) and UDP/TCP headers",
        |(): ()| Ok(Layer::new()),
    )
    .parallel(Parallel::Any)
}
