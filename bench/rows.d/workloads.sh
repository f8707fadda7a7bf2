# Sourced by bench/run.sh: JPEG decode costs, record slowdown on each bundled
# workload, and the ground-truth errors of make validate. Uses the helpers and
# variables of run.sh (B, S, T, REPS, row, median, spread, json).

CORPUS="$B/corpus-quick"
workloads/corpus/make_corpus.sh "$CORPUS" --quick >/dev/null
TH="$B/progs/thumbnailer"

# wall time of a command in ns
wall_ns() {
  local t0=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  local t1=$EPOCHREALTIME
  awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1e9}'
}

# ---- JPEG: added time per decode, three image sizes ------------------------
# Wall time of many decodes of one image, recorded vs native, per decode
# (standin's start-up is spread over the passes).
for f in 0160x0120_444_base_q90 0333x0251_420_base_q70 0640x0480_420_base_q85; do
  img="$CORPUS/$f.jpg"
  [ -f "$img" ] || continue
  passes=300
  nat=() rec=()
  for _ in $(seq "$REPS"); do
    nat+=("$(wall_ns "$TH" -j 1 -r $passes "$img")")
    rm -rf "$T/j"
    rec+=("$(wall_ns "$S" record -o "$T/j" -- "$TH" -j 1 -r $passes "$img")")
  done
  mn=$(printf '%s\n' "${nat[@]}" | median)
  mr=$(printf '%s\n' "${rec[@]}" | median)
  row "record jpeg decode ${f%%_*}: ns added per decode" \
    "$(awk -v a="$mr" -v b="$mn" -v n=$passes 'BEGIN{printf "%+.0f", (a-b)/n}')" \
    "native $(awk -v a="$mn" -v n=$passes 'BEGIN{printf "%.0f", a/n}') ns per decode (whole program / passes)" \
    "\`standin record -- thumbnailer -r $passes $f.jpg\`, wall"
done

# ---- record: end-to-end slowdown on each bundled workload -----------------
wl_row() { # NAME CMD...
  local name=$1
  shift
  local nat=() rec=()
  for _ in $(seq "$REPS"); do
    local t0=$EPOCHREALTIME
    "$@" >/dev/null 2>&1
    local t1=$EPOCHREALTIME
    nat+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1e6}')")
    rm -rf "$T/w"
    t0=$EPOCHREALTIME
    "$S" record -o "$T/w" -- "$@" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    rec+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1e6}')")
  done
  local mn mr
  mn=$(printf '%s\n' "${nat[@]}" | median)
  mr=$(printf '%s\n' "${rec[@]}" | median)
  row "record slowdown, $name" "$(awk -v a="$mr" -v b="$mn" 'BEGIN{printf "%.2fx", a/b}')" \
    "native $mn us ($(printf '%s\n' "${nat[@]}" | spread)), recorded $mr us" \
    "wall of \`standin record -- $name\` / native"
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
