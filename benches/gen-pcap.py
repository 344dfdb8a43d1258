#!/usr/bin/env python3
"""Generate a large, deterministic pcap of DNS queries for benchmarks.

Output: classic pcap (little-endian magic, microsecond timestamps,
LINKTYPE_ETHERNET) of Ethernet/IPv4/UDP packets, each carrying one DNS
query from a client in 10.0.0.0/8 to 10.53.53.53:53.  Nothing is sent on
the network; addresses are only written into the file.

Usage: python3 benches/gen-pcap.py --count N [--seed S] --out FILE

Standard library only.  Same arguments produce a byte-identical file.

Speed: a pool of distinct packets (client, source port, qname, qtype,
EDNS) is built once; the writer then cycles through the pool, varying
only the timestamp and the DNS message ID per packet (with the UDP
checksum patched incrementally), and packs each record with a single
struct call into large write buffers.
"""

import argparse
import random
import struct
import sys
import time

SERVER_IP = bytes((10, 53, 53, 53))
SERVER_MAC = bytes((0x02, 0x00, 0x00, 0x00, 0x00, 0x53))
START_SEC = 1_700_000_000  # 2023-11-14T22:13:20Z

# (name, code, weight): mostly A/AAAA, a tail of other common types.
QTYPES = [
    ("A", 1, 440),
    ("AAAA", 28, 300),
    ("HTTPS", 65, 70),
    ("MX", 15, 35),
    ("TXT", 16, 35),
    ("NS", 2, 25),
    ("PTR", 12, 25),
    ("SRV", 33, 15),
    ("CNAME", 5, 10),
    ("SOA", 6, 10),
    ("SVCB", 64, 10),
    ("DS", 43, 5),
    ("DNSKEY", 48, 5),
    ("CAA", 257, 5),
]

DOMAINS = [
    "example.com",
    "example.net",
    "example.org",
    "shop.example",
    "cdn.test",
    "corp.internal.test",
    "dnsluice.test",
]

PREFIXES = ["www", "mail", "api", "cdn", "static", "img", "login", "vpn", "m", "ns1"]
SRV_PREFIXES = ["_sip._udp", "_ldap._tcp", "_xmpp-client._tcp", "_imaps._tcp"]
ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def ones_sum(data, start=0):
    """One's-complement sum of 16-bit words of data, read as big-endian."""
    if len(data) % 2:
        data = data + b"\x00"
    s = start + sum(struct.unpack(">%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def bswap16(v):
    return ((v & 0xFF) << 8) | (v >> 8)


def encode_name(name):
    out = bytearray()
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        assert 0 < len(raw) < 64
        out.append(len(raw))
        out += raw
    out.append(0)
    return bytes(out)


def rand_label(rng, lo, hi):
    return "".join(rng.choice(ALNUM) for _ in range(rng.randint(lo, hi)))


# --zone/--names: every query asks A for n<i>.<zone>, i in 0..names-1 (names
# that the test servers' zone holds, so a replay gets answers).
ZONE = None
ZONE_NAMES = 100000


def make_qname(rng, qtype_name, client_ip):
    if qtype_name == "PTR":
        if rng.random() < 0.5:
            o = client_ip
        else:
            o = (rng.randint(1, 223), rng.randint(0, 255), rng.randint(0, 255), rng.randint(1, 254))
        return "%d.%d.%d.%d.in-addr.arpa" % (o[3], o[2], o[1], o[0])
    domain = rng.choice(DOMAINS)
    if qtype_name in ("NS", "SOA", "DS", "DNSKEY", "CAA") or (qtype_name == "MX" and rng.random() < 0.7):
        return domain
    if qtype_name == "SRV":
        return rng.choice(SRV_PREFIXES) + "." + domain
    r = rng.random()
    if r < 0.30:
        labels = [rng.choice(PREFIXES)]
    elif r < 0.75:
        labels = [rand_label(rng, 3, 12)]
    elif r < 0.95:
        labels = [rand_label(rng, 2, 10), rng.choice(PREFIXES)]
    else:
        labels = [rand_label(rng, 8, 30), rand_label(rng, 2, 8), rand_label(rng, 2, 8)]
    return ".".join(labels + [domain])


def make_opt(rng):
    """EDNS0 OPT pseudo-RR: root owner, type 41, class = UDP payload size."""
    size = rng.choice((1232, 1232, 1232, 4096, 4096, 1400, 512))
    flags = 0x8000 if rng.random() < 0.4 else 0  # DO bit
    rdata = b""
    if rng.random() < 0.5:  # client COOKIE option (code 10), 8-byte client cookie
        rdata = struct.pack(">HH", 10, 8) + bytes(rng.getrandbits(8) for _ in range(8))
    # ttl field = extended-rcode(8) | version(8) | flags(16)
    return b"\x00" + struct.pack(">HHIH", 41, size, flags, len(rdata)) + rdata


def make_clients(rng, n):
    seen = set()
    clients = []
    while len(clients) < n:
        ip = (10, rng.randint(0, 255), rng.randint(0, 255), rng.randint(1, 254))
        if bytes(ip) == SERVER_IP or ip in seen:
            continue
        seen.add(ip)
        clients.append(ip)
    return clients


def build_pool(rng, pool_size, n_clients, edns_frac):
    """Return (pool, n_edns, n_sources): pool is a list of
    (struct_obj, orig_len, prefix, base_sum_le, suffix)."""
    clients = make_clients(rng, n_clients)
    names = [q[0] for q in QTYPES]
    codes = {q[0]: q[1] for q in QTYPES}
    weights = [q[2] for q in QTYPES]
    structs = {}
    pool = []
    n_edns = 0
    used = set()
    for _ in range(pool_size):
        cip = rng.choice(clients)
        used.add(cip)
        sport = rng.randint(1024, 65535)
        while 33434 <= sport <= 33534:  # keep out of the traceroute range
            sport = rng.randint(1024, 65535)
        if ZONE:
            qtn = "A"
            qname = "n%d.%s" % (rng.randrange(ZONE_NAMES), ZONE)
        else:
            qtn = rng.choices(names, weights)[0]
            qname = make_qname(rng, qtn, cip)
        flags = 0x0100 if rng.random() < 0.97 else 0x0000  # RD mostly set
        if rng.random() < 0.03:
            flags |= 0x0010  # CD
        opt = b""
        if rng.random() < edns_frac:
            opt = make_opt(rng)
            n_edns += 1
        # DNS message with ID = 0; the writer fills it in per packet.
        dns = struct.pack(">HHHHHH", 0, flags, 1, 0, 0, 1 if opt else 0)
        dns += encode_name(qname) + struct.pack(">HH", codes[qtn], 1) + opt

        udp_len = 8 + len(dns)
        ip_len = 20 + udp_len
        src = bytes(cip)
        ip_id = rng.getrandbits(16)
        iph = struct.pack(">BBHHHBBH4s4s", 0x45, 0, ip_len, ip_id, 0x4000, 64, 17, 0, src, SERVER_IP)
        ip_csum = (~ones_sum(iph)) & 0xFFFF
        iph = iph[:10] + struct.pack(">H", ip_csum) + iph[12:]

        # UDP checksum over pseudo-header + UDP header (csum 0) + payload (ID 0).
        pseudo = src + SERVER_IP + struct.pack(">BBH", 0, 17, udp_len)
        udph0 = struct.pack(">HHHH", sport, 53, udp_len, 0)
        base = ones_sum(pseudo + udph0 + dns)
        # The one's-complement sum is byte-order independent: summing the
        # byte-swapped words gives the byte-swapped sum.  Keep the base in the
        # little-endian domain so the writer can pack checksum and ID with '<H'.
        base_le = bswap16(base)

        mac = bytes((0x02, 0x00, cip[0], cip[1], cip[2], cip[3]))
        eth = SERVER_MAC + mac + b"\x08\x00"
        prefix = eth + iph + udph0[:6]  # everything before UDP checksum
        suffix = dns[2:]  # everything after the DNS ID
        orig_len = len(eth) + ip_len
        assert len(prefix) == 40
        st = structs.get(len(suffix))
        if st is None:
            st = structs[len(suffix)] = struct.Struct("<IIII40sHH%ds" % len(suffix))
        pool.append((st, orig_len, prefix, base_le, suffix))
    return pool, n_edns, len(used)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, required=True, help="number of packets")
    ap.add_argument("--seed", type=int, default=1, help="RNG seed (default 1)")
    ap.add_argument("--out", required=True, help="output pcap path")
    ap.add_argument("--pool", type=int, default=8192, help="distinct packets to cycle through (default 8192)")
    ap.add_argument("--clients", type=int, default=3000, help="distinct client addresses (default 3000)")
    ap.add_argument("--edns", type=float, default=0.10, help="fraction of queries with OPT (default 0.10)")
    ap.add_argument("--zone", help="ask only A for n<i>.ZONE (e.g. lookup.test, the test servers' zone)")
    ap.add_argument("--names", type=int, default=100000, help="with --zone: i in 0..NAMES-1 (default 100000)")
    args = ap.parse_args()
    global ZONE, ZONE_NAMES
    ZONE, ZONE_NAMES = (args.zone.rstrip(".") if args.zone else None), args.names
    if args.count < 0 or args.pool < 1 or args.clients < 1:
        ap.error("count must be >= 0, pool and clients >= 1")

    t0 = time.monotonic()
    rng = random.Random(args.seed)
    pool_size = max(1, min(args.pool, args.count))
    pool, n_edns, n_src = build_pool(rng, pool_size, min(args.clients, pool_size), args.edns)

    # Per-packet DNS IDs: a table of random 16-bit values, used directly as
    # the little-endian-domain value (its byte swap is the wire ID).  The
    # table length is prime so it never shares a period with the pool walk
    # (otherwise each pool entry would see only a handful of IDs and the
    # capture would look like retransmissions).
    n_ids = 65521
    ids = [rng.getrandbits(16) for _ in range(n_ids)]
    # Inter-arrival gaps in microseconds (mean ~30 us, i.e. ~33k qps).
    gaps = [rng.randint(1, 60) for _ in range(4093)]
    n_gaps = len(gaps)

    # Walk the pool with an odd stride (full cycle for a power-of-two pool;
    # for other sizes a gcd != 1 just shortens the cycle, still deterministic).
    stride = 4099 if pool_size > 4099 else 1
    while pool_size > 1 and _gcd(stride, pool_size) != 1:
        stride += 2

    total_bytes = 24
    with open(args.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        sec, usec = START_SEC, 0
        idx = 0
        k = 0
        chunk = 8192
        count = args.count
        while k < count:
            buf = bytearray()
            end = min(count, k + chunk)
            for j in range(k, end):
                st, olen, prefix, base, suffix = pool[idx]
                idx += stride
                if idx >= pool_size:
                    idx -= pool_size
                x = ids[j % n_ids]
                s = base + x
                s = (s & 0xFFFF) + (s >> 16)
                c = (~s) & 0xFFFF or 0xFFFF
                buf += st.pack(sec, usec, olen, olen, prefix, c, x, suffix)
                usec += gaps[j % n_gaps]
                if usec >= 1_000_000:
                    usec -= 1_000_000
                    sec += 1
            f.write(buf)
            total_bytes += len(buf)
            k = end
    dt = time.monotonic() - t0
    print(
        "gen-pcap: wrote %d packets (%d bytes, pool %d, %d client addresses, %.1f%% EDNS in pool, seed %d) to %s in %.2fs"
        % (args.count, total_bytes, pool_size, n_src,
           100.0 * n_edns / pool_size, args.seed, args.out, dt)
    )


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


if __name__ == "__main__":
    sys.exit(main())
