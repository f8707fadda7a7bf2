# Offline analysis rows (sourced by bench/run.sh): calls analysed per second
# on one core and peak memory, on a synthetic trace written by gentrace
# (10 M calls over 8 threads; BENCH_QUICK=1: 1 M). The baseline is `standin
# info`, which reads every call with the same reader and adds them up: what
# is left is the analysis itself. Memory must not grow with the trace.
GENT="$B/progs/gentrace"
if [ "${BENCH_QUICK:-0}" = 1 ]; then NAN=1000000; else NAN=10000000; fi
rm -rf "$T/an"
"$GENT" -o "$T/an" -n "$NAN" -t 8 >/dev/null

# an_time CMD...: "cpu_seconds max_rss_kib" of one run (/usr/bin/time -v);
# CPU time (user + system) rather than wall time: the analysis runs on one
# core, and CPU time does not count the time other processes held it
an_time() {
  /usr/bin/time -v "$@" >/dev/null 2>"$T/an.time"
  awk -F': ' '/User time \(seconds\)/ { cpu += $2 } /System time \(seconds\)/ { cpu += $2 }
               /Maximum resident set size/ { rss = $2 }
               END { print cpu, rss }' "$T/an.time"
}

# an_rate CMD...: median calls/s (spread) and peak RSS over 3 runs
an_rate() {
  local v=() m=()
  for _ in 1 2 3; do
    read -r secs rss < <(an_time "$@")
    v+=("$(awk -v n="$NAN" -v s="$secs" 'BEGIN{printf "%.0f", n / (s > 0 ? s : 0.01)}')")
    m+=("$rss")
  done
  echo "$(printf '%s\n' "${v[@]}" | median) $(printf '%s\n' "${v[@]}" | spread) $(printf '%s\n' "${m[@]}" | sort -n | tail -1)"
}

read -r base _ base_rss < <(an_rate "$S" info "$T/an")
mcalls() { awk -v r="$1" 'BEGIN{printf "%.2f M", r / 1e6}'; }
mspread() { awk -F- '{printf "%.2f-%.2f M", $1 / 1e6, $2 / 1e6}' <<<"$1"; }
for what in "report:report --iface protoacc" "report by site:report --by site --iface protoacc:engines=2" \
  "whatif:whatif --iface pb.size=constant:ns=100 --iface protoacc" "whatif, 3 plans:whatif --iface protoacc --plan $T/an.plan --plan $T/an.plan"; do
  name=${what%%:*}
  args=${what#*:}
  printf 'accel a constant:ns=500 engines=4\noffload api=pb.unpack to a\n' >"$T/an.plan"
  # shellcheck disable=SC2086
  read -r rate sp rss < <(an_rate "$S" $args "$T/an")
  row "analysis: $name, calls/s on one core (CPU time; $((NAN / 1000000)) M-call trace)" \
    "$(mcalls "$rate") ($(mspread "$sp"))" "standin info (reader alone) $(mcalls "$base")/s" "\`standin ${args//$T\//}\`"
  row "analysis: $name, peak memory" "$((rss / 1024)) MiB" "standin info $((base_rss / 1024)) MiB" \
    "/usr/bin/time -v, Maximum resident set size"
done
