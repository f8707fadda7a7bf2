#!/usr/bin/env python3
"""Check a `record --retime=N` trace against the timing runs' own files
(kept with STANDIN_RETIME_KEEP=1): every call of a one-process program gets
its latency in the run whose time in calls is the lowest (PICK fastest, the
default) or the median of the runs' (PICK median: the lower middle one for
an even count), after the clock-read and nested corrections each run's file
states.

  retime_check.py TIMING_DIR DUMP_FILE [fastest|median]
  (DUMP_FILE: `standin dump` output)
Exits 0 and prints "ok N calls, R runs, run K" when every latency is that
run's."""
import glob
import os
import struct
import sys

ENT = struct.Struct("<QQQIB3x")  # latency, size, start, nested, api


def load(path):
    b = open(path, "rb").read()
    assert b[:8] == b"STTIME04", path
    pid, ppid, exec_seq, nthreads = struct.unpack_from("<4I", b, 8)
    start, timer_ns, pass_ns = struct.unpack_from("<3Q", b, 24)
    pidns, start_ticks = struct.unpack_from("<2Q", b, 48)
    (alen,) = struct.unpack_from("<I", b, 64)
    off = 68 + alen
    threads = {}
    for _ in range(nthreads):
        index, _zero, n = struct.unpack_from("<IIQ", b, off)
        off += 16
        ents = [ENT.unpack_from(b, off + k * ENT.size) for k in range(n)]
        off += n * ENT.size
        threads[index] = [max(0, lat - (timer_ns + nested * pass_ns)) for lat, _s, _t, nested, _a in ents]
    return threads


def main():
    tdir, dump = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "fastest"
    runs = []
    for d in sorted(os.listdir(tdir)):
        files = glob.glob(os.path.join(tdir, d, "*.timing"))
        if len(files) != 1:
            sys.exit(f"{tdir}/{d}: {len(files)} timing files, want 1")
        runs.append(load(files[0]))
    calls = {}
    for line in open(dump):
        f = line.split()
        calls.setdefault(int(f[3][1:]), []).append(int(f[6].rstrip("ns")))
    sums = [sum(sum(r[t][: len(lats)]) for t, lats in calls.items()) for r in runs]
    order = sorted(range(len(runs)), key=lambda p: (sums[p], p))
    pick = order[0] if mode == "fastest" else order[(len(runs) - 1) // 2]
    n = 0
    for t, lats in calls.items():
        for k, got in enumerate(lats):
            want = runs[pick][t][k]
            if got != want:
                sys.exit(f"thread {t} call {k}: latency {got} ns, run {pick + 1} (of sums {sums}) has {want}")
            n += 1
    print(f"ok {n} calls, {len(runs)} runs, run {pick + 1}")


main()
