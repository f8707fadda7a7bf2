#!/usr/bin/env bash
# make demo: record a bundled protobuf-c program, show where its time goes,
# then replay it against several performance interfaces and compare the
# measured end-to-end times with the native run.
set -euo pipefail
B=${B:-build}
S="$B/standin"
PROG=("$B/progs/pbtest" pool 4 4000)
D=$(mktemp -d /tmp/standin-demo.XXXXXX)
trap 'rm -rf "$D"' EXIT
json() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

echo "== 1. record: ${PROG[*]}"
"$S" record -o "$D/rec" -- "${PROG[@]}" >"$D/rec.out"
echo
echo "== 2. info: where the time goes"
"$S" info "$D/rec"
echo
echo "== 3. replay against performance interfaces (output checked byte for byte)"
t0=$(date +%s%N); "${PROG[@]}" >"$D/native.out"; t1=$(date +%s%N)
native=$(((t1 - t0) / 1000))
printf '%-34s %12s %10s %10s %10s\n' "interface" "wall (us)" "vs native" "replayed" "fallback"
printf '%-34s %12s %10s %10s %10s\n' "native (no standin)" "$native" "1.00" "-" "-"
for iface in software protobuf=scale:factor=0.5 protobuf=scale:factor=2 pb.unpack=constant:ns=0 constant:ns=0; do
  "$S" replay -t "$D/rec" --iface "$iface" --summary "$D/s.json" -- "${PROG[@]}" >"$D/rep.out" 2>/dev/null
  cmp -s "$D/rec.out" "$D/rep.out" || { echo "replayed output differs for $iface" >&2; exit 1; }
  wall=$(($(json "$D/s.json" wall_ns) / 1000))
  printf '%-34s %12s %10s %10s %10s\n' "$iface" "$wall" "$(awk -v a="$wall" -v b="$native" 'BEGIN{printf "%.2f", a/b}')" \
    "$(json "$D/s.json" calls_replayed)" "$(json "$D/s.json" calls_fallback)"
done
echo
echo "Every replayed run printed exactly what the recorded run printed."
