#!/usr/bin/env bash
# make bench: one table in which every figure is a ratio or a per-call cost
# measured in this run, side by side with its baseline (the same program and
# loop run natively, or under the tool users would otherwise pick), as the
# median and spread of REPS runs. Writes bench/results.md.
#   BENCH_QUICK=1   fewer and shorter runs (under 2 minutes)
set -euo pipefail
B=${B:-build}
S="$B/standin"
PBB="$B/progs/pbbench"
PBT="$B/progs/pbtest"
OUT=bench/results.md
T=$(mktemp -d /tmp/standin-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  REPS=3 N=20000 NBIG=2000 NLT=300 E2E=2000 NJPEG=50 NNEW=5000 NPG=300
else
  REPS=7 N=100000 NBIG=10000 NLT=2000 E2E=20000 NJPEG=200 NNEW=20000 NPG=2000
fi
have() { command -v "$1" >/dev/null 2>&1; }

# The shims and the CLI are read back from disk before measuring: a file the
# linker has just written keeps the page-cache pages its writes landed in,
# and one such replay shim ran a new 1 KB pack's harness 20% slower (155-162
# against 130-134 ns, the same machine code) until its pages were dropped
# and read again (134-137 ns). Dropping them (after sync) re-reads them as
# an installed copy would be read.
for f in "$B"/lib/standin/*.so "$S"; do
  sync "$f" && dd if="$f" iflag=nocache count=0 status=none || true
done

# ---- helpers ---------------------------------------------------------------
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
spread() { sort -g | awk '{a[NR]=$1} END {printf "%s-%s", a[1], a[NR]}'; }
json() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# json_line_field KEY: KEY of the first JSON line on stdin (a dump's first call)
json_line_field() { python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())[sys.argv[1]])' "$1"; }
per_call() { awk '/ns_per_call/{print $2}'; }

# runs REPS times: "CMD..." printing ns_per_call; echoes "median spread"
ns_stats() {
  local v=()
  for _ in $(seq "$REPS"); do v+=("$("$@" 2>/dev/null | per_call)"); done
  echo "$(printf '%s\n' "${v[@]}" | median) $(printf '%s\n' "${v[@]}" | spread)"
}

# harness JSON API: the harness's own ns a call for API in a --summary
harness() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["by_api"][sys.argv[2]]
print("%.0f" % (d["harness_ns"] / d["calls"]))' "$1" "$2"
}

# harness_stats API REPLAY-ARGS...: the harness's own ns a call for API,
# "median (spread)" over REPS replays (`standin replay REPLAY-ARGS` with
# --summary added): one run's figure moved by 20 ns from hour to hour here
harness_stats() {
  local api=$1 v=()
  shift
  for _ in $(seq "$REPS"); do
    "$S" replay --summary "$T/hs.json" "$@" >/dev/null 2>&1
    v+=("$(harness "$T/hs.json" "$api")")
  done
  echo "$(printf '%s\n' "${v[@]}" | median) ($(printf '%s\n' "${v[@]}" | spread))"
}

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 |"); }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f", a-b}'; }

rec_loop() { # record the loop with a fresh directory each time
  rm -rf "$T/r"
  "$S" record -o "$T/r" -- "$@"
}
uft_loop() {
  rm -rf "$T/u"
  uftrace record -d "$T/u" --force "$@"
}
lt_loop() { ltrace -o /dev/null "$@"; }

# ---- record: added ns per call, standin vs uftrace vs ltrace ---------------
# The loop calls the library once per turn (twice for unpack, which also
# frees: uftrace and ltrace trace both calls; standin intercepts unpack and
# lets free_unpacked through).
for mode in pack unpack; do
  for size in 64 1024 65536; do
    n=$N
    [ "$size" -gt 10000 ] && n=$NBIG
    read -r nat nat_sp <<<"$(ns_stats "$PBB" $mode $size $n)"
    read -r rec rec_sp <<<"$(ns_stats rec_loop "$PBB" $mode $size $n)"
    cmp="-"
    if have uftrace; then
      read -r uft _ <<<"$(ns_stats uft_loop "$PBB" $mode $size $n)"
      cmp="uftrace +$(sub "$uft" "$nat")"
    fi
    if have ltrace; then
      lt=$(lt_loop "$PBB" $mode $size $NLT 2>/dev/null | per_call)
      cmp="$cmp, ltrace +$(sub "$lt" "$nat")"
    fi
    row "record $mode $size B: ns added per call" "+$(sub "$rec" "$nat") (record $rec_sp)" \
      "native $nat ($nat_sp); $cmp" "\`standin record -- pbbench $mode $size $n\`"
    bytes=$(stat -c %s "$T"/r/*.trace | awk '{s+=$1} END {print s}')
    row "trace bytes per call, $mode $size B (same message each call)" \
      "$(awk -v b="$bytes" -v c="$((n + 100))" 'BEGIN{printf "%.1f", b/c}')" "" "trace size / calls"
  done
done

# ---- trace size on distinct messages, standin vs uftrace -------------------
rm -rf "$T/mix" "$T/umix"
"$S" record -o "$T/mix" -- "$PBT" basic "$E2E" >/dev/null 2>&1
mixcalls=$("$S" dump "$T/mix" | wc -l)
mixbytes=$(stat -c %s "$T"/mix/*.trace | awk '{s+=$1} END {print s}')
ratio=$("$S" info "$T/mix" | grep -o '([0-9.]*x)' | head -1 | tr -d '()')
ucmp=""
if have uftrace; then
  uftrace record -d "$T/umix" --force "$PBT" basic "$E2E" >/dev/null 2>&1 || true
  ubytes=$(du -sb "$T/umix" | cut -f1)
  ucalls=$(uftrace report -d "$T/umix" 2>/dev/null | awk '$NF ~ /protobuf_c_message/ {s+=$(NF-1)} END {print s+0}')
  ucmp="uftrace $(awk -v b="$ubytes" -v c="$ucalls" 'BEGIN{printf "%.1f", c ? b/c : 0}') B/call without payloads"
fi
row "trace bytes per call with payloads, pbtest basic $E2E" \
  "$(awk -v b="$mixbytes" -v c="$mixcalls" 'BEGIN{printf "%.1f", b/c}') (compression $ratio)" "$ucmp" \
  "\`standin record -- pbtest basic $E2E\`; \`standin info\`"

# A recorded server between requests: its writer thread's CPU while the
# program waits 2 s after its calls (faults wait: 2 messages, then it polls
# for a file every 10 ms). The writer naps longer once nothing came for
# 20 ms (record/rt.c WRITER_DEEP_AFTER_NS).
rm -rf "$T/idle" "$T/go"
(sleep 2 && touch "$T/go") &
toucher=$!
"$S" record -o "$T/idle" -- "$B/progs/faults" wait "$T/go" 2 >/dev/null 2>&1
wait "$toucher"
idle_cpu=$("$S" info "$T/idle" | grep -m1 'trace writer thread used' | sed 's/.*used \(.*\) of CPU.*/\1/')
row "record: writer thread CPU while the program waits 2 s after its calls" "$idle_cpu" "" \
  "\`standin record -- faults wait FILE 2\`, FILE made 2 s later; \`standin info\`"

# ---- replay: harness cost and spin accuracy --------------------------------
# With a model that predicts 0 ns, a replayed call takes exactly the
# harness's time (fingerprint, lookup, copy or rebuild, bookkeeping); the
# unpack loop also frees each tree (free_unpacked, natively too): piece by
# piece by default, as libprotobuf-c would, or one block.
for mode in pack size unpack; do
  for size in 64 1024; do
    rm -rf "$T/rh"
    "$S" record -o "$T/rh" -- "$PBB" $mode $size 1000 >/dev/null 2>&1
    read -r nat nat_sp <<<"$(ns_stats "$PBB" $mode $size "$N")"
    read -r rep rep_sp <<<"$(ns_stats "$S" replay -t "$T/rh" --iface constant:ns=0 -- "$PBB" $mode $size "$N")"
    alone=$(harness_stats pb.$mode -t "$T/rh" --iface constant:ns=0 -- "$PBB" $mode $size "$N")
    row "replay harness, constant:ns=0, $mode $size B: ns per call" "$rep ($rep_sp)" \
      "native $nat ($nat_sp); the harness alone (\`--summary\` by_api) $alone" \
      "\`standin replay --iface constant:ns=0 -- pbbench $mode $size $N\`"
    if [ $mode = unpack ]; then # the tree as one block: cheaper, but so is its free
      read -r blk blk_sp <<<"$(ns_stats "$S" replay -t "$T/rh" --iface constant:ns=0 --unpack-trees block \
        -- "$PBB" $mode $size "$N")"
      alone=$(harness_stats pb.$mode -t "$T/rh" --iface constant:ns=0 --unpack-trees block \
        -- "$PBB" $mode $size "$N")
      row "replay harness, constant:ns=0, $mode $size B, trees as one block: ns per call" \
        "$blk ($blk_sp)" "native $nat ($nat_sp); the harness alone $alone" \
        "\`standin replay --iface constant:ns=0 --unpack-trees block -- pbbench $mode $size $N\`"
    fi
  done
done
# A new message each call (the branch id counts up), recorded and replayed
# call for call: every request is fingerprinted and its entry is memory
# nothing has touched, as in most programs; the rows above pack one message
# again and again.
new_each_call() { # MODE API WHAT [CYCLE]: pbbench MODE's harness, a new message each call
  local cyc=(${4:+"$4"}) what="a new message each call"
  [ -n "${4:-}" ] && what="$what, from a cycle of $4 (the database's memory warm)"
  rm -rf "$T/rn"
  "$S" record -o "$T/rn" -- "$PBB" "$1" 1024 "$NNEW" "${cyc[@]}" >/dev/null 2>&1
  read -r nat nat_sp <<<"$(ns_stats "$PBB" "$1" 1024 "$NNEW" "${cyc[@]}")"
  read -r rep rep_sp <<<"$(ns_stats "$S" replay -t "$T/rn" --iface constant:ns=0 -- "$PBB" "$1" 1024 "$NNEW" "${cyc[@]}")"
  "$S" replay -t "$T/rn" --iface constant:ns=0 --summary "$T/h.json" -- "$PBB" "$1" 1024 "$NNEW" "${cyc[@]}" >/dev/null 2>&1
  row "replay harness, constant:ns=0, $3 1024 B, $what: ns per call" "$rep ($rep_sp)" \
    "native $nat ($nat_sp); the harness alone $(harness "$T/h.json" "$2")" "\`standin replay --iface constant:ns=0 -- pbbench $1 1024 $NNEW${4:+ $4}\`"
}
new_each_call packnew pb.pack pack
# The same, going round 100 messages: each call's tree is still new to the
# call before it, but its saved bytes are memory the run has used. What it
# saves against the row above is the first touch of the database's memory;
# what is left is the harness's own work on a new message.
new_each_call packnew pb.pack pack 100
# MODE SIZE N WHAT: pbbench MODE sizes, then packs, a new message each turn:
# ns per turn of the two calls natively and replayed, and each one's
# harness alone
size_pack_row() {
  rm -rf "$T/rs"
  "$S" record -o "$T/rs" -- "$PBB" "$1" "$2" "$3" >/dev/null 2>&1
  read -r nat nat_sp <<<"$(ns_stats "$PBB" "$1" "$2" "$3")"
  read -r rep rep_sp <<<"$(ns_stats "$S" replay -t "$T/rs" --iface constant:ns=0 -- "$PBB" "$1" "$2" "$3")"
  "$S" replay -t "$T/rs" --iface constant:ns=0 --summary "$T/h.json" -- "$PBB" "$1" "$2" "$3" >/dev/null 2>&1
  row "replay harness, constant:ns=0, size then pack $4: ns per turn" \
    "$rep ($rep_sp)" "native $nat ($nat_sp); the harness alone: size $(harness "$T/h.json" pb.size), pack $(harness "$T/h.json" pb.pack)" \
    "\`standin replay --iface constant:ns=0 -- pbbench $1 $2 $3\`"
}
# a new message sized, then packed into a buffer of that size: the size is
# confirmed by the walk the pack then reuses
size_pack_row sizenew 1024 "$NNEW" "1024 B, a new message each turn"
# A new tree of many small messages each turn (4 KB of branches with a leaf
# each, 271 branches: as vector tiles hold hundreds of small features):
# confirming it walks every message, which costs about what the library's
# own passes over it cost.
size_pack_row treenew 4096 $((NNEW / 10)) "a 4 KB tree of 543 small messages, a new tree each turn"
# and the unpack of a new message each call: its tree is built from an
# image no call of the process has used (the rows above reuse one)
new_each_call unpacknew pb.unpack unpack
new_each_call unpacknew pb.unpack unpack 100
# The rows above time the harness in a loop that does nothing else, its
# best case. A program does its own work between calls, which evicts the
# harness's code and data as it does the library's. Here the loop writes
# 1 MiB between calls (PBBENCH_BETWEEN_KB) and is replayed with software
# from a --retime recording: the harness alone against the call alone as
# recorded, and the share of calls the harness made late (overruns), in a
# tight loop and with the eviction, side by side.
between_row() { # MODE API WHAT
  local k harn rec ovr desc=()
  for k in 0 1024; do
    rm -rf "$T/rb"
    PBBENCH_BETWEEN_KB=$k "$S" record --retime -o "$T/rb" -- "$PBB" "$1" 1024 "$NNEW" >/dev/null 2>&1
    harn=() ovr=()
    for _ in $(seq "$REPS"); do
      PBBENCH_BETWEEN_KB=$k "$S" replay -t "$T/rb" --summary "$T/b.json" -- "$PBB" "$1" 1024 "$NNEW" >/dev/null 2>&1
      harn+=("$(harness "$T/b.json" "$2")")
      ovr+=("$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["by_api"][sys.argv[2]]
print("%.0f" % (100.0 * d["overruns"] / max(d["calls"], 1)))' "$T/b.json" "$2")")
    done
    # the API's median recorded latency (the loop's calls; the packs that
    # make unpacknew's messages before it are not of its API)
    rec=$("$S" dump "$T/rb" --format json | python3 -c 'import json,sys
l = sorted(j["latency_ns"] for j in map(json.loads, sys.stdin) if j["api"] == sys.argv[1])
print(l[len(l) // 2] if l else 0)' "$2")
    desc+=("$(printf '%s\n' "${harn[@]}" | median) ($(printf '%s\n' "${harn[@]}" | spread)) ns against $rec ns recorded (median), $(printf '%s\n' "${ovr[@]}" | median)% of calls late")
  done
  row "replay software, $3 1024 B, a new message each call, 1 MiB of the program's writes between calls: harness alone" \
    "${desc[1]}" "no writes between calls: ${desc[0]}" \
    "\`standin record --retime\`, then \`standin replay --summary\` by_api, \`PBBENCH_BETWEEN_KB=1024 pbbench $1 1024 $NNEW\`"
}
between_row unpacknew pb.unpack unpack
between_row packnew pb.pack pack
rm -rf "$T/r1"
"$S" record -o "$T/r1" -- "$PBB" pack 1024 1000 >/dev/null 2>&1
"$S" replay -t "$T/r1" --iface constant:ns=2000 --summary "$T/spin.json" -- "$PBB" pack 1024 "$N" >/dev/null 2>&1
# Every spin; beside it, the spins whose thread was not running when their
# deadline passed (an interrupt, another process, the hypervisor), and the
# error of the others
row "spin error median / p99 (ns)" "$(json "$T/spin.json" spin_error_p50_ns) / $(json "$T/spin.json" spin_error_p99_ns)" \
  "of $(json "$T/spin.json" spins) spins, $(json "$T/spin.json" spins_stopped) ended late with their thread not running, $(($(json "$T/spin.json" spin_stopped_ns) / 1000)) us in all; the others $(json "$T/spin.json" spin_error_running_p50_ns) / $(json "$T/spin.json" spin_error_running_p99_ns)" \
  "\`--iface constant:ns=2000 --summary\`: spin_error_p50_ns, _p99_ns; spins_stopped, spin_stopped_ns, spin_error_running_p50_ns, _p99_ns"

# ---- replay harness in instructions (callgrind) ----------------------------
# The rows above are times, and on a noisy or slow-paging VM their spread
# is wider than what they measure. Instructions executed do not depend on
# the host: callgrind counts them for the hooked call (inclusive: lookup,
# compare, rebuild, bookkeeping, the mallocs of a tree piece by piece)
# against the library's own call natively. They leave out what memory costs
# (a new message each call is mostly that), so they complement the times.
# One run each: the counts repeat to within a few instructions a call.
# pbbench makes 100 warm-up calls before the N it times.
NIR=20000
# ir_call PROFILE FUNCTION OBJECT: inclusive instructions a call of FUNCTION
# in OBJECT (the recursion's own lines, FUNCTION'2, are inside it)
ir_call() {
  callgrind_annotate --inclusive=yes --tree=none "$1" 2>/dev/null | awk -v f=":$2 [" -v o="$3" '
    index($0, f) && index($0, o) { gsub(",", "", $1); ir = $1 }
    END { print ir + 0 }'
}
ir_row() { # ir_row LABEL FUNC PROFILE_REPLAY PROFILE_NATIVE CALLS CMD
  local r n
  r=$(ir_call "$3" "$2" libstandin-replay.so) n=$(ir_call "$4" "$2" libprotobuf-c.so)
  [ "$r" -gt 0 ] && [ "$n" -gt 0 ] || return 0
  row "$1" "$(awk -v a="$r" -v c="$5" 'BEGIN{printf "%.0f", a/c}')" \
    "native $(awk -v a="$n" -v c="$5" 'BEGIN{printf "%.0f", a/c}') (harness/native $(awk -v a="$r" -v b="$n" 'BEGIN{printf "%.2f", a/b}'))" "$6"
}
if have valgrind && have callgrind_annotate; then
  cg() { # cg OUT PROGRAM ARGS...: the program under callgrind
    local out=$1
    shift
    valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>&1
  }
  cg "$T/cg.pn" "$PBB" pack 1024 "$NIR"
  "$S" replay -t "$T/r1" --iface constant:ns=0 -- valgrind --tool=callgrind --callgrind-out-file="$T/cg.pr" \
    "$PBB" pack 1024 "$NIR" >/dev/null 2>&1
  ir_row "replay harness instructions a call, pack 1024 B (callgrind)" protobuf_c_message_pack \
    "$T/cg.pr" "$T/cg.pn" $((NIR + 100)) "\`standin replay --iface constant:ns=0 -- valgrind --tool=callgrind pbbench pack 1024 $NIR\`"
  rm -rf "$T/ru"
  "$S" record -o "$T/ru" -- "$PBB" unpack 1024 1000 >/dev/null 2>&1
  cg "$T/cg.un" "$PBB" unpack 1024 "$NIR"
  for trees in pieces block; do
    "$S" replay -t "$T/ru" --iface constant:ns=0 --unpack-trees $trees -- valgrind --tool=callgrind \
      --callgrind-out-file="$T/cg.ur" "$PBB" unpack 1024 "$NIR" >/dev/null 2>&1
    ir_row "replay harness instructions a call, unpack 1024 B, trees $([ $trees = block ] && echo 'as one block' || echo 'piece by piece') (callgrind)" \
      protobuf_c_message_unpack "$T/cg.ur" "$T/cg.un" $((NIR + 100)) \
      "\`standin replay --iface constant:ns=0 --unpack-trees $trees -- valgrind --tool=callgrind pbbench unpack 1024 $NIR\`"
  done
  cg "$T/cg.nn" "$PBB" packnew 1024 "$NNEW"
  # its own recording: the one new_each_call left in $T/rn is its last row's
  rm -rf "$T/rn"
  "$S" record -o "$T/rn" -- "$PBB" packnew 1024 "$NNEW" >/dev/null 2>&1
  "$S" replay -t "$T/rn" --iface constant:ns=0 -- valgrind --tool=callgrind --callgrind-out-file="$T/cg.nr" \
    "$PBB" packnew 1024 "$NNEW" >/dev/null 2>&1
  ir_row "replay harness instructions a call, pack 1024 B, a new message each call (callgrind)" \
    protobuf_c_message_pack "$T/cg.nr" "$T/cg.nn" $((NNEW + 100)) \
    "\`standin replay --iface constant:ns=0 -- valgrind --tool=callgrind pbbench packnew 1024 $NNEW\`"
fi

# ---- replay with software vs native, end to end ----------------------------
# Both times cover the spawn, exec and wait of the program only, measured
# by standin alike: the native run by `standin native`, the replay by
# `standin replay --summary` wall_ns. (bash's timing, before, also held its
# fork of itself: a few ms on the AMD test VM, which flattered the replay.)
# A recording holds the speed the machine had while it was made, and every
# replay of it inherits that: on a VM that changes speed by 30-40% for
# seconds at a time, one recording replayed beside seven native runs showed
# 0.83 and 1.33 in two runs an hour apart. So each round records anew, as
# usual and with --retime (latencies from a second, timing-only run), and
# replays each recording between two native runs: a round's ratio is its
# replay over the mean of the native runs around it, and the row gives the
# median of the rounds' ratios.
nat=() rep=() adj=() ret=() dbt=() rr=() rt=() ra=() inrec=() inret=() ownn=() ownr=() orr=()
dbj() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["database"][sys.argv[2]])' "$1" "$2"; }
# the native run timed as replay times its own (standin native: spawn to
# exit; a shell's timing adds its fork)
native_us() {
  "$S" native -q --summary "$T/n.json" -- "$PBT" basic "$E2E" >/dev/null
  echo $(($(json "$T/n.json" wall_ns) / 1000))
}
ratio() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN{printf "%.3f", a/((b+c)/2)}'; }
# a warm-up run first: the runs before a recording free the memory it takes
"$PBT" basic "$E2E" >/dev/null
for _ in $(seq "$REPS"); do
  rm -rf "$T/e2e" "$T/e2r"
  "$S" record -o "$T/e2e" -- "$PBT" basic "$E2E" >/dev/null 2>&1
  "$S" record --retime -o "$T/e2r" -- "$PBT" basic "$E2E" >/dev/null 2>&1
  n0=$(native_us)
  "$S" replay -t "$T/e2e" --summary "$T/e.json" -- "$PBT" basic "$E2E" >/dev/null 2>&1
  n1=$(native_us)
  "$S" replay -t "$T/e2r" --summary "$T/r.json" -- "$PBT" basic "$E2E" >/dev/null 2>&1
  n2=$(native_us)
  nat+=("$n0" "$n1" "$n2")
  rep+=("$(($(json "$T/e.json" wall_ns) / 1000))")
  adj+=("$(($(json "$T/e.json" wall_adjusted_ns) / 1000))")
  ret+=("$(($(json "$T/r.json" wall_ns) / 1000))")
  rr+=("$(ratio "${rep[-1]}" "$n0" "$n1")")
  ra+=("$(ratio "${adj[-1]}" "$n0" "$n1")")
  rt+=("$(ratio "${ret[-1]}" "$n1" "$n2")")
  inrec+=("$(($(json "$T/e.json" recorded_ns) / 1000))")
  inret+=("$(($(json "$T/r.json" recorded_ns) / 1000))")
  # the program's own time, outside its calls: natively the wall less the
  # calls as the timing run measured them; replayed, the wall less the time
  # the hooks took (harness and spin) and the replay's setup
  ownn+=("$(((n1 + n2) / 2 - ${inret[-1]}))")
  ownr+=("$((${ret[-1]} - ($(json "$T/r.json" harness_ns) + $(json "$T/r.json" spin_ns) + $(json "$T/r.json" setup_ns)) / 1000))")
  orr+=("$(awk -v a="${ownr[-1]}" -v b="${ownn[-1]}" 'BEGIN{printf "%.3f", a/b}')")
  dbt+=("$(($(dbj "$T/e.json" build_ns) / 1000))")
done
mn=$(printf '%s\n' "${nat[@]}" | median)
mr=$(printf '%s\n' "${rep[@]}" | median)
mt=$(printf '%s\n' "${ret[@]}" | median)
ma=$(printf '%s\n' "${adj[@]}" | median)
row "replay software / native wall, pbtest basic $E2E (a recording each round)" \
  "$(printf '%s\n' "${rr[@]}" | median | xargs printf '%.3f') ($(printf '%s\n' "${rr[@]}" | spread))" \
  "native $mn us ($(printf '%s\n' "${nat[@]}" | spread)), replay $mr us ($(printf '%s\n' "${rep[@]}" | spread)); overruns $(json "$T/e.json" overruns) of $(json "$T/e.json" calls_replayed) calls (last round); time in calls as recorded $(printf '%s\n' "${inrec[@]}" | median) us ($(printf '%s\n' "${inrec[@]}" | spread)), retimed $(printf '%s\n' "${inret[@]}" | median) us ($(printf '%s\n' "${inret[@]}" | spread))" \
  "\`standin replay --summary\` wall_ns over the mean of the native runs before and after it"
row "replay software / native wall, pbtest basic $E2E, recorded with --retime (a recording each round)" \
  "$(printf '%s\n' "${rt[@]}" | median | xargs printf '%.3f') ($(printf '%s\n' "${rt[@]}" | spread))" \
  "native $mn us, replay $mt us ($(printf '%s\n' "${ret[@]}" | spread)); the program's own time outside its calls $(printf '%s\n' "${orr[@]}" | median | xargs printf '%.3f') ($(printf '%s\n' "${orr[@]}" | spread)) of native: natively the wall less the calls as timed, $(printf '%s\n' "${ownn[@]}" | median) us ($(printf '%s\n' "${ownn[@]}" | spread)); replayed the wall less harness, spin and setup, $(printf '%s\n' "${ownr[@]}" | median) us ($(printf '%s\n' "${ownr[@]}" | spread))" \
  "\`standin record --retime\`, then as above"
row "replay software less unpaid harness time / native wall, pbtest basic $E2E" \
  "$(printf '%s\n' "${ra[@]}" | median | xargs printf '%.3f') ($(printf '%s\n' "${ra[@]}" | spread))" \
  "native $mn us, replay less unpaid harness time $ma us ($(printf '%s\n' "${adj[@]}" | spread)); paid back $(json "$T/e.json" repaid_ns) ns of $(json "$T/e.json" overrun_ns) ns overrun and $(json "$T/e.json" spin_stopped_owed_ns) ns owed by waits the machine stopped (last round)" \
  "\`standin replay --summary\` wall_adjusted_ns, as above"
# The program's own view of the same work: `pbtest timed` times its four
# calls by its own clock (less the clock's cost, timed around an empty
# call). Natively and replayed (software, a --retime recording),
# alternating: the time in calls and the rest, each replayed over native,
# and what the replay's windows did not see: the calls by the program's
# clock less the harness and spin the summary counts, a call. That last
# was 26 ns a call before c8cd89d fenced the read that ends a window.
rm -rf "$T/tm"
"$S" record --retime -o "$T/tm" -- "$PBT" timed "$E2E" >/dev/null 2>&1
tc=() to=() tu=()
timed_field() { sed -n "s/.* $2 \([0-9.]*\) .*/\1/p" "$1"; }
for _ in $(seq "$REPS"); do
  "$PBT" timed "$E2E" 2>"$T/tn.err" >/dev/null
  "$S" replay -t "$T/tm" --summary "$T/tr.json" -- "$PBT" timed "$E2E" 2>"$T/tr.err" >/dev/null
  cn=$(timed_field "$T/tn.err" calls_ns) on=$(timed_field "$T/tn.err" own_ns)
  cr=$(timed_field "$T/tr.err" calls_ns) or=$(timed_field "$T/tr.err" own_ns)
  tc+=("$(awk -v a="$cr" -v b="$cn" 'BEGIN{printf "%.3f", a/b}')")
  to+=("$(awk -v a="$or" -v b="$on" 'BEGIN{printf "%.3f", a/b}')")
  tu+=("$(awk -v a="$cr" -v h="$(json "$T/tr.json" harness_ns)" -v s="$(json "$T/tr.json" spin_ns)" \
    -v n="$(json "$T/tr.json" calls_intercepted)" 'BEGIN{printf "%.1f", (a-h-s)/n}')")
done
row "replay software, pbtest timed $E2E, by the program's own clock: time in calls, replayed / native" \
  "$(printf '%s\n' "${tc[@]}" | median) ($(printf '%s\n' "${tc[@]}" | spread))" \
  "outside its calls, replayed / native $(printf '%s\n' "${to[@]}" | median) ($(printf '%s\n' "${to[@]}" | spread)); replayed calls by the program's clock less the summary's harness and spin $(printf '%s\n' "${tu[@]}" | median) ns a call ($(printf '%s\n' "${tu[@]}" | spread))" \
  "\`standin record --retime\`, then natively and \`standin replay --summary\` alternating: \`pbtest timed\` on stderr"

# building the replay database, before the program starts: the CLI's peak
# memory against the database's size, and its time against the native run
dbb=$(dbj "$T/e.json" bytes) dbp=$(dbj "$T/e.json" build_peak_rss_bytes)
mb=$(printf '%s\n' "${dbt[@]}" | median)
row "replay database build, pbtest basic $E2E: CLI peak memory / database size" \
  "$(awk -v a="$dbp" -v b="$dbb" 'BEGIN{printf "%.2f", a/b}')" \
  "database $((dbb >> 20)) MiB, peak $((dbp >> 20)) MiB; build $mb us ($(printf '%s\n' "${dbt[@]}" | spread)), $(awk -v a="$mb" -v b="$mn" 'BEGIN{printf "%.1f", a/b}')x the native run" \
  "\`standin replay --summary\` database"

# the database of a program of many distinct messages whose payloads repeat
# (protogen: every type of the project's schemas), against its native run,
# and the trace chunks the build decoded again to look up payloads stored
# chunks before it (2026-12-02: 5,139 for a 44-chunk trace, 13 s)
PG="$B/progs/protogen"
rm -rf "$T/pg"
"$S" record -o "$T/pg" -- "$PG" -n "$NPG" >/dev/null 2>&1
pgb=() pgn=()
for _ in 1 2 3; do
  "$S" native -q --summary "$T/n.json" -- "$PG" -n "$NPG" >/dev/null
  pgn+=("$(($(json "$T/n.json" wall_ns) / 1000))")
  "$S" replay -t "$T/pg" --summary "$T/pg.json" -- "$PG" -n "$NPG" >/dev/null 2>&1
  pgb+=("$(($(dbj "$T/pg.json" build_ns) / 1000))")
done
mpb=$(printf '%s\n' "${pgb[@]}" | median) mpn=$(printf '%s\n' "${pgn[@]}" | median)
row "replay database build, protogen -n $NPG ($(json "$T/pg.json" calls_replayed) calls): build / native run" \
  "$(awk -v a="$mpb" -v b="$mpn" 'BEGIN{printf "%.1fx", a/b}')" \
  "build $mpb us ($(printf '%s\n' "${pgb[@]}" | spread)), native $mpn us ($(printf '%s\n' "${pgn[@]}" | spread)); database $(($(dbj "$T/pg.json" bytes) >> 20)) MiB, CLI peak $(($(dbj "$T/pg.json" build_peak_rss_bytes) >> 20)) MiB; trace chunks $(dbj "$T/pg.json" trace_chunks), decoded again $(dbj "$T/pg.json" trace_chunks_decoded_again)" \
  "\`standin replay --summary\` database, 3 runs"

# ---- more rows from other parts (analysis, workloads, validation) ----------
for extra in bench/rows.d/*.sh; do
  [ -f "$extra" ] && source "$extra"
done

{
  echo "## make bench ($(date -u +%Y-%m-%d), $(nproc) cores, median (min-max) of $REPS runs$([ "${BENCH_QUICK:-0}" = 1 ] && echo ', quick'))"
  echo
  echo "| what | standin | baseline, same run | how |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$T/table.md"
cp "$T/table.md" "$OUT"
echo "written to $OUT"
