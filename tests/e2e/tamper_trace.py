#!/usr/bin/env python3
"""Rewrite a trace so that it lies about packed sizes (used by t630),
about a JPEG decode's rows (t216), or about which bytes an unpack's
fingerprint stands for (t662).

    tamper_trace.py IN OUT EXTRA [--size-too] [--jpeg-digest] [--unpack-fp]

Every response blob of pack and pack_to_buffer calls gets EXTRA junk bytes
appended, and those calls say so in resp_len and result; with --size-too,
get_packed_size calls answer EXTRA more as well (a consistent lie). With
--jpeg-digest, every JPEG response kept as a digest (SJD1) names other rows.
With --unpack-fp, the unpack calls' fingerprints are rotated among their
distinct values: each call's bytes stand under another request's
fingerprint. The
checksums are right (they are not an authentication), the index is
dropped. Layout: traces/FORMAT.md.
"""
import struct
import sys
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from tracefmt import put_varint, varint


def records(raw):
    pos = 0
    while pos < len(raw):
        kind = raw[pos]
        blen, p = varint(raw, pos + 1)
        yield kind, raw[p:p + blen]
        pos = p + blen


CALL_VARINTS_BEFORE_FP = 6  # reason, thread, type, site, seq_delta, start_delta


def call_fields(body):
    """(api, offsets) where offsets locate resp_blob, resp_len and result."""
    api = body[0]
    pos = 2
    for _ in range(CALL_VARINTS_BEFORE_FP + 1):  # ... and latency_ns
        _, pos = varint(body, pos)
    pos += 16  # fingerprint
    fields = {}
    for name in ("req_blob", "resp_blob", "req_len", "resp_len", "result"):
        start = pos
        v, pos = varint(body, pos)
        fields[name] = (v, start, pos)
    return api, fields


def fp_at(body):
    """Offset of a call's 16-byte fingerprint."""
    pos = 2
    for _ in range(CALL_VARINTS_BEFORE_FP + 1):
        _, pos = varint(body, pos)
    return pos


def rewrite_call(body, extra, size_too, fp_map=None):
    if fp_map is not None:
        if body[0] != 4:  # pb.unpack
            return body
        at = fp_at(body)
        return body[:at] + fp_map[body[at:at + 16]] + body[at + 16:]
    api, f = call_fields(body)
    names = []
    if api in (1, 3):  # pb.pack, pb.pack_to_buffer
        names = ["resp_len", "result"]
    elif api == 2 and size_too:  # pb.size
        names = ["result"]
    for name in reversed(names):  # from the end, so offsets stay valid
        v, start, end = f[name]
        body = body[:start] + put_varint(v + extra) + body[end:]
    return body


def main():
    src, dst, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
    size_too = "--size-too" in sys.argv
    jpeg_digest = "--jpeg-digest" in sys.argv
    unpack_fp = "--unpack-fp" in sys.argv
    data = open(src, "rb").read()
    plen = struct.unpack_from("<I", data, 16)[0]
    off = 28 + plen
    chunks = []
    while off + 32 <= len(data) and data[off:off + 4] == b"STCK":
        typ, method = data[off + 4], data[off + 5]
        clen, _, nrec = struct.unpack_from("<III", data, off + 12)
        body = data[off + 32:off + 32 + clen]
        if typ == 1:
            chunks.append((nrec, zlib.decompress(body) if method == 1 else body))
        off += 32 + clen
    pack_blobs = set()
    fps = []
    for _, raw in chunks:
        for kind, body in records(raw):
            if kind == 1:
                api, f = call_fields(body)
                if api in (1, 3):
                    pack_blobs.add(f["resp_blob"][0])
                at = fp_at(body)
                if api == 4 and body[at:at + 16] not in fps:
                    fps.append(body[at:at + 16])
    fp_map = None
    if unpack_fp:
        if len(fps) < 2:
            sys.exit("tamper_trace.py: fewer than two distinct unpack requests in " + src)
        fp_map = {fps[i]: fps[(i + 1) % len(fps)] for i in range(len(fps))}
        pack_blobs = set()
    out = bytearray(data[:28 + plen])
    for seq, (nrec, raw) in enumerate(chunks):
        new = bytearray()
        for kind, body in records(raw):
            if kind == 2:
                bid, p = varint(body, 0)
                blen, p = varint(body, p)
                if bid in pack_blobs:
                    payload = body[p:p + blen] + b"\xee" * extra
                    body = put_varint(bid) + put_varint(len(payload)) + payload
                elif jpeg_digest and body[p:p + 4] == b"SJD1":
                    payload = bytearray(body[p:p + blen])
                    payload[16] ^= 1  # the digest's low byte
                    body = body[:p] + bytes(payload)
            elif kind == 1:
                body = rewrite_call(body, extra, size_too, fp_map)
            new += bytes([kind]) + put_varint(len(body)) + body
        hdr = b"STCK" + bytes([1, 0]) + b"\0\0" + struct.pack("<IIII", seq, len(new), len(new), nrec)
        hdr += struct.pack("<I", zlib.crc32(new))
        hdr += struct.pack("<I", zlib.crc32(hdr))
        out += hdr + new
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
