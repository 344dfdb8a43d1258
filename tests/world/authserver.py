#!/usr/bin/env python3
"""A small authoritative DNS server for the edge cases knot and nsd will not
play (Python standard library only; UDP and TCP on port 53 of each address).

    authserver.py CONFIG.json

CONFIG (written by gen.py): {"zones": {APEX: [[owner, ttl, type, data]...]},
"servers": [{"addr", "mode", ...}]}. Modes, one per address:
  normal   answers its zone as an authoritative server does
  poison   the same, plus out-of-bailiwick records ("additional" and
           "authority" lists) in every answer: a resolver must drop them
  upward   answers every question with a referral to the root (not AA)
  silent   reads every query and never answers (UDP and TCP)
  noedns   a server from before EDNS (RFC 6891 section 7): a query with an
           OPT record gets FORMERR without one; others as "normal"
It encodes the record types its zones use: A AAAA NS CNAME SOA TXT MX NSEC3.
"""

import base64
import json
import socket
import struct
import sys
import threading

TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28,
         "RRSIG": 46, "NSEC": 47, "DNSKEY": 48, "NSEC3": 50}
NOERROR, NXDOMAIN, REFUSED, FORMERR = 0, 3, 5, 1


def wire_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def txt_strings(data):
    """'"a" "b c"' -> [b"a", b"b c"] (backslash escapes one character)."""
    out, cur, inside, i = [], b"", False, 0
    while i < len(data):
        c = data[i]
        if c == '"':
            if inside:
                out.append(cur)
                cur = b""
            inside = not inside
        elif c == "\\" and inside:
            i += 1
            cur += data[i].encode()
        elif inside:
            cur += c.encode()
        i += 1
    return out


def type_bitmap(types):
    windows = {}
    for t in types:
        code = TYPES[t]
        win, bit = divmod(code, 256)
        bits = windows.setdefault(win, bytearray(32))
        bits[bit // 8] |= 0x80 >> (bit % 8)
    out = b""
    for win in sorted(windows):
        bits = bytes(windows[win]).rstrip(b"\0")
        out += bytes([win, len(bits)]) + bits
    return out


def rdata(rtype, data):
    f = data.split()
    if rtype == "A":
        return socket.inet_pton(socket.AF_INET, data)
    if rtype == "AAAA":
        return socket.inet_pton(socket.AF_INET6, data)
    if rtype in ("NS", "CNAME"):
        return wire_name(data)
    if rtype == "MX":
        return struct.pack("!H", int(f[0])) + wire_name(f[1])
    if rtype == "SOA":
        return wire_name(f[0]) + wire_name(f[1]) + struct.pack("!5I", *map(int, f[2:7]))
    if rtype == "TXT":
        return b"".join(bytes([len(s)]) + s for s in txt_strings(data))
    if rtype == "NSEC3":
        salt = b"" if f[3] == "-" else bytes.fromhex(f[3])
        nxt = base64.b32hexdecode(f[4].upper())
        return (struct.pack("!BBH", int(f[0]), int(f[1]), int(f[2]))
                + bytes([len(salt)]) + salt + bytes([len(nxt)]) + nxt + type_bitmap(f[5:]))
    raise ValueError(f"authserver.py cannot encode {rtype}")


def wire_rr(rr):
    owner, ttl, rtype, data = rr
    body = rdata(rtype, data)
    return wire_name(owner) + struct.pack("!HHIH", TYPES[rtype], 1, ttl, len(body)) + body


def parse_question(msg):
    """(id, flags, qname, qtype, end of question) or None if malformed."""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if qd != 1:
        return None
    pos, labels = 12, []
    while True:
        if pos >= len(msg):
            return None
        n = msg[pos]
        pos += 1
        if n == 0:
            break
        if n > 63 or pos + n > len(msg):
            return None
        labels.append(msg[pos:pos + n].decode("ascii", "replace").lower())
        pos += n
    if pos + 4 > len(msg):
        return None
    qtype, _qclass = struct.unpack("!HH", msg[pos:pos + 4])
    return qid, flags, ".".join(labels) + ".", qtype, pos + 4


def has_opt(msg, qend):
    """True when the first additional record after the question is an OPT
    (the root name, then TYPE 41): how an EDNS query looks."""
    arcount = struct.unpack("!H", msg[10:12])[0]
    return arcount > 0 and msg[qend:qend + 3] == b"\0\0\x29"


def below(name, zone):
    return zone == "." or name == zone or name.endswith("." + zone)


class Server:
    def __init__(self, conf, zones):
        self.conf = conf
        self.mode = conf["mode"]
        self.zone = conf.get("zone")
        self.records = [tuple(r) for r in zones.get(self.zone, [])]

    def answer(self, msg):
        q = parse_question(msg)
        if q is None:
            return None
        qid, flags, qname, qtype, qend = q
        question = msg[12:qend]
        rd = flags & 0x0100
        if self.mode == "noedns" and has_opt(msg, qend):
            return self.message(qid, rd, FORMERR, False, question, [], [], [])
        if self.mode == "upward":
            return self.message(qid, rd, NOERROR, False, question, [],
                                self.conf["referral"], self.conf["glue"])
        if not below(qname, self.zone):
            return self.message(qid, rd, REFUSED, False, question, [], [], [])
        soa = [r for r in self.records if r[2] == "SOA"]
        apex_ns = [r for r in self.records if r[0] == self.zone and r[2] == "NS"]
        glue = [r for r in self.records if r[2] in ("A", "AAAA")
                and any(r[0] == ns[3] for ns in apex_ns)]
        at = [r for r in self.records if r[0] == qname]
        match = [r for r in at if TYPES[r[2]] == qtype]
        if not match:
            match = [r for r in at if r[2] == "CNAME"]
        if match:
            rcode, answer, authority, additional = NOERROR, match, apex_ns, glue
        elif at or any(r[0].endswith("." + qname) for r in self.records):
            rcode, answer, authority, additional = NOERROR, [], soa, []
        else:
            rcode, answer, authority, additional = NXDOMAIN, [], soa, []
        if self.mode == "poison":
            authority = authority + [tuple(r) for r in self.conf["authority"]]
            additional = additional + [tuple(r) for r in self.conf["additional"]]
        return self.message(qid, rd, rcode, True, question, answer, authority, additional)

    @staticmethod
    def message(qid, rd, rcode, aa, question, answer, authority, additional):
        flags = 0x8000 | rd | rcode | (0x0400 if aa else 0)
        head = struct.pack("!6H", qid, flags, 1, len(answer), len(authority), len(additional))
        return head + question + b"".join(wire_rr(r) for r in answer + authority + additional)

    # --- sockets ---------------------------------------------------------------
    def run(self):
        addr = self.conf["addr"]
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.bind((addr, 53))
        tcp = socket.socket(family, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((addr, 53))
        tcp.listen(64)
        threading.Thread(target=self.serve_udp, args=(udp,), daemon=True).start()
        threading.Thread(target=self.serve_tcp, args=(tcp,), daemon=True).start()

    def serve_udp(self, sock):
        while True:
            msg, peer = sock.recvfrom(65535)
            if self.mode == "silent":
                continue
            reply = self.safe_answer(msg)
            if reply is None:
                continue
            if len(reply) > 512:  # no EDNS here: truncate to the header
                reply = reply[:2] + bytes([reply[2] | 0x02, reply[3]]) + b"\0\1\0\0\0\0\0\0" \
                    + msg[12:parse_question(msg)[4]]
            sock.sendto(reply, peer)

    def serve_tcp(self, sock):
        while True:
            conn, _ = sock.accept()
            threading.Thread(target=self.serve_conn, args=(conn,), daemon=True).start()

    def serve_conn(self, conn):
        conn.settimeout(30)
        try:
            while True:
                head = recv_exact(conn, 2)
                if head is None:
                    return
                msg = recv_exact(conn, struct.unpack("!H", head)[0])
                if msg is None:
                    return
                if self.mode == "silent":
                    continue
                reply = self.safe_answer(msg)
                if reply is not None:
                    conn.sendall(struct.pack("!H", len(reply)) + reply)
        except OSError:
            pass
        finally:
            conn.close()

    def safe_answer(self, msg):
        try:
            return self.answer(msg)
        except (ValueError, KeyError, UnicodeError) as e:
            print(f"authserver.py {self.conf['addr']}: {e}", file=sys.stderr, flush=True)
            return None


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        conf = json.load(f)
    servers = [Server(s, conf["zones"]) for s in conf["servers"]]
    for s in servers:
        for rr in s.records:  # fail at start, not on the first query
            wire_rr(rr)
        s.run()
    print("authserver.py: serving " + ", ".join(
        f"{s.conf['addr']} ({s.mode})" for s in servers), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
