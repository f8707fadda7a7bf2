#!/usr/bin/env python3
"""Random SIGKILL trials for `standin record` (used by t620, reliability_tests.sh).

    kill_trials.py STANDIN PBTEST FAULTS WORKDIR TRIALS [--bound-ms MS]

Each trial records a call-heavy pbtest run in its own process group, kills
the whole group with SIGKILL at a random moment, then checks that every
trace file reads back: `standin info` exits 0 and calls nothing damaged,
and `standin dump` returns exactly the calls info counts. For the processes
that were still calling when killed, it measures the lost tail: the time
from the last recorded call to the kill. It prints one line per trial and a
summary, and fails if a trace is unreadable or a tail exceeds the bound.
"""
import os
import random
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from tracefmt import varint

# (program: 0 = pbtest, 1 = faults; arguments). "paced" calls every 200 us,
# so its tail is set by the 100 ms flush period, not by full chunks.
MODES = [
    (0, ["basic", "200000"]),
    (0, ["threads", "4", "60000"]),
    (0, ["pool", "4", "200000"]),
    (0, ["forkpar", "3", "60000"]),
    (1, ["paced", "200"]),
]


def start_mono_ns(path):
    """start_mono_ns from a trace header (traces/FORMAT.md), None if short."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if len(head) < 40 or head[:8] != b"STANDIN\x89":
        return None
    pos = 24
    for _ in range(4):  # pid, ppid, exec_seq, start_realtime_ns
        _, pos = varint(head, pos)
    v, _ = varint(head, pos)
    return v


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def check_dir(standin, d):
    """(ok, message, {pid: last_call_abs_ns}, {pid: calls}) for a recording."""
    info = run([standin, "info", d])
    if info.returncode != 0 or "damaged" in info.stdout:
        return False, "info: rc %d\n%s%s" % (info.returncode, info.stdout, info.stderr), {}, {}
    total = None
    for line in info.stdout.splitlines():
        if line.startswith("total:"):
            total = int(line.split()[3].replace(",", ""))
    dump = run([standin, "dump", d])
    if dump.returncode != 0:
        return False, "dump: rc %d\n%s" % (dump.returncode, dump.stderr), {}, {}
    last, count = {}, {}
    n = 0
    for line in dump.stdout.splitlines():
        f = line.split(None, 3)  # pid seq +seconds ...
        n += 1
        pid, rel = int(f[0]), int(round(float(f[2]) * 1e9))
        count[pid] = count.get(pid, 0) + 1
        last[pid] = max(last.get(pid, 0), rel)
    if total is not None and n != total:
        return False, "dump has %d calls, info says %d" % (n, total), {}, {}
    return True, "", last, count


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    bound_ms = None
    if "--bound-ms" in sys.argv:
        bound_ms = float(sys.argv[sys.argv.index("--bound-ms") + 1])
        args.remove(sys.argv[sys.argv.index("--bound-ms") + 1])
    standin, progs, workdir, trials = args[0], args[1:3], args[3], int(args[4])
    max_delay = float(os.environ.get("STANDIN_KILL_MAX_DELAY", "0.5"))
    rng = random.Random(os.environ.get("STANDIN_KILL_SEED", str(time.time_ns())))
    tails, failures = [], 0
    for i in range(trials):
        prog, mode = rng.choice(MODES)
        delay = rng.uniform(0.005, max_delay)
        d = os.path.join(workdir, "k%d" % i)
        p = subprocess.Popen([standin, "record", "-o", d, "--", progs[prog]] + mode,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        time.sleep(delay)
        kill_ns = time.monotonic_ns()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        if not os.path.isdir(d):
            print("trial %d %s killed at %.3f s: no recording yet" % (i, mode[0], delay))
            continue
        runinfo = os.path.join(d, "run.info")
        if not any(n.endswith(".trace") for n in os.listdir(d)) and \
                (not os.path.exists(runinfo) or os.path.getsize(runinfo) == 0):
            # killed before the program's first call or the run's end, or
            # while record wrote run.info as the program started (an empty
            # run.info, seen once at 12 ms): no trace to read back; info
            # says the directory holds none (exit 1)
            info = run([standin, "info", d])
            if info.returncode != 1 or "holds no trace" not in info.stderr:
                failures += 1
                print("trial %d %s killed at %.3f s: FAIL info on an empty directory: rc %d\n%s" %
                      (i, mode[0], delay, info.returncode, info.stderr))
            else:
                print("trial %d %s killed at %.3f s: no trace yet" % (i, mode[0], delay))
            continue
        ok, msg, last, count = check_dir(standin, d)
        if not ok:
            failures += 1
            print("trial %d %s killed at %.3f s: FAIL %s" % (i, mode[0], delay, msg))
            continue
        worst = None
        if mode[0] != "forkpar":  # children of forkpar may have finished early
            for name in os.listdir(d):
                if not name.endswith(".trace"):
                    continue
                pid = int(name.split(".")[0])
                base = start_mono_ns(os.path.join(d, name))
                if base is None or pid not in last or name.count(".") != 1:
                    continue
                tail = (kill_ns - (base + last[pid])) / 1e6
                worst = tail if worst is None else max(worst, tail)
        if worst is not None:
            tails.append(worst)
        print("trial %d %-7s killed at %.3f s: %d calls read back%s" %
              (i, mode[0], delay, sum(count.values()),
               "" if worst is None else ", last call %.1f ms before the kill" % worst))
        if bound_ms is not None and worst is not None and worst > bound_ms:
            failures += 1
            print("  FAIL: lost tail %.1f ms is over the bound of %.0f ms" % (worst, bound_ms))
    if tails:
        tails.sort()
        print("lost tail over %d trials: median %.1f ms, max %.1f ms" %
              (len(tails), tails[len(tails) // 2], tails[-1]))
    print("%d trials, %d failures" % (trials, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
