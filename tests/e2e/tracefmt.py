"""Trace format helpers for the test scripts (layout: traces/FORMAT.md)."""


def varint(buf, pos):
    """(value, next position) of the unsigned LEB128 at buf[pos]."""
    v, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, pos
        shift += 7


def put_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
