#!/usr/bin/env python3
"""Send N Pinba request packets (protobuf, Pinba.Request) to 127.0.0.1:PORT:
messages FIRST .. FIRST + N - 1 (FIRST defaults to 0).

The messages are encoded here by hand, field by field, so that the test
needs no protobuf library: hostname, server_name and script_name (strings),
request_count, document_size and memory_peak (varints), request_time,
ru_utime and ru_stime (floats), and i % 4 timers (hit counts and values).
Message i is the same in every run. Sent 50 at a time with a pause, so that
the receiver's socket buffer does not drop any."""
import socket
import struct
import sys
import time


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def key(field, wire):
    return varint(field << 3 | wire)


def string(field, v):
    v = v.encode()
    return key(field, 2) + varint(len(v)) + v


def uint(field, v):
    return key(field, 0) + varint(v)


def flt(field, v):
    return key(field, 5) + struct.pack("<f", v)


def request(i):
    m = (string(1, "web%d" % (i % 3)) + string(2, "example.org") +
         string(3, "/page/%d.php" % (i % 7)) + uint(4, 1) + uint(5, 1000 + i) +
         uint(6, 2000000 + 64 * i) + flt(7, 0.001 * (i % 50 + 1)) +
         flt(8, 0.0005) + flt(9, 0.00025))
    for _ in range(i % 4):
        m += uint(10, 1)
    for t in range(i % 4):
        m += flt(11, 0.0001 * (t + 1))
    return m


port, n = int(sys.argv[1]), int(sys.argv[2])
first = int(sys.argv[3]) if len(sys.argv) > 3 else 0
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(first, first + n):
    s.sendto(request(i), ("127.0.0.1", port))
    if i % 50 == 49:
        time.sleep(0.005)
