#!/usr/bin/env python3
"""tshark's truth for the field corpus (see README.md in this folder).

Usage: python3 truth.py [CAPTURE ...]   (default: every capture listed in sources.tsv)

For each capture writes CAPTURE.truth.json: the per-frame layers (every IP
header outermost first, the transport of the innermost, VLAN ids, tunnel
ids) and one row per DNS message, as tshark 4.0 dissects them with the
preferences of the main corpus (TCP and DNS desegmentation on, IP
defragmentation on, checksums not verified). Standard library only; needs
tshark on the PATH. Nothing here reads dnsluice's output.
"""

import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
PREFS = [
    "-o", "tcp.desegment_tcp_streams:TRUE",
    "-o", "ip.defragment:TRUE",
    "-o", "ipv6.defragment:TRUE",
    "-o", "dns.desegment_dns_messages:TRUE",
    "-o", "tcp.analyze_sequence_numbers:TRUE",
    "-o", "udp.check_checksum:FALSE",
    "-o", "tcp.check_checksum:FALSE",
    "-o", "ip.check_checksum:FALSE",
]
FRAME_COLUMNS = ["frame", "ts", "caplen", "len", "encap", "protocols", "ips", "l4", "sport",
                 "dport", "vlan_ids", "tunnel_ids", "ip_fragment", "n_dns", "expert"]
DNS_COLUMNS = ["frame", "ts", "ip", "transport", "src", "sport", "dst", "dport", "id", "qr",
               "opcode", "rcode", "qdcount", "ancount", "nscount", "arcount", "qname",
               "qname_hex", "qtype", "edns", "tcp_multi_segment", "malformed"]
# Protocols that carry another packet (whose transport is then not the carrier's).
TUNNEL_PROTOS = {"gre", "erspan", "vxlan", "geneve", "gtp", "mpls", "eth", "ppp", "pppoes"}
# Tunnel ids tshark shows, by our tunnel kind.
TUNNEL_FIELDS = {"gre.key": "gre", "gre.key.call_id": "gre", "erspan.spanid": "erspan",
                 "vxlan.vni": "vxlan", "geneve.vni": "geneve", "gtp.teid": "gtp-u",
                 "mpls.label": "mpls"}


def fields(elem):
    """Every field below `elem`, depth first, as (name, element)."""
    for child in elem:
        if child.tag == "field":
            yield child.get("name"), child
        yield from fields(child)


def first(elem, name, attr="show"):
    for n, f in fields(elem):
        if n == name:
            return f.get(attr)
    return None


def number(text):
    if text is None:
        return None
    return int(text, 0)


def uncompressed(hex_name):
    """Is `hex_name` a whole name on the wire: labels up to a zero byte at its end?"""
    data = bytes.fromhex(hex_name)
    pos = 0
    while pos < len(data) and 0 < data[pos] < 64:
        pos += 1 + data[pos]
    return pos == len(data) - 1 and data[pos] == 0


def name_hex(text):
    if text in (None, "."):
        return "00"
    return "".join(f"{len(l):02x}" + l.encode().hex() for l in text.split(".")) + "00"


def counts(proto):
    """The header's four counts (tshark names them after the UPDATE sections for opcode 5)."""
    for names in (("dns.count.queries", "dns.count.answers", "dns.count.auth_rr", "dns.count.add_rr"),
                  ("dns.count.zones", "dns.count.prerequisites", "dns.count.updates", "dns.count.add_rr")):
        values = [number(first(proto, n)) for n in names]
        if values[0] is not None:
            return values
    return [None] * 4


def dns_row(frame, ts, proto, net, transport, segments, malformed):
    """One DNS message (a <proto name="dns"> element)."""
    flags = number(first(proto, "dns.flags", "value") and "0x" + first(proto, "dns.flags", "value"))
    qname = first(proto, "dns.qry.name")
    qname_hex = first(proto, "dns.qry.name", "value")
    if qname == "<Root>":
        qname = "."
    if qname_hex is not None and not uncompressed(qname_hex):
        # A compression pointer: the field's bytes are the pointer, so the
        # name's own bytes are rebuilt from tshark's text (lossless for
        # names of letters, digits and hyphens, which these are).
        qname_hex = name_hex(qname)
    qtype = number(first(proto, "dns.qry.type"))
    # An OPT record anywhere in the message (tshark lists it with the others).
    edns = any(n == "dns.resp.type" and f.get("show") == "41" for n, f in fields(proto))
    return [
        frame, ts, net["ip"], transport["l4"], net["src"], transport["sport"], net["dst"],
        transport["dport"], number(first(proto, "dns.id")),
        None if flags is None else (flags >> 15) & 1,
        None if flags is None else (flags >> 11) & 0xf,
        None if flags is None else flags & 0xf,
        *counts(proto),
        qname, qname_hex, qtype, edns, segments, malformed,
    ]


def dissect(path):
    cmd = ["tshark", "-n", "-r", path] + PREFS + ["-T", "pdml"]
    run = subprocess.run(cmd, capture_output=True)
    root = ET.fromstring(run.stdout.decode("utf-8", "replace") or "<pdml/>")
    frames, messages = [], []
    for packet in root.iter("packet"):
        protos = [p for p in packet if p.tag == "proto"]
        frame_proto = next(p for p in protos if p.get("name") == "frame")
        frame = number(first(frame_proto, "frame.number"))
        ts = first(frame_proto, "frame.time_epoch")
        if ts is not None:
            whole, _, frac = ts.partition(".")
            ts = f"{whole}.{(frac + '000000000')[:9]}"
        ips, l4, sport, dport, vlans, tunnel_ids, fragment = [], None, None, None, [], [], None
        n_dns = 0
        expert = [f.get("show") for n, f in fields(packet) if n == "_ws.expert.message"]
        # The frames whose TCP segments tshark put together for this frame's message.
        segments = [number(f.get("show")) for n, f in fields(packet) if n == "tcp.segment"] or None
        net = {"ip": None, "src": None, "dst": None}
        transport = {"l4": None, "sport": None, "dport": None}
        quoted = False
        for p in protos:
            name = p.get("name")
            if quoted:
                break
            if name in ("icmp", "icmpv6"):
                quoted = True
                l4 = name
                continue
            if name in TUNNEL_PROTOS:
                # The transport seen so far is the carrier's, not the inner packet's.
                l4 = sport = dport = None
                transport = {"l4": None, "sport": None, "dport": None}
            if name == "vlan":
                vlans.append(number(first(p, "vlan.id")))
            if name in ("ip", "ipv6"):
                v = 4 if name == "ip" else 6
                src = first(p, "ip.src" if v == 4 else "ipv6.src")
                dst = first(p, "ip.dst" if v == 4 else "ipv6.dst")
                ips.append([v, src, dst])
                net = {"ip": v, "src": src, "dst": dst}
                l4 = sport = dport = None
                mf = first(p, "ip.flags.mf")
                off = first(p, "ip.frag_offset")
                if v == 4 and (mf == "1" or (off not in (None, "0"))):
                    fragment = {"mf": number(mf), "offset_bytes": number(off), "id": number(first(p, "ip.id"))}
                if v == 6 and first(p, "ipv6.fraghdr.offset") is not None:
                    fragment = {"mf": number(first(p, "ipv6.fraghdr.more")),
                                "offset_units": number(first(p, "ipv6.fraghdr.offset")),
                                "id": number(first(p, "ipv6.fraghdr.ident"))}
            if name in ("udp", "tcp"):
                l4 = name
                sport = number(first(p, name + ".srcport"))
                dport = number(first(p, name + ".dstport"))
                transport = {"l4": l4, "sport": sport, "dport": dport}
            for key, kind in TUNNEL_FIELDS.items():
                for n, f in fields(p):
                    if n == key and p.get("name") == key.split(".")[0]:
                        tunnel_ids.append([kind, number(f.get("show"))])
            if name == "dns":
                n_dns += 1
                malformed = any(q.get("name") == "_ws.malformed" for q in protos)
                messages.append(dns_row(frame, ts, p, net, transport, segments, malformed))
        frames.append([
            frame, ts, number(first(frame_proto, "frame.cap_len")), number(first(frame_proto, "frame.len")),
            first(frame_proto, "frame.encap_type"), first(frame_proto, "frame.protocols"), ips, l4,
            sport, dport, vlans or None, tunnel_ids or None, fragment, n_dns, expert or None,
        ])
    return " ".join(cmd), run.returncode, run.stderr.decode("utf-8", "replace"), frames, messages


def truth(path):
    data = open(path, "rb").read()
    command, code, stderr, frames, messages = dissect(path)
    version = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    col = {c: i for i, c in enumerate(DNS_COLUMNS)}
    counts = {
        "frames": len(frames),
        "dns_messages": len(messages),
        "dns_queries": sum(1 for m in messages if m[col["qr"]] == 0),
        "dns_responses": sum(1 for m in messages if m[col["qr"]] == 1),
        "dns_udp": sum(1 for m in messages if m[col["transport"]] == "udp"),
        "dns_tcp": sum(1 for m in messages if m[col["transport"]] == "tcp"),
        "tunneled_frames": sum(1 for f in frames if len(f[6]) > 1 or f[11]),
    }
    return {
        "schema": "field-1",
        "file": os.path.basename(path),
        "size_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "tshark": {"version": version, "command": command.replace(path, os.path.basename(path)),
                   "exit_code": code, "stderr": stderr.replace(path, os.path.basename(path)).replace("Running as user \"root\" and group \"root\". This could be dangerous.\n", "")},
        "counts": counts,
        "frames": {"columns": FRAME_COLUMNS, "rows": frames},
        "dns_messages": {"columns": DNS_COLUMNS, "rows": messages},
    }


def write(path):
    doc = truth(path)
    with open(path + ".truth.json", "w") as out:
        head = {k: v for k, v in doc.items() if k not in ("frames", "dns_messages")}
        text = json.dumps(head, indent=1)[:-2]
        for table in ("frames", "dns_messages"):
            rows = ",\n".join(json.dumps(r) for r in doc[table]["rows"])
            text += f',\n "{table}": {{"columns": {json.dumps(doc[table]["columns"])}, "rows": [\n{rows}\n]}}'
        out.write(text + "\n}\n")
    return doc["counts"]


def main():
    names = sys.argv[1:]
    if not names:
        with open(os.path.join(HERE, "sources.tsv")) as f:
            names = [line.split("\t")[0] for line in f if line.strip() and not line.startswith("#")][1:]
        names = [os.path.join(HERE, n) for n in names]
    for name in names:
        print(os.path.basename(name), write(name))


if __name__ == "__main__":
    main()
