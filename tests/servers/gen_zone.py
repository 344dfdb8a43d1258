#!/usr/bin/env python3
"""Writes the zones that tests/servers/up.sh serves with knot.

    gen_zone.py OUTDIR [COUNT]

lookup.test.zone: n0 .. n{COUNT-1} (default 100000) A records, plus a few
names of every record type the lookup tools support (see FIXED below).
0.0.10.in-addr.arpa.zone: PTR records back to n0 .. n255.

The address of nI is the one address_of(I) returns: 10.a.b.c with
I = a*65536 + b*256 + c (so n12345 is 10.0.48.57). Tests that check answers
use the same rule; keep the two in step.
"""

import os
import sys

ZONE = "lookup.test."
REVERSE = "0.0.10.in-addr.arpa."
TTL = 3600
# How many A records `big` has: 40 * 16 bytes is well past 512 bytes.
BIG_COUNT = 40

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


if __name__ == "__main__":
    main()
