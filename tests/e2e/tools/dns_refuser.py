#!/usr/bin/env python3
"""Answer every DNS query on 127.0.0.1:PORT with REFUSED, at once.

A stand-in server for tests that need a DNS client (kdig) to get answers
quickly. Exits after IDLE seconds without a query (bounded, loopback only)."""
import socket
import sys

port = int(sys.argv[1])
idle = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", port))
s.settimeout(idle)
print("ready", flush=True)
try:
    while True:
        q, addr = s.recvfrom(4096)
        if len(q) < 12:
            continue
        # same id and question; QR=1, opcode copied, RCODE=5 (REFUSED)
        flags = ((q[2] | 0x80) << 8) | (q[3] & 0x70) | 5
        s.sendto(q[:2] + flags.to_bytes(2, "big") + q[4:], addr)
except socket.timeout:
    pass
