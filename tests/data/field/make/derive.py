#!/usr/bin/env python3
"""Re-encapsulates the DNS packets of a real capture (make.sh's VXLAN one) in
the encapsulations the kernel here cannot make: IP-in-IP, IPv6-in-IPv4
(6in4), GRE with a key over IPv4 and GRE over IPv6, MPLS (two labels), a PPPoE session on Ethernet,
LINKTYPE_PPP_ETHER (51), and DLT_NULL with an Ethertype (`0f 00 08 00`).

Usage: derive.py VXLAN_PCAP OUTDIR. Outer addresses are documentation ones
(203.0.113.0/24, 2001:db8::/32); the files are written, never sent.
"""

import sys

from scapy.contrib.mpls import MPLS
from scapy.all import (GRE, IP, IPv6, PPP, PPPoE, Ether, Raw, VXLAN, PcapWriter,
                       conf, rdpcap)

OUTER4 = dict(src="203.0.113.1", dst="203.0.113.2")
MAC = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def inner_packets(path):
    """The inner IP packets (IPv4 and IPv6) of the VXLAN capture, with their times."""
    for p in rdpcap(path):
        if VXLAN in p and (IP in p[VXLAN] or IPv6 in p[VXLAN]):
            inner = p[VXLAN].payload.payload  # past the inner Ethernet header
            yield p.time, inner


def write(path, linktype, frames):
    w = PcapWriter(path, linktype=linktype, sync=True)
    for t, f in frames:
        raw = bytes(f)
        pkt = Raw(raw)
        pkt.time = t
        w.write(pkt)
    w.close()


def main():
    src, out = sys.argv[1], sys.argv[2]
    inner = list(inner_packets(src))
    v4 = [(t, p) for t, p in inner if p.version == 4]
    v6 = [(t, p) for t, p in inner if p.version == 6]
    write(f"{out}/made-ipip.pcap", 1, [(t, Ether(**MAC) / IP(proto=4, **OUTER4) / p) for t, p in v4])
    write(f"{out}/made-6in4.pcap", 1, [(t, Ether(**MAC) / IP(proto=41, **OUTER4) / p) for t, p in v6])
    write(f"{out}/made-gre-key.pcap", 1,
          [(t, Ether(**MAC) / IP(**OUTER4) / GRE(key_present=1, key=0x1234, proto=0x0800 if p.version == 4 else 0x86dd) / p)
           for t, p in inner])
    write(f"{out}/made-gre-ipv6.pcap", 1,
          [(t, Ether(**MAC) / IPv6(src="2001:db8::1", dst="2001:db8::2") / GRE(proto=0x0800 if p.version == 4 else 0x86dd) / p)
           for t, p in inner])
    write(f"{out}/made-mpls.pcap", 1,
          [(t, Ether(**MAC, type=0x8847) / MPLS(label=16, s=0, ttl=64) / MPLS(label=1000, s=1, ttl=64) / p)
           for t, p in inner])
    write(f"{out}/made-pppoe.pcap", 1,
          [(t, Ether(**MAC) / PPPoE(sessionid=0x11) / PPP(proto=0x0021 if p.version == 4 else 0x0057) / p)
           for t, p in inner])
    write(f"{out}/made-ppp-ether.pcap", 51,
          [(t, PPPoE(sessionid=0x11) / PPP(proto=0x0021 if p.version == 4 else 0x0057) / p) for t, p in inner])
    write(f"{out}/made-null-ethertype.pcap", 0,
          [(t, Raw(b"\x0f\x00\x08\x00") / p) for t, p in v4])


if __name__ == "__main__":
    conf.verb = 0
    main()
