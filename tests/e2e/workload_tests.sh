# Bundled workloads (sourced by run.sh): each runs natively and gives the
# same output twice and whatever its thread count; the protobuf ones are
# recorded and replayed with identical output and no fallback. Each test runs
# in its own empty directory.

WL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WL="$B/progs"
# The six HyperProtoBench schemas, when the shared data folder is present.
HPB=${STANDIN_HYPERPROTOBENCH:-$WL_ROOT/../shared/data/hyperprotobench}

# quick_corpus: path of the small JPEG corpus, generated once into the build
# directory (make_corpus.sh skips files that exist).
quick_corpus() {
  IMAGEGEN="$WL/imagegen" "$WL_ROOT/workloads/corpus/make_corpus.sh" "$B/corpus-quick" --quick >/dev/null
  echo "$B/corpus-quick"
}

# same_output NAME CMD...: CMD twice gives the same stdout; keeps NAME.out
same_output() {
  local name=$1
  shift
  "$@" >"$name.out" 2>"$name.err" || fail "$name: exit status $? ($(tail -1 "$name.err"))"
  "$@" >"$name.again" 2>/dev/null
  cmp "$name.out" "$name.again" || fail "$name: output differs between two runs"
}

t500_workload_rpc_output_is_deterministic_and_thread_independent() {
  same_output one "$WL/rpc" -n 3000 -t 1 -w 1
  same_output pool "$WL/rpc" -n 3000 -t 3 -w 1
  cmp one.out pool.out || fail "3 workers print something else than 1"
  "$WL/rpc" -n 3000 -t 3 -w 1 -s 2 >seed2.out 2>/dev/null
  ! cmp -s one.out seed2.out || fail "another seed gives the same output"
  grep -q "failed     0" one.out || fail "failures: $(cat one.out)"
  grep -q "rpc: served 3000 requests on 3 threads" pool.err || fail "no timing on stderr"
}

t501_workload_rpc_sizes_follow_the_fleet_distribution() {
  "$WL/rpc" -n 5000 -t 1 -w 0 >out 2>/dev/null
  # "requests bytes N <=32 A (P%) <=512 B (Q%) ...": about 56% and 93%
  python3 - out <<'EOF'
import re, sys
line = next(l for l in open(sys.argv[1]) if l.startswith("requests"))
small, medium = map(float, re.findall(r"\(([\d.]+)%\)", line))
assert 50 <= small <= 62, line
assert 90 <= medium <= 96, line
assert int(re.search(r"max (\d+)", line).group(1)) > 10000, line
EOF
  "$WL/rpc" -n 500 -t 1 --sizes large >large.out 2>/dev/null
  grep -q "^requests .*<=512 0 (0.0%)" large.out || fail "large: $(head -2 large.out)"
}

t502_workload_rpc_record_replay_identical() {
  replay_same "$WL/rpc" -n 2000 -t 3 -w 1
  "$STANDIN" dump rec | awk '{print $5, $6}' | sort -u >apis
  for want in "pb.unpack workload.rpc.Request" "pb.pack workload.rpc.Response" \
    "pb.pack_to_buffer workload.rpc.Response" "pb.size workload.rpc.Response"; do
    grep -qx "$want" apis || fail "no $want call recorded"
  done
}

t503_workload_thumbnailer_is_deterministic_in_both_modes() {
  c=$(quick_corpus)
  same_output one "$WL/thumbnailer" "$c"
  same_output pool "$WL/thumbnailer" -j 3 -s 96 -r 2 "$c"
  "$WL/thumbnailer" -j 3 "$c" >pool128.out 2>/dev/null
  cmp one.out pool128.out || fail "3 decoder threads print something else than 1"
  expect_eq "files" "$(ls "$c"/*.jpg | wc -l)" "$(wc -l <one.out)"
  for what in " 444 " " 422 " " 420 " " grey " " prog " " base " "rst[1-9]"; do
    grep -q -- "$what" one.out || fail "corpus has no '$what' image: $(cat one.out)"
  done
  mkdir thumbs
  "$WL/thumbnailer" -o thumbs "$c" >/dev/null 2>&1
  expect_eq "thumbnails written" "$(ls "$c"/*.jpg | wc -l)" "$(ls thumbs | wc -l)"
  head -c 2 thumbs/0640x0480_420_base_q85.ppm | grep -q P6 || fail "not a PPM"
  head -c 2 thumbs/0160x0120_grey_base_q85.pgm | grep -q P5 || fail "not a PGM"
}

t504_workload_thumbnailer_reports_bad_files() {
  c=$(quick_corpus)
  mkdir in
  echo "not a jpeg" >in/a.jpg
  head -c 2000 "$c/0320x0240_420_base_rst4_q85.jpg" >in/b.jpg
  set +e
  "$WL/thumbnailer" in >out 2>err
  rc=$?
  set -e
  expect_eq "exit status" 1 "$rc"
  grep -q "^a.jpg error: Not a JPEG file" out || fail "out: $(cat out)"
  grep -q "^b.jpg 320x240" out || fail "a truncated file still decodes (libjpeg pads it): $(cat out)"
}

t505_workload_photo_service_is_deterministic() {
  c=$(quick_corpus)
  same_output one "$WL/photo-service" -n 40 -t 1 "$c"
  same_output pool "$WL/photo-service" -n 40 -t 3 "$c"
  cmp one.out pool.out || fail "3 workers print something else than 1"
  expect_eq "lines" 42 "$(wc -l <one.out)"
  grep -q "bad images 0; failed 0" one.out || fail "$(tail -2 one.out)"
}

# JPEG record/replay is being added: until `standin record` records jpeg
# calls this checks native runs only (above) and says so here.
t506_workload_jpeg_record_replay_when_recorded() {
  c=$(quick_corpus)
  mkdir two
  cp "$c/0160x0120_444_base_q90.jpg" "$c/0320x0240_420_prog_q85.jpg" two/
  "$STANDIN" record -o probe -- "$WL/thumbnailer" two >/dev/null 2>&1 || true
  if [ "$(calls probe jpeg.decode 2>/dev/null)" -eq 0 ]; then
    echo "standin record does not record jpeg calls yet: replay of thumbnailer and photo-service skipped"
    return 0
  fi
  (mkdir t && cd t && replay_same "$WL/thumbnailer" -j 2 "$c")
  (mkdir p && cd p && replay_same "$WL/photo-service" -n 30 -t 2 "$c")
}

t507_workload_protogen_is_deterministic() {
  same_output a "$WL/protogen" -n 200
  "$WL/protogen" -n 200 -s 2 >b.out 2>/dev/null
  ! cmp -s a.out b.out || fail "another seed gives the same output"
  grep -q "^workload.rpc.Request " a.out || fail "top-level type missing: $(cat a.out)"
  ! grep -q "^standin.test.Tree.CountersEntry " a.out || fail "nested type run by default"
  grep -q "round trips: .* identical, 0 changed" a.out || fail "$(tail -1 a.out)"
  same_output all "$WL/protogen" -n 50 -m all --sizes large
  grep -q "^standin.test.Tree.CountersEntry " all.out || fail "-m all left out nested types"
  grep -q "round trips: .* identical, 0 changed" all.out || fail "$(tail -1 all.out)"
}

# every top-level type of the project's schemas: proto2 and proto3, oneofs,
# maps, defaults, recursion, and a type without fields (packs to 0 bytes)
t508_workload_protogen_record_replay_identical() {
  replay_same "$WL/protogen" -n 100
  grep -q "^standin.pbwds.Empty  *100 " rec.out || fail "no empty messages: $(cat rec.out)"
}

# Building the replay database reads each trace chunk about once: protogen's
# calls name payloads stored chunks before (its messages of a type
# repeat), which, with one decoded chunk kept for such lookups and each
# lookup made again, decoded 854 chunks of this 15-chunk trace again.
t514_workload_protogen_database_reads_each_chunk_once() {
  replay_same "$WL/protogen" -n 600
  db() { python3 -c 'import json,sys; print(json.load(open("sum.json"))["database"][sys.argv[1]])' "$1"; }
  chunks=$(db trace_chunks)
  again=$(db trace_chunks_decoded_again)
  [ "$chunks" -ge 4 ] || fail "the trace has $chunks chunks: too few to tell"
  [ "$again" -le "$chunks" ] || fail "$again chunks decoded again for $chunks in the trace"
}

t509_workload_protogen_hyperprotobench_record_replay() {
  if [ ! -f "$HPB/bench0.proto" ]; then
    echo "no HyperProtoBench schemas in $HPB: skipped"
    return 0
  fi
  for i in 0 1 2 3 4 5; do
    CFLAGS=-O1 "$WL_ROOT/workloads/protogen/build.sh" "$HPB/bench$i.proto" "b$i" >/dev/null
    (
      cd "b$i"
      same_output native ./protogen -n 60
      grep -q "round trips: 600 identical, 0 changed" native.out || fail "bench$i: $(tail -1 native.out)"
      replay_same ./protogen -n 60
      cmp native.out rec.out || fail "bench$i: recorded run differs from native"
    )
  done
}

t510_workload_bad_options_are_refused() {
  set +e
  "$WL/rpc" --sizes huge 2>e1
  r1=$?
  "$WL/protogen" -m no.such.Type 2>e2
  r2=$?
  "$WL_ROOT/workloads/protogen/build.sh" missing.proto out 2>e3
  r3=$?
  "$WL/thumbnailer" no-such-dir 2>e4
  r4=$?
  "$WL_ROOT/workloads/corpus/make_corpus.sh" 2>e5
  r5=$?
  set -e
  [ $r1 -eq 2 ] && grep -q "unknown size distribution 'huge'" e1 || fail "e1 ($r1): $(cat e1)"
  [ $r2 -eq 2 ] && grep -q "no message type 'no.such.Type'" e2 || fail "e2 ($r2): $(cat e2)"
  [ $r3 -ne 0 ] && grep -q "missing.proto: no such file" e3 || fail "e3 ($r3): $(cat e3)"
  [ $r4 -ne 0 ] && grep -q "no-such-dir" e4 || fail "e4 ($r4): $(cat e4)"
  [ $r5 -eq 2 ] && grep -q "usage: make_corpus.sh" e5 || fail "e5 ($r5): $(cat e5)"
}

t511_workload_corpus_is_idempotent() {
  IMAGEGEN="$WL/imagegen" "$WL_ROOT/workloads/corpus/make_corpus.sh" c --quick >first
  grep -q ": 12 new, 12 JPEG files" first || fail "$(cat first)"
  rm c/0064x0064_420_base_q75.jpg
  IMAGEGEN="$WL/imagegen" "$WL_ROOT/workloads/corpus/make_corpus.sh" c --quick >second
  grep -q ": 1 new, 12 JPEG files" second || fail "$(cat second)"
  for f in c/*.jpg; do
    cmp "$f" "$(quick_corpus)/${f#c/}" || fail "$f: the same name gave different bytes"
  done
  [ -z "$(ls -A c | grep -v '\.jpg$')" ] || fail "left-overs: $(ls -A c)"
}

t512_workload_programs_are_valgrind_clean() {
  command -v valgrind >/dev/null || { echo "no valgrind: skipped"; return 0; }
  [ -z "${STANDIN_SANITIZER:-}" ] || { echo "valgrind under a sanitizer: skipped"; return 0; }
  c=$(quick_corpus)
  vg=(valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible)
  "${vg[@]}" "$WL/rpc" -n 200 -t 2 >/dev/null 2>vg1 || fail "rpc: $(cat vg1)"
  "${vg[@]}" "$WL/protogen" -n 10 -m all >/dev/null 2>vg2 || fail "protogen: $(cat vg2)"
  "${vg[@]}" "$WL/thumbnailer" -j 2 "$c/0160x0120_grey_base_q85.jpg" "$c/0320x0240_420_prog_q85.jpg" \
    >/dev/null 2>vg3 || fail "thumbnailer: $(cat vg3)"
  "${vg[@]}" "$WL/photo-service" -n 6 -t 2 "$c/0064x0064_420_base_q75.jpg" >/dev/null 2>vg4 ||
    fail "photo-service: $(cat vg4)"
}

# record --retime covers JPEG decodes too: the timing run keeps no rows, and
# a single-threaded thumbnailer makes the same decodes in the same order.
t513_workload_thumbnailer_retime() {
  c=$(quick_corpus)
  "$WL/thumbnailer" -r 1 "$c" >native.out
  "$STANDIN" record --retime -o rec -- "$WL/thumbnailer" -r 1 "$c" >rec.out 2>rec.err
  cmp native.out rec.out
  n=$(calls rec jpeg.decode)
  [ "$n" -gt 0 ] || fail "no decode recorded"
  grep -q "$n of $n calls retimed" rec.err || fail "retime: $(cat rec.err)"
  "$STANDIN" replay -t rec --summary s.json -- "$WL/thumbnailer" -r 1 "$c" >rep.out
  cmp native.out rep.out
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
  # two decode threads take files from a queue: paired as a pool
  "$WL/thumbnailer" -j 2 -r 1 "$c" >native2.out
  "$STANDIN" record --retime=2 -o rec2 -- "$WL/thumbnailer" -j 2 -r 1 "$c" >rec2.out 2>rec2.err
  cmp native2.out rec2.out
  grep -q "$n of $n calls retimed" rec2.err || fail "retime -j 2: $(cat rec2.err)"
  "$STANDIN" replay -t rec2 -- "$WL/thumbnailer" -j 2 -r 1 "$c" >rep2.out
  cmp native2.out rep2.out
}
