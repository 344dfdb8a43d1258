#!/usr/bin/env python3
"""Writes the zones that tests/servers/up.sh serves with knot.

    gen_zone.py OUTDIR [COUNT]

lookup.test.zone: n0 .. n{COUNT-1} (default 100000) A records, plus a few
names of every record type the lookup tools support (see FIXED below), and
under rr.lookup.test. one or two records of every type whose RDATA lookups
decode into fields (typed_zone.py; what was written is in typed.json).
0.0.10.in-addr.arpa.zone: PTR records back to n0 .. n255.
axfr.test.zone: a zone knot lets anyone transfer, AXFR_FILLER A records
(several TCP messages), nameservers ns1 and ns2 (knot) and ns3 (nothing
listens there); its records, in zone order, are in axfr.json.
noaxfr.test.zone: a zone knot refuses to transfer.

The address of nI is the one address_of(I) returns: 10.a.b.c with
I = a*65536 + b*256 + c (so n12345 is 10.0.48.57). Tests that check answers
use the same rule; keep the two in step.
"""

import json
import os
import sys

import typed_zone

ZONE = "lookup.test."
REVERSE = "0.0.10.in-addr.arpa."
TTL = 3600
# How many A records `big` has: 40 * 16 bytes is well past 512 bytes.
BIG_COUNT = 40
AXFR_ZONE = "axfr.test."
NOAXFR_ZONE = "noaxfr.test."
# 10,000 A records of 16 bytes each: an AXFR of several 64 KiB messages.
AXFR_FILLER = 10000

FIXED = r"""
@        SOA   ns1 hostmaster 1 3600 600 86400 300
@        NS    ns1
@        NS    ns2
ns1      A     127.0.0.1
ns2      A     127.0.0.3
v6       AAAA  2001:db8::1
dual     A     192.0.2.10
dual     AAAA  2001:db8::10
mx       MX    10 mail1
mx       MX    20 mail2
mail1    A     192.0.2.25
mail2    A     192.0.2.26
txt      TXT   "hello world"
txt-multi TXT  "first" "second" "third"
txt-special TXT "quote\" backslash\\ semi; tab\009 utf8\195\169 dot."
www      CNAME alias
alias    CNAME target
target   A     192.0.2.80
target   AAAA  2001:db8::80
_dns._udp SRV  0 5 53 ns1
_sip._tcp SRV  10 60 5060 sip
sip      A     192.0.2.50
caa      CAA   0 issue "ca.example.net"
caa      CAA   128 iodef "mailto:security@lookup.test"
https    HTTPS 1 . alpn=h2,h3 port=8443
svc      HTTPS 0 https
ptr      PTR   n1
sub.ent  A     192.0.2.99
spf      TXT   "v=spf1 include:_spf.lookup.test -all"
spf      TXT   "an unrelated text record"
spf-case TXT   "V=SPF1 ip4:192.0.2.0/24 -all"
spf-split TXT  "v=spf1 " "ip4:192.0.2.0/24 -all"
nospf    TXT   "v=spf10 is not spf"
_dmarc   TXT   "v=DMARC1; p=reject; rua=mailto:dmarc@lookup.test"
_dmarc.spaced TXT "v = DMARC1 ;\009p=none"
_dmarc.bad TXT "v=DMARC2; p=none"
"""


def address_of(i):
    """The A record of n<i>.lookup.test."""
    return "10.%d.%d.%d" % ((i >> 16) & 255, (i >> 8) & 255, i & 255)


def write_lookup(path, count):
    with open(path, "w") as f:
        f.write("$ORIGIN %s\n$TTL %d\n" % (ZONE, TTL))
        f.write(FIXED.lstrip())
        # `ent` has no records of its own, only `sub.ent` below it: an empty
        # non-terminal (NOERROR, no answer).
        for k in range(BIG_COUNT):
            f.write("big A 192.0.2.%d\n" % (k + 1))
        f.write("".join("n%d A %s\n" % (i, address_of(i)) for i in range(count)))
        f.write(typed_zone.zone_lines())


def axfr_records():
    """axfr.test.'s records in zone-file order: (owner, type, RDATA as dig
    prints it)."""
    z = AXFR_ZONE
    head = [
        (z, "SOA", "ns1.%s hostmaster.%s 2024010101 3600 600 86400 300" % (z, z)),
        (z, "NS", "ns1." + z),
        (z, "NS", "ns2." + z),
        (z, "NS", "ns3." + z),
        ("ns1." + z, "A", "127.0.0.1"),
        ("ns2." + z, "A", "127.0.0.3"),
        ("ns3." + z, "A", "127.0.0.9"),
        ("text." + z, "TXT", '"zone transfer test"'),
    ] + typed_zone.axfr_zone_lines(z)
    filler = [("r%d.%s" % (i, z), "A", address_of(i)) for i in range(AXFR_FILLER)]
    return head + filler


def write_axfr(outdir):
    records = axfr_records()
    with open(os.path.join(outdir, AXFR_ZONE + "zone"), "w") as f:
        f.write("$TTL %d\n" % TTL)
        f.write("".join("%s %s %s\n" % r for r in records))
    with open(os.path.join(outdir, "axfr.json"), "w") as f:
        json.dump([{"name": n, "type": t, "answer": a} for n, t, a in records], f)
    with open(os.path.join(outdir, NOAXFR_ZONE + "zone"), "w") as f:
        z = NOAXFR_ZONE
        f.write("$ORIGIN %s\n$TTL %d\n" % (z, TTL))
        f.write("@ SOA ns1 hostmaster 1 3600 600 86400 300\n")
        f.write("@ NS ns1\n@ NS ns2\nns1 A 127.0.0.1\nns2 A 127.0.0.3\n")
        f.write('secret TXT "not for transfer"\n')


def write_reverse(path):
    with open(path, "w") as f:
        f.write("$ORIGIN %s\n$TTL %d\n" % (REVERSE, TTL))
        f.write("@ SOA ns1.%s hostmaster.%s 1 3600 600 86400 300\n" % (ZONE, ZONE))
        f.write("@ NS ns1.%s\n" % ZONE)
        f.write("".join("%d PTR n%d.%s\n" % (i, i, ZONE) for i in range(256)))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    outdir = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) == 3 else 100000
    os.makedirs(outdir, exist_ok=True)
    write_lookup(os.path.join(outdir, ZONE + "zone"), count)
    write_reverse(os.path.join(outdir, REVERSE + "zone"))
    write_axfr(outdir)
    with open(os.path.join(outdir, "typed.json"), "w") as f:
        json.dump(typed_zone.truth(ZONE, AXFR_ZONE, TTL), f, indent=1)


if __name__ == "__main__":
    main()
