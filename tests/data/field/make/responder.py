#!/usr/bin/env python3
"""A minimal DNS responder for making captures (standard library only).

Usage: responder.py ADDRESS PORT SECONDS

Answers every query on UDP and TCP with the question echoed, QR and AA set,
and one A record (192.0.2.53) for A questions (NODATA otherwise); stops
after SECONDS. Only for the captures made by make.sh, inside network
namespaces it creates: it serves nothing else.
"""

import socket
import struct
import sys
import threading
import time


def answer(query: bytes) -> bytes:
    if len(query) < 12:
        return b""
    ident, flags, qdcount = struct.unpack("!HHH", query[:6])
    pos = 12
    while pos < len(query) and query[pos] != 0:
        pos += 1 + query[pos]
    question = query[12:pos + 5]
    qtype = struct.unpack("!H", query[pos + 1:pos + 3])[0] if pos + 3 <= len(query) else 0
    records = b""
    if qtype == 1:
        records = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + bytes([192, 0, 2, 53])
    header = struct.pack("!HHHHHH", ident, 0x8400 | (flags & 0x0100), 1, 1 if records else 0, 0, 0)
    return header + question + records


def serve_udp(sock):
    while True:
        try:
            data, peer = sock.recvfrom(65535)
        except OSError:
            return
        sock.sendto(answer(data), peer)


def serve_tcp(sock):
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            buf = b""
            while True:
                chunk = conn.recv(65535)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
                    n = struct.unpack("!H", buf[:2])[0]
                    reply = answer(buf[2:2 + n])
                    conn.sendall(struct.pack("!H", len(reply)) + reply)
                    buf = buf[2 + n:]


def main():
    address, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    udp = socket.socket(family, socket.SOCK_DGRAM)
    udp.bind((address, port))
    tcp = socket.socket(family, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((address, port))
    tcp.listen(8)
    for target, sock in ((serve_udp, udp), (serve_tcp, tcp)):
        threading.Thread(target=target, args=(sock,), daemon=True).start()
    time.sleep(seconds)


if __name__ == "__main__":
    main()
