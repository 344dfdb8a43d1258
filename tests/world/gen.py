#!/usr/bin/env python3
"""Generates the simulated internet of tests/world (see README.md there).

    gen.py --out DIR [--net 127.53] [--zones 5000] [--seed 1]
           [--bench-names 100000] [--leaf-instances 4] [--deep 12]
           [--delay-ms 300] [--netem PATH] [--authserver PATH]
           [--wan BIND_NET [--wan-delay-ms 5-20] [--wan-loss 0.5%]]

With --wan, the world is behind an emulated wide-area network: every server
listens on BIND_NET.a.b instead of NET.a.b (the addresses the zones, glue and
hints name), and one dnsluice-netem forwards each NET.a.b to its BIND_NET.a.b
with its own one-way delay (drawn from --wan-delay-ms, per address, from the
seed) and loss each way. Nothing else changes, so the truth (expected.jsonl)
is the same. unbound (the truth's resolver, not an authority) stays on its
public address and resolves through the emulated network, from 64 source
ports (the emulator keeps a socket per client); [::1] stays direct (it is
one address for every world on the machine).

Writes into DIR (absolute paths inside, so DIR must not move):
  named.root        root hints (named.root format) for resolvers
  expected.jsonl    the truth: one JSON object per test query
  names.txt         the distinct names of expected.jsonl
  bench-names.txt   --bench-names host names for the iterative benchmark
  layout.json       every server instance: software, addresses, zones
  instances.tsv     name, kind, addresses to check, command line (up.sh)
  <instance>/       each instance's config and zone files
Deterministic: the same arguments give the same bytes.
"""

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402
from model import TTL, Model, is_below  # noqa: E402

TLDS = ["com", "net", "org", "io", "xyz"]
NEG_TTL = 300
SERIAL = 2026010101
HOSTS_PER_ZONE = 20
KEY = ("mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxIL"
       "fDLUT0rAK9iUzy1L53eKGQ==")
V6_ADDRESS = "::1"


class World:
    def __init__(self, args):
        self.a = args
        self.net = args.net
        self.model = Model()
        self.instances = {}  # name -> dict
        self.served = {}  # zone -> [instance names]
        self.expected = []
        self.py_servers = []
        self.rng = random.Random(args.seed)
        # Public address -> the address its server listens on (--wan).
        self.binds = {}

    # --- helpers -------------------------------------------------------------
    def ip(self, a, b):
        return f"{self.net}.{a}.{b}"

    def bind(self, addr):
        """The address a server whose public address is `addr` listens on."""
        return self.binds.get(addr, addr)

    def instance(self, name, software, addrs, version=None, **extra):
        self.instances[name] = dict(
            name=name, software=software, addresses=addrs, zones=[],
            version=version, **extra)

    def new_zone(self, apex, instances, ns, broken=None, glue=True):
        """A zone with SOA and NS, delegated from its parent with `ns`
        ([(name, [addresses])]); glue goes into the parent where the parent
        holds the NS name, and into the zone itself where it is in-zone."""
        z = self.model.zone(apex, broken)
        z.add(apex, TTL, "SOA",
              f"{ns[0][0]} hostmaster.{apex if apex != '.' else ''} "
              f"{SERIAL} 7200 3600 1209600 {NEG_TTL}")
        for name, _ in ns:
            z.add(apex, TTL, "NS", name)
        for name, addrs in ns:
            if is_below(name, apex):
                for addr in addrs:
                    z.add(name, TTL, "AAAA" if ":" in addr else "A", addr)
        if apex != ".":
            parent = self.model.zone_of(self._parent(apex))
            for name, _ in ns:
                parent.add(apex, TTL, "NS", name)
            if glue:
                for name, addrs in ns:
                    # Glue in the parent for names the parent's servers can
                    # answer: in the child, or elsewhere under the parent.
                    if is_below(name, parent.apex):
                        for addr in addrs:
                            parent.add(name, TTL, "AAAA" if ":" in addr else "A", addr)
        for inst in instances:
            self.instances[inst]["zones"].append(apex)
        self.served[apex] = list(instances)
        return z

    def _parent(self, apex):
        return apex.split(".", 1)[1] or "."

    def expect(self, name, rtype, case=None, **extra):
        rcode, answers = self.model.resolve(name, rtype)
        self.add_expected(name, rtype, rcode, answers, case, **extra)

    def add_expected(self, name, rtype, rcode, answers, case=None, **extra):
        entry = {"name": name, "type": rtype, "rcode": rcode,
                 "answers": [dict(name=o, type=t, ttl=ttl, data=d)
                             for (o, ttl, t, d) in answers]}
        if case:
            entry["case"] = case
        entry.update(extra)
        self.expected.append(entry)

    def word(self):
        cons, vows = "bdfgklmnprstvz", "aeiou"
        return "".join(self.rng.choice(cons) + self.rng.choice(vows)
                       for _ in range(self.rng.randint(2, 3)))

    # --- the hierarchy ---------------------------------------------------------
    def build(self):
        a = self.a
        ip = self.ip
        self.instance("root", "knot", [ip(0, 1), ip(0, 2), ip(0, 3)], "knot world root")
        self.instance("tld-a", "knot", [ip(1, b) for b in range(1, 7)], "knot world tld-a")
        self.instance("tld-b", "knot", [ip(2, b) for b in range(1, 5)], "knot world tld-b")
        for k in range(a.leaf_instances):
            addrs = [ip(10 + k, b) for b in range(1, 5)]
            if k == 0:
                addrs.append(ip(52, 1))  # answers REFUSED for lame.com
            # The last leaf instance hides its version (version.bind refused).
            version = None if k == a.leaf_instances - 1 else f"knot world leaf{k}"
            self.instance(f"leaf{k}", "knot", addrs, version)
        self.instance("edge", "knot", [ip(40, b) for b in range(1, 5)], "knot world edge")
        for d in range(1, a.deep + 1):
            self.instance(f"deep{d}", "nsd", [ip(30, d)], f"nsd world deep{d}")
        self.instance("v6", "nsd", [V6_ADDRESS], "nsd world v6")
        self.instance("tc", "dnsdist", [ip(50, 1)], backend=ip(40, 1))
        self.instance("slow", "netem", [ip(51, 1)], backend=ip(40, 1),
                      delay_ms=a.delay_ms)
        self.instance("py", "authserver.py", [ip(53, 1), ip(54, 1), ip(54, 2), ip(54, 3),
                                             ip(55, 1)])
        self.instance("unbound", "unbound", [ip(99, 1)])

        roots = [(f"{c}.root-servers.net.", [ip(0, i + 1)]) for i, c in enumerate("abc")]
        self.new_zone(".", ["root"], roots)
        tld_ns = {
            "com": [("a.nic.com.", [ip(1, 1)]), ("b.nic.com.", [ip(1, 2)])],
            "net": [("a.nic.net.", [ip(1, 3)]), ("b.nic.net.", [ip(1, 4)])],
            "org": [("a.nic.org.", [ip(1, 5)]), ("c.nic.net.", [ip(1, 6)])],
            "io": [("a.nic.io.", [ip(2, 1)]), ("b.nic.io.", [ip(2, 2)])],
            "xyz": [("ns1.nic.xyz.", [ip(2, 3)]), ("ns2.nic.xyz.", [ip(2, 4)])],
        }
        for tld in TLDS:
            inst = "tld-b" if tld in ("io", "xyz") else "tld-a"
            self.new_zone(tld + ".", [inst], tld_ns[tld])
        # c.nic.net serves org; the root has its glue, net its address.
        self.model.zones["net."].add("c.nic.net.", TTL, "A", ip(1, 6))
        self.new_zone("root-servers.net.", ["root"], roots)

        self.leaves()
        self.edges()
        self.deep_chain()

    def leaf_ns(self, k, i, apex):
        if i % 2 == 0:  # in-bailiwick names, with glue
            return [(f"ns1.{apex}", [self.ip(10 + k, 1 + i % 4)]),
                    (f"ns2.{apex}", [self.ip(10 + k, 1 + (i + 1) % 4)])]
        return [(f"ns1.host{k}.net.", [self.ip(10 + k, 1)]),
                (f"ns2.host{k}.net.", [self.ip(10 + k, 2)])]

    def leaves(self):
        a = self.a
        for k in range(a.leaf_instances):
            apex = f"host{k}.net."
            z = self.new_zone(apex, [f"leaf{k}"],
                              [(f"ns1.{apex}", [self.ip(10 + k, 1)]),
                               (f"ns2.{apex}", [self.ip(10 + k, 2)])])
            z.add(apex, TTL, "A", self.ip(10 + k, 1))
        hosts = max(HOSTS_PER_ZONE, -(-a.bench_names // max(a.zones, 1)))
        self.leaf_names = []
        bench = []
        for i in range(a.zones):
            k = i % a.leaf_instances
            tld = TLDS[(i // a.leaf_instances) % len(TLDS)]
            apex = f"{self.word()}{i}.{tld}."
            self.leaf_names.append(apex)
            z = self.new_zone(apex, [f"leaf{k}"], self.leaf_ns(k, i, apex))
            hi, lo = (i >> 8) & 255, i & 255
            addr = f"198.51.{hi}.{lo}" if i < 65536 else f"198.52.{hi}.{lo}"
            z.add(apex, TTL, "A", addr)
            if i % 3 == 0:
                z.add(apex, TTL, "AAAA", f"2001:db8:{i:x}::1")
            z.add(apex, TTL, "MX", f"10 mail.{apex}")
            z.add(f"mail.{apex}", TTL, "A", f"198.18.{hi}.{lo}")
            if i % 5 == 0:
                z.add(f"mail.{apex}", TTL, "AAAA", f"2001:db8:{i:x}::25")
            z.add(apex, TTL, "TXT", f'"v=spf1 ip4:{addr} mx -all"')
            z.add(f"_dmarc.{apex}", TTL, "TXT",
                  f'"v=DMARC1; p=reject; rua=mailto:dmarc@{apex[:-1]}"')
            if i % 4 == 1:
                z.add(f"www.{apex}", TTL, "CNAME", apex)
            else:
                z.add(f"www.{apex}", TTL, "A", addr)
            for j in range(hosts):
                z.add(f"h{j}.{apex}", TTL, "A", f"10.{hi}.{lo}.{j % 256}")
                bench.append(f"h{j}.{apex}")
        random.Random(self.a.seed + 1).shuffle(bench)
        self.bench = bench[: a.bench_names]

    def zone_on(self, apex, inst, ns_addrs, **kw):
        """A zone on one instance (or none) with NS names ns1, ns2, ... in it."""
        ns = [(f"ns{n + 1}.{apex}", [addr]) for n, addr in enumerate(ns_addrs)]
        return self.new_zone(apex, [inst] if inst else [], ns, **kw)

    def edges(self):
        ip = self.ip
        e1, e2, e3 = ip(40, 1), ip(40, 2), ip(40, 3)
        # glueless.org: its NS is under io, whose zone's NS is under net.
        self.new_zone("gluelessdns.io.", ["leaf2"], [("ns1.host2.net.", [ip(12, 1)])])
        self.model.zones["gluelessdns.io."].add("ns1.gluelessdns.io.", TTL, "A", e3)
        z = self.new_zone("glueless.org.", ["edge"], [("ns1.gluelessdns.io.", [e3])])
        z.add("www.glueless.org.", TTL, "A", "192.0.2.1")
        # sibling.com: NS in another com zone; com has its glue.
        self.zone_on("siblinghost.com.", "edge", [e1])
        z = self.new_zone("sibling.com.", ["edge"], [("ns1.siblinghost.com.", [e1])])
        z.add("www.sibling.com.", TTL, "A", "192.0.2.2")
        # mixed.com: one in-zone NS with glue, one glueless out of zone.
        z = self.new_zone("mixed.com.", ["edge", "leaf3"],
                          [("ns1.mixed.com.", [e1]), ("ns1.host3.net.", [])])
        z.add("www.mixed.com.", TTL, "A", "192.0.2.3")
        # Lame: the first server REFUSES (or is silent), the second works.
        for apex, bad in (("lame.com.", ip(52, 1)), ("lamesilent.com.", ip(53, 1)),
                          ("upward.com.", ip(55, 1))):
            z = self.zone_on(apex, "edge", [bad, e2])
            z.add("www." + apex, TTL, "A", "192.0.2.4")
        # Every server lame: no answer to be had.
        for apex, bad in (("deadlame.com.", ip(52, 1)), ("deadsilent.com.", ip(53, 1))):
            z = self.zone_on(apex, None, [bad], broken=f"only {bad}")
            z.add("www." + apex, TTL, "A", "192.0.2.5")
        # noglue.com: in-zone NS, no glue in com: cannot be reached.
        z = self.zone_on("noglue.com.", "edge", [e1], broken="no glue", glue=False)
        z.add("www.noglue.com.", TTL, "A", "192.0.2.6")
        # CNAME chain across three zones on three servers.
        zb = self.zone_on("cname-b.net.", "leaf1", [ip(11, 3)])
        zc = self.zone_on("cname-c.org.", "leaf2", [ip(12, 3)])
        za = self.zone_on("cname-a.com.", "edge", [e1, e2])
        za.add("www.cname-a.com.", TTL, "CNAME", "www.cname-b.net.")
        zb.add("www.cname-b.net.", TTL, "CNAME", "www.cname-c.org.")
        zc.add("www.cname-c.org.", TTL, "A", "192.0.2.10")
        za.add("dangling.cname-a.com.", TTL, "CNAME", "nothing.cname-c.org.")
        # DNAME: old.dname.com -> new.dname-target.net.
        zt = self.zone_on("dname-target.net.", "leaf2", [ip(12, 4)])
        zt.add("www.new.dname-target.net.", TTL, "A", "192.0.2.20")
        zt.add("mail.new.dname-target.net.", TTL, "MX", "10 www.new.dname-target.net.")
        z = self.zone_on("dname.com.", "edge", [e1])
        z.add("old.dname.com.", TTL, "DNAME", "new.dname-target.net.")
        # CNAME loops: across two zones on two servers, and onto itself.
        zl = self.zone_on("cnameloop-a.com.", "edge", [e2])
        zr = self.zone_on("cnameloop-b.org.", "leaf3", [ip(13, 3)])
        zl.add("loop.cnameloop-a.com.", TTL, "CNAME", "loop.cnameloop-b.org.")
        zr.add("loop.cnameloop-b.org.", TTL, "CNAME", "loop.cnameloop-a.com.")
        zl.add("self.cnameloop-a.com.", TTL, "CNAME", "self.cnameloop-a.com.")
        # Wildcard.
        z = self.zone_on("wild.com.", "edge", [e1])
        z.add("*.wild.com.", 600, "A", "192.0.2.30")
        z.add("*.wild.com.", 600, "TXT", '"wildcard"')
        z.add("exists.wild.com.", TTL, "A", "192.0.2.31")
        # A server that truncates every UDP answer; a slow one.
        z = self.zone_on("tc.com.", "edge", [ip(50, 1)])
        z.add("www.tc.com.", TTL, "A", "192.0.2.40")
        z.add("big.tc.com.", TTL, "TXT", '"' + "x" * 200 + '" "' + "y" * 200 + '"')
        z = self.zone_on("slow.com.", "edge", [ip(51, 1)])
        z.add("www.slow.com.", TTL, "A", "192.0.2.41")
        # AXFR allowed from loopback, and refused.
        for apex in ("axfr.com.", "noaxfr.com."):
            z = self.zone_on(apex, "edge", [e1, e2])
            z.add("www." + apex, TTL, "A", "192.0.2.50")
            z.add("mail." + apex, TTL, "A", "192.0.2.51")
            z.add(apex, TTL, "MX", f"10 mail.{apex}")
            z.add(apex, TTL, "TXT", '"v=spf1 mx -all"')
        self.instances["edge"]["axfr_allowed"] = ["axfr.com."]
        # IPv6-only glue: the only server is on ::1.
        z = self.new_zone("v6only.net.", ["v6"], [("ns1.v6only.net.", [V6_ADDRESS])])
        z.add("www.v6only.net.", TTL, "A", "192.0.2.60")
        z.add("www.v6only.net.", TTL, "AAAA", "2001:db8::60")
        self.rdata_zone()
        self.python_zones()

    def rdata_zone(self):
        z = self.zone_on("rdata.com.", "edge", [self.ip(40, 4)])
        com = self.model.zones["com."]
        r = "rdata.com."
        com.add(r, TTL, "DS", "12345 13 2 "
                "49FD46E6C4B45C55D4AC69CBD3CD34AC1AFE51DE6FA6AA6A5D9A41FCAA4A8DCA")
        for owner, rtype, data in [
            (r, "DNSKEY", f"257 3 13 {KEY}"),
            (r, "NSEC3PARAM", "1 0 10 AABBCCDD"),
            (r, "CAA", '0 issue "letsencrypt.org"'),
            (r, "NAPTR", '100 10 "S" "SIP+D2U" "" _sip._udp.rdata.com.'),
            (r, "A", "192.0.2.70"),
            (r, "TXT", '"v=spf1 ip4:192.0.2.0/24 include:_spf.rdata.com ~all"'),
            ("_dmarc.rdata.com.", "TXT",
             '"v=DMARC1; p=quarantine; pct=50; rua=mailto:agg@rdata.com"'),
            ("rrsig.rdata.com.", "RRSIG", "A 13 3 3600 20300101000000 20250101000000 "
             f"12345 rdata.com. {KEY}"),
            ("nsec.rdata.com.", "NSEC", "next.rdata.com. A TXT RRSIG NSEC"),
            ("_443._tcp.www.rdata.com.", "TLSA", "3 1 1 0C72AC70B745AC19998811B131D66"
             "2C9AC69DBDBE7CB23E5B514B56664C5D3D6"),
            ("host.rdata.com.", "SSHFP", "4 2 123456789ABCDEF67890123456789ABCDEF678901"
             "23456789ABCDEF123456789"),
            ("loc.rdata.com.", "LOC", "52 22 23 N 4 53 32 E -2m 1m 10000m 10m"),
            ("cert.rdata.com.", "CERT", f"3 0 0 {KEY}"),
            ("_http._tcp.rdata.com.", "URI", '10 1 "https://www.rdata.com/"'),
            ("svc.rdata.com.", "SVCB", "1 svc-target.rdata.com. alpn=h2,h3 port=8443 "
             "ipv4hint=192.0.2.7"),
            ("www.rdata.com.", "HTTPS", "1 . alpn=h2 ipv6hint=2001:db8::70"),
            ("www.rdata.com.", "A", "192.0.2.70"),
            ("_sip._udp.rdata.com.", "SRV", "10 5 5060 sip.rdata.com."),
            ("hinfo.rdata.com.", "HINFO", '"PC" "Linux"'),
            ("ptr.rdata.com.", "PTR", "www.rdata.com."),
            ("txt.rdata.com.", "TXT", '"one" "two words" "semi;colon"'),
        ]:
            z.add(owner, TTL, rtype, data)

    def python_zones(self):
        """Zones served by authserver.py: poison.com (answers right, adds
        out-of-bailiwick records), handmade.org (an NSEC3 record, which
        knot and nsd keep out of answers) and noedns.com (FORMERR to EDNS
        queries, as servers from before EDNS answer)."""
        ip = self.ip
        p = self.zone_on("poison.com.", "py", [ip(54, 1)])
        p.add("www.poison.com.", TTL, "A", "192.0.2.80")
        p.add("poison.com.", TTL, "MX", "10 www.poison.com.")
        h = self.zone_on("handmade.org.", "py", [ip(54, 2)])
        h.add("2t7b4g4vsa5smi47k61mv5bv1a22bojr.handmade.org.", TTL, "NSEC3",
              "1 0 10 AABBCCDD 2vptu5timamqttgl4luu9kg21e0aor3s A RRSIG")
        h.add("www.handmade.org.", TTL, "A", "192.0.2.81")
        n = self.zone_on("noedns.com.", "py", [ip(54, 3)])
        n.add("www.noedns.com.", TTL, "A", "192.0.2.82")
        victim = self.leaf_names[0]
        self.poison = {
            "additional": [
                (f"www.{victim}", TTL, "A", "192.0.2.66"),
                ("a.nic.com.", TTL, "A", ip(54, 1)),
                (f"ns1.host0.net.", TTL, "A", ip(54, 1)),
            ],
            "authority": [
                ("com.", TTL, "NS", "ns1.poison.com."),
                (victim, TTL, "NS", "ns1.poison.com."),
            ],
        }
        self.victim = victim

    def deep_chain(self):
        apex = "deep.com."
        self.deep = []
        for d in range(1, self.a.deep + 1):
            if d > 1:
                apex = f"l{d}.{apex}"
            z = self.new_zone(apex, [f"deep{d}"], [(f"ns.{apex}", [self.ip(30, d)])])
            z.add(f"www.{apex}", TTL, "A", f"192.0.2.{100 + d}")
            self.deep.append(apex)

    # --- the truth -------------------------------------------------------------
    def truths(self):
        first_leaf = self.leaf_names[0]
        # Poison first: the victims after it must still resolve right.
        self.expect("www.poison.com.", "A", "poison")
        self.expect("poison.com.", "MX", "poison")
        self.expect("nothing.poison.com.", "A", "poison")
        self.expect(f"www.{self.victim}", "A", "poison-victim")
        self.expect("a.nic.com.", "A", "poison-victim")
        self.expect("ns1.host0.net.", "A", "poison-victim")
        self.expect("com.", "NS", "poison-victim")
        self.expect(self.victim, "NS", "poison-victim")
        # NXDOMAIN and NODATA at each level.
        self.expect("nosuchtld.", "A", "nxdomain-root")
        self.expect(".", "A", "nodata-root")
        self.expect(".", "NS", "root")
        self.expect("nosuchzone.com.", "A", "nxdomain-tld")
        self.expect("com.", "MX", "nodata-tld")
        self.expect(f"nosuchname.{first_leaf}", "A", "nxdomain-leaf")
        leaf_a = next(n for i, n in enumerate(self.leaf_names) if i % 4 != 1)
        self.expect(f"www.{leaf_a}", "TXT", "nodata-leaf")
        for name, rtype, case in [
            ("www.glueless.org.", "A", "glueless"),
            ("www.sibling.com.", "A", "sibling-glue"),
            ("www.mixed.com.", "A", "mixed-glue"),
            ("www.lame.com.", "A", "lame-refused"),
            ("www.lamesilent.com.", "A", "lame-silent"),
            ("www.upward.com.", "A", "upward-referral"),
            ("www.deadlame.com.", "A", "all-lame-refused"),
            ("www.deadsilent.com.", "A", "all-lame-silent"),
            ("www.noglue.com.", "A", "missing-glue"),
            ("www.cname-a.com.", "A", "cname-chain"),
            ("www.cname-a.com.", "CNAME", "cname-chain"),
            ("dangling.cname-a.com.", "A", "cname-dangling"),
            ("www.old.dname.com.", "A", "dname"),
            ("mail.old.dname.com.", "MX", "dname"),
            ("loop.cnameloop-a.com.", "A", "cname-loop"),
            ("self.cnameloop-a.com.", "A", "cname-loop"),
            ("anything.wild.com.", "A", "wildcard"),
            ("a.b.wild.com.", "A", "wildcard"),
            ("anything.wild.com.", "TXT", "wildcard"),
            ("anything.wild.com.", "MX", "wildcard-nodata"),
            ("exists.wild.com.", "A", "wildcard-exists"),
            ("exists.wild.com.", "TXT", "wildcard-exists"),
            ("www.tc.com.", "A", "truncating"),
            ("big.tc.com.", "TXT", "truncating"),
            ("www.slow.com.", "A", "slow"),
            ("www.v6only.net.", "A", "ipv6-only-glue"),
            ("www.v6only.net.", "AAAA", "ipv6-only-glue"),
            ("www.axfr.com.", "A", "axfr"),
            ("www.noaxfr.com.", "A", "axfr"),
            ("www.handmade.org.", "A", "handmade"),
            ("www.noedns.com.", "A", "noedns"),
        ]:
            self.expect(name, rtype, case)
        for d, apex in enumerate(self.deep, start=1):
            self.expect(f"www.{apex}", "A", f"deep-{d}")
        for rtype, owner in [
            ("DNSKEY", ""), ("DS", ""), ("NSEC3PARAM", ""), ("CAA", ""), ("NAPTR", ""),
            ("MX", ""), ("TXT", ""), ("SOA", ""), ("NS", ""), ("A", ""),
            ("TXT", "_dmarc."), ("RRSIG", "rrsig."), ("NSEC", "nsec."),
            ("TLSA", "_443._tcp.www."), ("SSHFP", "host."), ("LOC", "loc."),
            ("CERT", "cert."), ("URI", "_http._tcp."), ("SVCB", "svc."),
            ("HTTPS", "www."), ("SRV", "_sip._udp."), ("HINFO", "hinfo."),
            ("PTR", "ptr."), ("TXT", "txt."),
        ]:
            self.expect(f"{owner}rdata.com.", rtype, "rdata")
        self.expect("2t7b4g4vsa5smi47k61mv5bv1a22bojr.handmade.org.", "NSEC3", "rdata")
        # A sample of every leaf zone: one name rotating through the types,
        # and one host.
        kinds = [("www.", "A"), ("", "MX"), ("", "TXT"), ("_dmarc.", "TXT"),
                 ("", "AAAA"), ("", "NS"), ("", "SOA"), ("mail.", "A"), ("www.", "AAAA")]
        for i, apex in enumerate(self.leaf_names):
            pre, rtype = kinds[i % len(kinds)]
            self.expect(pre + apex, rtype, "leaf")
            self.expect(f"h{i % HOSTS_PER_ZONE}.{apex}", "A", "leaf")
        self.server_truths()

    def server_truths(self):
        """Questions for one server, not for a resolver: version.bind, AXFR."""
        for inst in self.instances.values():
            if inst["software"] not in ("knot", "nsd"):
                continue
            server = inst["addresses"][0]
            if inst["version"]:
                self.add_expected("version.bind.", "TXT", "NOERROR",
                                  [("version.bind.", 0, "TXT", f'"{inst["version"]}"')],
                                  "bindversion", **{"class": "CH", "server": server})
            else:
                self.add_expected("version.bind.", "TXT", "REFUSED", [], "bindversion",
                                  **{"class": "CH", "server": server})
        for apex, rcode in (("axfr.com.", "NOERROR"), ("noaxfr.com.", "NOTAUTH")):
            recs = self.model.zones[apex].records if rcode == "NOERROR" else []
            soa = [r for r in recs if r[2] == "SOA"]
            rest = sorted(r for r in recs if r[2] != "SOA")
            self.add_expected(apex, "AXFR", rcode, soa + rest + soa, "axfr",
                              server=self.ip(40, 1))

    def wan(self):
        """--wan: every IPv4 server moves to its BIND_NET address, and a
        netem instance forwards each public address to it."""
        a = self.a
        rng = random.Random(a.seed + 7)
        low, high = (int(x) for x in a.wan_delay_ms.split("-"))
        links = []
        for inst in list(self.instances.values()):
            if inst["software"] == "unbound":
                continue
            for addr in inst["addresses"]:
                if ":" in addr:
                    continue
                bound = a.wan + addr[len(self.net):]
                self.binds[addr] = bound
                links.append(f"{addr}:53={bound}:53,delay={rng.randint(low, high)}ms")
        self.instance("wan", "netem_wan", sorted(self.binds), links=links)

    # --- writing -----------------------------------------------------------------
    def write(self):
        out = self.a.out
        os.makedirs(out, exist_ok=True)
        layout = {"net": self.net, "seed": self.a.seed, "zones": self.a.zones,
                  "wan": self.a.wan, "instances": list(self.instances.values())}
        for inst in self.instances.values():
            os.makedirs(os.path.join(out, inst["name"]), exist_ok=True)
        for apex, insts in self.served.items():
            z = self.model.zones[apex]
            for inst in insts:
                self.write_zone(os.path.join(out, inst, "zones"), z)
        tsv = []
        for inst in self.instances.values():
            writer = getattr(configs, inst["software"].replace(".", "_").replace("-", "_"))
            argv, checks = writer(self, inst, os.path.join(out, inst["name"]))
            inst["checks"] = checks
            tsv.append("\t".join([inst["name"], inst["software"],
                                  ",".join(inst_ports(self, inst)), " ".join(argv)]))
        with open(os.path.join(out, "instances.tsv"), "w") as f:
            f.write("\n".join(tsv) + "\n")
        with open(os.path.join(out, "layout.json"), "w") as f:
            json.dump(layout, f, indent=1)
            f.write("\n")
        with open(os.path.join(out, "named.root"), "w") as f:
            f.write("; root hints of the dnsluice test world (tests/world/gen.py)\n")
            for rr in self.model.zones["."].records:
                if rr[0] == "." and rr[2] == "NS":
                    f.write(f".                        3600000      NS    {rr[3]}\n")
            for rr in self.model.zones["."].records:
                if rr[0].endswith("root-servers.net.") and rr[2] in ("A", "AAAA"):
                    f.write(f"{rr[0]:<24} 3600000      {rr[2]:<5} {rr[3]}\n")
        with open(os.path.join(out, "expected.jsonl"), "w") as f:
            for e in self.expected:
                f.write(json.dumps(e, sort_keys=True) + "\n")
        names = []
        for e in self.expected:
            if "server" not in e and e["name"] not in names:
                names.append(e["name"])
        with open(os.path.join(out, "names.txt"), "w") as f:
            f.write("".join(n + "\n" for n in names))
        with open(os.path.join(out, "bench-names.txt"), "w") as f:
            f.write("".join(n + "\n" for n in self.bench))

    def write_zone(self, zdir, z):
        os.makedirs(zdir, exist_ok=True)
        fname = "root.zone" if z.apex == "." else z.apex + "zone"
        with open(os.path.join(zdir, fname), "w") as f:
            recs = z.records
            for owner, ttl, rtype, data in [r for r in recs if r[2] == "SOA"] + \
                    [r for r in recs if r[2] != "SOA"]:
                f.write(f"{owner} {ttl} IN {rtype} {data}\n")


def inst_ports(world, inst):
    """The ports an instance binds: its public addresses' ports (the wan
    instance's) or the addresses its server listens on."""
    addrs = inst["addresses"] if inst["software"] == "netem_wan" else \
        [world.bind(a) for a in inst["addresses"]]
    return [f"[{a}]:53" if ":" in a else f"{a}:53" for a in addrs]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--net", default="127.53", help="first two octets of every address")
    p.add_argument("--zones", type=int, default=5000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bench-names", type=int, default=100000)
    p.add_argument("--leaf-instances", type=int, default=4)
    p.add_argument("--deep", type=int, default=12, help="zones in the deep chain")
    p.add_argument("--delay-ms", type=int, default=300)
    p.add_argument("--netem", default="dnsluice-netem")
    p.add_argument("--wan", default=None, metavar="BIND_NET",
                   help="put the world behind a network emulator; servers listen on BIND_NET")
    p.add_argument("--wan-delay-ms", default="5-20", help="one-way delay range per address")
    p.add_argument("--wan-loss", default="0.5%", help="loss each way")
    p.add_argument("--authserver", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "authserver.py"))
    a = p.parse_args()
    a.out = os.path.abspath(a.out)
    if a.leaf_instances < 4:
        p.error("--leaf-instances must be at least 4 (the edge cases use four)")
    w = World(a)
    w.build()
    w.truths()
    if a.wan:
        w.wan()
    w.write()


if __name__ == "__main__":
    main()
