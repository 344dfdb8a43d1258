"""Records of every type whose RDATA lookups decode into fields (ZDNS's
shapes), for tests/servers/gen_zone.py, with the generator's own record of
what it wrote.

RECORDS lists (owner, type, zone-file RDATA, fields): the owner under
lookup.test., the RDATA as the zone file says it, and the fields a lookup
record must show for it, computed here from the same values (hex digests
lower-case, base64 without spaces, times as YYYYMMDDHHMMSS, names with their
trailing dot where ZDNS keeps it). gen_zone.py writes the zone lines and
typed.json (this list as JSON); tests read typed.json.
"""

import base64

KEY = bytes(range(64))
KEY_B64 = base64.b64encode(KEY).decode()
DIGEST = bytes(range(32)).hex()
SIG = bytes(range(100, 164))
SIG_B64 = base64.b64encode(SIG).decode()
CERT = bytes(range(200, 250))
CERT_B64 = base64.b64encode(CERT).decode()
FP = bytes(range(1, 33)).hex()
SALT = "aabbccdd"
# base32hex (RFC 4648 §7) of 20 bytes: an NSEC3 next hashed owner.
NEXT_HASH = base64.b32hexencode(bytes(range(20))).decode().rstrip("=")
ECH = bytes([0x00, 0x49, 0xFE, 0x0D, 0x00, 0x45])


def loc_raw(deg, minutes, sec, hemi):
    """RFC 1876 §2: thousandths of an arc second, 2^31 at the equator or
    the prime meridian."""
    ms = round(((deg * 60 + minutes) * 60 + sec) * 1000)
    return 2**31 + (-ms if hemi in "SW" else ms)


def loc_prec(metres):
    """RFC 1876 §2: size and precision, base and power of ten of centimetres."""
    cm = round(metres * 100)
    exp = 0
    while cm >= 10:
        cm //= 10
        exp += 1
    return cm << 4 | exp


def loc_fields(lat, lon, alt_m, size, hp, vp):
    """The fields ZDNS gives a LOC record, with its `coordinates` text."""
    raw_lat, raw_lon = loc_raw(*lat), loc_raw(*lon)
    raw_alt = round(alt_m * 100) + 10000000

    def dms(raw, pos, neg):
        s = (raw - 2**31) / 1000.0
        hemi = pos if s >= 0 else neg
        s = abs(s)
        d = int(s) // 3600
        m = (int(s) % 3600) // 60
        return "%d %d %.3f %s" % (d, m, s - (d * 3600 + m * 60), hemi)

    def metres(code):
        return (code >> 4) * 10 ** (code & 15) / 100.0

    codes = [loc_prec(size), loc_prec(hp), loc_prec(vp)]
    coords = "%s %s %.2fm %s" % (
        dms(raw_lat, "N", "S"),
        dms(raw_lon, "E", "W"),
        raw_alt / 100.0 - 100000.0,
        " ".join("%gm" % metres(c) for c in codes),
    )
    return {
        "version": 0,
        "size": codes[0],
        "horizontal_pre": codes[1],
        "vertical_pre": codes[2],
        "latitude": raw_lat,
        "longitude": raw_lon,
        "altitude": raw_alt,
        "coordinates": coords,
    }


RECORDS = [
    ("dnskey.rr", "DNSKEY", "257 3 13 " + KEY_B64,
     {"flags": 257, "protocol": 3, "algorithm": 13, "public_key": KEY_B64}),
    ("cdnskey.rr", "CDNSKEY", "256 3 8 " + KEY_B64,
     {"flags": 256, "protocol": 3, "algorithm": 8, "public_key": KEY_B64}),
    ("ds.rr", "DS", "12345 13 2 " + DIGEST,
     {"key_tag": 12345, "algorithm": 13, "digest_type": 2, "digest": DIGEST}),
    ("cds.rr", "CDS", "54321 8 2 " + DIGEST,
     {"key_tag": 54321, "algorithm": 8, "digest_type": 2, "digest": DIGEST}),
    ("rrsig.rr", "RRSIG",
     "A 13 3 3600 20300101000000 20240102030405 12345 lookup.test. " + SIG_B64,
     {"type_covered": 1, "algorithm": 13, "labels": 3, "original_ttl": 3600,
      "expiration": "20300101000000", "inception": "20240102030405",
      "keytag": 12345, "signer_name": "lookup.test.", "signature": SIG_B64}),
    ("nsec.rr", "NSEC", "next.rr.lookup.test. A MX TXT AAAA RRSIG NSEC TYPE1234",
     {"next_domain": "next.rr.lookup.test",
      "type_bit_map": "A MX TXT AAAA RRSIG NSEC TYPE1234"}),
    # ZDNS writes NSEC3PARAM in its NSEC3 shape, salt_length and the
    # hash fields left at their zero values.
    ("nsec3param.rr", "NSEC3PARAM", "1 0 5 " + SALT,
     {"hash_algorithm": 1, "flags": 0, "iterations": 5, "salt_length": 0,
      "salt": SALT, "hash_length": 0, "next_domain": "", "type_bit_map": ""}),
    ("_443._tcp.tlsa.rr", "TLSA", "3 1 1 " + DIGEST,
     {"cert_usage": 3, "selector": 1, "matching_type": 1, "certificate": DIGEST}),
    ("smimea.rr", "SMIMEA", "3 0 2 " + DIGEST,
     {"usage": 3, "selector": 0, "matching_type": 2, "certificate": DIGEST}),
    # ZDNS's SSHFP `type` (the fingerprint type) stands where the record
    # type would be.
    ("sshfp.rr", "SSHFP", "4 2 " + FP,
     {"algorithm": 4, "type": 2, "fingerprint": FP}),
    ("naptr.rr", "NAPTR", '100 10 "S" "SIP+D2U" "" _sip._udp.lookup.test.',
     {"order": 100, "preference": 10, "flags": "S", "service": "SIP+D2U",
      "regexp": "", "replacement": "_sip._udp.lookup.test."}),
    ("naptr-re.rr", "NAPTR", '100 50 "u" "E2U+sip" "!^.*$!sip:info@lookup.test!" .',
     {"order": 100, "preference": 50, "flags": "u", "service": "E2U+sip",
      "regexp": "!^.*$!sip:info@lookup.test!", "replacement": "."}),
    ("loc.rr", "LOC", "52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m",
     loc_fields((52, 22, 23.0, "N"), (4, 53, 32.0, "E"), -2.0, 0, 10000, 10)),
    ("loc-sw.rr", "LOC", "33 51 24.100 S 151 12 40.000 W 123.45m 2m 1000000m 90000000m",
     loc_fields((33, 51, 24.1, "S"), (151, 12, 40.0, "W"), 123.45, 2, 1000000, 90000000)),
    # ZDNS's CERT `type` is the certificate type's mnemonic.
    ("cert.rr", "CERT", "PKIX 12345 RSASHA256 " + CERT_B64,
     {"type": "PKIX", "keytag": 12345, "algorithm": "RSASHA256", "certificate": CERT_B64}),
    ("cert-pgp.rr", "CERT", "PGP 0 ECDSAP256SHA256 " + CERT_B64,
     {"type": "PGP", "keytag": 0, "algorithm": "ECDSAP256SHA256", "certificate": CERT_B64}),
    ("_ftp._tcp.uri.rr", "URI", '10 1 "ftp://ftp1.lookup.test/public"',
     {"priority": 10, "weight": 1, "target": "ftp://ftp1.lookup.test/public"}),
    ("svcb.rr", "SVCB",
     "1 svc-target.lookup.test. mandatory=alpn alpn=h2,h3 no-default-alpn port=8443 "
     "ipv4hint=192.0.2.1,192.0.2.2 ech=%s ipv6hint=2001:db8::1 key65000=hello"
     % base64.b64encode(ECH).decode(),
     {"priority": 1, "target": "svc-target.lookup.test.",
      "svcparams": {"mandatory": ["alpn"], "alpn": ["h2", "h3"], "no-default-alpn": True,
                    "port": 8443, "ipv4hint": ["192.0.2.1", "192.0.2.2"],
                    "ech": base64.b64encode(ECH).decode(), "ipv6hint": ["2001:db8::1"],
                    "key65000": base64.b64encode(b"hello").decode()}}),
    ("https.rr", "HTTPS", "1 . alpn=h2 port=443",
     {"priority": 1, "target": ".", "svcparams": {"alpn": ["h2"], "port": 443}}),
    ("https-alias.rr", "HTTPS", "0 www.lookup.test.",
     {"priority": 0, "target": "www.lookup.test."}),
    ("caa.rr", "CAA", '0 issue "ca.example.net; account=123"',
     {"flag": 0, "tag": "issue", "value": "ca.example.net; account=123"}),
    ("caa-critical.rr", "CAA", '128 iodef "mailto:security@lookup.test"',
     {"flag": 128, "tag": "iodef", "value": "mailto:security@lookup.test"}),
    ("srv.rr", "SRV", "10 60 5060 sip.lookup.test.",
     {"priority": 10, "weight": 60, "port": 5060, "target": "sip.lookup.test."}),
    ("mx.rr", "MX", "10 mail1.lookup.test.",
     {"preference": 10, "answer": "mail1.lookup.test."}),
    ("hinfo.rr", "HINFO", '"PDP-11" "UNIX"', {"cpu": "PDP-11", "os": "UNIX"}),
    ("txt.rr", "TXT", '"first" "sec\\"ond" "tab\\009"',
     {"answer": 'first\nsec\\"ond\ntab\\009'}),
    ("a.rr", "A", "192.0.2.1", {"answer": "192.0.2.1"}),
    ("aaaa.rr", "AAAA", "2001:db8::1", {"answer": "2001:db8::1"}),
    ("aaaa-mapped.rr", "AAAA", "::ffff:192.0.2.1", {"answer": "::ffff:192.0.2.1"}),
    ("ptr.rr", "PTR", "n1.lookup.test.", {"answer": "n1.lookup.test."}),
    ("cname.rr", "CNAME", "target.lookup.test.", {"answer": "target.lookup.test."}),
    ("dname.rr", "DNAME", "lookup.test.", {"answer": "lookup.test."}),
]

# NSEC3 records, which knot keeps apart from the zone's other names and
# serves only in a transfer: written into axfr.test. (gen_zone.py), found
# in its AXFR.
AXFR_RECORDS = [
    ("nsec3", "NSEC3", "1 1 10 %s %s A NS SOA RRSIG DNSKEY NSEC3PARAM" % (SALT, NEXT_HASH),
     {"hash_algorithm": 1, "flags": 1, "iterations": 10, "salt_length": 4,
      "salt": SALT, "hash_length": 20, "next_domain": NEXT_HASH,
      "type_bit_map": "A NS SOA RRSIG DNSKEY NSEC3PARAM"}),
    ("nsec3-nosalt", "NSEC3", "1 0 0 - %s A" % NEXT_HASH,
     {"hash_algorithm": 1, "flags": 0, "iterations": 0, "salt_length": 0,
      "salt": "", "hash_length": 20, "next_domain": NEXT_HASH, "type_bit_map": "A"}),
]

# Records gen_zone.py writes elsewhere (the apex's SOA and NS), with the
# fields they must show; not written again.
APEX = [
    ("@", "SOA", "ns1 hostmaster 1 3600 600 86400 300",
     {"ns": "ns1.lookup.test", "mbox": "hostmaster.lookup.test", "serial": 1,
      "refresh": 3600, "retry": 600, "expire": 86400, "min_ttl": 300}),
]

# The record types listed above, by number (the tests ask for each).
TYPE_CODES = {
    "A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "HINFO": 13, "MX": 15,
    "TXT": 16, "AAAA": 28, "LOC": 29, "SRV": 33, "NAPTR": 35, "CERT": 37,
    "DNAME": 39, "DS": 43, "SSHFP": 44, "RRSIG": 46, "NSEC": 47, "DNSKEY": 48,
    "NSEC3": 50, "NSEC3PARAM": 51, "TLSA": 52, "SMIMEA": 53, "CDS": 59,
    "CDNSKEY": 60, "SVCB": 64, "HTTPS": 65, "URI": 256, "CAA": 257,
}


def zone_lines():
    """The records as zone-file lines (owners relative to lookup.test.)."""
    return "".join("%s %s %s\n" % (owner, rtype, rdata) for owner, rtype, rdata, _ in RECORDS)


def axfr_zone_lines(zone):
    """AXFR_RECORDS as (owner, type, RDATA) with owners in full."""
    return [("%s.%s" % (o, zone), t, r) for o, t, r, _ in AXFR_RECORDS]


def truth(zone, axfr_zone, ttl):
    """The generator's record of what it wrote, for typed.json: `via` is
    "query" (ask for name and type) or "axfr" (find it in axfr_zone's AXFR)."""
    def entry(zone, owner, rtype, rdata, fields, via):
        name = zone.rstrip(".") if owner == "@" else "%s.%s" % (owner, zone.rstrip("."))
        return {"name": name, "type": rtype, "code": TYPE_CODES[rtype], "ttl": ttl,
                "rdata": rdata, "fields": fields, "via": via}

    return [entry(zone, *r, "query") for r in APEX + RECORDS] + [
        entry(axfr_zone, *r, "axfr") for r in AXFR_RECORDS
    ]
