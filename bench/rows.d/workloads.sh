# Sourced by bench/run.sh: JPEG decode costs, record slowdown on each bundled
# workload, and the ground-truth errors of make validate. Uses the helpers and
# variables of run.sh (B, S, T, REPS, row, median, spread, json).

CORPUS="$B/corpus-quick"
workloads/corpus/make_corpus.sh "$CORPUS" --quick >/dev/null
TH="$B/progs/thumbnailer"

# ---- JPEG: added time per decode, three image sizes ------------------------
# jpegbench decodes one image from memory in a loop timed by the program
# itself (standin's start-up and final flush are outside it), natively and
# recorded, alternately.
JB="$B/progs/jpegbench"
for f in 0160x0120_444_base_q90 0333x0251_420_base_q70 0640x0480_420_base_q85; do
  img="$CORPUS/$f.jpg"
  [ -f "$img" ] || continue
  nat=() rec=()
  for _ in $(seq "$REPS"); do
    nat+=("$("$JB" "$img" "$NJPEG" 2>/dev/null | per_call)")
    rm -rf "$T/j"
    rec+=("$("$S" record -o "$T/j" -- "$JB" "$img" "$NJPEG" 2>/dev/null | per_call)")
  done
  mn=$(printf '%s\n' "${nat[@]}" | median)
  mr=$(printf '%s\n' "${rec[@]}" | median)
  row "record jpeg decode ${f%%_*}: ns added per decode" \
    "$(awk -v a="$mr" -v b="$mn" 'BEGIN{printf "%+.0f", a-b}') (record $(printf '%s\n' "${rec[@]}" | spread))" \
    "native $mn ($(printf '%s\n' "${nat[@]}" | spread)) ns per decode" \
    "\`standin record -- jpegbench $f.jpg $NJPEG\`"
done

# ---- JPEG: one large image in a fresh process -------------------------------
# A process that decodes one image pays the first touch of every buffer
# the shims fill (the drain's copies of its compressed bytes) and of the
# database pages its rows come from; on a VM whose page faults are slow
# that is most of a replayed decode's harness, and record's drain copies
# inside the timed call. Recorded decode against --retime's timing-only
# runs (the same process with two clock reads a call), and the replay
# harness with a model that predicts 0 ns.
if have djpeg && have cjpeg; then
  ms() { awk '{printf "%.2f\n", $1 / 1e6}'; }
  "$B/progs/imagegen" 1920 1080 7 >"$T/big.ppm"
  cjpeg -quality 85 "$T/big.ppm" >"$T/big.jpg"
  recd=() ret=() har=()
  for _ in $(seq "$REPS"); do
    rm -rf "$T/bj"
    "$S" record -o "$T/bj" -- djpeg -outfile /dev/null "$T/big.jpg" 2>/dev/null
    recd+=("$("$S" dump "$T/bj" --format json | json_line_field latency_ns | ms)")
    "$S" replay -t "$T/bj" --iface constant:ns=0 --summary "$T/bj.json" -- djpeg -outfile /dev/null "$T/big.jpg" 2>/dev/null
    har+=("$(json "$T/bj.json" harness_ns | ms)")
    rm -rf "$T/bt"
    "$S" record --retime=1 -o "$T/bt" -- djpeg -outfile /dev/null "$T/big.jpg" >/dev/null 2>&1
    ret+=("$("$S" dump "$T/bt" --format json | json_line_field latency_ns | ms)")
  done
  mrec=$(printf '%s\n' "${recd[@]}" | median) mret=$(printf '%s\n' "${ret[@]}" | median)
  mhar=$(printf '%s\n' "${har[@]}" | median)
  row "record, one 1920x1080 JPEG decode in a fresh process: recorded / timing-only latency" \
    "$(awk -v a="$mrec" -v b="$mret" 'BEGIN{printf "%.3f", a/b}')" \
    "recorded $mrec ms ($(printf '%s\n' "${recd[@]}" | spread)), timing-only $mret ms ($(printf '%s\n' "${ret[@]}" | spread))" \
    "\`standin record -- djpeg\` against \`record --retime=1\`: \`dump --format json\` latency_ns"
  row "replay harness, one 1920x1080 JPEG decode in a fresh process, constant:ns=0 (ms)" \
    "$mhar ($(printf '%s\n' "${har[@]}" | spread))" "timing-only decode $mret ms" \
    "\`standin replay --iface constant:ns=0 --summary\` harness_ns, \`djpeg\`"
  # The same image from a program's own source that hands the library one
  # byte a fill (poppler's DCTStream does), against 1000 bytes a fill: a
  # replay drains the source to the image's end before it answers, so the
  # fills' cost (natively inside the decode) is the harness's, and so is
  # whatever the drain adds to each.
  byte_fill() { # READSIZE: "harness recorded" medians in ms, one recording a round
    local h=() r=()
    for _ in $(seq "$REPS"); do
      rm -rf "$T/bf"
      "$S" record -o "$T/bf" -- "$B/progs/jpegdec" -src custom -readsize "$1" "$T/big.jpg" >/dev/null 2>&1
      r+=("$("$S" dump "$T/bf" --format json | json_line_field latency_ns | ms)")
      "$S" replay -t "$T/bf" --iface constant:ns=0 --summary "$T/bf.json" -- \
        "$B/progs/jpegdec" -src custom -readsize "$1" "$T/big.jpg" >/dev/null 2>&1
      h+=("$(json "$T/bf.json" harness_ns | ms)")
    done
    echo "$(printf '%s\n' "${h[@]}" | median) $(printf '%s\n' "${r[@]}" | median)"
  }
  read -r h1 r1 <<<"$(byte_fill 1)"
  read -r hk rk <<<"$(byte_fill 1000)"
  row "replay harness, one 1920x1080 JPEG decode from a source of one byte a fill, constant:ns=0 (ms)" \
    "$h1" "1000 bytes a fill: $hk; recorded decode $r1 ms (one byte a fill) and $rk ms" \
    "\`standin replay --iface constant:ns=0 --summary\` harness_ns, \`jpegdec -src custom -readsize 1\`"
fi

# ---- record: end-to-end slowdown on each bundled workload -----------------
# Beside it, the floor of any recorder that times each call: the record
# shim's timing-only pass (what `record --retime` runs: two clock reads and
# 32 bytes a call, no payload, no call site, no writer thread, no launcher).
# Its clock is the launcher's calibration of the TSC (STANDIN_TSC), as in
# --retime's runs, taken from a record run's environment; without it the
# shim reads clock_gettime, which on the shadow-paged VM (kvm-clock) made a
# 64 B pack loop 193-196 ns a call against 157-160 with it (58 natively).
RSO="$(cd "$B/lib/standin" && pwd)/libstandin-record.so"
# shellcheck disable=SC2016 # expanded by the recorded shell, not this one
TSC_SPEC=$("$S" record -o "$T/tscprobe" -- sh -c 'printf %s "${STANDIN_TSC-}"' 2>/dev/null) || TSC_SPEC=
rm -rf "$T/tscprobe"
us_between() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f", (b-a)*1e6}'; }
wl_row() { # NAME CMD...
  local name=$1
  shift
  local nat=() rec=() tim=() t0 t1
  for _ in $(seq "$REPS"); do
    t0=$EPOCHREALTIME
    "$@" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    nat+=("$(us_between "$t0" "$t1")")
    rm -rf "$T/w"
    t0=$EPOCHREALTIME
    "$S" record -o "$T/w" -- "$@" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    rec+=("$(us_between "$t0" "$t1")")
    rm -rf "$T/tm" && mkdir -p "$T/tm"
    t0=$EPOCHREALTIME
    STANDIN_TIMING=1 STANDIN_TSC="$TSC_SPEC" STANDIN_DIR="$T/tm" LD_PRELOAD="$RSO" "$@" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    tim+=("$(us_between "$t0" "$t1")")
  done
  local mn mr mt
  mn=$(printf '%s\n' "${nat[@]}" | median)
  mr=$(printf '%s\n' "${rec[@]}" | median)
  mt=$(printf '%s\n' "${tim[@]}" | median)
  row "record slowdown, $name" "$(awk -v a="$mr" -v b="$mn" 'BEGIN{printf "%.2fx", a/b}')" \
    "native $mn us ($(printf '%s\n' "${nat[@]}" | spread)), recorded $mr us; timing each call only $(awk -v a="$mt" -v b="$mn" 'BEGIN{printf "%.2fx", a/b}') ($mt us)" \
    "wall of \`standin record -- $name\` / native; timing only: \`STANDIN_TIMING=1 STANDIN_TSC=(the launcher's) LD_PRELOAD=libstandin-record.so\`"
}
wl_row "rpc -n 20000 (default work, 4 threads)" "$B/progs/rpc" -n 20000
wl_row "rpc -n 20000 -w 8 (little protobuf)" "$B/progs/rpc" -n 20000 -w 8
wl_row "thumbnailer -r 4 corpus-quick" "$TH" -r 4 "$CORPUS"
wl_row "photo-service -n 100 corpus-quick" "$B/progs/photo-service" -n 100 "$CORPUS"
wl_row "protogen -n 2000" "$B/progs/protogen" -n 2000

# ---- ground truth (make validate) ------------------------------------------
if VALIDATE_RUNS=3 B="$B" validate/run.sh >"$T/validate.log" 2>&1; then
  while IFS='|' read -r _ name _ _ _ rep_err _ adj_err _ est_err _; do
    row "ground truth, ${name# }: replay error / replay less unpaid harness time / offline estimate error" \
      "${rep_err# } / ${adj_err# } / ${est_err# }" "true end-to-end with the real faster implementation" \
      "\`make validate\` (median of 3)"
  done < <(grep '^| jpeg\|^| protobuf' validate/results.md)
else
  row "ground truth" "failed" "" "see \`make validate\`"
fi
