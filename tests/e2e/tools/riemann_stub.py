#!/usr/bin/env python3
"""A stand-in Riemann server on 127.0.0.1 for riemann-client (TCP).

Every message a client sends (a 4-byte big-endian length, then a protobuf
Msg) is appended to LOG as one hex line, and answered with Msg{ok: true},
which the client unpacks. Prints "ready PORT" once listening on a free
port. Exits after IDLE seconds without a connection (bounded, loopback
only)."""
import socket
import sys
import threading

log = open(sys.argv[1], "a")
idle = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
lock = threading.Lock()
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(8)
srv.settimeout(idle)
print("ready", srv.getsockname()[1], flush=True)


def serve(c):
    f = c.makefile("rb")
    while True:
        head = f.read(4)
        if len(head) < 4:
            break
        msg = f.read(int.from_bytes(head, "big"))
        with lock:
            log.write(msg.hex() + "\n")
            log.flush()
        c.sendall(b"\x00\x00\x00\x02\x10\x01")  # Msg { ok: true }
    c.close()


try:
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
except socket.timeout:
    pass
