#!/usr/bin/env python3
"""Helpers for tests/world/up.sh (Python standard library only).

    ctl.py free ADDR:PORT...       exit 1 naming the first address whose
                                   UDP or TCP port another process holds
    ctl.py wait LAYOUT.json SECS   wait until every instance in the layout
                                   answers its checks; exit 1 naming those
                                   that did not
"""

import json
import random
import socket
import struct
import sys
import time

QTYPES = {"SOA": 6, "NS": 2, "A": 1}


def split(addr):
    host, port = addr.rsplit(":", 1)
    return host.strip("[]"), int(port)


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def held(host, port):
    """The protocol ("UDP"/"TCP") on which host:port is taken, or None."""
    for kind, name in ((socket.SOCK_DGRAM, "UDP"), (socket.SOCK_STREAM, "TCP")):
        s = socket.socket(family(host), kind)
        if kind == socket.SOCK_STREAM:  # TIME_WAIT leftovers are no conflict
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return name
        finally:
            s.close()
    return None


def free(addrs):
    for addr in addrs:
        proto = held(*split(addr))
        if proto:
            sys.exit(f"tests/world: {proto} {addr} is already in use by another process "
                     "(another world? stop it with its tests/world/down.sh, or give this "
                     "one other addresses: DNSLUICE_WORLD_NET=127.N)")


def query(qname, qtype, rd):
    qid = random.randrange(65536)
    wire = b"".join(bytes([len(l)]) + l.encode() for l in qname.rstrip(".").split(".") if l)
    msg = struct.pack("!6H", qid, 0x0100 if rd else 0, 1, 0, 0, 0) + wire + b"\0" \
        + struct.pack("!HH", QTYPES[qtype], 1)
    return qid, msg


def check(c):
    """True when the check passes once."""
    host = c["addr"]
    if c["expect"] == "bound":
        return held(host, 53) is not None
    qid, msg = query(c["qname"], c["qtype"], c.get("rd", False))
    s = socket.socket(family(host), socket.SOCK_DGRAM)
    s.settimeout(c.get("timeout", 0.3))
    try:
        s.sendto(msg, (host, 53))
        reply, _ = s.recvfrom(65535)
    except OSError:
        return False
    finally:
        s.close()
    if len(reply) < 12:
        return False
    rid, flags, _, an, ns, _ = struct.unpack("!6H", reply[:12])
    rcode = flags & 0xF
    if rid != qid:
        return False
    return {
        "aa": rcode == 0 and flags & 0x0400,
        "tc": flags & 0x0200,
        "referral": rcode == 0 and ns > 0,
        "answer": rcode == 0 and an > 0,
    }[c["expect"]]


def wait(layout_path, secs):
    with open(layout_path) as f:
        layout = json.load(f)
    pending = {(i["name"], n): c for i in layout["instances"]
               for n, c in enumerate(i.get("checks", []))}
    deadline = time.monotonic() + secs
    while pending and time.monotonic() < deadline:
        for key in [k for k, c in pending.items() if check(c)]:
            del pending[key]
        if pending:
            time.sleep(0.1)
    if pending:
        bad = sorted({f"{name} ({c['addr']})" for (name, _), c in pending.items()})
        sys.exit("tests/world: no answer in time from " + ", ".join(bad))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "free":
        free(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "wait":
        wait(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
