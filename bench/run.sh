#!/usr/bin/env bash
# make bench: every figure is measured side by side with its baseline in this
# run (native vs record vs replay of the same loop), median of REPS runs.
# Writes the table to stdout and bench/results.md. BENCH_QUICK=1: fewer runs.
set -euo pipefail
B=${B:-build}
S="$B/standin"
PBB="$B/progs/pbbench"
PBT="$B/progs/pbtest"
OUT=bench/results.md
T=$(mktemp -d /tmp/standin-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ "${BENCH_QUICK:-0}" = 1 ]; then REPS=3; N=20000; NBIG=2000; E2E=2000; else REPS=7; N=100000; NBIG=10000; E2E=20000; fi

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
spread() { sort -g | awk '{a[NR]=$1} END {printf "%s..%s", a[1], a[NR]}'; }
per_call() { awk '/ns_per_call/{print $2}'; }
json() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

rows=()
row() { rows+=("$(printf '| %s | %s | %s | %s |' "$1" "$2" "$3" "$4")"); }

# ---- record: added ns per call on the calling thread ---------------------
# The ring is made large enough that the writer thread never makes the
# caller wait, so the figure is the calling thread's own cost; the second
# row per size keeps the default ring (the caller waits when the writer
# falls behind in a tight loop).
for mode in pack unpack; do
  for size in 64 1024 65536; do
    n=$N; [ "$size" -gt 10000 ] && n=$NBIG
    nat=() rec=() recd=()
    for _ in $(seq $REPS); do
      nat+=("$("$PBB" $mode $size $n | per_call)")
      rm -rf "$T/r"
      rec+=("$(STANDIN_RING_KB=$((512 * 1024)) "$S" record -o "$T/r" -- "$PBB" $mode $size $n 2>/dev/null | per_call)")
      rm -rf "$T/r"
      recd+=("$("$S" record -o "$T/r" -- "$PBB" $mode $size $n 2>/dev/null | per_call)")
    done
    mn=$(printf '%s\n' "${nat[@]}" | median)
    mr=$(printf '%s\n' "${rec[@]}" | median)
    md=$(printf '%s\n' "${recd[@]}" | median)
    added=$(awk -v a="$mr" -v b="$mn" 'BEGIN{printf "%.0f", a-b}')
    addedd=$(awk -v a="$md" -v b="$mn" 'BEGIN{printf "%.0f", a-b}')
    row "record $mode ${size} B: added ns/call (calling thread)" "$added" "native ${mn} ns/call" "\`standin record -- pbbench $mode $size $n\` (ring 512 MiB) vs native"
    row "record $mode ${size} B: added ns/call (default ring, tight loop)" "$addedd" "native ${mn} ns/call" "same, default ring"
    bytes=$(stat -c %s "$T"/r/*.trace | awk '{s+=$1} END {print s}')
    calls=$((n + 100))
    row "trace bytes per call, $mode ${size} B" "$(awk -v b="$bytes" -v c="$calls" 'BEGIN{printf "%.1f", b/c}')" "" "trace size / calls"
  done
done

# ---- trace compression on a realistic mix --------------------------------
rm -rf "$T/mix"
"$S" record -o "$T/mix" -- "$PBT" basic $E2E >/dev/null 2>&1
ratio=$("$S" info "$T/mix" | grep -o '([0-9.]*x)' | head -1 | tr -d '()')
row "trace compression ratio, pbtest basic $E2E (random payloads)" "${ratio}" "" "\`standin info\` (uncompressed/file)"

# ---- replay: harness cost and spin accuracy ------------------------------
rm -rf "$T/r1"
"$S" record -o "$T/r1" -- "$PBB" pack 1024 $N >/dev/null 2>&1
nat=() rep=()
for _ in $(seq $REPS); do
  nat+=("$("$PBB" pack 1024 $N | per_call)")
  rep+=("$("$S" replay -t "$T/r1" --iface constant:ns=0 -- "$PBB" pack 1024 $N 2>/dev/null | per_call)")
done
mn=$(printf '%s\n' "${nat[@]}" | median)
mr=$(printf '%s\n' "${rep[@]}" | median)
row "replay harness, constant:ns=0, pack 1 KB: ns/call" "$mr" "native ${mn} ns/call" "\`standin replay --iface constant:ns=0 -- pbbench pack 1024\`"
"$S" replay -t "$T/r1" --iface constant:ns=2000 --summary "$T/spin.json" -- "$PBB" pack 1024 $N >/dev/null 2>&1
row "spin error median / p99 (ns), constant:ns=2000" "$(json "$T/spin.json" spin_error_p50_ns) / $(json "$T/spin.json" spin_error_p99_ns)" "" "--summary spin_error_p50_ns, _p99_ns"

# ---- replay with software vs native, end to end --------------------------
# Both times cover fork, exec and wait of the program only: the native one
# measured by bash, the replayed one by standin around the same steps
# (--summary wall_ns), so standin's own start-up (reading the trace) is out.
rm -rf "$T/e2e"
"$S" record -o "$T/e2e" -- "$PBT" basic $E2E >/dev/null 2>&1
nat=() rep=()
for _ in $(seq $REPS); do
  t0=$EPOCHREALTIME; "$PBT" basic $E2E >/dev/null; t1=$EPOCHREALTIME
  nat+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1e6}')")
  "$S" replay -t "$T/e2e" --summary "$T/e.json" -- "$PBT" basic $E2E >/dev/null 2>&1
  rep+=("$(($(json "$T/e.json" wall_ns) / 1000))")
done
mn=$(printf '%s\n' "${nat[@]}" | median)
mr=$(printf '%s\n' "${rep[@]}" | median)
row "replay software / native wall, pbtest basic $E2E" "$(awk -v a="$mr" -v b="$mn" 'BEGIN{printf "%.3f", a/b}')" "native ${mn} us (spread $(printf '%s\n' "${nat[@]}" | spread)), replay ${mr} us (spread $(printf '%s\n' "${rep[@]}" | spread))" "\`standin replay --summary\` wall_ns vs bash"
row "replay software: overruns / calls" "$(json "$T/e.json" overruns) / $(json "$T/e.json" calls_replayed)" "" "last run's --summary"

{
  echo "## make bench ($(date -u +%Y-%m-%d), $(nproc) cores, median of $REPS runs)"
  echo
  echo "| what | value | baseline (same run) | how |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$T/table.md"
cp "$T/table.md" "$OUT"
echo "written to $OUT"
