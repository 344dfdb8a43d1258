//! The kernel's own count of datagrams it dropped on a socket (its receive
//! buffer was full): the `drops` column of `/proc/net/udp` and
//! `/proc/net/udp6`. The emulator must never lose a datagram it was not told
//! to; this is how a test sees that it did not.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The drops the kernel counted on the UDP sockets bound to `locals`.
pub fn udp_drops(locals: &[SocketAddr]) -> u64 {
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|table| drops_in(&table, locals))
        .sum()
}

/// [`udp_drops`] over the text of one table.
fn drops_in(table: &str, locals: &[SocketAddr]) -> u64 {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = parse_address(fields.get(1)?)?;
            let drops: u64 = fields.last()?.parse().ok()?;
            locals.contains(&local).then_some(drops)
        })
        .sum()
}

/// `0100007F:0035` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit
/// word in the kernel's byte order (little-endian here).
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::from_be);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?.to_be_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(&ip[i * 8..i * 8 + 8])?.to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drops_of_our_sockets_are_summed() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
            1: 0200007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0000000000000000 7\n\
            2: 0100007F:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0000000000000000 3\n";
        let ours = ["127.0.0.2:53".parse().unwrap()];
        assert_eq!(drops_in(table, &ours), 7);
        let v6 = "sl local rem\n 0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 07 0:0 0:0 0 0 0 1 2 0 5\n";
        assert_eq!(drops_in(v6, &["[::1]:53".parse().unwrap()]), 5);
    }

    #[test]
    fn a_socket_that_overflows_is_counted() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = receiver.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = udp_drops(&[addr]);
        // Nobody reads: a few MB of datagrams overflow the default buffer.
        for _ in 0..20_000 {
            let _ = sender.send_to(&[0u8; 512], addr);
        }
        assert!(udp_drops(&[addr]) > before);
    }
}
