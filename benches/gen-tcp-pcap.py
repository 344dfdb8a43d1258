#!/usr/bin/env python3
"""Generate a deterministic pcap of DNS over TCP for benchmarks.

Each connection: the three-way handshake, a query cut into two segments
(its 2-byte length, then the message), an answer cut into two segments,
and both FINs: nine packets carrying two DNS messages that only TCP
reassembly finds. Clients in 10.0.0.0/8 talk to 10.53.53.53:53, many
connections at once (interleaved), times going forward. Nothing is sent
on the network; addresses are only written into the file.

Usage: python3 benches/gen-tcp-pcap.py --connections N [--seed S] --out FILE

Standard library only. Same arguments produce a byte-identical file.
Checksums are left zero (readers of captures do not check them).
"""

import argparse
import random
import struct

SERVER_IP = bytes((10, 53, 53, 53))
SERVER_MAC = bytes((0x02, 0x00, 0x00, 0x00, 0x00, 0x53))
START_SEC = 1_700_000_000
SYN, FIN, ACK, PSH = 0x02, 0x01, 0x10, 0x08


def encode_name(name):
    out = bytearray()
    for label in name.split("."):
        out.append(len(label))
        out += label.encode("ascii")
    out.append(0)
    return bytes(out)


def packet(src, dst, sport, dport, seq, ack, flags, payload, client_mac):
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    ip_len = 20 + len(tcp) + len(payload)
    iph = struct.pack(">BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 6, 0, src, dst)
    if src == SERVER_IP:
        eth = client_mac + SERVER_MAC + b"\x08\x00"
    else:
        eth = SERVER_MAC + client_mac + b"\x08\x00"
    return eth + iph + tcp + payload


def connection(rng, index):
    """The nine packets of connection `index`, in order."""
    client = bytes((10, (index >> 16) & 0xFF, (index >> 8) & 0xFF, 1 + index % 250))
    mac = bytes((0x02, 0x00)) + client
    sport = 1024 + (index * 7919) % 60000
    cseq, sseq = rng.getrandbits(32), rng.getrandbits(32)
    qid = rng.getrandbits(16)
    qname = encode_name("c%d.tcp.example" % index)
    query = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", 1, 1)
    answer = (
        struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0)
        + qname
        + struct.pack(">HH", 1, 1)
        + b"\xc0\x0c"
        + struct.pack(">HHIH4s", 1, 1, 300, 4, client)
    )
    c, s = (client, SERVER_IP, sport, 53), (SERVER_IP, client, 53, sport)
    qlen, alen = struct.pack(">H", len(query)), struct.pack(">H", len(answer))
    out = [
        packet(*c, cseq, 0, SYN, b"", mac),
        packet(*s, sseq, cseq + 1, SYN | ACK, b"", mac),
        packet(*c, cseq + 1, sseq + 1, ACK, b"", mac),
        packet(*c, cseq + 1, sseq + 1, ACK | PSH, qlen, mac),
        packet(*c, cseq + 3, sseq + 1, ACK | PSH, query, mac),
        packet(*s, sseq + 1, cseq + 3 + len(query), ACK | PSH, alen + answer[:10], mac),
        packet(*s, sseq + 13, cseq + 3 + len(query), ACK | PSH, answer[10:], mac),
        packet(*c, cseq + 3 + len(query), sseq + 3 + len(answer), FIN | ACK, b"", mac),
        packet(*s, sseq + 3 + len(answer), cseq + 4 + len(query), FIN | ACK, b"", mac),
    ]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, required=True, help="TCP connections (9 packets each)")
    parser.add_argument("--seed", type=int, default=1, help="RNG seed (default 1)")
    parser.add_argument("--open", type=int, default=64, help="connections open at once (default 64)")
    parser.add_argument("--out", required=True, help="output pcap path")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        buf = bytearray()
        usec = 0
        # Interleave: a window of open connections, one packet of each in turn.
        pending = []
        started = 0
        while started < args.connections or pending:
            while len(pending) < args.open and started < args.connections:
                pending.append(connection(rng, started))
                started += 1
            still = []
            for packets in pending:
                data = packets.pop(0)
                usec += 7
                sec, frac = divmod(usec, 1_000_000)
                buf += struct.pack("<IIII", START_SEC + sec, frac, len(data), len(data)) + data
                if packets:
                    still.append(packets)
            pending = still
            if len(buf) > 1 << 22:
                f.write(buf)
                buf.clear()
        f.write(buf)


if __name__ == "__main__":
    main()
