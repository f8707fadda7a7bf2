# Plans, models, plugins, links and shared accelerators (sourced by run.sh).

# accel FILE NAME KEY: a number from one accelerator of a --summary file
accel() {
  python3 -c 'import json,sys
for a in json.load(open(sys.argv[1]))["accelerators"]:
    if a["name"] == sys.argv[2]: print(a[sys.argv[3]])' "$1" "$2" "$3"
}

t301_plan_rules_pick_calls_by_api_and_type() {
  "$STANDIN" record -o rec -- "$PB" basic 12 >rec.out
  cat >plan.txt <<'EOF'
# unpack on one device, pack on another, the rest stays in software
accel de  constant:ns=1000
accel ser protoacc:mem_lat=30 link=onchip engines=1
keep    api=pb.size
offload api=pb.unpack type=standin.test.* to de
offload api=pb.pack,pb.pack_to_buffer size=0-1M to ser
EOF
  "$STANDIN" replay -t rec --plan plan.txt --summary s.json -- "$PB" basic 12 >rep.out
  cmp rec.out rep.out
  expect_eq "replayed" 36 "$(json s.json calls_replayed)"
  expect_eq "software" 12 "$(json s.json calls_software)"
  # keep api=pb.size keeps every size call of the type: run without a lookup
  expect_eq "software, not looked up" 12 "$(json s.json calls_software_direct)"
  expect_eq "de requests" 12 "$(accel s.json de requests)"
  expect_eq "de service" 12000 "$(accel s.json de service_ns)"
  expect_eq "ser requests" 24 "$(accel s.json ser requests)"
  expect_eq "ser link" onchip "$(accel s.json ser link)"
  expect_eq "ser link ns" $((24 * 20)) "$(accel s.json ser link_ns)"
}

t302_plan_errors_name_file_and_line() {
  printf 'accel a constant\noffload api=pb.pack to b\n' >p1.txt
  printf '# ok\naccel a nosuchmodel\n' >p2.txt
  printf 'accel a constant\nofload api=jpeg to a\n' >p3.txt
  printf 'accel a constant engines=lots\n' >p4.txt
  printf 'accel a constant\noffload size=9-1 to a\n' >p5.txt
  printf 'accel a constant\noffload api=pb.packk to a\n' >p6.txt
  printf 'accel a constant link_rtt_ns=5000\noffload api=protobuf to a\n' >p8.txt
  # a second selector of a kind replaced the first without a word
  printf 'accel a constant\noffload site=main site=run_* to a\n' >p12.txt
  printf 'accel a constant\noffload api=pb.pack api=pb.unpack to a\n' >p13.txt
  printf 'accel a constant\noffload type="baseline 4:2:0 to a\n' >p14.txt
  printf 'accel a constant\nkeep site=x to a\n' >p16.txt
  printf 'accel a constant\noffload size=4K-1K to a\n' >p17.txt
  # an empty API list selected every API
  printf 'accel a constant\noffload api= to a\n' >p18.txt
  for i in 1 2 3 4 5 6 8 12 13 14 16 17 18; do
    set +e
    "$STANDIN" replay --plan p$i.txt -- true 2>e$i
    rc=$?
    set -e
    [ $rc -ne 0 ] || fail "p$i.txt accepted"
  done
  grep -q "p1.txt:2: no accelerator named 'b'" e1 || fail "e1: $(cat e1)"
  grep -q "p2.txt:2: unknown model 'nosuchmodel'" e2 || fail "e2: $(cat e2)"
  grep -q "p3.txt:2: 'ofload' starts no known line" e3 || fail "e3: $(cat e3)"
  grep -q "p4.txt:1: engines=lots" e4 || fail "e4: $(cat e4)"
  grep -q "p5.txt:2: size=9-1" e5 || fail "e5: $(cat e5)"
  grep -q "p6.txt:2: 'pb.packk' is not an API" e6 || fail "e6: $(cat e6)"
  grep -q "p12.txt:2: site= is given twice in this rule" e12 || fail "e12: $(cat e12)"
  grep -q "p13.txt:2: api= is given twice in this rule: list the APIs in one" e13 || fail "e13: $(cat e13)"
  grep -q "p14.txt:2: a double quote is not closed" e14 || fail "e14: $(cat e14)"
  grep -q "p16.txt:2: a keep rule names no accelerator: take 'to a' away" e16 || fail "e16: $(cat e16)"
  grep -q "p17.txt:2: size=4K-1K: its first end is above its second" e17 || fail "e17: $(cat e17)"
  grep -q "p18.txt:2: no API named; use protobuf, jpeg, " e18 || fail "e18: $(cat e18)"
  # so did --iface with nothing before its '=' (a typo for API=MODEL)
  for spec in =constant ,=constant; do
    set +e
    "$STANDIN" replay --iface "$spec" -- true 2>e19
    rc=$?
    set -e
    expect_eq "--iface $spec refused" 2 "$rc"
    grep -q "^standin: --iface $spec: no API named" e19 || fail "e19: $(cat e19)"
  done
  # a PCIe setting without link=pcie did nothing, without a word
  grep -q "p8.txt:1: link_rtt_ns, link_gbps and link_poll_ns set a PCIe link: give link=pcie too" e8 ||
    fail "e8: $(cat e8)"
  # a rule an earlier one always wins over never applies: said, not refused
  printf 'accel a constant\noffload api=protobuf to a\nkeep api=pb.pack\n' >p9.txt
  "$STANDIN" record -o rec -- "$PB" basic 2 >/dev/null
  "$STANDIN" whatif rec --plan p9.txt >/dev/null 2>e9
  grep -q "p9.txt:3: this rule never applies: the rule on line 2 takes every call it selects" e9 ||
    fail "e9: $(cat e9)"
  printf 'accel a constant\nkeep api=pb.pack\noffload api=protobuf to a\n' >p10.txt
  "$STANDIN" whatif rec --plan p10.txt >/dev/null 2>e10
  [ ! -s e10 ] || fail "e10: $(cat e10)"
  # by type, site and size too: a glob that matches the later rule's name,
  # a size range that holds its range; not the other way round
  printf '%s\n' 'accel a constant' 'offload type=standin.test.* size=0-5000 to a' \
    'keep type=standin.test.Tree size=10-20 api=pb.pack' 'offload site=main to a' \
    'keep site=main type=standin.test.Tree' 'keep type=standin.test.*' >p11.txt
  "$STANDIN" whatif rec --plan p11.txt >/dev/null 2>e11
  grep -q "p11.txt:3: this rule never applies: the rule on line 2" e11 &&
    grep -q "p11.txt:5: this rule never applies: the rule on line 4" e11 ||
    fail "e11: $(cat e11)"
  expect_eq "e11 warnings" 2 "$(grep -c "never applies" e11)"
  # a misspelt type selected nothing, without a word
  printf 'accel a constant\noffload type=standin.test.Tre to a\noffload api=protobuf to a\n' >p15.txt
  "$STANDIN" whatif rec --plan p15.txt >/dev/null 2>e15
  grep -q "p15.txt:2: no call of this recording comes to this rule" e15 || fail "e15: $(cat e15)"
  expect_eq "e15 warnings" 1 "$(wc -l <e15)"
  set +e
  "$STANDIN" replay --plan missing.txt -- true 2>e7
  set -e
  grep -q "cannot read plan missing.txt" e7 || fail "e7: $(cat e7)"
}

t303_plugin_model_and_its_errors() {
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >fixed.c <<'EOF'
#include <stdlib.h>
#include <string.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  return malloc(1);
}
/* 5 us for unpack, unsupported for the rest: pack with a reason of its
 * own, size with a code it gives no reason for */
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  if (r->api == STANDIN_API_PB_PACK) return 7;
  if (r->api == STANDIN_API_PB_SIZE) return 9;
  if (r->api != STANDIN_API_PB_UNPACK) return 11;
  *ns = 5000;
  return STANDIN_SUPPORTED;
}
/* 11: bytes that are no UTF-8, then 150 two-byte characters: cut at 200
 * bytes, one was split, and JSON readers refused the summary */
const char *standin_iface_why(int code) {
  static char bad[512] = "bad \xff\xfe\x7f bytes ";
  for (int k = 0; k < 150 && code == 11; k++)
    strcat(bad, "\xc3\xa9");
  return code == 7 ? "no pack engine\non this part" : code == 11 ? bad : NULL;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "fixed", "", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF
  sed 's/STANDIN_IFACE_ABI, "fixed"/99, "fixed"/' fixed.c >wrongabi.c
  printf 'int nothing_here;\n' >noentry.c
  for p in fixed wrongabi noentry; do gcc -shared -fPIC -I"$inc" -o $p.so $p.c; done
  "$STANDIN" record -o rec -- "$PB" basic 6 >rec.out
  "$STANDIN" replay -t rec --iface ./fixed.so --summary s.json -- "$PB" basic 6 >rep.out 2>err
  cmp rec.out rep.out
  expect_eq "replayed" 6 "$(json s.json calls_replayed)"
  expect_eq "software" 18 "$(json s.json calls_software)"
  expect_eq "service" 30000 "$(accel s.json fixed service_ns)"
  # the plugin's reasons, counted per reason (a line break in one is a space)
  python3 -c 'import json,sys; a=json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))["accelerators"][0]["unsupported"]
bad = "bad ??  bytes " + "\u00e9" * 93  # (DEL is a blank)
assert len(bad.encode()) == 200, len(bad.encode())
assert a == {"no pack engine on this part": 6, "the model does not support this request": 6, bad: 6}, a' s.json ||
    fail "reasons in the summary: $(cat s.json)"
  grep -q "6 stay in software on fixed: no pack engine on this part" err || fail "replay: $(cat err)"
  "$STANDIN" whatif rec --iface ./fixed.so >w.txt
  grep -q "6 on fixed: no pack engine on this part" w.txt &&
    grep -q "6 on fixed: the model does not support this request" w.txt || fail "whatif: $(cat w.txt)"
  set +e
  "$STANDIN" replay -t rec --iface ./wrongabi.so -- true 2>e1
  "$STANDIN" replay -t rec --iface ./noentry.so -- true 2>e2
  "$STANDIN" replay -t rec --iface ./absent.so -- true 2>e3
  set -e
  grep -q "built for interface ABI 99; this standin uses ABI 1" e1 || fail "e1: $(cat e1)"
  grep -q "has no standin_iface_entry" e2 || fail "e2: $(cat e2)"
  grep -q "cannot load plugin ./absent.so" e3 || fail "e3: $(cat e3)"
  "$STANDIN" models ./fixed.so | grep -q "^fixed *test" || fail "models: $("$STANDIN" models ./fixed.so)"
  # a plugin's mistakes (from a helper writing plugins): printf in predict
  # went into the replayed program's output and whatif's JSON; a time of
  # 1e18 ns made replay spin for days, a negative wrapped whatif's sums;
  # a crash killed standin without a word
  cat >bad.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "standin_iface.h"
static int mode;
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  mode = n ? atoi(v[0]) : 0;
  printf("bad: created\n");
  return malloc(1);
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  printf("bad: predict\n");
  if (mode == 2)
    *(volatile int *)0 = 1;
  *ns = mode == 1 ? (uint64_t)(100 - (long long)r->recorded_ns) : 1000000000000000000ull;
  return STANDIN_SUPPORTED;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "bad", "mode=0", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF
  gcc -shared -fPIC -I"$inc" -o bad.so bad.c
  for mode in 0 1; do
    timeout 60 "$STANDIN" replay -t rec --iface ./bad.so:mode=$mode --summary b$mode.json \
      -- "$PB" basic 6 >b$mode.out 2>b$mode.err
    cmp rec.out b$mode.out || fail "mode $mode: the plugin's output went into the program's"
    expect_eq "mode $mode: replayed" 0 "$(json b$mode.json calls_replayed)"
    grep -q "the model predicted more than an hour for it" b$mode.err || fail "mode $mode: $(cat b$mode.err)"
    "$STANDIN" whatif rec --iface ./bad.so:mode=$mode --format json >w$mode.json 2>/dev/null
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["plans"][0]; assert p["offloaded"] == 0, p' w$mode.json ||
      fail "mode $mode: whatif: $(head -c 300 w$mode.json)"
  done
  set +e
  "$STANDIN" whatif rec --iface ./bad.so:mode=2 >/dev/null 2>e4
  local rc=$?
  set -e
  expect_eq "crash: exit" 139 "$rc"
  grep -q "the model plugin ./bad.so:mode=2 crashed in its predict (signal 11)" e4 || fail "e4: $(cat e4)"
}

# 8 threads on one engine must queue; on 8 engines never
t304_shared_timeline_queues_threads_on_one_engine() {
  "$STANDIN" record -o rec -- "$PB" threads 8 6 >rec.out
  "$STANDIN" replay -t rec --iface constant:ns=300000,engines=1 --summary one.json -- "$PB" threads 8 6 >r1.out
  "$STANDIN" replay -t rec --iface constant:ns=300000,engines=8 --summary eight.json -- "$PB" threads 8 6 >r8.out
  cmp rec.out r1.out
  cmp rec.out r8.out
  q1=$(accel one.json constant queue_ns)
  q8=$(accel eight.json constant queue_ns)
  [ "$q1" -gt 0 ] || fail "no queueing on one engine"
  # Each thread's requests follow one another (catch-up keeps them in
  # order), so 8 threads should never need a 9th engine. Threads that owe
  # harness time book late, and taking the lowest free engine then left a
  # lagging request's gap taken: 391 us of queueing once, in the ASan pass
  # of a full make check (q1 is tens of ms). Engines are now chosen by the
  # tightest fit (tests/unit/test_rp_engines.c); a back-to-back call can
  # still arrive a few ns before its own previous one ends, so eight engines
  # must cut the queueing at least tenfold, and any left is shown.
  if [ "$q8" != 0 ]; then
    echo "queueing on eight engines: $q8 ns (one engine: $q1 ns)"
    python3 -m json.tool eight.json | head -60
  fi
  [ $((q8 * 10)) -lt "$q1" ] || fail "queueing on eight engines: $q8 ns, on one: $q1 ns"
}

# Two children forked together, each 8 calls of 25 ms on one engine: the
# second child's first call comes while the first child's 200 ms are booked
# (they would have to start 200 ms apart not to meet, even on a loaded
# machine: 400 us calls did not always meet with other tests beside them).
t305_shared_timeline_spans_forked_children() {
  "$STANDIN" record -o rec -- "$PB" forkpar 2 2 >rec.out
  "$STANDIN" replay -t rec --iface constant:ns=25000000,engines=1 --summary s.json -- "$PB" forkpar 2 2 >rep.out
  cmp rec.out rep.out
  expect_eq "processes" 3 "$(json s.json processes)"
  expect_eq "requests" 16 "$(accel s.json constant requests)"
  q=$(accel s.json constant queue_ns)
  [ "$q" -gt 0 ] || fail "children did not queue on the shared engine"
}

t306_pcie_link_cost_reported_apart_from_service() {
  "$STANDIN" record -o rec -- "$PB" basic 4 >/dev/null
  "$STANDIN" replay -t rec --iface pb.unpack=constant:ns=0,link=pcie --summary s.json -- "$PB" basic 4 >/dev/null
  expect_eq "service" 0 "$(accel s.json constant service_ns)"
  link=$(accel s.json constant link_ns)
  # 3 round trips of 758 ns per request, plus bytes at 15.75 GB/s
  [ "$link" -ge $((4 * 3 * 758)) ] || fail "link_ns $link"
  expect_eq "link kind" pcie "$(accel s.json constant link)"
}

t307_unsupported_requests_stay_in_software() {
  "$STANDIN" record -o rec -- "$PB" basic 5 >rec.out
  "$STANDIN" replay -t rec --iface protobuf=protoacc --summary s.json -- "$PB" basic 5 >rep.out 2>err
  cmp rec.out rep.out
  expect_eq "software (get_packed_size)" 5 "$(json s.json calls_software)"
  expect_eq "replayed" 15 "$(json s.json calls_replayed)"
  grep -q "of the recording's calls, 5 stay in software on protoacc: get_packed_size" err || fail "$(cat err)"
  # every recorded size was refused: they run at once, not walked and looked
  # up first, and are counted under the model's reason
  expect_eq "sizes without a lookup" 5 "$(json s.json calls_software_direct)"
  expect_eq "reason" 5 "$(pyj s.json 'd["software_reasons"]["unsupported"]')"
  expect_eq "not selected" 0 "$(pyj s.json 'd["software_reasons"]["not_selected"]')"
  grep -q "5 kept in software (5 without a lookup)" err || fail "$(cat err)"
  "$STANDIN" replay -t rec --iface protobuf=protoacc --on-miss abort --summary s2.json -- "$PB" basic 5 >rep2.out
  cmp rec.out rep2.out
  expect_eq "abort: every call looked up" 0 "$(json s2.json calls_software_direct)"
  expect_eq "abort: reason" 5 "$(pyj s2.json 'd["software_reasons"]["unsupported"]')"
  # the plan keeps the three smallest sizes (23, 61, 78 bytes), the model
  # refuses the rest: one reason per class, so the sizes are looked up and
  # each is counted under its own
  printf 'accel pa protoacc\nkeep api=pb.size size=-100\noffload api=protobuf to pa\n' >mix.plan
  "$STANDIN" replay -t rec --plan mix.plan --summary s3.json -- "$PB" basic 5 >rep3.out
  cmp rec.out rep3.out
  expect_eq "mixed: looked up" 0 "$(json s3.json calls_software_direct)"
  expect_eq "mixed: kept" 3 "$(pyj s3.json 'd["software_reasons"]["not_selected"]')"
  expect_eq "mixed: refused" 2 "$(pyj s3.json 'd["software_reasons"]["unsupported"]')"
  "$STANDIN" record -o one -- "$PB" basic 1 >/dev/null
  "$STANDIN" replay -t one --iface protobuf=protoacc -- "$PB" basic 1 >/dev/null 2>err1
  grep -q "of the recording's calls, 1 stays in software on protoacc: get_packed_size" err1 || fail "$(cat err1)"
  # whatif says it per plan, and nothing for a plan that offloads every call
  "$STANDIN" whatif rec --iface protobuf=protoacc --plan <(printf 'accel c constant:ns=0\noffload api=protobuf to c\n') >w.txt
  grep -q "^in software under --iface protobuf=protoacc:" w.txt || fail "whatif: $(cat w.txt)"
  grep -q "^    5 on protoacc: get_packed_size" w.txt || fail "whatif why: $(cat w.txt)"
  expect_eq "plans with software calls" 1 "$(grep -c '^in software under' w.txt)"
}

t308_models_lists_every_model_with_sources() {
  "$STANDIN" models >m.out
  for m in software scale constant linear table protoacc protoacc-lpn optimus-prime jpeg-core jpeg-lpn; do
    grep -q "^$m " m.out || fail "$m missing"
  done
  grep -q "HotOS'23" m.out || fail "no sources"
}

t309_install_prefix_runs_and_plugins_build_with_pkg_config() {
  root=$(cd "$B/.." && pwd)
  make -s -C "$root" install PREFIX="$PWD/inst" >/dev/null
  "$PWD/inst/bin/standin" record -o rec -- "$PB" basic 2 >/dev/null
  expect_eq "calls via installed standin" 8 "$(calls rec)"
  cflags=$(PKG_CONFIG_PATH="$PWD/inst/lib/pkgconfig" pkg-config --cflags standin)
  printf '#include "standin_iface.h"\nint abi = STANDIN_IFACE_ABI;\n' >p.c
  gcc -c $cflags p.c -o p.o || fail "plugin does not build against the installed header"
}

# A uniform mid-grey image has no non-zero DCT coefficient: each of its 64
# blocks costs max(3*0 + 6, 66.5) cycles, and every chunk of 12 blocks (the
# last has 4) costs the 1000-cycle floor: 6 chunks, 6000 cycles, 80 us at
# 75 MHz.
t310_jpeg_lpn_counts_coefficients() {
  command -v cjpeg >/dev/null && command -v djpeg >/dev/null || { echo "skipped: no cjpeg"; return 0; }
  { printf 'P5 64 64 255\n'; head -c 4096 /dev/zero | tr '\0' '\200'; } >grey.pgm
  cjpeg -grayscale -baseline grey.pgm >grey.jpg
  "$STANDIN" record -o rec -- djpeg -pnm -outfile out.pgm grey.jpg
  # no protobuf here: no nested-call correction to print
  "$STANDIN" info rec >info.txt
  grep -q -- "-0 ns" info.txt && fail "info prints a correction of 0: $(grep corrected info.txt)"
  grep -q "^total: 1 process, 1 call, " info.txt || fail "info total: $(grep total info.txt)"
  "$STANDIN" replay -t rec --iface jpeg=jpeg-lpn --summary s.json -- djpeg -pnm -outfile out2.pgm grey.jpg
  cmp out.pgm out2.pgm
  expect_eq "lpn service" 80000 "$(accel s.json jpeg-lpn service_ns)"
  "$STANDIN" whatif rec --iface jpeg=jpeg-lpn --format json >w.json
  # and djpeg's file reads (stdio's fills), which the device waits for too
  python3 -c 'import json; p = json.load(open("w.json"))["plans"][0]; a = p["accelerators"][0]; assert p["offloaded"] == 1 and p["predicted_ns"] == 80000 + a["source_ns"], p'
}

t311_types_kept_whole_run_without_a_lookup() {
  "$STANDIN" record -o rec -- "$PB" basic 12 >rec.out
  # nothing of protobuf offloaded: every call runs the real library at once
  "$STANDIN" replay -t rec --iface jpeg=software --summary s.json -- "$PB" basic 12 >rep.out 2>err
  cmp rec.out rep.out
  expect_eq "direct, jpeg plan" 48 "$(json s.json calls_software_direct)"
  grep -q "48 kept in software (48 without a lookup)" err || fail "summary: $(cat err)"
  expect_eq "software, jpeg plan" 48 "$(json s.json calls_software)"
  expect_eq "overruns, jpeg plan" 0 "$(json s.json overruns)"
  # everything offloaded: nothing direct
  "$STANDIN" replay -t rec --iface constant:ns=0 --summary s.json -- "$PB" basic 12 >rep.out
  cmp rec.out rep.out
  expect_eq "direct, all offloaded" 0 "$(json s.json calls_software_direct)"
  # pack split by size: some pack calls offloaded, so no pack call skips the
  # lookup (the k-th occurrence decides); size, pack_to_buffer, unpack do
  mid=$(awk '{print $4}' rec.out | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf 'accel a constant:ns=0\noffload api=pb.pack size=0-%s to a\n' "$mid" >split.plan
  "$STANDIN" replay -t rec --plan split.plan --summary s.json -- "$PB" basic 12 >rep.out
  cmp rec.out rep.out
  replayed=$(json s.json calls_replayed)
  [ "$replayed" -ge 1 ] && [ "$replayed" -lt 12 ] || fail "split plan replayed $replayed pack calls"
  expect_eq "direct, split plan" 36 "$(json s.json calls_software_direct)"
  expect_eq "software, split plan" $((48 - replayed)) "$(json s.json calls_software)"
  # requests the recording never saw, of a type kept whole: real calls, no miss
  "$PB" basic 20 >native20.out
  "$STANDIN" replay -t rec --iface jpeg=software --summary s.json -- "$PB" basic 20 >rep20.out
  cmp native20.out rep20.out
  expect_eq "direct, longer run" 80 "$(json s.json calls_software_direct)"
  expect_eq "fallback, longer run" 0 "$(json s.json calls_fallback)"
  # --on-miss abort looks every call up, so the 13th message still stops it
  set +e
  "$STANDIN" replay -t rec --iface jpeg=software --on-miss abort --summary s.json \
    -- "$PB" basic 20 >/dev/null 2>err
  rc=$?
  set -e
  expect_eq "abort exit" 125 "$rc"
  grep -q "replay miss in pb.size for standin.test.Tree" err || fail "abort: $(cat err)"
  # and says that the plan keeps that call in software
  grep -q "stopping because of --on-miss abort, which checks every call against the recording, also this one that the plan keeps in software" err ||
    fail "abort: $(cat err)"
}

# --iface options form one plan, first match wins: an option that an earlier
# one leaves no call is warned about (our own bench once measured such a
# plan), and the order that works does not warn.
t312_iface_shadowed_by_an_earlier_one_is_warned() {
  "$STANDIN" record -o rec -- "$PB" basic 4 >/dev/null
  "$STANDIN" whatif rec --iface protoacc --iface pb.size=constant:ns=100 --format json >bad.json 2>err
  grep -q "iface pb.size=constant:ns=100 takes no call" err || fail "no warning: $(cat err)"
  "$STANDIN" whatif rec --iface pb.size=constant:ns=100 --iface protoacc --format json >good.json 2>err2
  [ ! -s err2 ] || fail "warned about a plan that works: $(cat err2)"
  off() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plans"][0]["offloaded"])' "$1"; }
  expect_eq "shadowed: sizes stay in software" 12 "$(off bad.json)"
  expect_eq "in order: sizes offloaded too" 16 "$(off good.json)"
  # a narrower API after a wider one, and the same API twice
  "$STANDIN" replay -t rec --iface protobuf=constant:ns=0 --iface pb.pack=software -- "$PB" basic 4 \
    >/dev/null 2>err3
  grep -q "iface pb.pack=software takes no call" err3 || fail "$(cat err3)"
  "$STANDIN" whatif rec --iface jpeg=jpeg-core --iface jpeg=jpeg-core:clock_mhz=2000 >/dev/null 2>err4
  grep -q "to compare models, give each its own --plan file" err4 || fail "$(cat err4)"
}

# A plugin that gives every refusal a reason of its own: past 256 (kept
# apart per model) they are counted together, said so, and another model's
# reasons still show (a table shared by every plugin was used up by one,
# and the other's reasons then read as "does not support")
t313_plugin_reasons_past_256_are_counted_together() {
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >many.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  return calloc(1, sizeof(int));
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  return r->api == STANDIN_API_PB_UNPACK ? 2 : 3 + (*(int *)i)++;
}
const char *standin_iface_why(int code) {
  static char b[32];
  snprintf(b, sizeof b, code == 2 ? "no unpack" : "reason %d", code);
  return b;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "many", "", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF
  gcc -shared -fPIC -I"$inc" -o many.so many.c
  "$STANDIN" record -o rec -- "$PB" basic 100 >/dev/null
  printf 'accel a ./many.so\naccel b ./many.so\noffload api=pb.unpack to b\noffload to a\n' >p.txt
  "$STANDIN" whatif rec --plan p.txt --format json >w.json
  python3 - <<'PY'
import json
w = json.load(open("w.json"))["plans"][0]["accelerators"]
a = {x["name"]: x["unsupported"] for x in w}
assert a["b"] == {"no unpack": 100}, a["b"]
assert len(a["a"]) == 257 and a["a"]["one of the model's reasons past the first 256, which standin counts together"] == 44, a["a"]
PY
}

# A plugin that says its device is a pipeline (standin_iface_interval):
# requests keep the one engine for the interval it gives, not for their
# whole service time. An interval of 0 never queues, offline or in replay;
# one of the whole service time queues as a model without the export does.
t314_plugin_initiation_interval_sets_engine_time() {
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >pipe.c <<'EOF'
#include <stdlib.h>
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  unsigned long long *ii = calloc(1, sizeof *ii);
  for (int i = 0; i < n; i++)
    *ii = strtoull(v[i], NULL, 10);
  return ii;
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  *ns = 300000;
  return 0;
}
uint64_t standin_iface_interval(void *i, const standin_request *r, uint64_t service_ns) {
  return service_ns == 300000 ? *(unsigned long long *)i : 1;
}
static const standin_iface me = {STANDIN_IFACE_ABI, "pipe", "ii=0", "test", create, predict, free};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF
  gcc -shared -fPIC -I"$inc" -o pipe.so pipe.c
  "$STANDIN" record -o rec -- "$PB" threads 8 6 >rec.out
  q() { "$STANDIN" whatif rec --iface "$1" --format json | python3 -c 'import json,sys
print(json.load(sys.stdin)["plans"][0]["accelerators"][0]["queue_ns"])'; }
  whole=$(q constant:ns=300000,engines=1)
  [ "$whole" -gt 0 ] || fail "8 threads of 300 us calls did not queue on one engine"
  expect_eq "interval = service" "$whole" "$(q ./pipe.so:ii=300000,engines=1)"
  expect_eq "interval 0" 0 "$(q ./pipe.so:ii=0,engines=1)"
  short=$(q ./pipe.so:ii=1000,engines=1)
  [ "$short" -lt "$whole" ] || fail "a 1 us interval queued $short ns, the whole call $whole"
  "$STANDIN" replay -t rec --iface ./pipe.so:ii=0,engines=1 --summary s.json -- "$PB" threads 8 6 >rep.out
  cmp rec.out rep.out
  expect_eq "replayed, interval 0: queue" 0 "$(accel s.json pipe queue_ns)"
  n=$(accel s.json pipe requests)
  [ "$n" -gt 0 ] || fail "no request replayed"
  expect_eq "replayed, interval 0: engine time" 0 "$(accel s.json pipe busy_ns)"
  # engine time, which utilisation is a share of: the interval per request
  "$STANDIN" replay -t rec --iface ./pipe.so:ii=1000,engines=1 --summary s2.json -- "$PB" threads 8 6 >rep2.out
  cmp rec.out rep2.out
  expect_eq "replayed, interval 1 us: engine time" $((n * 1000)) "$(accel s2.json pipe busy_ns)"
  expect_eq "replayed: service" $((n * 300000)) "$(accel s2.json pipe service_ns)"
  "$STANDIN" whatif rec --iface ./pipe.so:ii=1000,engines=1 --format json >w.json
  expect_eq "whatif: engine time" $((n * 1000)) "$(python3 -c 'import json
print(json.load(open("w.json"))["plans"][0]["accelerators"][0]["busy_ns"])')"
}

t315_plan_with_byte_order_mark_or_crlf_reads_as_without() {
  "$STANDIN" record -o rec -- "$PB" basic 12 >rec.out
  printf 'accel a constant:ns=100\noffload api=pb.pack to a\n' >plain.txt
  # a Windows editor's UTF-8 file: a byte order mark, CRLF line ends
  printf '\xef\xbb\xbfaccel a constant:ns=100\r\noffload api=pb.pack to a\r\n' >win.txt
  off() { "$STANDIN" whatif rec --plan "$1" --format json | python3 -c 'import json,sys
p = json.load(sys.stdin)["plans"][0]; print(p["offloaded"], p["estimate_ns"])'; }
  want=$(off plain.txt)
  expect_eq "BOM and CRLF" "$want" "$(off win.txt)"
  [ "${want%% *}" -gt 0 ] || fail "nothing offloaded: $want"
}

t316_size_past_64_bits_is_refused_not_wrapped() {
  "$STANDIN" record -o rec -- "$PB" basic 4 >rec.out
  # 99999999999G wrapped modulo 2^64 to a size some calls had
  printf 'accel a constant\noffload size=99999999999G- to a\n' >p.txt
  set +e
  "$STANDIN" whatif rec --plan p.txt >out 2>err
  rc=$?
  set -e
  expect_eq "status" 2 "$rc"
  grep -q "p.txt:2: size=99999999999G-: an end is past 16 EiB" err || fail "$(cat err)"
  printf 'accel a constant\noffload size=-16777215T to a\n' >q.txt
  "$STANDIN" whatif rec --plan q.txt >/dev/null 2>err2 && fail "a T suffix was taken"
  grep -q "q.txt:2: size=-16777215T is not a byte range" err2 || fail "$(cat err2)"
}

t317_rule_no_call_comes_to_names_the_selector_at_fault() {
  "$STANDIN" record -o rec -- "$PB" basic 4 >rec.out
  cat >p.txt <<'EOF2'
accel a constant
offload api=jpeg to a
offload type=standin.test.Nosuch to a
offload site=no_such_function to a
offload module=*libnosuch* to a
offload api=pb.unpack size=1G- to a
offload api=pb.pack to a
EOF2
  "$STANDIN" whatif rec --plan p.txt >out 2>err
  # a protobuf recording given a JPEG rule: no API of it was recorded
  grep -q "p.txt:2: .*the recording has no call of any of its APIs; 'standin report --by api'" err || fail "api: $(cat err)"
  grep -q "p.txt:3: .*no recorded call's type matches type=standin.test.Nosuch; 'standin report --by type'" err || fail "type: $(cat err)"
  grep -q "p.txt:4: .*no recorded call site matches site=no_such_function; 'standin report --by site'" err || fail "site: $(cat err)"
  grep -q "p.txt:5: .*no recorded call site is in an object matching module=\*libnosuch\*" err || fail "module: $(cat err)"
  grep -q "p.txt:6: .*no call matches all of its selectors at once (size= included" err || fail "size: $(cat err)"
  if grep -q "p.txt:7:" err; then fail "a rule calls come to was warned: $(cat err)"; fi
}

# Two plan files of one base name in two directories are told apart by
# their paths in whatif's table and lines (by base name they read alike).
t330_plans_of_one_base_name_are_named_by_path() {
  "$STANDIN" record -o rec -- "$PB" basic 4 >rec.out
  mkdir -p a b
  printf 'accel p protoacc\noffload api=protobuf to p\n' >a/plan.txt
  printf 'accel p constant:ns=1\noffload api=pb.pack to p\n' >b/plan.txt
  "$STANDIN" whatif rec --plan a/plan.txt --plan b/plan.txt >out 2>err
  grep -q "^a/plan.txt " out || fail "$(cat out)"
  grep -q "^b/plan.txt " out || fail "$(cat out)"
  grep -q "in software under b/plan.txt:" out || fail "$(cat out)"
  # one plan: its base name
  "$STANDIN" whatif rec --plan a/plan.txt --iface protoacc >out 2>err
  grep -q "^plan.txt " out || fail "$(cat out)"
}

# What replay counts per accelerator is what whatif counts for the same
# calls, whatever the engines: requests, service, link and engine time
# (protoacc's packs hold an engine for their initiation interval only).
# With unlimited engines replay counted no engine time (0 ns).
t335_replay_counts_what_whatif_counts_per_accelerator() {
  "$STANDIN" record -o rec -- "$PB" threads 3 5 >rec.out
  for e in 0 1 2; do
    printf 'accel pa protoacc engines=%s link=pcie\noffload api=pb.pack,pb.unpack to pa\n' $e >p$e.txt
    "$STANDIN" whatif rec --plan p$e.txt --format json >w$e.json
    "$STANDIN" replay -t rec --plan p$e.txt --summary s$e.json -- "$PB" threads 3 5 >rep$e.out
    cmp rec.out rep$e.out
    for k in requests service_ns link_ns fault_ns busy_ns; do
      want=$(python3 -c 'import json,sys
print(json.load(open(sys.argv[1]))["plans"][0]["accelerators"][0][sys.argv[2]])' w$e.json $k)
      expect_eq "engines=$e: $k" "$want" "$(accel s$e.json pa $k)"
    done
  done
  expect_eq "requests" 30 "$(accel s0.json pa requests)"
  b=$(accel s0.json pa busy_ns)
  [ "$b" -gt 0 ] && [ "$b" -lt "$(accel s0.json pa service_ns)" ] || fail "engine time $b"
}

# An initiation interval is kept in 32 bits: one of 5 s (of a 10 s
# request) was cut to its low bits, 705 ms, and the engine was free again
# long before. It counts as 4.29 s now, the most 32 bits hold.
t336_initiation_interval_past_32_bits_is_not_cut() {
  inc=$(cd "$B/.." && pwd)/interfaces
  cat >long.c <<'EOF2'
#include "standin_iface.h"
static void *create(int n, const char *const *k, const char *const *v, char *e, size_t c) {
  return (void *)1;
}
static int predict(void *i, const standin_request *r, uint64_t *ns) {
  *ns = 10000000000ull;
  return 0;
}
uint64_t standin_iface_interval(void *i, const standin_request *r, uint64_t service_ns) {
  return 5000000000ull;
}
static void drop(void *i) {}
static const standin_iface me = {STANDIN_IFACE_ABI, "long", "", "test", create, predict, drop};
const standin_iface *standin_iface_entry(void) { return &me; }
EOF2
  gcc -shared -fPIC -I"$inc" -o long.so long.c
  "$STANDIN" record -o rec -- "$PB" basic 2 >/dev/null
  "$STANDIN" whatif rec --iface pb.unpack=./long.so:engines=1 --format json >w.json
  python3 -c 'import json
a = json.load(open("w.json"))["plans"][0]["accelerators"][0]
assert a["requests"] == 2, a
assert a["busy_ns"] == 2 * 4294967294, a
assert a["service_ns"] == 2 * 10000000000, a' || fail "$(cat w.json)"
}
