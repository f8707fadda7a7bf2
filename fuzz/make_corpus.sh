#!/usr/bin/env bash
# Regenerate the seed corpora in fuzz/corpus/ from fresh recordings of the
# test programs (make fuzz-seeds). Seeds are small: libFuzzer mutates them,
# and make check runs every one of them.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
STANDIN=$B/standin
PB=$B/progs/pbtest
T=$(mktemp -d /tmp/standin-seeds.XXXXXX)
trap 'rm -rf "$T"' EXIT
C=fuzz/corpus
rm -rf "$C"
mkdir -p $C/trace_reader $C/trace_cli $C/replay_db $C/plan $C/model_spec $C/schema $C/pb_image $C/elf \
  $C/jpeg_scan

mkdir -p "$T/pb" "$T/jpeg"
"$STANDIN" record -o "$T/pb/basic" -- "$PB" basic 3 >/dev/null 2>&1
"$STANDIN" record -o "$T/pb/p3" -- "$PB" p3 2 >/dev/null 2>&1
"$STANDIN" record -o "$T/pb/bad" -- "$PB" bad >/dev/null 2>&1
"$STANDIN" record -o "$T/pb/threads" -- "$PB" threads 2 1 >/dev/null 2>&1
"$STANDIN" record -o "$T/pb/big" -- "$PB" basic 40 >/dev/null 2>&1
# JPEG decodes of tiny images (a seed stays under 12 KB): baseline, with
# restart markers, progressive, scaled; the rows kept once; TurboJPEG;
# raw data (planes); buffered-image mode
"$B/progs/jpegmkppm" 24 16 >"$T/t.ppm"
cjpeg -quality 75 "$T/t.ppm" >"$T/b.jpg"
cjpeg -quality 75 -restart 1 "$T/t.ppm" >"$T/r.jpg"
cjpeg -quality 75 -progressive "$T/t.ppm" >"$T/p.jpg"
JD="$B/progs/jpegdec"
"$STANDIN" record -o "$T/jpeg/dec" -- "$JD" "$T/b.jpg" "$T/r.jpg" "$T/p.jpg" >/dev/null 2>&1
"$STANDIN" record -o "$T/jpeg/scaled" -- "$JD" -scale 1/2 "$T/b.jpg" >/dev/null 2>&1
"$STANDIN" record --keep-pixels -o "$T/jpeg/kept" -- "$JD" "$T/b.jpg" >/dev/null 2>&1
"$STANDIN" record -o "$T/jpeg/tj" -- "$B/progs/jpegtj" "$T/b.jpg" >/dev/null 2>&1
"$STANDIN" record -o "$T/jpeg/raw" -- "$JD" -raw "$T/b.jpg" "$T/p.jpg" >/dev/null 2>&1
"$STANDIN" record -o "$T/jpeg/buffered" -- "$JD" -bufsimple "$T/b.jpg" >/dev/null 2>&1

# Trace inputs: byte 0 = 0 (the file as is), or 1/3/5/7 (records wrapped
# into a well-formed file, see fuzz_common.h): the records of each chunk,
# taken from the recordings in FOLDER.
trace_seeds() { # FOLDER HARNESS...
python3 - "$C" "$@" <<'EOF'
import os, sys, zlib, struct
c, t, harnesses = sys.argv[1], sys.argv[2], sys.argv[3:]

def chunks(data):
    """(type, raw payload) of each chunk of a trace file."""
    plen = struct.unpack_from("<I", data, 16)[0]
    off = 28 + plen
    while off + 32 <= len(data):
        typ, method = data[off + 4], data[off + 5]
        clen = struct.unpack_from("<I", data, off + 12)[0]
        body = data[off + 32: off + 32 + clen]
        yield typ, zlib.decompress(body) if method == 1 else body
        off += 32 + clen
        if off + 32 == len(data):  # trailer
            break

n = 0
for rec in sorted(os.listdir(t)):
    for name in sorted(os.listdir(os.path.join(t, rec))):
        if not name.endswith(".trace"):
            continue
        data = open(os.path.join(t, rec, name), "rb").read()
        parts = list(chunks(data))
        data_chunks = [p for typ, p in parts if typ == 1]
        index = [p for typ, p in parts if typ == 2]
        seeds = []
        if len(data) < 12000:
            seeds.append(b"\x00" + data)
        if data_chunks and len(data_chunks[0]) < 12000:
            seeds.append(b"\x01" + b"\xfe\xedCK".join(data_chunks))
            seeds.append(b"\x05" + data_chunks[0])
            if index:
                seeds.append(b"\x03" + b"\xfe\xedCK".join(data_chunks + index))
        for s in seeds:
            for h in harnesses:
                open(os.path.join(c, h, "%s-%s-%d" % (rec, name, n)), "wb").write(s)
            n += 1
print("trace seeds from %s:" % os.path.basename(t), n)
EOF
}
trace_seeds "$T/pb" trace_reader trace_cli replay_db
trace_seeds "$T/jpeg" trace_reader trace_cli replay_db

# Schemas with message bytes, and replay images, from the unpack calls.
for rec in basic p3; do
  mkdir -p "$T/seeds-$rec"
  "$B/fuzz/seeds" "$(ls "$T/pb/$rec"/*.trace | head -1)" "$T/seeds-$rec"
  for k in schema pb_image; do
    for f in "$T/seeds-$rec/$k"/*; do cp "$f" "$C/$k/$rec-$(basename "$f")"; done
  done
done
# fuzz_parse_slabs reads fuzz_schema's format: the same seeds
mkdir -p "$C/parse_slabs"
cp "$C"/schema/* "$C/parse_slabs/"

# JPEG datastreams for the marker scanner (fuzz_jpeg_scan): the tiny
# images above and arithmetic, grayscale and commented ones, whole, with
# trailing bytes, cut short and with fill bytes, behind control bytes
# (colour map, chunk sizes: see the harness); and corrupt corners.
cjpeg -arithmetic "$T/t.ppm" >"$T/a.jpg"
cjpeg -grayscale "$T/t.ppm" >"$T/g.jpg"
wrjpgcom -comment "a comment" "$T/b.jpg" >"$T/c.jpg"
python3 - "$T" "$C/jpeg_scan" <<'EOF'
import sys, os
t, c = sys.argv[1], sys.argv[2]
ctl = [b"\x00\x00", b"\x03\x03\x00\x0f\x3f", b"\x00\x01\x00", b"\x05\x02\xf0\x07"]
n = 0
for name in "bacgpr":
    d = open(os.path.join(t, name + ".jpg"), "rb").read()
    variants = {
        "whole": d,
        "trailing": d + b"\x00\x11garbage\xff\xd8",
        "truncated": d[: len(d) * 2 // 3],
        "fill": d.replace(b"\xff\xda", b"\xff\xff\xff\xda", 1),
    }
    for vn, v in variants.items():
        for i, pre in enumerate(ctl):
            if (n + i) % 2 == 0 or vn == "whole":
                open(os.path.join(c, "seed-%s-%s-%d" % (name, vn, i)), "wb").write(pre + v)
        n += 1
b = open(os.path.join(t, "b.jpg"), "rb").read()
k = b.index(b"\xff\xda")
ent = k + 2 + ((b[k + 2] << 8) | b[k + 3]) + 10
# a restart marker in a scan without a restart interval, a second SOI, a
# reserved marker
open(os.path.join(c, "seed-rst-without-dri"), "wb").write(
    b"\x00\x04\x01\x02\x03\x04" + b[:ent] + b"\xff\xd3" + b[ent:])
open(os.path.join(c, "seed-second-soi"), "wb").write(b"\x00\x00" + b[:20] + b"\xff\xd8" + b[20:])
open(os.path.join(c, "seed-reserved-marker"), "wb").write(
    b"\x02\x00" + b[:20] + b"\xff\xc8\x00\x04\x00\x00" + b[20:])
EOF

# Plans: the examples of docs/PLANS.md and the tests, and the odd corners.
i=0
plan() { printf '%s\n' "$@" >"$C/plan/seed-$i"; i=$((i + 1)); }
plan 'accel de constant:ns=1000' 'accel ser protoacc:mem_lat=30 link=onchip engines=1' \
  'keep api=pb.size' 'offload api=pb.unpack type=standin.test.* to de' \
  'offload api=pb.pack,pb.pack_to_buffer size=0-1M to ser'
plan '# comment' 'accel j jpeg-core engines=2 link=pcie link_rtt_ns=900 link_gbps=8' \
  'offload api=jpeg site=decode_* module=*libapp* size=64K- to j'
plan 'accel t table:file=/nonexistent' 'offload to t'
plan 'accel a linear:base_ns=10,ns_per_byte=0.5,engines=4' 'offload size=-4096 to a' 'keep'
plan 'accel a optimus-prime' 'accel b protoacc-lpn' 'offload api=pb.unpack to a' \
  'offload api=protobuf to b'
plan 'accel a scale:factor=0.25' 'offload type=[a-z]*.Tree api=pb.pack to a'

# --iface specs.
i=0
for s in software scale:factor=0.25 constant:ns=100 linear:base_ns=5,ns_per_byte=0.1 \
  protobuf=scale:factor=2 pb.unpack=constant:ns=1000,link=pcie,engines=4 \
  jpeg=jpeg-core:engines=2 protoacc:mem_lat=30 protoacc-lpn optimus-prime \
  'table:file=/nonexistent' ./plugin.so 'pb.pack,pb.size=constant:ns=1,link=onchip'; do
  printf '%s' "$s" >"$C/model_spec/seed-$i"
  i=$((i + 1))
done
# Programs for record's ELF reading (fuzz_elf): small objects defining a
# hooked function or not, stripped, static, and a script.
mkdir -p "$C/elf"
printf 'void protobuf_c_message_pack(void) {}\nvoid other(void) {}\n' >"$T/e1.c"
printf 'int tjDecompress2(void) { return 0; }\n' >"$T/e2.c"
printf 'int main(void) { return 0; }\n' >"$T/e4.c"
gcc -O1 -shared -nostdlib -fPIC -o "$C/elf/seed-defines-pack" "$T/e1.c"
gcc -O1 -shared -nostdlib -fPIC -o "$C/elf/seed-defines-tj" "$T/e2.c"
strip -o "$C/elf/seed-stripped" "$C/elf/seed-defines-pack"
gcc -O1 -nostdlib -static -e main -o "$C/elf/seed-static" "$T/e4.c"
printf '#!/bin/sh\necho not elf\n' >"$C/elf/seed-script"
echo "corpus: $(find "$C" -type f | wc -l) files, $(du -sh "$C" | cut -f1)"
