# Offline analysis: report, whatif, sweep, compare, export (sourced by run.sh).
# Golden traces are written by gentrace from a spec, so every figure is
# known; the others come from recorded pbtest runs.
GEN="$B/progs/gentrace"

# pyj FILE EXPR: evaluate a Python expression over the JSON document d
pyj() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# near GOT WANT: within the histogram's 1.6%
near() {
  python3 -c 'import sys; g,w=float(sys.argv[1]),float(sys.argv[2]); sys.exit(abs(g-w) > 0.016*w + 0.5)' "$1" "$2" ||
    fail "$1 is not within 1.6% of $2"
}

# One process, one thread, 100 us: four unpacks of 1..4 us, a pack of 10 us,
# a get_packed_size of 0.5 us.
golden_single() {
  cat >single.spec <<'EOF'
process 100 start=1000000000 end=1000100000
thread 0
type 1 app.Req
type 2 app.Resp
site 1 handle_req /app
site 2 send_resp /app
call thread=0 api=pb.unpack type=1 site=1 start=1000001000 lat=1000 req=100 size=100
call thread=0 api=pb.unpack type=1 site=1 start=1000010000 lat=2000 req=200 size=200
call thread=0 api=pb.unpack type=1 site=1 start=1000020000 lat=3000 req=300 size=300
call thread=0 api=pb.unpack type=1 site=1 start=1000030000 lat=4000 req=400 size=400
call thread=0 api=pb.pack type=2 site=2 start=1000040000 lat=10000 resp=1000 size=1000
call thread=0 api=pb.size type=2 site=2 start=1000060000 lat=500 size=1000
EOF
  "$GEN" -o single --spec single.spec
}

# Main calls 1..11 us, thread 1 20..40 and 50..70 us, thread 2 20..25 and
# 30..35 us; the process runs 100 us.
golden_threads() {
  cat >threads.spec <<'EOF'
process 200 start=1000000000 end=1000100000
thread 0
thread 1 parent=0
thread 2 parent=0
type 1 app.Req
call thread=0 api=pb.unpack type=1 start=1000001000 lat=10000 req=10
call thread=1 api=pb.unpack type=1 start=1000020000 lat=20000 req=10
call thread=2 api=pb.unpack type=1 start=1000020000 lat=5000 req=10
call thread=2 api=pb.unpack type=1 start=1000030000 lat=5000 req=10
call thread=1 api=pb.unpack type=1 start=1000050000 lat=20000 req=10
EOF
  "$GEN" -o threads --spec threads.spec
}

# two_threads_at_once RUN LAT: the recording "over", a process of RUN ns
# whose two threads each make one LAT ns unpack at the same moment
two_threads_at_once() {
  cat >over.spec <<SPEC
process 300 start=1000000000 end=$((1000000000 + $1))
thread 0
thread 1 parent=0
type 1 app.Req
call thread=0 api=pb.unpack type=1 start=1000001000 lat=$2 req=10
call thread=1 api=pb.unpack type=1 start=1000001000 lat=$2 req=10
SPEC
  "$GEN" -o over --spec over.spec
}

t401_report_golden_trace_hand_computed() {
  golden_single
  "$STANDIN" report single --format json >r.json
  g='[x for x in d["groups"] if x["key"] == "pb.unpack app.Req"][0]'
  expect_eq calls 6 "$(pyj r.json 'd["calls"]')"
  expect_eq "run" 100000 "$(pyj r.json 'd["run_ns"]')"
  expect_eq "unpack calls" 4 "$(pyj r.json "$g[\"calls\"]")"
  expect_eq "unpack time" 10000 "$(pyj r.json "$g[\"time_ns\"]")"
  expect_eq "unpack share" 0.1 "$(pyj r.json "$g[\"share\"]")"
  expect_eq "unpack request bytes" 1000 "$(pyj r.json "$g[\"req_bytes\"]")"
  # as text, a side that is not bytes (a pack's request, an unpack's
  # response: trees) is "-"
  "$STANDIN" report single >r.txt
  grep -Eq '^pb\.pack +app\.Resp .* - +[0-9.]+ (B|KiB)$' r.txt || fail "pack row: $(cat r.txt)"
  grep -Eq '^pb\.unpack +app\.Req .* [0-9.]+ (B|KiB) +-$' r.txt || fail "unpack row: $(cat r.txt)"
  near "$(pyj r.json "$g[\"p50_ns\"]")" 2000
  near "$(pyj r.json "$g[\"p90_ns\"]")" 4000
  near "$(pyj r.json "$g[\"p99_ns\"]")" 4000
  expect_eq "unpack max" 4000 "$(pyj r.json "$g[\"max_ns\"]")"
  expect_eq "pack time" 10000 "$(pyj r.json '[x for x in d["groups"] if x["key"] == "pb.pack app.Resp"][0]["time_ns"]')"
  expect_eq "first row (most time)" "pb.pack app.Resp" "$(pyj r.json 'd["groups"][0]["key"]')"
  "$STANDIN" report single >r.txt
  grep -q "within 1.6%" r.txt || fail "no error bound: $(cat r.txt)"
  grep -q "20.5% of 100.00 us run time" r.txt || fail "share: $(cat r.txt)"
  "$STANDIN" report single --by api --format json >a.json
  expect_eq "groups by api" 3 "$(pyj a.json 'len(d["groups"])')"
}

# The unpacks of 100 and 200 B go to dev: 500 ns service, 2.5 round trips
# of 100 ns + the request at 1 B/ns in, half a round trip out: 900 and
# 1000 ns, saving 100 + 1000 ns. get_packed_size is unsupported on pa; the
# rest matches no rule.
t402_report_plan_decisions_golden() {
  golden_single
  cat >plan.txt <<'EOF'
accel dev constant:ns=500 link=pcie link_rtt_ns=100 link_gbps=1
accel pa protoacc
offload api=pb.unpack size=-250 to dev
offload api=pb.size to pa
EOF
  "$STANDIN" report single --plan plan.txt --format json >r.json
  expect_eq offloaded 2 "$(pyj r.json 'd["plan"]["offloaded"]')"
  expect_eq "not selected" 3 "$(pyj r.json 'd["plan"]["software"]["not_selected"]')"
  expect_eq unsupported 1 "$(pyj r.json 'd["plan"]["software"]["unsupported"]')"
  expect_eq "dev service" 1000 "$(pyj r.json 'd["plan"]["accelerators"][0]["service_ns"]')"
  expect_eq "dev link" 900 "$(pyj r.json 'd["plan"]["accelerators"][0]["link_ns"]')"
  expect_eq "predicted" 1900 "$(pyj r.json 'd["plan"]["predicted_ns"]')"
  expect_eq "why" 1 "$(pyj r.json 'list(d["plan"]["accelerators"][1]["unsupported"].values())[0]')"
  expect_eq "estimate" 98900 "$(pyj r.json 'd["plan"]["estimate_ns"]')"
  expect_eq "method" "single-thread Amdahl" "$(pyj r.json 'd["plan"]["method"]')"
  g='[x for x in d["groups"] if x["key"] == "pb.unpack app.Req"][0]["plan"]'
  expect_eq "group offloaded" 2 "$(pyj r.json "$g[\"offloaded\"]")"
  expect_eq "group predicted" 1900 "$(pyj r.json "$g[\"predicted_ns\"]")"
  "$STANDIN" report single --plan plan.txt >r.txt
  grep -q "1 call unsupported by the accelerator's model" r.txt || fail "$(cat r.txt)"
  grep -q "get_packed_size" r.txt || fail "no reason: $(cat r.txt)"
  grep -q "estimate 98.90 us (-1.1%) by single-thread Amdahl" r.txt || fail "$(cat r.txt)"
}

# constant:ns=0 saves main 10, thread 1 40 and thread 2 10 us; both threads
# start after main's call, so they inherit its 10: the last call ends at
# 20 us instead of 70, the estimate is 50 us; the naive sum says 40 us.
# constant:ns=30000 adds 20, 20 and 50 us: the critical path says 140 us,
# one CPU cannot do 75 + 90 us of work in less than 165 us.
t403_whatif_threads_golden_critical_path_and_cpu_bound() {
  golden_threads
  printf 'accel a constant:ns=30000\noffload to a\n' >slow.txt
  "$STANDIN" whatif threads --iface constant:ns=0 --plan slow.txt --cpus 1 --format json >w.json
  expect_eq "estimate" 50000 "$(pyj w.json 'd["plans"][0]["estimate_ns"]')"
  expect_eq "naive" 40000 "$(pyj w.json 'd["plans"][0]["estimate_naive_ns"]')"
  expect_eq "method" "per-thread critical path" "$(pyj w.json 'd["plans"][0]["method"]')"
  expect_eq "slow critical path" 140000 "$(pyj w.json 'd["plans"][1]["estimate_critical_path_ns"]')"
  expect_eq "slow estimate" 165000 "$(pyj w.json 'd["plans"][1]["estimate_ns"]')"
  expect_eq "slow method" "CPU capacity" "$(pyj w.json 'd["plans"][1]["method"]')"
  "$STANDIN" whatif threads --iface constant:ns=0 --plan slow.txt --cpus 2 >w.txt
  grep -q "per-thread critical path" w.txt || fail "$(cat w.txt)"
  grep -q "CPU capacity bound (2 CPUs)" w.txt || fail "$(cat w.txt)"
}

# 8 threads share one engine of 100 us: the accelerator serves 3,200
# requests one at a time, so the run takes about 320 ms whatever the number
# of CPUs. The per-thread estimate follows the engine's timeline; the naive
# sum adds every thread's queueing on top of the wall time.
t404_whatif_threads_closer_to_replay_than_naive_sum() {
  "$STANDIN" record -o rec -- "$PB" threads 8 100 >rec.out
  spec=constant:ns=100000,engines=1
  "$STANDIN" whatif rec --iface $spec --format json >w.json
  est=$(pyj w.json 'd["plans"][0]["estimate_ns"]')
  naive=$(pyj w.json 'd["plans"][0]["estimate_naive_ns"]')
  [ "$est" != "$naive" ] || fail "estimate equals the naive sum"
  for i in 1 2 3; do
    "$STANDIN" replay -t rec --iface $spec --summary s$i.json -- "$PB" threads 8 100 >rep.out
    cmp rec.out rep.out
  done
  med=$(for i in 1 2 3; do json s$i.json wall_ns; done | sort -n | sed -n 2p)
  echo "replay median $med ns, estimate $est ns, naive $naive ns"
  python3 -c 'import sys; e,n,m=map(int,sys.argv[1:]); sys.exit(abs(e-m) >= abs(n-m))' \
    "$est" "$naive" "$med" || fail "estimate $est is not closer to replay $med than naive $naive"
  "$STANDIN" compare rec --iface $spec s1.json s2.json s3.json >c.txt
  grep -q "^median" c.txt || fail "$(cat c.txt)"
}

t405_export_csv_and_json_parse_with_standard_tools() {
  "$STANDIN" record -o rec -- "$PB" basic 5 >/dev/null
  "$STANDIN" export rec --format csv -o calls.csv
  # -o - is standard output, not a file named -
  "$STANDIN" export rec --format csv -o - | cmp - calls.csv || fail "-o - differs"
  [ ! -e ./- ] || fail "-o - wrote a file named -"
  "$STANDIN" export rec --format json >calls.json
  n=$(calls rec)
  python3 - "$n" <<'EOF'
import csv, json, sys
n = int(sys.argv[1])
rows = list(csv.DictReader(open("calls.csv")))
assert len(rows) == n, (len(rows), n)
for col in ("pid", "thread", "start_ns", "latency_ns", "api", "type", "site", "encoded_size"):
    assert col in rows[0], col
assert {r["api"] for r in rows} == {"pb.pack", "pb.size", "pb.pack_to_buffer", "pb.unpack"}
assert all(int(r["latency_ns"]) > 0 for r in rows)
d = json.load(open("calls.json"))
assert d["format"] == "standin-export" and d["version"] == 1
assert len(d["calls"]) == n and len(d["processes"]) == 1
assert d["processes"][0]["calls"] == n
assert d["calls"][0]["features"]["encoded_size"] >= 0
assert [int(r["latency_ns"]) for r in rows] == [c["latency_ns"] for c in d["calls"]]
# the JSON calls have every CSV column (request_size was missing), the same
base = list(rows[0])[:list(rows[0]).index("fingerprint") + 1]
for r, c in zip(rows, d["calls"]):
    for col in base:
        v = c[col]
        v = {True: "1", False: "0"}.get(v, v) if isinstance(v, bool) else str(v)
        assert v == r[col], (col, r[col], c[col])
EOF
}

# The Chrome trace-event format as Perfetto reads it: complete events with
# name, category, pid, tid, ts and dur in microseconds, args; metadata naming
# every process and thread; a thread's calls never overlap.
t406_export_chrome_passes_schema_check() {
  "$STANDIN" record -o rec -- "$PB" threads 3 4 >/dev/null
  "$STANDIN" export rec --format chrome -o trace.json
  python3 - <<'EOF'
import json
d = json.load(open("trace.json"))
assert isinstance(d, dict) and isinstance(d["traceEvents"], list)
num = (int, float)
names, spans = {}, {}
for e in d["traceEvents"]:
    assert e["ph"] in ("X", "M"), e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
    if e["ph"] == "M":
        assert e["name"] in ("process_name", "thread_name"), e
        assert isinstance(e["args"]["name"], str) and e["args"]["name"], e
        names[(e["name"], e["pid"], e["tid"] if e["name"] == "thread_name" else 0)] = 1
        continue
    assert isinstance(e["name"], str) and " " in e["name"], e
    assert isinstance(e["cat"], str), e
    assert isinstance(e["ts"], num) and e["ts"] >= 0, e
    assert isinstance(e["dur"], num) and e["dur"] > 0, e
    assert isinstance(e["args"], dict) and "req_bytes" in e["args"], e
    spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
assert sum(len(v) for v in spans.values()) == 3 * 4 * 4
for (pid, tid), v in spans.items():
    assert ("thread_name", pid, tid) in names, (pid, tid)
    assert ("process_name", pid, 0) in names, pid
    v.sort()
    assert all(a[1] <= b[0] + 1e-3 for a, b in zip(v, v[1:])), (pid, tid)
EOF
}

t407_sweep_offline_estimates_and_measured_replays() {
  "$STANDIN" record -o rec -- "$PB" basic 20 >/dev/null
  "$STANDIN" sweep rec --iface constant:ns=0 --vary constant.ns=0,200000 --runs 1 \
    --format json --plot plots --replay -- "$PB" basic 20 >s.json
  expect_eq values 2 "$(pyj s.json 'len(d["values"])')"
  expect_eq "estimates grow" True "$(pyj s.json 'd["values"][0]["estimate"]["estimate_ns"] < d["values"][1]["estimate"]["estimate_ns"]')"
  expect_eq "replays ran" "1 1" "$(pyj s.json '" ".join(str(v["replay"]["ok"]) for v in d["values"])')"
  # 80 calls of 200 us make the slow replay about 16 ms longer; a measured
  # time on a shared machine is not asserted, only that one was measured
  expect_eq "measured" True "$(pyj s.json 'all(v["replay"]["median_ns"] > 0 for v in d["values"])')"
  expect_eq "replayed, fallback" "80 0 80 0" \
    "$(pyj s.json '" ".join("%d %d" % (v["replay"]["calls_replayed"], v["replay"]["calls_fallback"]) for v in d["values"])')"
  # a replay that answered no call measured the program alone, without a word
  "$STANDIN" sweep rec --iface constant:ns=0 --vary constant.ns=0 --runs 1 --native-wall 5ms \
    --replay -- true >/dev/null 2>t.err
  grep -q "the replays of ns=0 answered no call from the recording" t.err || fail "t.err: $(cat t.err)"
  # sweep's options after --replay were run as the program
  set +e
  "$STANDIN" sweep rec --iface constant:ns=0 --vary constant.ns=0 --replay --runs 1 -- true 2>o.err
  rc=$?
  set -e
  [ $rc -ne 0 ] && grep -q "put sweep's options before --replay" o.err || fail "o.err: $(cat o.err)"
  # the program also ran natively, and the estimates start from that run
  expect_eq "native runs" 1 "$(pyj s.json 'd["native"]["ok"]')"
  expect_eq "baseline" True "$(pyj s.json 'd["wall_ns"] == d["native"]["median_ns"] > 0 and d["wall_source"] == "native-wall"')"
  # unless --native-wall says it
  "$STANDIN" sweep rec --iface constant:ns=0 --vary constant.ns=0 --runs 1 --native-wall 5ms \
    --format json --replay -- "$PB" basic 20 >n.json
  expect_eq "given native wall" "False 5000000" "$(pyj n.json '"native" in d, d["wall_ns"]' | tr -d '(),')"
  [ -s plots/sweep.dat ] && [ -s plots/sweep.gp ] || fail "no plot data"
  if command -v gnuplot >/dev/null; then [ -s plots/sweep.svg ] || fail "gnuplot made no SVG"; fi
  # an accelerator setting, offline only
  "$STANDIN" sweep rec --iface constant:ns=50000 --vary engines=1,0 >e.txt
  grep -q "^1 " e.txt && grep -q "^0 " e.txt || fail "$(cat e.txt)"
}

t408_compare_prints_estimate_beside_measured() {
  "$STANDIN" record -o rec -- "$PB" basic 10 >/dev/null
  for i in 1 2; do
    "$STANDIN" replay -t rec --iface pb.pack=constant:ns=20000 --summary s$i.json -- "$PB" basic 10 >/dev/null
  done
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 s1.json s2.json --format json >c.json
  "$STANDIN" whatif rec --iface pb.pack=constant:ns=20000 --format json >w.json
  expect_eq "same estimate" "$(pyj w.json 'd["plans"][0]["estimate_ns"]')" "$(pyj c.json 'd["estimate_ns"]')"
  expect_eq summaries 2 "$(pyj c.json 'len(d["summaries"])')"
  python3 - <<'EOF'
import json
c = json.load(open("c.json"))
for s in c["summaries"]:
    w = json.load(open(s["file"]))["wall_ns"]
    assert s["wall_ns"] == w
    assert abs(s["estimate_difference"] - (c["estimate_ns"] - w) / w) < 1e-3, s
    assert s["calls_replayed"] == c["plan"]["offloaded"] == 10
    a = json.load(open(s["file"]))["accelerators"][0]
    assert s["accelerators"] == {a["name"]: {"requests": 10, "queue_ns": a["queue_ns"]}}, s
EOF
  # names longer than the column were cut at their end: every row read the
  # same directory; cut in the middle, they differ
  mkdir -p a_directory_of_replay_summaries
  cp s1.json s2.json a_directory_of_replay_summaries/
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 a_directory_of_replay_summaries/s1.json \
    a_directory_of_replay_summaries/s2.json >cl.txt
  expect_eq "distinct cut names" 2 "$(grep '\.\.\.' cl.txt | grep -v '^ ' | awk '{print $1}' | sort -u | wc -l)"
  # whatif's JSON has a wall_ns too: it was compared as a measured replay
  set +e
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 s1.json w.json >/dev/null 2>cw.err
  local rc=$?
  set -e
  [ $rc -ne 0 ] && grep -q "w.json is not a 'standin replay --summary' file" cw.err ||
    fail "whatif JSON: $rc $(cat cw.err)"
  # the same model, its parameters written otherwise, is not another's
  "$STANDIN" compare rec --iface pb.pack=constant:ns=2e4 s1.json >/dev/null 2>c1.err
  [ ! -s c1.err ] || fail "warned: $(cat c1.err)"
  "$STANDIN" compare rec --iface pb.pack=constant:ns=3e4 s1.json >/dev/null 2>c1.err
  grep -q "its times are another model's" c1.err || fail "not warned: $(cat c1.err)"
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 s1.json s2.json >c.txt 2>c.err
  grep -q "s1.json" c.txt && grep -q "^median" c.txt || fail "$(cat c.txt)"
  [ ! -s c.err ] || fail "warned: $(cat c.err)"
  # a summary of another recording, or of a replay with none of the plan's
  # accelerators, is said to be one (it was compared without a word)
  "$STANDIN" record -o other -- "$PB" basic 3 >/dev/null
  "$STANDIN" replay -t other --iface pb.pack=constant:ns=20000 --summary o.json -- "$PB" basic 3 >/dev/null
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 s1.json o.json >c2.txt 2>c2.err
  grep -q "o.json is a replay of $(realpath other), not of $(realpath rec)" c2.err || fail "$(cat c2.err)"
  "$STANDIN" compare rec --iface pb.pack=protoacc s1.json >c3.txt 2>c3.err
  grep -q "s1.json was replayed with none of the plan's accelerators (protoacc)" c3.err ||
    fail "$(cat c3.err)"
  grep -q "^ *s1.json *- *-$" c3.txt || fail "no measurement shown as '-': $(cat c3.txt)"
  # the same accelerator with other parameters is another model
  "$STANDIN" compare rec --iface pb.pack=constant:ns=5000 s1.json >/dev/null 2>c5.err
  grep -q "s1.json replayed constant as constant:ns=20000, not constant:ns=5000" c5.err ||
    fail "$(cat c5.err)"
  # a replay whose every call missed ran the program for real: said so;
  # --on-miss nearest's calls are shown beside the replayed ones
  "$STANDIN" replay -t other --iface pb.pack=constant:ns=20000 --summary miss.json \
    -- "$PB" same 10 >/dev/null 2>&1
  "$STANDIN" replay -t other --iface pb.pack=constant:ns=20000 --on-miss nearest \
    --summary near.json -- "$PB" same 10 >/dev/null 2>&1
  "$STANDIN" compare other --iface pb.pack=constant:ns=20000 miss.json near.json >c4.txt 2>c4.err
  grep -q "miss.json answered no call from the recording (.* fallbacks): its wall time is the program's own" c4.err ||
    fail "$(cat c4.err)"
  ! grep -q "near.json answered no call" c4.err || fail "near.json: $(cat c4.err)"
  grep -q " APPROXIMATED$" c4.txt || fail "$(cat c4.txt)"
}

t409_report_plots_written_with_or_without_gnuplot() {
  golden_single
  "$STANDIN" report single --iface pb.unpack=constant:ns=100 --plot plots >/dev/null 2>err
  for f in latency.dat latency.gp size.dat size.gp; do [ -s plots/$f ] || fail "no plots/$f"; done
  grep -q "^# pb.unpack app.Req" plots/latency.dat || fail "$(cat plots/latency.dat)"
  grep -q "^64 1000.0 100.0 1$" plots/size.dat ||
    fail "size bin 64..127 B: one unpack, 1 us recorded, 100 ns predicted: $(cat plots/size.dat)"
  grep -q "set output 'latency.svg'" plots/latency.gp || fail "$(cat plots/latency.gp)"
  if command -v gnuplot >/dev/null; then
    [ -s plots/latency.svg ] && [ -s plots/size.svg ] || fail "gnuplot made no SVG: $(cat err)"
  else
    grep -q "install gnuplot" err || fail "$(cat err)"
  fi
}

t410_analysis_errors_say_what_to_do() {
  set +e
  "$STANDIN" report nosuch 2>e1; r1=$?
  "$STANDIN" report --by nothing . 2>e2; r2=$?
  "$STANDIN" whatif . 2>e3; r3=$?
  "$STANDIN" sweep . --iface constant --vary ns 2>e4; r4=$?
  "$STANDIN" sweep . --iface constant --vary nodev.ns=1 2>e5; r5=$?
  "$STANDIN" sweep . --iface constant --vary constant.nokey=1 2>e6; r6=$?
  echo '{"x": 1}' >bad.json
  "$STANDIN" compare . --iface constant bad.json 2>e7; r7=$?
  "$STANDIN" export . 2>e8; r8=$?
  "$STANDIN" sweep . --iface constant --vary ns=1 --replay 2>e9; r9=$?
  set -e
  expect_eq "missing dir" 1 $r1
  grep -q "no such recording directory" e1 || fail "$(cat e1)"
  expect_eq "bad --by" 2 $r2
  grep -q "not api, type, site or thread" e2 || fail "$(cat e2)"
  expect_eq "whatif without plan" 2 $r3
  grep -q "give a plan" e3 || fail "$(cat e3)"
  [ $r4 -ne 0 ] && grep -q "ACCEL.PARAM=V1,V2" e4 || fail "$(cat e4)"
  [ $r5 -ne 0 ] && grep -q "no accelerator named 'nodev'" e5 || fail "$(cat e5)"
  [ $r6 -ne 0 ] && grep -q "nokey" e6 || fail "$(cat e6)"
  [ $r7 -ne 0 ] && grep -q "has no wall_ns" e7 || fail "$(cat e7)"
  expect_eq "export without format" 2 $r8
  grep -q "choose --format" e8 || fail "$(cat e8)"
  [ $r9 -ne 0 ] && grep -q "needs the program" e9 || fail "$(cat e9)"
}

# A program that made no intercepted call leaves a recording without a trace:
# every command that needs calls says so (and exits 1), distinctly from a
# directory that is not a recording at all.
t415_recording_without_calls_is_reported_not_analysed() {
  "$STANDIN" record -o rec -- true 2>err
  grep -q "no intercepted call was made, so rec holds no trace" err || fail "record: $(cat err)"
  # a program that failed: its status is the likely why, and said
  set +e
  "$STANDIN" record -o failed -- sh -c 'exit 3' 2>ferr
  set -e
  grep -q "no intercepted call was made (sh exited with status 3), so failed holds no trace" ferr ||
    fail "record: $(cat ferr)"
  ! grep -q "mkdir -m 1777" ferr || fail "root hint after a failure: $(cat ferr)"
  mkdir empty
  echo '{"wall_ns": 1000, "calls_intercepted": 0}' >s.json
  for c in "report rec" "whatif rec --iface protoacc" "sweep rec --iface constant --vary constant.ns=1,2" \
           "replay -t rec -- true" "compare rec --iface constant s.json"; do
    set +e
    "$STANDIN" $c >out 2>err; rc=$?
    set -e
    expect_eq "$c: exit" 1 $rc
    grep -q "rec: nothing to .*made no protobuf-c or JPEG call" err || fail "$c: $(cat err)"
    [ ! -s out ] || fail "$c printed: $(cat out)"
  done
  set +e
  "$STANDIN" report empty 2>err; rc=$?
  set -e
  expect_eq "report on a directory without recording" 1 $rc
  grep -q "empty holds no trace; record one" err || fail "$(cat err)"
  # info describes the empty recording, and refuses the plain directory
  "$STANDIN" info rec | grep -q "true made no protobuf-c" || fail "info: $("$STANDIN" info rec)"
  set +e
  "$STANDIN" info empty 2>err; rc=$?
  set -e
  expect_eq "info on a directory without recording" 1 $rc
  grep -q "empty holds no trace" err || fail "$(cat err)"
  # a folder of recordings given for one: they are named
  mkdir -p folder && cp -r rec folder/
  set +e
  "$STANDIN" info folder 2>err
  set -e
  grep -q "folder holds no trace itself, but recordings in it do: folder/rec; give one of them" err ||
    fail "folder: $(cat err)"
  # a trace renamed by hand is not read, and said so
  "$STANDIN" record -o named -- "$PB" basic 1 >/dev/null
  mv named/*.trace named/before.trace
  set +e
  "$STANDIN" info named >/dev/null 2>err
  set -e
  grep -q "named/before.trace is not read: the recorder names its traces PID.trace" err ||
    fail "renamed: $(cat err)"
  # dump and export answer with nothing, and say why
  "$STANDIN" dump rec >out 2>err
  [ ! -s out ] || fail "dump printed: $(cat out)"
  grep -q "rec: no calls to dump: the program recorded there made no protobuf-c or JPEG call" err ||
    fail "dump: $(cat err)"
  "$STANDIN" export rec --format csv >out 2>err
  expect_eq "export: the header row alone" 1 "$(wc -l <out)"
  grep -q "rec: no calls to export" err || fail "export: $(cat err)"
  # an empty trace file is a recorder stopped at once, not a program
  # without calls
  mkdir zero && : >zero/1.trace
  set +e
  "$STANDIN" whatif zero --iface protoacc >/dev/null 2>err
  set -e
  grep -q "zero: nothing to estimate: its 1 trace file is empty" err || fail "zero: $(cat err)"
  # a line each for 10,000 empty traces: ten, then a word that there are more
  cp -r rec many && for i in $(seq 100 130); do : >many/$i.trace; done
  "$STANDIN" report many >/dev/null 2>err || true
  expect_eq "lines about unreadable traces" 10 "$(grep -c "not closed (killed while creating the file): no calls" err)"
  grep -q "more traces that cannot be read: not listed" err || fail "$(cat err)"
}

# whatif and replay give a model the same request: linear (request plus
# response bytes) predicted 15% more in replay, which handed it the
# entry's stored bytes (a pack's output, an unpack's tree image) where
# whatif gave the call's sizes. Equal now, call for call (every call is
# replayed, none queues).
t422_whatif_and_replay_give_models_the_same_requests() {
  "$STANDIN" record -o rec -- "$PB" basic 40 >/dev/null
  "$STANDIN" whatif rec --iface linear:base_ns=10,ns_per_byte=1 --format json >w.json
  "$STANDIN" replay -t rec --iface linear:base_ns=10,ns_per_byte=1 --summary s.json \
    -- "$PB" basic 40 >/dev/null 2>&1
  expect_eq "replayed" 160 "$(json s.json calls_replayed)"
  expect_eq "predicted" "$(pyj w.json 'd["plans"][0]["predicted_ns"]')" "$(json s.json predicted_ns)"
}

# Threads that call at once can save more than the run's wall time in all:
# the naive sum (wall minus every saving) then stops at 0, and whatif and
# compare showed "0 ns" and -100%. Shown as "-" now.
t423_naive_sum_past_zero_is_not_shown_as_zero() {
  two_threads_at_once 30000 20000
  "$STANDIN" whatif over --iface constant:ns=0 >w.txt
  grep -q "^--iface constant:ns=0 .* -  per-thread critical path$" w.txt || fail "$(cat w.txt)"
  ! grep -q "subtracting every call's saving" w.txt || fail "$(cat w.txt)"
}

t411_report_by_thread_site_and_api_on_a_recording() {
  "$STANDIN" record -o rec -- "$PB" threads 3 5 >/dev/null
  "$STANDIN" report rec --by thread --format json >t.json
  expect_eq "thread rows" "20 20 20" "$(pyj t.json '" ".join(str(g["calls"]) for g in d["groups"])')"
  "$STANDIN" report rec --by site --format json >s.json
  expect_eq "site rows add up" 60 "$(pyj s.json 'sum(g["calls"] for g in d["groups"])')"
  "$STANDIN" report rec --by api --format json >a.json
  expect_eq "api rows" 4 "$(pyj a.json 'len(d["groups"])')"
  expect_eq "threads" 3 "$(pyj a.json 'd["threads"]')"
}

# flip_byte FILE OFFSET: damage a trace (a checksum then fails there)
flip_byte() {
  python3 -c 'import sys; p, o = sys.argv[1], int(sys.argv[2]); b = bytearray(open(p, "rb").read()); b[o] ^= 0x20; open(p, "wb").write(b)' "$1" "$2"
}

t412_report_damaged_trace_warns_and_fails() {
  "$STANDIN" record -o rec -- "$PB" basic 50 >/dev/null
  f=$(ls rec/*.trace)
  flip_byte "$f" $(($(stat -c %s "$f") - 40)) # in the index chunk, after every call
  set +e
  "$STANDIN" report rec >r.txt 2>err
  rc=$?
  set -e
  expect_eq "exit status" 1 $rc
  grep -q "analysing the calls before the damage" err || fail "$(cat err)"
  grep -q "^recording rec" r.txt || fail "$(cat r.txt)"
  # the estimate itself says it holds only the calls before the damage
  set +e
  "$STANDIN" whatif rec --iface protoacc >w.txt 2>/dev/null
  set -e
  grep -q "^note: a trace ends early (damaged or cut off, as warned)" w.txt || fail "$(cat w.txt)"
}

# A recording whose every trace has a damaged header (or is no trace) was
# said to hold a program that "made no protobuf-c or JPEG call", and one
# cut inside its header (killed while creating it) to "end in the middle
# of a chunk". Each is said as it is.
t438_unreadable_traces_are_not_a_program_without_calls() {
  "$STANDIN" record -o rec -- "$PB" basic 3 >/dev/null
  f=$(ls rec/*.trace)
  flip_byte "$f" 30 # the header's payload
  local c rc
  for c in report whatif; do
    rc=0
    "$STANDIN" $c rec --iface protoacc >/dev/null 2>err || rc=$?
    expect_eq "$c: exit" 1 "$rc"
    grep -q "rec: nothing to .*: its 1 trace file cannot be read (said above); record the program again" err ||
      fail "$c: $(cat err)"
    ! grep -q "made no protobuf-c or JPEG call" err || fail "$c: $(cat err)"
  done
  cp "$f" rec/99.trace
  "$STANDIN" report rec >/dev/null 2>err || true
  grep -q "none of its 2 trace files can be read" err || fail "$(cat err)"
  rm rec/99.trace
  # written by a newer standin (min_read 2): upgrade, not record again,
  # and said once ("upgrade standin to read it; upgrade standin to read it")
  cp "$f" newer.trace
  cp "$f" orig.trace
  python3 -c 'import struct, sys, zlib
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
struct.pack_into("<HH", b, 8, 2, 2); struct.pack_into("<I", b, 20, zlib.crc32(bytes(b[:20])))
open(p, "wb").write(b)' newer.trace
  mv newer.trace "$f"
  rc=0
  "$STANDIN" whatif rec --iface protoacc >/dev/null 2>err || rc=$?
  expect_eq "newer: exit" 1 "$rc"
  expect_eq "newer: advice" 2 "$(grep -o "upgrade standin to read it" err | wc -l)"
  grep -q "rec: nothing to estimate: its 1 trace file cannot be read (said above); a newer standin wrote it" err ||
    fail "$(cat err)"
  head -c 100 orig.trace >"$f" # inside the header
  "$STANDIN" report rec >/dev/null 2>err || true
  grep -q "^standin: warning: rec/[0-9]*.trace: not closed (killed while creating the file): no calls" err ||
    fail "$(cat err)"
  ! grep -q "middle of a chunk" err || fail "$(cat err)"
}

# A trace copied in from another recording was analysed with the others
# without a word (its span and overlap included). One whose process
# started before this recording's run is now named. (Here it is made an
# hour older: its header's start time, checksums fixed.)
t439_a_trace_of_another_recording_is_named() {
  "$STANDIN" record -o rec -- "$PB" basic 3 >/dev/null
  "$STANDIN" record -o old -- "$PB" basic 5 >/dev/null
  cp "$(ls old/*.trace)" foreign.trace
  f=foreign.trace
  python3 -c 'import struct, sys, zlib
sys.path.insert(0, sys.argv[2])
from tracefmt import varint, put_varint
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
pos = 24
for _ in range(3):
    _, pos = varint(b, pos)
v, end = varint(b, pos)
new = put_varint(v - 3600 * 10**9)
assert len(new) == end - pos
b[pos:end] = new
plen = struct.unpack_from("<I", b, 16)[0]
struct.pack_into("<I", b, 24 + plen, zlib.crc32(bytes(b[24:24 + plen])))
open(p, "wb").write(b)' "$f" "$RELIABILITY_DIR" # (tests/e2e)
  cp "$f" rec/1.trace
  local c
  for c in "info rec" "dump rec" "report rec" "whatif rec --iface protoacc" "export rec --format csv"; do
    "$STANDIN" $c >/dev/null 2>err || fail "$c: exit $?: $(cat err)"
    expect_eq "$c: lines" 1 "$(grep -c "rec/1.trace is not of this recording: its process started 3[56][0-9][0-9] s before 'standin record' ran the program" err)"
  done
  "$STANDIN" info old >/dev/null 2>err
  [ ! -s err ] || fail "its own recording: $(cat err)"
}

# A trace cut inside a chunk is what a recorder killed while writing, a full
# disk or ulimit -f leaves: info and dump call it not closed, not damaged,
# and exit 0, as every command does for one killed between two chunks. But
# report, whatif, sweep, compare and export called it damage and exited 1
# (a SIGKILL of rpc -t 8 left one in 1 of 40 random kills). Warned, its
# calls analysed, status 0; the estimates still say they hold only those.
t437_a_cut_trace_is_a_killed_recording_not_damage() {
  "$STANDIN" record -o rec -- "$PB" basic 200 >/dev/null
  "$STANDIN" replay -t rec --iface protoacc --summary s.json -- "$PB" basic 200 >/dev/null 2>&1
  f=$(ls rec/*.trace)
  truncate -s $(($(stat -c %s "$f") - 40)) "$f" # the index chunk cut: every call is there
  local c
  for c in "info rec" "dump rec" "report rec" "whatif rec --iface protoacc" \
    "sweep rec --iface protoacc --vary protoacc.clock_mhz=1000,2000" \
    "compare rec --iface protoacc s.json" "export rec --format csv -o x.csv"; do
    "$STANDIN" $c >out 2>err || fail "$c: exit $?: $(cat err)"
    # (info says it on standard output)
    grep -q "not closed (killed while writing, a full disk or ulimit -f)" out err ||
      fail "$c: $(cat err)"
    ! grep -q "damage" err || fail "$c: $(cat err)"
  done
  "$STANDIN" whatif rec --iface protoacc >w.txt 2>err
  grep -q "analysing the calls before that point" err || fail "$(cat err)"
  # whole: the status was cut at 255 bytes ("... or the file size limit;")
  grep -q "the file size limit was hit (the recorder said so when it happened); analysing" err ||
    fail "$(cat err)"
  grep -q "^note: a trace ends early (damaged or cut off, as warned)" w.txt || fail "$(cat w.txt)"
  expect_eq "calls exported" 801 "$(wc -l <x.csv)"
  "$STANDIN" whatif rec --iface protoacc --format json >w.json 2>/dev/null
  expect_eq "json: damaged, cut off" "False True" "$(pyj w.json 'd["damaged"], d["cut_off"]' | tr -d '(),')"
  "$STANDIN" replay -t rec --iface protoacc -- "$PB" basic 200 >/dev/null 2>err
  grep -q "replaying with the calls before that point" err || fail "replay: $(cat err)"
  # cut before its first chunk ended: nothing to estimate, said as such
  head -c 3000 "$f" >cut.trace && mv cut.trace "$f"
  rc=0
  "$STANDIN" whatif rec --iface protoacc >/dev/null 2>err || rc=$?
  expect_eq "whatif with no call: exit" 1 "$rc"
  grep -q "rec: nothing to estimate: its traces end (killed, or the disk filled up) before their first call" err ||
    fail "$(cat err)"
}

t413_no_progress_line_when_stderr_is_not_a_terminal() {
  golden_single
  "$STANDIN" whatif single --iface constant:ns=0 >/dev/null 2>err
  [ ! -s err ] || fail "stderr: $(cat err)"
}

# What recording cost a program's threads is their time in the hooks, by
# the clock, summed over threads: past the run's own length (threads that
# outnumber the cores wait for one inside the hooks too), info says so.
t417_info_explains_a_recording_cost_longer_than_the_run() {
  cat >spec <<'EOF2'
process 1 start=1000000000 end=1010000000 overhead=25000000
thread 0
thread 1
thread 2
type 1 t.Msg
site 1 handler
call thread=0 api=pb.pack type=1 site=1 start=1000001000 lat=500
process 2 start=1000000000 end=1010000000 overhead=2000000
thread 0
type 1 t.Msg
site 1 handler
call thread=0 api=pb.pack type=1 site=1 start=1000001000 lat=500
EOF2
  "$GEN" -o g --spec spec
  "$STANDIN" info g >info.out
  grep -q "recording cost the program's threads 25.00 ms (250.0% of the recorded run)" info.out ||
    fail "$(cat info.out)"
  expect_eq "explained once" 1 "$(grep -c "summed over its 3 threads; where they outnumber the cores" info.out)"
}

t414_whatif_native_wall_is_the_baseline() {
  "$STANDIN" record -o rec -- "$PB" basic 30 >/dev/null
  "$STANDIN" whatif rec --iface constant:ns=0 --native-wall 50ms --format json >w.json
  python3 - <<'PY'
import json
w = json.load(open("w.json"))
p = w["plans"][0]
assert w["wall_ns"] == 50000000 and w["wall_source"] == "native-wall", w
# single thread: native wall minus what the plan saves
assert p["estimate_ns"] == 50000000 - p["saving_sum_ns"], p
# what recording cost the program is reported (from the trace's notes)
assert w["record_overhead_ns"] > 0, w
PY
  # with the program's own time given, no note about recording's share
  "$STANDIN" whatif rec --iface constant:ns=0 --native-wall 50ms >w.txt
  grep -q "recorded run's wall time" w.txt && fail "note with --native-wall: $(cat w.txt)"
  # without it, a 30-call run is mostly standin's start-up and final flush
  "$STANDIN" whatif rec --iface constant:ns=0 >w.txt
  grep -q "recorded run's wall time: it includes .* that recording cost the program's threads" w.txt ||
    fail "$(cat w.txt)"
  set +e
  "$STANDIN" whatif rec --iface constant --native-wall 12parsecs 2>err
  rc=$?
  set -e
  [ "$rc" -ne 0 ] && grep -q "native-wall: '12parsecs' is not a duration" err || fail "$(cat err)"
  # a bare number was taken as ns: 80 (meant as ms) gave an estimate of 2 ns
  set +e
  "$STANDIN" whatif rec --iface constant --native-wall 80 2>err
  rc=$?
  set -e
  [ "$rc" -eq 2 ] && grep -q "native-wall: '80' has no unit; give it as 80ms, 80s or 80ns" err ||
    fail "$rc: $(cat err)"
  # a run.info whose wall_ns was damaged ("-5": 2^64 - 5) made every
  # estimate 0 ns, -100%
  cp -r rec damaged && sed -i 's/^wall_ns=.*/wall_ns=-5/' damaged/run.info
  "$STANDIN" whatif damaged --iface constant >w.txt 2>err
  grep -q "damaged/run.info: wall_ns -5 is more than 1000 times the processes' span" err ||
    fail "$(cat err)"
  grep -q "(trace span)" w.txt || fail "$(cat w.txt)"
  # under a nanosecond was ignored; less than the calls alone take, taken
  set +e
  "$STANDIN" whatif rec --iface constant --native-wall 0.0001ns 2>err
  rc=$?
  set -e
  [ "$rc" -eq 2 ] && grep -q "'0.0001ns' is not a duration" err || fail "$rc: $(cat err)"
  "$STANDIN" whatif rec --iface constant --native-wall 1ns --cpus 1 >/dev/null 2>err
  grep -q "native wall time 1 ns is less than half what the recorded calls alone take on 1 CPU (" err ||
    fail "$(cat err)"
}

# A server whose calls are all made by the processes it starts (postgres's
# backends): the time outside their runs is the first process's own, and
# whatif says so instead of putting it down to standin's start-up.
t418_whatif_says_when_the_first_process_made_no_call() {
  "$STANDIN" record -o rec -- sh -c "sleep 0.2; '$PB' basic 30 >/dev/null; true"
  "$STANDIN" whatif rec --iface constant:ns=0 >w.txt
  grep -q "the program's first process made no intercepted call" w.txt || fail "$(cat w.txt)"
  grep -q "standin's start-up and final flush" w.txt && fail "start-up note too: $(cat w.txt)"
  expect_eq "json" False "$("$STANDIN" whatif rec --iface constant:ns=0 --format json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["first_process_made_calls"])')"
  # the program itself making the calls: the start-up note, as before
  "$STANDIN" record -o rec2 -- "$PB" basic 30 >/dev/null
  expect_eq "json, direct" True "$("$STANDIN" whatif rec2 --iface constant:ns=0 --format json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["first_process_made_calls"])')"
  "$STANDIN" whatif rec2 --iface constant:ns=0 >w2.txt
  grep -q "first process made no intercepted call" w2.txt && fail "$(cat w2.txt)"
  # a recording from before run.info named the launcher: unknown, no claim
  sed -i '/^launcher_pid=/d' rec/run.info
  expect_eq "json, unknown" None "$("$STANDIN" whatif rec --iface constant:ns=0 --format json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["first_process_made_calls"])')"
}

# Threads that call at once spend more time in calls than the run lasts:
# report and info say why the share passes 100%, and only then.
t416_report_share_over_100_percent_is_explained() {
  two_threads_at_once 10000 8000
  "$STANDIN" report over >r.txt
  grep -q "160.0% of 10.00 us run time (threads call at the same time: their times add up)" r.txt ||
    fail "$(head -1 r.txt)"
  "$STANDIN" info over >i.txt
  grep -q "= 160.0% of 10.00 us run (threads call at the same time: their times add up)" i.txt ||
    fail "info: $(grep threads i.txt)"
  golden_single
  "$STANDIN" report single >s.txt
  if grep -q "add up" s.txt; then fail "explained a share under 100%: $(head -1 s.txt)"; fi
  "$STANDIN" info single >si.txt
  if grep -q "add up" si.txt; then fail "info explained a share under 100%: $(grep threads si.txt)"; fi
  # the sweep's native runs: a program that always fails leaves no baseline
  set +e
  "$STANDIN" sweep over --iface constant:ns=0 --vary constant.ns=0 --runs 1 --replay -- false 2>err
  rc=$?
  set -e
  [ $rc -ne 0 ] && grep -q "give the program's native time with --native-wall" err || fail "$(cat err)"
}

# Every command that reads a recording takes it as replay does (-t DIR,
# --trace DIR) as well as as an operand, with the same output; both at
# once is an error that names them, and nothing is read.
t419_offline_commands_take_the_recording_with_t() {
  "$STANDIN" record -o rec -- "$PB" basic 5 >/dev/null
  "$STANDIN" replay -t rec --summary s.json -- "$PB" basic 5 >/dev/null 2>&1
  local cmds=("info" "dump" "dump --format json --payload" "report --by site"
    "report --iface protoacc" "whatif --iface protoacc" "export --format csv"
    "sweep --iface protoacc --vary protoacc.clock_mhz=1000,2000"
    "compare --iface software s.json")
  local c n=0
  for c in "${cmds[@]}"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    "$STANDIN" $c rec >op.$n 2>&1 || fail "$c rec: $(cat op.$n)"
    # shellcheck disable=SC2086
    "$STANDIN" $c -t rec >t.$n 2>&1 || fail "$c -t rec: $(cat t.$n)"
    # shellcheck disable=SC2086
    "$STANDIN" $c --trace rec >tt.$n 2>&1 || fail "$c --trace rec: $(cat tt.$n)"
    # timings of this run (sweep's progress, compare's medians) are the
    # recording's, so the three outputs are the same
    cmp op.$n t.$n || fail "$c: -t differs: $(diff op.$n t.$n | head -5)"
    cmp op.$n tt.$n || fail "$c: --trace differs"
    # shellcheck disable=SC2086
    "$STANDIN" $c -t rec rec >both 2>&1 && fail "$c: two recordings accepted"
    grep -q "the recording is rec (-t); 'rec' is" both || fail "$c: $(cat both)"
  done
  expect_eq "commands" 9 "$n"
}

# Every reason a call stays in software, in one group: each is counted as
# itself, and the WHY SOFTWARE column widens to hold them all, so the
# columns after it stay under their headings.
t420_report_software_reasons_apart_and_aligned() {
  cat >s.spec <<'SPEC'
process 100 start=1000000000 end=1000100000
thread 0
type 1 app.Req
site 1 handle_req /app
call thread=0 api=pb.unpack type=1 site=1 start=1000001000 lat=1000 req=100 size=100
call thread=0 api=pb.unpack type=1 site=1 start=1000010000 lat=2000 req=200 size=200
call thread=0 api=pb.unpack type=1 site=1 start=1000020000 lat=3000 req=300 size=300
call thread=0 api=pb.unpack type=1 site=1 start=1000030000 lat=4000 req=400 size=400 flags=not_offloadable
call thread=0 api=pb.unpack type=1 site=1 start=1000040000 lat=5000 req=500 size=500 flags=no_response
SPEC
  "$GEN" -o rec --spec s.spec
  printf 'accel dev constant:ns=500\noffload api=pb.unpack size=-150 to dev\n' >plan.txt
  "$STANDIN" report rec --plan plan.txt --format json >r.json
  expect_eq "software reasons" "2 0 0 1 1" "$(pyj r.json '" ".join(str(d["plan"]["software"][k]) for k in ("not_selected", "kept", "unsupported", "no_response", "not_offloadable"))')"
  "$STANDIN" report rec --plan plan.txt >r.txt
  grep -q "^  1 call without a recorded response (replay runs them)$" r.txt || fail "$(cat r.txt)"
  grep -q "^  1 call not offloadable (replay runs them): " r.txt || fail "$(cat r.txt)"
  python3 - r.txt <<'PYEOF'
import sys
lines = open(sys.argv[1]).read().split("\n")
h = next(i for i, l in enumerate(lines) if l.startswith("GROUP") and "WHY SOFTWARE" in l)
end = lines[h].index("RECORDED") + len("RECORDED")
row = lines[h + 1]
assert "not-selected 2, no-response 1, not-offloadable 1" in row, row
assert row[end - 1] != " " and row[end:end + 1] == " ", "RECORDED is not under its heading:\n%s\n%s" % (lines[h], row)
PYEOF
  # unlimited engines have no capacity to be a share of (UTIL 178.6%)
  grep -q "^dev .* unlim\. .* -$" r.txt || fail "$(grep -A1 ACCELERATOR r.txt)"
  printf 'accel dev constant:ns=500 engines=2\noffload api=pb.unpack size=-150 to dev\n' >plan2.txt
  "$STANDIN" report rec --plan plan2.txt | grep -q "^dev .* 2 .*%$" || fail "engines=2: no UTIL %"
}

# Call sites in the program's own functions, which it does not export, had
# no name (dladdr sees only exported symbols): report showed "pbtest+0x9680"
# and a plan's site= could select none of them. The CLI names them from
# the program's symbol table, unless the file changed after the recording
# (its functions may have moved: a wrong name is worse than none); site=
# also takes a frame's object and offset, as replay's abort names it.
t421_call_sites_named_from_the_programs_symbol_table() {
  cp "$PB" ./pbcopy
  "$STANDIN" record -o rec -- ./pbcopy basic 3 >/dev/null
  "$STANDIN" report rec --by site >named.txt
  # (the innermost frames: one < basic, or with less inlining the generated
  # standin__test__tree_* < one)
  grep -q "[ <] *one[.a-z0-9]*+0x[0-9a-f]* \|^one[.a-z0-9]*+0x" named.txt || fail "$(cat named.txt)"
  printf 'accel c constant:ns=0\noffload site=basic to c\n' >sym.plan
  "$STANDIN" whatif rec --plan sym.plan --format json >w.json
  expect_eq "calls selected by function name" 12 "$(pyj w.json 'd["plans"][0]["offloaded"]')"
  off=$("$STANDIN" dump rec --format json | head -1 | python3 -c \
    'import json, sys; print(hex(json.load(sys.stdin)["frames"][0]["offset"]))')
  printf 'accel c constant:ns=0\noffload site=pbcopy+%s to c\n' "$off" >off.plan
  "$STANDIN" whatif rec --plan off.plan --format json >w2.json
  expect_eq "calls selected by object and offset" 3 "$(pyj w2.json 'd["plans"][0]["offloaded"]')"
  # a frame as report's label names it (function and offset), pasted into a
  # plan, selected nothing; nor did an offset in capitals
  "$STANDIN" report rec --by site --format json >sites.json
  local first n
  first=$(pyj sites.json 'd["groups"][0]["key"].split(" < ")[0]')
  n=$(pyj sites.json 'd["groups"][0]["calls"]')
  for g in "$first" "$(echo "$first" | sed 's/+0x\(.*\)/+0x\U\1/')"; do
    printf 'accel c constant:ns=0\noffload site=%s to c\n' "$g" >lab.plan
    "$STANDIN" whatif rec --plan lab.plan --format json >lab.json
    expect_eq "calls selected by $g" "$n" "$(pyj lab.json 'd["plans"][0]["offloaded"]')"
  done
  touch -d '+1 hour' ./pbcopy
  "$STANDIN" report rec --by site >changed.txt
  grep -q "^pbcopy+0x[0-9a-f]* < pbcopy+0x[0-9a-f]* " changed.txt || fail "$(cat changed.txt)"
  grep -q "basic+" changed.txt && fail "named from a file changed since: $(cat changed.txt)"
  return 0
}

# `export -o` opened its output before reading anything: given one of the
# recording's own files (a slip of the shell's completion), it cut the trace
# to a CSV header and the recording was gone. Outputs that are files of the
# recording are refused, before anything is written or run; others are
# written beside their name and renamed over it when whole.
t424_outputs_never_overwrite_the_recording() {
  "$STANDIN" record -o rec -- "$PB" basic 30 >/dev/null
  local f rc
  f=$(ls rec/*.trace)
  cp "$f" keep.trace
  cp rec/run.info keep.info
  for out in "$f" rec/run.info; do
    rc=0
    "$STANDIN" export rec -F csv -o "$out" 2>err || rc=$?
    expect_eq "export -o $out" 1 "$rc"
    grep -q "$out is a file of the recording rec" err || fail "$(cat err)"
  done
  rc=0
  "$STANDIN" replay -t rec --summary rec/run.info -- "$PB" basic 30 >out.txt 2>err || rc=$?
  [ "$rc" -ne 0 ] || fail "replay wrote its summary over run.info"
  grep -q "rec/run.info is a file of the recording rec" err || fail "$(cat err)"
  [ ! -s out.txt ] || fail "the program ran: $(head -3 out.txt)"
  cmp "$f" keep.trace
  cmp rec/run.info keep.info
  expect_eq "calls" 120 "$(calls rec)"
  # a file elsewhere is replaced whole; /dev/stdout is written in place
  echo old >x.csv
  "$STANDIN" export rec -F csv -o x.csv
  expect_eq "rows" 121 "$(wc -l <x.csv)"
  ls x.csv.tmp* 2>/dev/null && fail "a temporary file was left"
  "$STANDIN" export rec -F csv -o /dev/stdout >y.csv
  cmp x.csv y.csv
  "$STANDIN" replay -t rec --summary s.json -- "$PB" basic 30 >/dev/null 2>&1
  expect_eq "replayed" 120 "$(json s.json calls_replayed)"
}

# An export killed while it writes leaves the file it was to replace, and
# nothing beside it (it left x.json.tmpPID): the output has no name until
# it is whole. Killed once the output is open, whenever that is.
t427_killed_export_leaves_no_temporary_file() {
  "$STANDIN" record -o rec -- "$PB" basic 20000 >/dev/null
  echo old >x.json
  local pid caught=0
  "$STANDIN" export rec -F json -o x.json 2>/dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    # named x.json.tmpPID, or unnamed: DIR/#INODE (deleted)
    if ls -l "/proc/$pid/fd" 2>/dev/null | grep -q -e 'x.json' -e "$PWD/#"; then
      kill -KILL "$pid"
      caught=1
      break
    fi
  done
  wait "$pid" || true
  [ "$caught" = 1 ] || fail "the export ended before its output was seen open"
  expect_eq "x.json" old "$(cat x.json)"
  ls -a | grep -q 'x.json.' && fail "left beside it: $(ls -a | grep 'x.json.')"
  "$STANDIN" export rec -F json -o x.json
  expect_eq "rows" 80000 "$(grep -c '"api"' x.json)"
}

# sweep and compare printed tables of zeros and exited 0 on recordings whose
# traces were damaged before their first call (whatif and report refused),
# and exited 0 on a damaged trace, which every other command reports with
# status 1. They now share whatif's checks; sweep makes its check
# before it runs any program.
t425_sweep_and_compare_refuse_damaged_recordings() {
  "$STANDIN" record -o rec -- "$PB" basic 200 >/dev/null
  local f rc
  f=$(ls rec/*.trace)
  mkdir -p early half
  head -c 3000 "$f" >early/1.trace
  cp rec/run.info early/
  cp rec/run.info half/
  cp "$f" half/1.trace
  flip_byte half/1.trace $(($(stat -c %s "$f") - 40))
  "$STANDIN" replay -t rec --iface constant:ns=100 --summary s.json -- "$PB" basic 200 >/dev/null 2>&1
  rc=0
  "$STANDIN" sweep early --iface constant --vary ns=1,2 --replay -- touch ran >out 2>err || rc=$?
  expect_eq "sweep, damaged before the first call" 1 "$rc"
  grep -q "nothing to sweep: no trace holds a readable call (early/1.trace" err || fail "$(cat err)"
  [ ! -e ran ] || fail "the sweep ran the program"
  [ ! -s out ] || fail "a table: $(cat out)"
  rc=0
  "$STANDIN" compare early --iface constant:ns=100 s.json >out 2>err || rc=$?
  expect_eq "compare, damaged before the first call" 1 "$rc"
  grep -q "nothing to compare" err || fail "$(cat err)"
  # damaged near its end: the calls before the damage, said, and status 1
  rc=0
  "$STANDIN" sweep half --iface constant --vary ns=1,2 >out 2>err || rc=$?
  expect_eq "sweep, damaged near the end" 1 "$rc"
  grep -q "analysing the calls before the damage" err || fail "$(cat err)"
  grep -q "^2  *[0-9]" out || fail "no table: $(cat out)"
  rc=0
  "$STANDIN" compare half --iface constant:ns=100 s.json >out 2>err || rc=$?
  expect_eq "compare, damaged near the end" 1 "$rc"
  "$STANDIN" sweep rec --iface constant --vary ns=1,2 >/dev/null
  "$STANDIN" compare rec --iface constant:ns=100 s.json >/dev/null
}

# compare cast a summary's wall_ns to a count whatever it was: -5 printed
# as 18446744073.710 s, NaN as 9223372036.855 s, 0 and 1e300 as "0 ns,
# +0.0%", all with status 0. It now takes whole numbers above 0, and the
# JSON reader takes numbers as RFC 8259 writes them (no NaN, Infinity, hex).
t426_compare_refuses_a_summary_with_a_wall_time_no_replay_measured() {
  "$STANDIN" record -o rec -- "$PB" basic 30 >/dev/null
  "$STANDIN" replay -t rec --iface constant:ns=100 --summary s.json -- "$PB" basic 30 >/dev/null 2>&1
  "$STANDIN" compare rec --iface constant:ns=100 s.json >/dev/null
  local w rc
  for w in -5 0 1e300 2.5; do
    sed "s/\"wall_ns\": [0-9]*/\"wall_ns\": $w/" s.json >bad.json
    rc=0
    "$STANDIN" compare rec --iface constant:ns=100 bad.json >out 2>err || rc=$?
    expect_eq "wall_ns $w" 1 "$rc"
    grep -q "bad.json: wall_ns is .*, not a time a replay measured" err || fail "$w: $(cat err)"
    [ ! -s out ] || fail "$w: a table: $(cat out)"
  done
  for w in NaN Infinity 0x10; do
    sed "s/\"wall_ns\": [0-9]*/\"wall_ns\": $w/" s.json >bad.json
    rc=0
    "$STANDIN" compare rec --iface constant:ns=100 bad.json >out 2>err || rc=$?
    expect_eq "wall_ns $w" 1 "$rc"
    grep -q "bad.json.*at byte" err || fail "$w: $(cat err)"
  done
  sed 's/"calls_replayed": [0-9]*/"calls_replayed": -1/' s.json >bad.json
  rc=0
  "$STANDIN" compare rec --iface constant:ns=100 bad.json >out 2>err || rc=$?
  expect_eq "calls_replayed -1" 1 "$rc"
  grep -q "calls_replayed is not a count of calls" err || fail "$(cat err)"
  # a directory in a summary's place: why, not "read error"
  mkdir dir.json
  rc=0
  "$STANDIN" compare rec --iface constant:ns=100 dir.json >out 2>err || rc=$?
  expect_eq "a directory: exit" 1 "$rc"
  expect_eq "a directory" "standin: cannot read dir.json: Is a directory" "$(cat err)"
}

# A link time past 2^32 ns per call was cut to 4.29 s in the timeline (the
# estimate, the accelerator's LINK TIME) but not in the groups' LINK. Link
# times are now whole up to 4.29 s each way, the most replay keeps (rdb.h):
# a setting past it is refused, and a call whose bytes would take longer is
# not taken, in whatif as in replay.
t430_link_time_is_counted_whole_or_refused() {
  golden_single
  "$STANDIN" report single --by api --iface constant:ns=0,link=onchip,link_onchip_ns=4e9 \
    --format json >r.json
  expect_eq "groups' link" 24000000000 "$(pyj r.json 'sum(g["plan"]["link_ns"] for g in d["groups"])')"
  expect_eq "accelerator's link" 24000000000 "$(pyj r.json 'd["plan"]["accelerators"][0]["link_ns"]')"
  expect_eq "predicted" 24000000000 "$(pyj r.json 'd["plan"]["predicted_ns"]')"
  expect_eq "estimate" $((100000 - 20500 + 24000000000)) "$(pyj r.json 'd["plan"]["estimate_ns"]')"
  set +e
  "$STANDIN" whatif single --iface constant:link=onchip,link_onchip_ns=1e10 2>err
  rc=$?
  set -e
  expect_eq "link over 4.29 s: exit" 2 $rc
  grep -q "link_onchip_ns=1e10 is more than 4.29 s" err || fail "$(cat err)"
  # 1e-7 GB/s: 1e7 ns a byte; the unpacks of 100..400 B take 1e9..4e9 ns
  # in, the pack's and the size's 1,000 B 1e10 ns: not taken
  "$STANDIN" whatif single --iface constant:ns=0,link=pcie,link_rtt_ns=0,link_gbps=1e-7 \
    --format json >w.json
  expect_eq "offloaded" 4 "$(pyj w.json 'd["plans"][0]["offloaded"]')"
  expect_eq "not taken" 2 "$(pyj w.json 'd["plans"][0]["software"]["unsupported"]')"
  expect_eq "link" 10000000000 "$(pyj w.json 'd["plans"][0]["accelerators"][0]["link_ns"]')"
  pyj w.json 'list(d["plans"][0]["accelerators"][0]["unsupported"])' | grep -q "more than 4.29 s" ||
    fail "$(cat w.json)"
}

# Replay decides the calls as whatif does: those whose link would take over
# 4.29 s stay in software in both (before, whatif offloaded them, and
# replay would have waited 4.29 s for each).
t431_replay_refuses_a_link_past_4s_as_whatif_does() {
  "$STANDIN" record -o rec -- "$PB" basic 20 >/dev/null
  plan=(--iface pb.unpack=constant:ns=0,link=pcie,link_rtt_ns=0,link_gbps=1e-15 --iface constant:ns=100)
  "$STANDIN" whatif rec "${plan[@]}" --format json >w.json
  expect_eq "whatif: unpacks not taken" 20 "$(pyj w.json 'd["plans"][0]["software"]["unsupported"]')"
  "$STANDIN" replay -t rec "${plan[@]}" --summary s.json -- "$PB" basic 20 >/dev/null 2>&1
  expect_eq "replay: unpacks not taken" 20 "$(pyj s.json 'd["software_reasons"]["unsupported"]')"
  expect_eq "predicted" "$(pyj w.json 'd["plans"][0]["predicted_ns"]')" "$(json s.json predicted_ns)"
}

# --native-wall at 0.8 times the recorded time in calls, one thread: the
# estimate stopped at 0 ns, -100%, without a word; and the threshold for
# an impossible native wall divided the calls' time among every CPU, where
# one thread made them one after the other.
t432_native_wall_below_the_calls_is_warned() {
  golden_single # 20.5 us in calls, one thread
  "$STANDIN" whatif single --iface constant:ns=0 --native-wall 16400ns --cpus 8 >w.txt 2>err
  grep -q "estimate 0 ns (-100%) under the --iface plan, floored: its offloaded calls save 20.50 us, as much as the 16.40 us native wall time" err ||
    fail "floored: $(cat err)"
  ! grep -q "less than half" err || fail "$(cat err)"
  "$STANDIN" whatif single --iface constant:ns=0 --native-wall 10us --cpus 8 >w.txt 2>err
  grep -q "native wall time 10.00 us is less than half what the recorded calls alone take on 1 CPU (20.50 us in calls, one after the other on one thread)" err ||
    fail "threshold: $(cat err)"
  # an estimate above 0 says nothing
  "$STANDIN" whatif single --iface constant:ns=0 --native-wall 50us >w.txt 2>err
  [ ! -s err ] || fail "$(cat err)"
}

# A spec over 255 characters (table:trace=<long path>) was cut in the plan:
# sweep's variants re-read the cut spec; over 511, whatif itself did. Kept
# whole now, up to PATH_MAX and more; a longer one is refused, not cut.
t433_long_model_spec_is_kept_whole() {
  golden_single
  long=$PWD/$(printf 'd%.0s' $(seq 120))/$(printf 'e%.0s' $(seq 150))/$(printf 'f%.0s' $(seq 200))
  mkdir -p "$long" && cp -r single "$long/rec"
  "$STANDIN" whatif single --iface "table:trace=$long/rec" --format json >w.json
  expect_eq "model" "table:trace=$long/rec" "$(pyj w.json 'd["plans"][0]["accelerators"][0]["model"]')"
  expect_eq "offloaded" 6 "$(pyj w.json 'd["plans"][0]["offloaded"]')"
  "$STANDIN" sweep single --iface "table:trace=$long/rec" --vary engines=0,1 --format json >s.json
  expect_eq "variants' model" "table:trace=$long/rec table:trace=$long/rec" \
    "$(pyj s.json '" ".join(v["estimate"]["accelerators"][0]["model"] for v in d["values"])')"
  printf 'accel t table:trace=%s/rec engines=1\noffload to t\n' "$long" >p.plan
  "$STANDIN" whatif single --plan p.plan --format json >p.json
  expect_eq "plan file" 6 "$(pyj p.json 'd["plans"][0]["offloaded"]')"
  set +e
  "$STANDIN" whatif single --iface "table:trace=/$(printf 'x%.0s' $(seq 6000))" 2>err
  rc=$?
  set -e
  expect_eq "over-long spec: exit" 2 $rc
  grep -q "is 6013 characters long; at most [0-9]* are taken" err || fail "$(cat err)"
}

# Small gaps: an empty --vary list exited 2 without a word, a second
# --vary or --by replaced the first, a directory read as an empty plan,
# dump -n -1 printed every call, and a model key given twice: the last won.
t434_options_given_twice_or_empty_are_refused() {
  golden_single
  check() { # WHAT PATTERN COMMAND...: exit 2 and the message
    local what=$1 pat=$2 rc
    shift 2
    set +e
    "$STANDIN" "$@" >out 2>err
    rc=$?
    set -e
    expect_eq "$what: exit" 2 $rc
    grep -q -- "$pat" err || fail "$what: $(cat err)"
  }
  check "empty values" "--vary constant.ns=,,: an empty value" sweep single --iface constant --vary constant.ns=,,
  check "an empty value" "an empty value" sweep single --iface constant --vary ns=1,,2
  check "--vary twice" "--vary is given twice (ns=1,2, ns=3)" sweep single --iface constant --vary ns=1,2 --vary ns=3
  check "--by twice" "--by is given twice (api, site)" report single --by api --by site
  mkdir plandir
  check "a directory as plan" "plan plandir is a directory" whatif single --plan plandir
  check "dump -n -1" "--limit: '-1' is not a number of calls" dump single -n -1
  "$STANDIN" dump --help | grep -q "0: no limit" || fail "dump --help: $("$STANDIN" dump --help)"
  check "a model key twice" "ns= is given twice" whatif single --iface constant:ns=1,ns=1000000
  check "a link key twice" "link_onchip_ns= is given twice" whatif single \
    --iface constant:link=onchip,link_onchip_ns=1,link_onchip_ns=2
  printf 'accel a constant:engines=1 engines=2\noffload to a\n' >twice.plan
  check "a plan setting twice" "twice.plan:1: engines= is given twice for accelerator a" whatif single --plan twice.plan
}

# The naive sum past 0 is "-" in text and was 0 in JSON: null now.
t435_naive_sum_that_means_nothing_is_null_in_json() {
  two_threads_at_once 30000 20000
  "$STANDIN" whatif over --iface constant:ns=0 --format json >w.json
  expect_eq "naive" None "$(pyj w.json 'd["plans"][0]["estimate_naive_ns"]')"
  golden_single
  "$STANDIN" whatif single --iface constant:ns=0 --format json >s.json
  expect_eq "naive that means something" 79500 "$(pyj s.json 'd["plans"][0]["estimate_naive_ns"]')"
}

# A module whose name holds a newline (here a stripped program's: its
# call sites are named by file and offset) split dump's and report's rows.
t436_control_characters_in_names_are_escaped_in_text() {
  command -v strip >/dev/null || { echo "no strip: skipped"; return 0; }
  cp "$PB" "pb
test" && strip "pb
test"
  "$STANDIN" record -o rec -- "./pb
test" basic 5 >/dev/null
  expect_eq "dump lines" 20 "$("$STANDIN" dump rec | wc -l)"
  "$STANDIN" dump rec | head -1 | grep -q 'site=pb\\ntest+0x' || fail "$("$STANDIN" dump rec | head -1)"
  "$STANDIN" report rec --by site >r.txt
  expect_eq "site rows" 4 "$(grep -c '^pb\\ntest+0x' r.txt)"
  ! grep -q '^test+0x' r.txt || fail "$(cat r.txt)"
}

t450_analysis_of_a_recording_still_being_written_says_so() {
  mkfifo go
  # pbtest ends (its trace is closed) while the recording goes on
  "$STANDIN" record -o rec -- sh -c '"$1" basic 4 >rec.out && : >pb.done && read x <go' sh "$PB" &
  rec=$!
  while [ ! -e pb.done ]; do sleep 0.1; done
  "$STANDIN" whatif rec --iface protoacc >w1.out 2>w1.err
  grep -q "note: the recording is still being written" w1.out || fail "running: $(cat w1.out)"
  "$STANDIN" whatif rec --iface protoacc --format json >w1.json
  expect_eq "still_recording" True "$(python3 -c 'import json
print(json.load(open("w1.json"))["still_recording"])')"
  echo >go
  wait $rec
  "$STANDIN" whatif rec --iface protoacc >w2.out
  if grep -q "still being written" w2.out; then fail "ended: $(cat w2.out)"; fi
  "$STANDIN" report rec --iface protoacc >r2.out
  if grep -q "still being written" r2.out; then fail "report: $(cat r2.out)"; fi
}

t451_compare_leaves_another_recordings_summary_out_of_the_median() {
  "$STANDIN" record -o rec -- "$PB" basic 12 >rec.out
  "$STANDIN" record -o other -- "$PB" basic 3 >other.out
  for i in 1 2; do
    "$STANDIN" replay -t rec --iface constant:ns=100 --summary s$i.json -- "$PB" basic 12 >/dev/null
  done
  "$STANDIN" replay -t other --iface constant:ns=100 --summary o.json -- "$PB" basic 3 >/dev/null
  "$STANDIN" replay -t rec --iface software --summary sw.json -- "$PB" basic 12 >/dev/null
  "$STANDIN" compare rec --iface constant:ns=100 s1.json o.json s2.json sw.json --format json \
    >c.json 2>c.err
  grep -q "o.json is a replay of .*other.*left out of the median" c.err || fail "$(cat c.err)"
  python3 - <<'PY' || fail "$(cat c.json)"
import json
d = json.load(open("c.json"))
w = {s["file"]: s["wall_ns"] for s in d["summaries"]}
inm = {s["file"]: s["in_median"] for s in d["summaries"]}
assert inm == {"s1.json": True, "o.json": False, "s2.json": True, "sw.json": False}, inm
assert d["median_wall_ns"] == (w["s1.json"] + w["s2.json"]) // 2, (d["median_wall_ns"], w)
PY
  "$STANDIN" compare rec --iface constant:ns=100 s1.json o.json s2.json >c.txt 2>/dev/null
  grep -q "^o.json .*(another recording: not in the median)" c.txt || fail "$(cat c.txt)"
  grep -q "^median of 2 " c.txt || fail "$(cat c.txt)"
}

t452_whatif_names_the_best_plan_and_its_margin() {
  "$STANDIN" record -o rec -- "$PB" basic 12 >rec.out
  printf 'accel a constant:ns=0\noffload api=protobuf to a\n' >free.txt
  printf 'accel a constant:ns=0\noffload api=pb.size to a\n' >some.txt
  # (100 ms a call: slower than any recorded call, on a loaded machine too)
  printf 'accel a constant:ns=100000000\noffload api=protobuf to a\n' >slow.txt
  "$STANDIN" whatif rec --plan slow.txt --plan free.txt --plan some.txt --native-wall 10s >w.out
  grep -q "^best: free.txt: .* less than the native run" w.out || fail "$(cat w.out)"
  grep -q "^  .* ahead of the next, some.txt" w.out || fail "$(cat w.out)"
  "$STANDIN" whatif rec --plan slow.txt --plan free.txt --format json >w.json
  expect_eq "json best" free.txt "$(python3 -c 'import json
print(json.load(open("w.json"))["best"])')"
  # a slower device for every call: no plan helps, and the text says so
  "$STANDIN" whatif rec --plan slow.txt >s.out
  grep -q "^slow.txt: .* more than the recorded run: the plan does not shorten the run" s.out ||
    fail "$(cat s.out)"
  # two plans within a few percent of a 10 s run: not told apart
  grep -q "within what estimates can be off by" w.out || fail "$(cat w.out)"
}

t453_plots_keep_the_key_off_the_data_and_label_units() {
  # protogen's many message types: more groups than gnuplot has colours
  "$STANDIN" record -o rec -- "$B/progs/protogen" -n 3 >rec.out
  "$STANDIN" report rec --iface protobuf=constant:ns=100 --plot plots >/dev/null 2>err
  gp=plots/latency.gp
  grep -q "^set key below" $gp || fail "latency key: $(cat $gp)"
  grep -q "^set format x '%.0s%cs'" $gp || fail "latency unit: $(cat $gp)"
  # the 9th group onwards is dashed: gnuplot's colours repeat after 8
  grep -q "index 8 using (\$1\*1e-9):2 with steps lw 2 dt 2 " $gp || fail "9th group: $(cat $gp)"
  grep -q "index 0 using (\$1\*1e-9):2 with steps lw 2 dt 1 " $gp || fail "1st group: $(cat $gp)"
  gp=plots/size.gp
  grep -q '"64 KiB" 65536' $gp || fail "size tics: $(cat $gp)"
  grep -q "^set format y '%.0s%cs'" $gp || fail "size unit: $(cat $gp)"
  "$STANDIN" sweep rec --iface protobuf=constant:ns=100 --vary ns=100,1000 --plot splot >/dev/null 2>err
  grep -q "^set key below" splot/sweep.gp || fail "sweep key: $(cat splot/sweep.gp)"
  wall=$("$STANDIN" whatif rec --iface protobuf=constant:ns=100 --format json | python3 -c 'import json,sys
print("%.6f" % (json.load(sys.stdin)["wall_ns"] / 1e6))')
  grep -q "using 0:($wall) with lines .* title 'recorded run (baseline of the estimates)'" \
    splot/sweep.gp || fail "sweep baseline $wall: $(cat splot/sweep.gp)"
  if command -v gnuplot >/dev/null; then
    for f in plots/latency plots/size splot/sweep; do [ -s $f.svg ] || fail "no $f.svg: $(cat err)"; done
  fi
}

# export --plan / --iface: each call carries the decision whatif takes, and
# the offloaded calls' predictions add up to whatif's predicted_ns.
t454_compare_and_sweep_say_what_replay_could_not_hide() {
  "$STANDIN" record -o rec -- "$PB" basic 10 >/dev/null
  "$STANDIN" replay -t rec --iface pb.pack=constant:ns=20000 --summary s.json -- "$PB" basic 10 >/dev/null
  # the replay's own time it could not hide is wall_ns - wall_adjusted_ns:
  # a tenth of the wall in a, a twentieth in b, none said in c (a summary
  # from before wall_adjusted_ns), none in d
  python3 - <<'EOF'
import json
s = json.load(open("s.json"))
w = s["wall_ns"]
for name, adj in (("a", w - w // 10), ("b", w - w // 20), ("c", None), ("d", w)):
    t = dict(s)
    if adj is None:
        del t["wall_adjusted_ns"]
    else:
        t["wall_adjusted_ns"] = adj
    json.dump(t, open(name + ".json", "w"))
EOF
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 a.json b.json c.json --format json >cmp.json
  python3 - <<'EOF'
import json
c = json.load(open("cmp.json"))
w = json.load(open("s.json"))["wall_ns"]
assert [x["unhidden_ns"] for x in c["summaries"]] == [w // 10, w // 20, 0], c["summaries"]
less = sorted([w - w // 10, w - w // 20, w])[1]
assert c["median_wall_ns"] == w and c["median_wall_less_unhidden_ns"] == less, c
e = c["estimate_ns"]
assert abs(c["estimate_difference_less_unhidden"] - (e - less) / less) < 1e-3, c
EOF
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 a.json b.json c.json >c.txt
  grep -q "^note: the replays could not hide .* of their own time" c.txt || fail "no note: $(cat c.txt)"
  # under a hundredth of the wall is noise: not said
  "$STANDIN" compare rec --iface pb.pack=constant:ns=20000 c.json d.json >d.txt
  ! grep -q "could not hide" d.txt || fail "said for none: $(cat d.txt)"
  # sweep: each replay's unhidden time, and the median less it
  "$STANDIN" sweep rec --iface constant:ns=0 --vary constant.ns=0,20000 --runs 1 --native-wall 5ms \
    --format json --plot plots --replay -- "$PB" basic 10 >sw.json 2>/dev/null
  # and the plot's data, a column more
  expect_eq "plot columns" "7 7" "$(grep -v '^#' plots/sweep.dat | awk '{print NF}' | tr '\n' ' ' | sed 's/ $//')"
  python3 - <<'EOF'
import json
for v in json.load(open("sw.json"))["values"]:
    r = v["replay"]
    assert r["ok"] == 1 and len(r["unhidden_ns"]) == 1, r
    assert r["median_less_unhidden_ns"] == r["wall_ns"][0] - r["unhidden_ns"][0], r
    assert 0 <= r["unhidden_ns"][0] < r["wall_ns"][0], r
EOF
}

t460_export_with_a_plan_gives_each_calls_decision() {
  "$STANDIN" record -o rec -- "$PB" basic 20 >/dev/null
  cat >p.plan <<'EOF'
accel pa protoacc
offload api=pb.pack to pa
offload api=pb.size to pa
keep api=pb.unpack
EOF
  "$STANDIN" export rec --format csv --plan p.plan -o calls.csv
  "$STANDIN" export rec --format json --plan p.plan -o calls.json
  "$STANDIN" export rec --format chrome --plan p.plan -o calls.chrome.json
  "$STANDIN" whatif rec --plan p.plan --format json >w.json
  python3 - <<'EOF'
import csv, json
rows = list(csv.DictReader(open("calls.csv")))
by = {}
for r in rows:
    by.setdefault((r["api"], r["decision"]), []).append(r)
assert {k: len(v) for k, v in by.items()} == {("pb.pack", "offload"): 20, ("pb.size", "unsupported"): 20,
    ("pb.unpack", "kept"): 20, ("pb.pack_to_buffer", "not_selected"): 20}, {k: len(v) for k, v in by.items()}
# protoacc keeps a call's recorded page faults (a thread's first pack may
# take some): export's predicted time holds them, at most the call's
for r in by[("pb.pack", "offload")]:
    fault = min(int(r["fault_ns"] or 0), int(r["latency_ns"]))
    assert r["accel"] == "pa" and int(r["predicted_ns"]) == int(r["service_ns"]) + int(r["link_ns"]) + fault > 0, r
for r in by[("pb.size", "unsupported")]:
    assert r["accel"] == "pa" and r["predicted_ns"] == "" and "get_packed_size" in r["why"], r
w = json.load(open("w.json"))["plans"][0]
assert sum(int(r["predicted_ns"]) for r in by[("pb.pack", "offload")]) == w["predicted_ns"], w
assert w["offloaded"] == 20, w
d = json.load(open("calls.json"))
assert d["plan"].endswith("p.plan"), d["plan"]
assert [c["plan"]["decision"] for c in d["calls"]] == [r["decision"] for r in rows]
assert [c["plan"]["predicted_ns"] for c in d["calls"]] == [int(r["predicted_ns"]) if r["predicted_ns"] else None for r in rows]
ev = [e for e in json.load(open("calls.chrome.json"))["traceEvents"] if e["ph"] == "X"]
assert [e["args"]["plan"]["decision"] for e in ev] == [r["decision"] for r in rows]
EOF
  # --iface alone is a plan too; two plans are refused
  "$STANDIN" export rec --format csv --iface protobuf=constant:ns=7 | awk -F, 'NR > 1 && $(NF-3) != 7 { exit 1 }' ||
    fail "constant:ns=7 not on every call"
  ! "$STANDIN" export rec --format csv --plan p.plan --iface software >/dev/null 2>err || fail "two plans taken"
  grep -q "one plan at a time" err || fail "$(cat err)"
  ! "$STANDIN" export rec --format csv --iface nosuchmodel >/dev/null 2>err || fail "bad --iface taken"
  grep -q "nosuchmodel" err || fail "$(cat err)"
}

# A plugin's constructor and destructor are its code too: one that printed
# went into whatif's JSON (create's and predict's output goes to stderr),
# one that crashed killed standin without a word, and exit() anywhere in a
# plugin ended standin with the plugin's status, 0 included: a replay that
# never ran its program, a whatif with no output, both "successful".
t440_plugin_constructor_output_crash_and_exit_are_named() {
  golden_single
  cat >p.c <<'EOF2'
#include <stdio.h>
#include <stdlib.h>
#include "standin_iface.h"
__attribute__((constructor)) static void hello(void) {
  printf("ctor\n");
  if (MODE == 1)
    *(volatile int *)0 = 1;
  if (MODE == 2)
    exit(0);
}
__attribute__((destructor)) static void bye(void) { printf("dtor\n"); }
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  if (MODE == 3)
    exit(0);
  return malloc(1);
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  if (MODE == 4)
    exit(0);
  *ns = 1000;
  return STANDIN_SUPPORTED;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "p", "", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
  inc=$(cd "$B/.." && pwd)/interfaces
  for m in 0 1 2 3 4; do gcc -shared -fPIC -DMODE=$m -I"$inc" -o p$m.so p.c; done
  "$STANDIN" whatif single --iface ./p0.so --format json >w.json 2>err
  expect_eq "offloaded" 6 "$(pyj w.json 'd["plans"][0]["offloaded"]')"
  expect_eq "on stderr" "ctor dtor" "$(echo $(cat err))"
  "$STANDIN" models ./p0.so >m.txt 2>/dev/null
  ! grep -q tor m.txt || fail "models: $(cat m.txt)"
  set +e
  "$STANDIN" whatif single --iface ./p1.so >out1 2>err1
  rc1=$?
  "$STANDIN" whatif single --iface ./p2.so >out2 2>err2
  rc2=$?
  "$STANDIN" whatif single --iface ./p3.so:x=1 >out3 2>err3
  rc3=$?
  "$STANDIN" replay -t single --iface ./p4.so -- echo ran >out4 2>err4
  rc4=$?
  set -e
  expect_eq "crash in the constructor: exit" 139 $rc1
  grep -q "the model plugin ./p1.so crashed in its constructor (signal 11)" err1 || fail "$(cat err1)"
  expect_eq "exit() in the constructor: exit" 1 $rc2
  grep -q "the model plugin ./p2.so called exit() in its constructor; standin stops" err2 ||
    fail "$(cat err2)"
  expect_eq "exit() in create: exit" 1 $rc3
  grep -q "the model plugin ./p3.so:x=1 called exit() in its create" err3 || fail "$(cat err3)"
  expect_eq "exit() in predict: exit" 1 $rc4
  grep -q "the model plugin ./p4.so called exit() in its predict" err4 || fail "$(cat err4)"
  [ ! -s out4 ] || fail "the program ran: $(cat out4)"
}

# sweep --replay writes each value's plan to a file: a plugin path with a
# blank split there, and every replay "failed" with no word of why. A
# replay that fails now says what it said (here a plugin that refuses to
# be made in 'standin replay', the sweep's child).
t441_sweep_replays_a_plugin_path_with_a_blank_and_says_why_one_failed() {
  cat >p.c <<'EOF2'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  char cmd[256] = "";
  FILE *f = fopen("/proc/self/cmdline", "r");
  size_t len = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
  if (f)
    fclose(f);
  if (NO_REPLAY && len > 8 && !strcmp(cmd + strlen(cmd) + 1, "replay")) {
    snprintf(e, c, "this plugin is not made in replay");
    return NULL;
  }
  unsigned long long *ns = malloc(sizeof *ns);
  *ns = n ? strtoull(v[0], NULL, 10) : 0;
  return ns;
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  *ns = *(unsigned long long *)i;
  return STANDIN_SUPPORTED;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "p", "ns=0", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
  inc=$(cd "$B/.." && pwd)/interfaces
  mkdir "my models"
  gcc -shared -fPIC -DNO_REPLAY=0 -I"$inc" -o "my models/p.so" p.c
  gcc -shared -fPIC -DNO_REPLAY=1 -I"$inc" -o nor.so p.c
  "$STANDIN" record -o rec -- "$PB" basic 5 >/dev/null
  "$STANDIN" sweep rec --iface "./my models/p.so" --vary ns=0,1000 --runs 1 --format json \
    --replay -- "$PB" basic 5 >s.json 2>err
  expect_eq "replays measured" "1 1" "$(pyj s.json '" ".join(str(v["replay"]["ok"]) for v in d["values"])')"
  "$STANDIN" sweep rec --iface ./nor.so --vary ns=0,1000 --runs 2 --replay -- "$PB" basic 5 >t.txt 2>err2
  grep -q "the replay of ns=0 failed: .*this plugin is not made in replay" err2 || fail "$(cat err2)"
  expect_eq "said once a value" 2 "$(grep -c 'failed:' err2)"
}

# An --iface accelerator is named after its model: a plugin named "" left
# a blank column and '--vary .ns', one with a newline split report's rows,
# one with a blank split sweep's saved plan. One word now.
t442_plugin_names_become_one_word_accelerator_names() {
  golden_single
  inc=$(cd "$B/.." && pwd)/interfaces
  for n in '' 'my model' 'two\nlines'; do
    cat >p.c <<EOF2
#include <stdlib.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  return malloc(1);
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  *ns = 1000;
  return STANDIN_SUPPORTED;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "$n", "", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
    gcc -shared -fPIC -I"$inc" -o "p${#n}.so" p.c
  done
  "$STANDIN" report single --iface ./p0.so >r.txt
  grep -q "^plugin  *./p0.so " r.txt || fail "$(cat r.txt)"
  "$STANDIN" whatif single --iface ./p8.so --format json >w.json
  expect_eq "a blank" my_model "$(pyj w.json 'd["plans"][0]["accelerators"][0]["name"]')"
  "$STANDIN" report single --iface ./p10.so >r2.txt
  grep -q "^two_lines  *./p10.so " r2.txt || fail "$(cat r2.txt)"
  "$STANDIN" sweep single --iface ./p8.so --vary my_model.engines=1,2 --format json >s.json
  expect_eq "sweep" "6 6" "$(pyj s.json '" ".join(str(v["estimate"]["offloaded"]) for v in d["values"])')"
}

# 'standin models ./p.so:engines=2' said "p has no parameter 'engines'",
# a spec --iface takes; a plugin of another ABI is told how to fix it.
t443_models_takes_a_plugin_spec_as_iface_does() {
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >p.c <<'EOF2'
#include <stdio.h>
#include <stdlib.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  if (n) {
    snprintf(e, c, "p has no parameter '%s'", k[0]);
    return NULL;
  }
  return malloc(1);
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  return STANDIN_UNSUPPORTED;
}
static const standin_iface me = {ABI, "p", "", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
  gcc -shared -fPIC -DABI=STANDIN_IFACE_ABI -I"$inc" -o p.so p.c
  gcc -shared -fPIC -DABI=7 -I"$inc" -o old.so p.c
  "$STANDIN" models ./p.so:engines=2,link=pcie >m.txt
  grep -q "^p  *test" m.txt || fail "$(cat m.txt)"
  set +e
  "$STANDIN" models ./p.so:x=1 2>e1
  rc1=$?
  "$STANDIN" models ./old.so 2>e2
  rc2=$?
  set -e
  expect_eq "a parameter the plugin refuses" 2 $rc1
  grep -q "p has no parameter 'x'" e1 || fail "$(cat e1)"
  expect_eq "another ABI" 2 $rc2
  grep -q "built for interface ABI 7; this standin uses ABI 1: build it again against" e2 ||
    fail "$(cat e2)"
}

# A plugin that keeps its parameter in a global: a sweep makes every
# value's instance before it reads the trace, so each value got the last
# one's answers, a flat line and no word. Said now; a plugin that keeps it
# in its instance sweeps without a warning.
t444_sweep_says_when_a_plugins_parameter_changes_nothing() {
  golden_single
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >p.c <<'EOF2'
#include <stdlib.h>
#include "standin_iface.h"
static unsigned long long global_ns;
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  unsigned long long *ns = malloc(sizeof *ns);
  *ns = n ? strtoull(v[0], NULL, 10) : 0;
  global_ns = *ns;
  return ns;
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  *ns = GLOBAL ? global_ns : *(unsigned long long *)i;
  return STANDIN_SUPPORTED;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "p", "ns=0", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
  gcc -shared -fPIC -DGLOBAL=1 -I"$inc" -o global.so p.c
  gcc -shared -fPIC -DGLOBAL=0 -I"$inc" -o inst.so p.c
  "$STANDIN" sweep single --iface ./global.so --vary ns=0,1000 >s.txt 2>err
  grep -q "every value of p.ns gave the same predictions" err || fail "$(cat err)"
  "$STANDIN" sweep single --iface ./inst.so --vary ns=0,1000 >s2.txt 2>err2
  [ ! -s err2 ] || fail "$(cat err2)"
  # an accelerator setting that changes nothing is not the plugin's doing
  "$STANDIN" sweep single --iface ./inst.so --vary engines=0,8 >s3.txt 2>err3
  [ ! -s err3 ] || fail "$(cat err3)"
}

# Any key starting "link" was taken for a link setting where sweep and its
# saved plans rebuild a model's spec: a plugin's own links=4 was dropped
# from every value's model (numbers of another model, silently), and
# --vary p.links=1,2 printed an uninitialised error.
t445_plugin_parameter_named_like_a_setting_is_the_plugins() {
  golden_single
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >p.c <<'EOF2'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  unsigned long long *x = malloc(2 * sizeof *x);
  x[0] = 1, x[1] = 1000;
  for (int i = 0; i < n; i++)
    if (!strcmp(k[i], "links") || !strcmp(k[i], "ns"))
      x[k[i][0] == 'n'] = strtoull(v[i], NULL, 10);
    else {
      snprintf(e, c, "p has no parameter '%s'", k[i]);
      free(x);
      return NULL;
    }
  return x;
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  unsigned long long *x = i;
  *ns = x[1] / x[0];
  return STANDIN_SUPPORTED;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "p", "links=1,ns=1000", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
  gcc -shared -fPIC -I"$inc" -o p.so p.c
  "$STANDIN" sweep single --iface ./p.so:links=4 --vary ns=1000,2000 --format json >s.json
  expect_eq "predicted" "1500 3000" "$(pyj s.json '" ".join(str(v["estimate"]["predicted_ns"]) for v in d["values"])')"
  "$STANDIN" sweep single --iface ./p.so --vary links=1,2 --format json >s2.json
  expect_eq "varied" "6000 3000" "$(pyj s2.json '" ".join(str(v["estimate"]["predicted_ns"]) for v in d["values"])')"
}

# A plugin that writes into its request (a const cast away) changed what
# standin went on using: replay then ran every decode for real, warning of
# a doctored recording. A plugin now sees copies, and a request it wrote
# into is not taken, with that reason.
t446_plugin_that_writes_into_its_request_damages_nothing() {
  golden_single
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >p.c <<'EOF2'
#include <stdlib.h>
#include <string.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  return malloc(1);
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  if (r->req)
    memset((void *)r->req, 0x55, r->req_len);
  memset((void *)r->feat, 0x11, r->nfeat * sizeof *r->feat);
  *ns = 1000;
  return STANDIN_SUPPORTED;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "w", "", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
  gcc -shared -fPIC -I"$inc" -o w.so p.c
  why="the plugin wrote into the request it was given (standin_request is read-only): not taken"
  "$STANDIN" whatif single --iface ./w.so --format json >w.json
  expect_eq "offloaded" 0 "$(pyj w.json 'd["plans"][0]["offloaded"]')"
  expect_eq "why" 6 "$(pyj w.json 'd["plans"][0]["accelerators"][0]["unsupported"]["'"$why"'"]')"
  command -v cjpeg >/dev/null && command -v djpeg >/dev/null || { echo "no cjpeg: JPEG part skipped"; return 0; }
  { printf 'P5 64 64 255\n'; head -c 4096 /dev/zero | tr '\0' '\200'; } >grey.pgm
  cjpeg -grayscale grey.pgm >grey.jpg
  "$STANDIN" record -o rec -- djpeg -pnm -outfile out.pgm grey.jpg
  "$STANDIN" replay -t rec --iface ./w.so --summary s.json -- djpeg -pnm -outfile out2.pgm grey.jpg 2>err
  cmp out.pgm out2.pgm
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
  grep -q "1 stays in software on w: $why" err || fail "$(cat err)"
}

# Processes share the accelerators offline, as replay shares them: child
# 102's request (5..15 us) queues behind 101's (2..12 us) for 7 us; 103,
# after both ended, inherits those 7 us and meets no one. Each process had
# the engine to itself: no queueing, and pbtest's four children, at once
# on one engine, had 136% of it busy.
t480_processes_at_once_queue_for_one_engine() {
  cat >p.spec <<'EOF2'
process 100 start=1000000000 end=1000200000
thread 0
process 101 ppid=100 start=1000001000 end=1000050000
thread 0
type 1 app.Req
call thread=0 api=pb.unpack type=1 start=1000002000 lat=10000 req=10
process 102 ppid=100 start=1000001500 end=1000050000
thread 0
type 1 app.Req
call thread=0 api=pb.unpack type=1 start=1000005000 lat=10000 req=10
process 103 ppid=100 start=1000060000 end=1000100000
thread 0
type 1 app.Req
call thread=0 api=pb.unpack type=1 start=1000061000 lat=10000 req=10
EOF2
  "$GEN" -o procs --spec p.spec
  "$STANDIN" whatif procs --iface constant:ns=10000,engines=1 --format json >w.json
  expect_eq "queue" 7000 "$(pyj w.json 'd["plans"][0]["accelerators"][0]["queue_ns"]')"
  expect_eq "estimate" 207000 "$(pyj w.json 'd["plans"][0]["estimate_ns"]')"
  "$STANDIN" whatif procs --iface constant:ns=10000,engines=2 --format json >w2.json
  expect_eq "two engines: queue" 0 "$(pyj w2.json 'd["plans"][0]["accelerators"][0]["queue_ns"]')"
  expect_eq "two engines: estimate" 200000 "$(pyj w2.json 'd["plans"][0]["estimate_ns"]')"
  "$STANDIN" whatif procs --iface constant:ns=10000,engines=1 >w.txt
  grep -q "processes ran at the same time and share the accelerators" w.txt || fail "$(cat w.txt)"
  # however the children met when recorded, one engine is never more than
  # busy
  "$STANDIN" record -o rec -- "$PB" forkpar 4 10 >/dev/null
  "$STANDIN" whatif rec --iface constant:ns=200000,engines=1 --format json >f.json
  expect_eq "requests" 160 "$(pyj f.json 'd["plans"][0]["accelerators"][0]["requests"]')"
  expect_eq "at most all of one engine" True \
    "$(pyj f.json 'd["plans"][0]["accelerators"][0]["busy_ns"] <= d["plans"][0]["estimate_ns"]')"
}

# A thread's calls written out of start order (a JPEG decode is written when
# its object is finished or destroyed, long after and on another thread, as
# libvips does): the thread still ends earlier by every one of its savings,
# not only by those written before its latest call.
t490_whatif_takes_every_saving_of_a_thread_whose_calls_came_late() {
  cat >late.spec <<'EOF2'
process 400 start=1000000000 end=1000100000
thread 0
thread 1 parent=0
type 1 app.Req
call thread=1 api=pb.unpack type=1 start=1000005000 lat=1000 req=10
call thread=0 api=pb.unpack type=1 start=1000050000 lat=10000 req=10
call thread=0 api=pb.unpack type=1 start=1000010000 lat=30000 req=10
EOF2
  "$GEN" -o late --spec late.spec
  "$STANDIN" whatif late --iface constant:ns=0 --cpus 2 --format json >w.json
  expect_eq "late calls" 1 "$(pyj w.json 'd["late_calls"]')"
  expect_eq "method" "per-thread critical path" "$(pyj w.json 'd["plans"][0]["method"]')"
  # thread 0 ends at 60 us, 40 us earlier under the plan: the run at 60 us
  expect_eq "critical-path saving" 40000 "$(pyj w.json 'd["plans"][0]["saving_critical_path_ns"]')"
  expect_eq "estimate" 60000 "$(pyj w.json 'd["plans"][0]["estimate_ns"]')"
}

# report with a plan and --native-wall: the baseline is named native, not
# recorded, as whatif names it
t491_report_names_a_native_wall_baseline_native() {
  golden_threads
  "$STANDIN" report threads --iface constant:ns=0 --native-wall 200us >r.txt
  grep -q "^end to end: native 200.00 us (--native-wall); estimate " r.txt || fail "$(cat r.txt)"
  "$STANDIN" report threads --iface constant:ns=0 >r.txt
  grep -q "^end to end: recorded 100.00 us (trace span); estimate " r.txt || fail "$(cat r.txt)"
}

# plans that offload nothing (core_jpeg refuses every decode of a
# recording: scaled or progressive) leave the run as it was, and the
# verdict says that none shortens it rather than only naming a best
t492_whatif_says_when_no_plan_shortens_the_run() {
  golden_threads
  printf 'accel a constant:ns=0\noffload api=pb.pack to a\n' >none1.txt
  printf 'accel b constant:ns=0\noffload api=pb.size to b\n' >none2.txt
  "$STANDIN" whatif threads --plan none1.txt --plan none2.txt --cpus 2 >w.txt 2>&1
  grep -q "^best: none1.txt: .*, the same as the recorded run: no plan shortens the run" w.txt ||
    fail "$(cat w.txt)"
  "$STANDIN" whatif threads --plan none1.txt --cpus 2 >w.txt 2>&1
  grep -q "^none1.txt: .*, the same as the recorded run: the plan does not shorten the run" w.txt ||
    fail "$(cat w.txt)"
}

# whatif takes each thread's calls alone; where the naive sum is well below
# its estimate it says how early a run whose threads wait on each other
# could end, and how to measure it (golden_threads: 50 against 40 us). A
# single thread's estimate has no such range.
t493_whatif_gives_the_range_threads_that_wait_on_each_other_open() {
  golden_threads
  "$STANDIN" whatif threads --iface constant:ns=0 >w.out 2>/dev/null
  grep -q "^  its calls are on 3 threads, .* the run can end as early as 40.00 us (every call's saving subtracted); measure with 'standin replay" w.out ||
    fail "$(cat w.out)"
  golden_single
  "$STANDIN" whatif single --iface constant:ns=0 >s.out 2>/dev/null
  ! grep -q "its calls are on" s.out || fail "one thread: $(cat s.out)"
}

# A recorded call's page faults (fault_ns: a pack into a fresh buffer) stay
# under a model of a device, apart from its service: a 10 us pack of which
# 8 us were faults is predicted 1.5 + 8 us on optimus-prime at 8 Gb/s and
# 500 ns a call (saving 0.5 us, not 8.5). software, whose time holds them,
# and constant, a call's whole time by definition, add nothing.
t494_page_faults_a_call_took_stay_when_offloaded_golden() {
  cat >fault.spec <<'EOF2'
process 100 start=1000000000 end=1000100000
thread 0
type 1 app.Resp
call thread=0 api=pb.pack type=1 start=1000040000 lat=10000 resp=1000 size=1000 fault=8000
call thread=0 api=pb.pack type=1 start=1000060000 lat=2000 resp=1000 size=1000
EOF2
  "$GEN" -o fault --spec fault.spec
  local op=optimus-prime:gbps=8,fixed_ns=500
  "$STANDIN" report fault --iface $op --format json >r.json
  expect_eq "faults kept" 8000 "$(pyj r.json 'd["plan"]["accelerators"][0]["fault_ns"]')"
  expect_eq "service" 3000 "$(pyj r.json 'd["plan"]["accelerators"][0]["service_ns"]')"
  expect_eq "predicted" 11000 "$(pyj r.json 'd["plan"]["predicted_ns"]')"
  expect_eq "group faults" 8000 "$(pyj r.json 'd["groups"][0]["plan"]["fault_ns"]')"
  expect_eq "estimate" $((100000 - 12000 + 11000)) "$(pyj r.json 'd["plan"]["estimate_ns"]')"
  "$STANDIN" report fault --iface $op >r.txt
  grep -Eq '^pb\.pack +app\.Resp +2 +0 .* 8\.00 us +0 ns +11\.00 us$' r.txt || fail "text: $(cat r.txt)"
  grep -Eq '^optimus-prime .* 3\.00 us +0 ns +8\.00 us +0 ns' r.txt || fail "accelerators: $(cat r.txt)"
  for m in software constant:ns=500; do
    "$STANDIN" report fault --iface $m --format json >s.json
    expect_eq "$m: no faults added" 0 "$(pyj s.json 'd["plan"]["accelerators"][0]["fault_ns"]')"
  done
  expect_eq "constant: its time" 1000 "$(pyj s.json 'd["plan"]["predicted_ns"]')"
  # constant predicts the 10 us call below its 8 us of faults: 7.5 us that
  # no run reaches (replay takes the faults), which whatif says
  expect_eq "constant: faults beyond it" 7500 "$(pyj s.json 'd["plan"]["faults_over_model_ns"]')"
  "$STANDIN" whatif fault --iface constant:ns=500 >w.txt
  grep -q "predicts calls faster than the page faults they took .*by 7.50 us in all (7.5% of the run)" w.txt ||
    fail "whatif: $(cat w.txt)"
  for m in $op software; do
    "$STANDIN" whatif fault --iface $m --format json >w.json
    expect_eq "$m: no faults beyond it" 0 "$(pyj w.json 'd["plans"][0]["faults_over_model_ns"]')"
    "$STANDIN" whatif fault --iface $m >w.txt
    ! grep -q "faster than the page faults" w.txt || fail "$m: $(cat w.txt)"
  done
  # a trace from elsewhere that says a call faulted longer than it took:
  # at most the call's time, in the models as in info
  printf 'process 100 start=1000000000 end=1000100000\nthread 0\ntype 1 app.Resp\ncall thread=0 api=pb.pack type=1 start=1000040000 lat=10000 resp=1000 size=1000 fault=50000\n' >over.spec
  "$GEN" -o over --spec over.spec
  "$STANDIN" report over --iface $op --format json >o.json
  expect_eq "faults at most the call" 10000 "$(pyj o.json 'd["plan"]["accelerators"][0]["fault_ns"]')"
  "$STANDIN" info over >o.txt
  grep -q "page faults took 10.00 us of the 10.00 us of a call that wrote" o.txt || fail "info: $(cat o.txt)"
  # export: the call's predicted time holds them, its features show them
  "$STANDIN" export fault -F csv --iface $op >e.csv
  python3 - e.csv <<'PY' || fail "export: $(cat e.csv)"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["fault_ns"] for r in rows] == ["8000", "0"], rows
assert [r["predicted_ns"] for r in rows] == ["9500", "1500"], rows
PY
}

# Where a model leaves decoded rows (deliver=) against where the recorded
# decodes left them (out_cold_permille): the program's reads of those rows,
# after the calls, are in no estimate. whatif counts the bytes each way and,
# with the miss cost record measured (the place_miss_ns note), bounds what
# they can add or take: 8,000,000 more bytes in memory are 125,000 lines at
# 100 ns, up to 12.5 ms; 1,600,000 fewer, up to 2.5 ms less. Threads are
# taken as the estimates take them.
t495_whatif_bounds_the_reads_of_rows_a_model_leaves_in_memory_golden() {
  cat >rows.spec <<'EOF2'
process 100 start=1000000000 end=1100000000 miss=100
thread 0
type 1 baseline
call thread=0 api=jpeg.decode type=1 start=1010000000 lat=20000000 req=50000 resp=6400000 out=6400000 cold=0
call thread=0 api=jpeg.decode type=1 start=1050000000 lat=10000000 req=30000 resp=3200000 out=3200000 cold=500
EOF2
  "$GEN" -o rows --spec rows.spec
  "$STANDIN" whatif rows --iface jpeg=software:deliver=memory --format json >m.json
  expect_eq "miss cost" 100 "$(pyj m.json 'd["cache_miss_ns"]')"
  expect_eq "to memory" 9600000 "$(pyj m.json 'd["plans"][0]["rows_to_memory_bytes"]')"
  expect_eq "recorded there" 1600000 "$(pyj m.json 'd["plans"][0]["recorded_rows_to_memory_bytes"]')"
  expect_eq "bound" 12500000 "$(pyj m.json 'd["plans"][0]["rows_miss_bound_ns"]')"
  "$STANDIN" whatif rows --iface jpeg=software:deliver=memory >m.txt
  grep -q "leave 9.2 MiB of the decoded rows in memory, where the recorded decodes left 1.5 MiB: .* up to 12.50 ms (12.5%) more, were each of the 125,000 cache lines a miss (100 ns a line" m.txt ||
    fail "deliver=memory: $(cat m.txt)"
  "$STANDIN" whatif rows --iface jpeg=software:deliver=cache --format json >c.json
  expect_eq "cache: bound" -2500000 "$(pyj c.json 'd["plans"][0]["rows_miss_bound_ns"]')"
  "$STANDIN" whatif rows --iface jpeg=software:deliver=cache >c.txt
  grep -q "miss the caches less, .* up to 2.50 ms (2.5%) less" c.txt || fail "deliver=cache: $(cat c.txt)"
  # report's plan says it too, and its JSON carries the bound
  "$STANDIN" report rows --iface jpeg=software:deliver=memory >r.txt
  grep -q "under .*leave 9.2 MiB of the decoded rows in memory.* up to 12.50 ms (12.5%) more" r.txt ||
    fail "report: $(cat r.txt)"
  "$STANDIN" report rows --iface jpeg=software:deliver=memory --format json >r.json
  expect_eq "report: bound" 12500000 "$(pyj r.json 'd["plan"]["rows_miss_bound_ns"]')"
  # sweep: a note for the value that moves rows, none for the one that does not
  "$STANDIN" sweep rows --iface jpeg=software:deliver=memory --vary software.deliver=memory,recorded >w.txt
  grep -q "under software.deliver=memory, the models leave 9.2 MiB.* up to 12.50 ms (12.5%) more" w.txt ||
    fail "sweep: $(cat w.txt)"
  ! grep -q "under software.deliver=recorded" w.txt || fail "sweep, recorded: $(cat w.txt)"
  # as recorded: nothing moves, nothing said
  "$STANDIN" whatif rows --iface jpeg=software --format json >s.json
  expect_eq "recorded: bound" 0 "$(pyj s.json 'd["plans"][0]["rows_miss_bound_ns"]')"
  "$STANDIN" whatif rows --iface jpeg=software >s.txt
  ! grep -q "decoded rows" s.txt || fail "recorded: $(cat s.txt)"
  # a recording without the miss cost: the bytes alone, no bound
  sed 's/ miss=100//' rows.spec >old.spec
  "$GEN" -o old --spec old.spec
  "$STANDIN" whatif old --iface jpeg=software:deliver=memory --format json >o.json
  expect_eq "no miss cost: bound" None "$(pyj o.json 'd["plans"][0]["rows_miss_bound_ns"]')"
  "$STANDIN" whatif old --iface jpeg=software:deliver=memory >o.txt
  grep -q "which this estimate leaves out; replay runs them" o.txt || fail "no miss cost: $(cat o.txt)"
  # a trace is untrusted: a miss cost no machine has is not one
  sed 's/ miss=100/ miss=99999999999/' rows.spec >bad.spec
  "$GEN" -o bad --spec bad.spec
  "$STANDIN" whatif bad --iface jpeg=software:deliver=memory --format json >b.json
  expect_eq "absurd miss cost" 0 "$(pyj b.json 'd["cache_miss_ns"]')"
  # two threads, as the estimates take them: the thread whose rows moved
  # most (100,000 lines: 10 ms), or all 150,000 over the CPUs, whichever
  # is more, never more than all
  cat >two.spec <<'EOF2'
process 100 start=1000000000 end=1100000000 miss=100
thread 0
thread 1
type 1 baseline
call thread=0 api=jpeg.decode type=1 start=1010000000 lat=20000000 req=50000 resp=6400000 out=6400000
call thread=1 api=jpeg.decode type=1 start=1010000000 lat=10000000 req=30000 resp=3200000 out=3200000
EOF2
  "$GEN" -o two --spec two.spec
  "$STANDIN" whatif two --cpus 2 --iface jpeg=software:deliver=memory --format json >t2.json
  expect_eq "two threads, 2 CPUs" 10000000 "$(pyj t2.json 'd["plans"][0]["rows_miss_bound_ns"]')"
  "$STANDIN" whatif two --cpus 1 --iface jpeg=software:deliver=memory --format json >t1.json
  expect_eq "two threads, 1 CPU" 15000000 "$(pyj t1.json 'd["plans"][0]["rows_miss_bound_ns"]')"
}
