# JPEG tests (sourced by run.sh). Each runs in its own empty directory.
# The corpus is generated once into $B/corpus (tests/e2e/make_corpus.sh).

JPEG_E2E=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JD="$B/progs/jpegdec"
JT="$B/progs/jpegtj"
CORPUS="$B/corpus"
PYSYS=/usr/bin/python3 # Debian's python, where python3-pil installs

corpus() {
  B="$B" "$JPEG_E2E/make_corpus.sh" "$CORPUS"
}

# files NAME...: corpus paths
files() {
  local n
  for n in "$@"; do printf '%s ' "$CORPUS/$n.jpg"; done
}

# jpeg_same SCRIPT [REPLAY ARGS...]: run `sh SCRIPT` natively, recorded and
# replayed; stdout, stderr (without standin's own lines) and exit status
# must be the same in all three.
jpeg_same() {
  local script=$1 nrc rrc prc
  shift
  set +e
  sh "$script" >nat.out 2>nat.err
  nrc=$?
  "$STANDIN" record -o rec -- sh "$script" >rec.out 2>rec.err
  rrc=$?
  "$STANDIN" replay -t rec --summary sum.json "$@" -- sh "$script" >rep.out 2>rep.err
  prc=$?
  set -e
  expect_eq "exit status recorded" "$nrc" "$rrc"
  expect_eq "exit status replayed" "$nrc" "$prc"
  cmp nat.out rec.out || fail "recorded output differs"
  cmp nat.out rep.out || fail "replayed output differs"
  grep -v '^standin: ' rec.err | cmp - nat.err || fail "recorded stderr differs"
  grep -v '^standin: ' rep.err | cmp - nat.err || fail "replayed stderr differs"
}

# JPEG calls in rec that an accelerator could serve (not flagged
# NOT-OFFLOADABLE; failed decodes count: replay answers them too)
offloadable() {
  "$STANDIN" dump rec | grep -v NOT-OFFLOADABLE | awk '$5 == "jpeg.decode" || $5 == "tj.decode"' |
    wc -l
}

# every_decode_replayed: the replay answered every offloadable call
every_decode_replayed() {
  local n
  n=$(offloadable)
  [ "$n" -gt 0 ] || fail "no offloadable decode recorded"
  expect_eq "replayed" "$n" "$(json sum.json calls_replayed)"
  expect_eq "intercepted" "$n" "$(json sum.json calls_intercepted)"
  expect_eq "fallback" 0 "$(json sum.json calls_fallback)"
}

SMALL="s_base_420_r1 s_prog_444_r0 o_prog_422 s_base_gray_r0 c_base_420 m_prog_444_r2 s_prog_420_r1 s_base_422_r0"

t200_jpeg_djpeg_corpus_round_trip() {
  corpus
  ls "$CORPUS"/[acoms]_*.jpg "$CORPUS"/l_*.jpg >list
  while read -r f; do
    echo "djpeg '$f' | md5sum; djpeg -bmp -scale 1/2 '$f' | md5sum"
  done <list >run.sh
  jpeg_same run.sh
  expect_eq "decodes" $((2 * $(wc -l <list))) "$(calls rec jpeg.decode)"
  every_decode_replayed
  "$STANDIN" info rec >info.out
  for c in "baseline 4:2:0" "baseline 4:2:2" "baseline 4:4:4" "baseline gray" "progressive 4:2:0" \
    "progressive 4:2:2" "progressive 4:4:4" "progressive gray" "arithmetic 4:2:0"; do
    grep -q "jpeg.decode *$c " info.out || fail "info lacks '$c'"
  done
}

t201_jpeg_djpeg_output_options_are_requests() {
  corpus
  for f in s_base_420_r1 s_prog_444_r0 o_prog_422 s_base_gray_r0; do
    for o in "-gif" "-colors 64" "-colors 16 -onepass -dither ordered" "-dct float" "-nosmooth" \
      "-fast" "-grayscale" "-rgb565 -bmp" "-scale 3/8" "-dither none -colors 8" "-rgb"; do
      echo "djpeg $o $CORPUS/$f.jpg | md5sum"
    done
  done >run.sh
  jpeg_same run.sh
  every_decode_replayed
  # the same picture decoded with other parameters is another request (djpeg
  # -gif of a grey picture needs no colour map: it is the -grayscale request)
  expect_eq "distinct requests" 43 "$("$STANDIN" dump rec | grep -o 'fp=[0-9a-f]*' | sort -u | wc -l)"
}

t202_jpeg_12mp_decode_disappears_with_constant_zero() {
  corpus
  f="$CORPUS/x_base_420.jpg"
  djpeg -outfile nat.ppm "$f"
  "$STANDIN" record -o rec -- djpeg -outfile rec.ppm "$f"
  "$STANDIN" replay -t rec --iface constant:ns=0 --summary sum.json -- djpeg -outfile rep.ppm "$f"
  cmp nat.ppm rec.ppm
  cmp nat.ppm rep.ppm
  expect_eq "replayed" 1 "$(json sum.json calls_replayed)"
  expect_eq "predicted" 0 "$(json sum.json predicted_ns)"
  # with no window every served decode overruns, and its rows, copied in
  # later calls, are owed as part of that same overrun: one call, one overrun
  expect_eq "overruns" 1 "$(json sum.json overruns)"
  "$STANDIN" dump rec --format json >d.json
  python3 - d.json "$(stat -c %s "$f")" <<'EOF'
import json, sys
(r,) = [json.loads(l) for l in open(sys.argv[1])]
f = r["features"]
assert r["type"] == "baseline 4:2:0", r["type"]
assert (f["width"], f["height"], f["out_pixels"]) == (4000, 3000, 12000000), f
assert f["out_bytes"] == 36000000 == r["resp_len"], (f, r["resp_len"])
assert f["input_bytes"] == int(sys.argv[2]), (f["input_bytes"], sys.argv[2])
assert (f["subsampling"], f["progressive"], f["components"]) == (4, 0, 3), f
EOF
}

t203_jpeg_sources_stdio_memory_custom_suspending() {
  corpus
  fs=$(files $SMALL)
  for src in stdio mem custom suspend forget; do
    echo "$JD -src $src $fs"
    echo "$JD -src $src -nofinish -lines 5 $fs"
  done >run.sh
  echo "$JD -src suspend -chunk 100 $fs" >>run.sh
  echo "$JD -src suspend -chunk 100000 -one $fs" >>run.sh
  # a source that forgets its buffer when it suspends (Chromium's): the
  # bytes used before each suspension were lost from its requests
  echo "$JD -src forget -chunk 300 $fs" >>run.sh
  jpeg_same run.sh
  every_decode_replayed
  [ "$(json sum.json lookups_predicted)" -gt 0 ] || fail "no libjpeg decode found by its guess"
}

t204_jpeg_output_parameters_are_part_of_the_request() {
  corpus
  fs=$(files s_base_420_r1 s_prog_444_r0 o_prog_422 s_base_gray_r0)
  {
    echo "$JD $fs"
    echo "$JD -scale 1/2 -cs bgrx -dct float $fs"
    echo "$JD -cs 565 -nofancy $fs"
    echo "$JD -quant 32 $fs"
    echo "$JD -quant 8 -onepass -nosmooth -src suspend $fs"
    echo "$JD -cs ycc -dct fast -scale 7/8 $fs"
  } >run.sh
  jpeg_same run.sh
  every_decode_replayed
  expect_eq "distinct requests" 24 "$("$STANDIN" dump rec | grep -o 'fp=[0-9a-f]*' | sort -u | wc -l)"
}

t205_jpeg_modes_an_accelerator_would_not_serve() {
  corpus
  fs=$(files s_base_420_r1 s_prog_444_r0 o_prog_422)
  {
    # buffered-image mode: an output pass with another IDCT than the
    # decode's (the baseline image), several scans (the progressive ones);
    # passes over one scan are served (t239)
    echo "$JD -buffered -passdct fast $fs"
    echo "$JD -coef $fs"
    echo "$JD -skip 8 $fs"
    echo "$JD -crop 16,64 $fs"
    echo "$JD -stop 10 $fs"
  } >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "decodes" 15 "$(calls rec jpeg.decode)"
  expect_eq "not offloadable" 15 "$("$STANDIN" dump rec | grep -c NOT-OFFLOADABLE)"
  # reasons: 1 buffered, 3 coefficients, 4 skip, 5 crop, 6 abandoned (2,
  # raw data, is served since 2026-11-30: t237)
  expect_eq "reasons" "1 3 4 5 6" \
    "$("$STANDIN" dump rec --format json | python3 -c 'import json,sys; print(*sorted({json.loads(l)["reason"] for l in sys.stdin}))')"
  expect_eq "fallback" 0 "$(json sum.json calls_fallback)"
  expect_eq "replayed" 0 "$(json sum.json calls_replayed)"
  # info names the reasons too, per type
  "$STANDIN" info rec >info.out
  expect_eq "not offloadable, info" 15 \
    "$(grep -o '[0-9]* not offloadable' info.out | awk '{n += $1} END {print n}')"
  for why in "buffered-image mode" jpeg_read_coefficients \
    jpeg_skip_scanlines jpeg_crop_scanline "ended before its last row"; do
    grep -q "not offloadable (.*$why" info.out || fail "info does not name '$why': $(cat info.out)"
  done
  # replay intercepts none of them, and says why they are not in its counts
  expect_eq "not offloadable, replay" 15 "$(json sum.json calls_not_offloadable)"
  expect_eq "their reasons, replay" \
    "buffered-image mode=3 ended before its last row=3 jpeg_crop_scanline=3 jpeg_read_coefficients=3 jpeg_skip_scanlines=3" \
    "$(python3 -c 'import json; r = json.load(open("sum.json"))["not_offloadable_reasons"]; print(" ".join("%s=%d" % kv for kv in sorted(r.items())))')"
  # ... and this run's own, which are the recording's: said once
  expect_eq "run not offloadable, replay" 15 "$(json sum.json calls_not_offloadable_ran)"
  expect_eq "their reasons, this run" \
    "buffered-image mode=3 ended before its last row=3 jpeg_crop_scanline=3 jpeg_read_coefficients=3 jpeg_skip_scanlines=3" \
    "$(python3 -c 'import json; r = json.load(open("sum.json"))["not_offloadable_ran_reasons"]; print(" ".join("%s=%d" % kv for kv in sorted(r.items())))')"
  grep -q "^standin: replay: 15 calls not offloadable (3 buffered-image mode, .*) ran for real, outside the counts above" rep.err ||
    fail "no line on the calls replay left alone: $(grep '^standin:' rep.err)"
  grep -q "recording holds" rep.err && fail "the recording's, said again: $(grep '^standin:' rep.err)"
  # report names them too, under the plan's calls left in software
  "$STANDIN" report rec --iface jpeg-core >rep.txt
  grep -q "^  15 calls not offloadable (replay runs them): 3 buffered-image mode, " rep.txt ||
    fail "report does not say why: $(cat rep.txt)"
  grep -q "without a recorded response" rep.txt && fail "counted as without a response: $(cat rep.txt)"
  # the per-group column names them for what they are
  expect_eq "WHY column" 3 "$(grep -c '^jpeg.decode .* 0  *5 not-offloadable 5 ' rep.txt)"
  expect_eq "their reasons, report" 5 "$("$STANDIN" report rec --iface jpeg-core --format json |
    python3 -c 'import json,sys; r = json.load(sys.stdin)["not_offloadable_reasons"]; assert set(r.values()) == {3}, r; print(len(r))')"
  expect_eq "the plan's software counts, report" "0 15" "$("$STANDIN" report rec --iface jpeg-core --format json |
    python3 -c 'import json,sys; gs = [g["plan"]["software"] for g in json.load(sys.stdin)["groups"]]; print(sum(g["no_response"] for g in gs), sum(g["not_offloadable"] for g in gs))')"
}

t206_jpeg_threads_decode_at_once() {
  corpus
  fs=$(files $SMALL)
  {
    echo "$JD -threads 4 -src mem -repeat 2 $fs"
    echo "$JD -threads 3 -src suspend $fs"
    echo "$JT -threads 3 $(files s_base_420_r1 s_prog_444_r0 o_prog_422)"
  } >run.sh
  jpeg_same run.sh
  every_decode_replayed
  expect_eq "threads" "1 2 3 4" "$("$STANDIN" dump rec | awk '{print $4}' | sort -u | tr -d t | sort -n | xargs)"
}

t207_jpeg_turbojpeg_entry_points() {
  corpus
  echo "$JT $(files s_base_420_r1 s_prog_444_r0 o_prog_422 s_base_gray_r0 s_base_422_r0 t_base_420 m_prog_444_r2)" >run.sh
  jpeg_same run.sh
  every_decode_replayed
  # rgb, bgrx/2, tjDecompress, yuv, yuv planes, too small: 6 per picture;
  # too small fails for each, and every call on the truncated file warns
  expect_eq "tj calls" 42 "$(calls rec tj.decode)"
  expect_eq "failed" 12 "$("$STANDIN" dump rec | grep -c FAILED)"
  # one process decodes them all in the recorded order: after the first,
  # each call is found by comparing its bytes with the one the recording
  # says comes next, without hashing the JPEG
  [ "$(json sum.json lookups_predicted)" -ge 30 ] || fail "predicted: $(json sum.json lookups_predicted)"
}

t208_jpeg_truncated_and_corrupt_behave_as_without_standin() {
  corpus
  for f in t_base_420 t_prog_444_r2; do
    echo "djpeg -outfile o.ppm $CORPUS/$f.jpg; echo rc=\$?; md5sum <o.ppm"
    echo "djpeg -strict -outfile o.ppm $CORPUS/$f.jpg; echo rc=\$?; md5sum <o.ppm"
  done >run.sh
  ts=$(files t_base_420 t_prog_444_r2)
  {
    echo "$JD -strict $ts"
    echo "$JD -src custom -eoferr $ts"
    echo "$JD -src mem $ts"
    echo "$JD -src custom -strict $ts"
    echo "$JD -src suspend $(files a_arith_420)" # the arithmetic decoder cannot suspend
    # a suspending source at the end of a truncated file: the program gives
    # up with the rows the library could decode (replay gave it none, as it
    # waited for the rest of the image to identify it), and the bytes the
    # library left unread in the source (replay's drain had taken them all:
    # PIL said "0 bytes not processed")
    echo "$JD -src suspend -unread $ts"
    echo "$JD -src suspend -chunk 5000 -unread $ts"
  } >>run.sh
  jpeg_same run.sh
  expect_eq "rows before the end, suspended" 2 \
    "$(grep -c "t_base_420.jpg: error 'Empty input file' after 270 rows, 0 warnings, [1-9][0-9]* bytes unread" nat.out)"
  grep -q "Premature end of JPEG file" nat.err || fail "no warning: $(cat nat.err)"
  grep -q "rc=2" nat.out || fail "djpeg did not warn"
  grep -q "error 'Premature end of input file' after 270 rows" nat.out || fail "$(cat nat.out)"
  grep -q "error 'Suspension not allowed here'" nat.out || fail "$(cat nat.out)"
  expect_eq "fallback" 0 "$(json sum.json calls_fallback)"
  # a decode that failed where its suspending source ran out of data is
  # answered as a failed decode: it was run for real and not counted at all
  # (OpenCV's imdecode of a truncated image), where whatif offloads it
  every_decode_replayed
}

# Corrupt data: an invalid marker inside the entropy-coded data. The
# library warns, fills the rest of the scan, and fails at the marker when
# the program reads on; with restart markers (the progressive file) it
# skips to the next one instead. Recorded as not offloadable; replay runs
# them for real, whatever the source: a
# suspending one had its drain read the two bytes after the marker as a
# segment length, past the end of the file, and wait for data forever (the
# program got no rows; poppler rendered a blank page).
t220_jpeg_corrupt_marker_runs_for_real_from_every_source() {
  corpus
  ks=$(files k_base_420 k_prog_444_r2)
  {
    echo "djpeg -outfile o.ppm $CORPUS/k_base_420.jpg; echo rc=\$?; md5sum <o.ppm"
    for src in stdio mem custom suspend; do echo "$JD -src $src $ks"; done
    echo "$JD -src suspend -chunk 50000 $ks"
  } >run.sh
  jpeg_same run.sh
  grep -q "Corrupt JPEG data: premature end of data segment" nat.err || fail "no warning: $(cat nat.err)"
  expect_eq "errors at the marker" 5 "$(grep -c "error 'Unsupported marker type 0x28'" nat.out)"
  expect_eq "rows before it" 5 "$(grep -c "k_base_420.jpg: error 'Unsupported marker type 0x28' after 450 rows" nat.out)"
  expect_eq "resynchronised" 5 "$(grep -c "k_prog_444_r2.jpg: 800x450 c=3 rows=450 .* warnings=4" nat.out)"
  expect_eq "not offloadable" 11 "$("$STANDIN" dump rec | grep -c NOT-OFFLOADABLE)"
  expect_eq "summary" "11 0 0" \
    "$(json sum.json calls_not_offloadable) $(json sum.json calls_intercepted) $(json sum.json calls_fallback)"
  "$STANDIN" info rec >info.txt
  grep -q "0 failed in the library, 5 not offloadable (5 corrupt data: an invalid marker)" info.txt &&
    grep -q "6 failed in the library, 6 not offloadable (6 corrupt data: an invalid marker)" info.txt ||
    fail "info: $(cat info.txt)"
}

# A program that sets the image size after jpeg_read_header (openslide
# decodes one band of a Hamamatsu image so: the header, the band's
# restart intervals, EOI): the size is part of the request, and the rows
# recorded as a digest are rebuilt at that size. Before, the rebuild
# decoded the whole image, failed, and every such decode fell back while
# whatif counted them offloaded.
t221_jpeg_image_size_set_after_the_header() {
  corpus
  python3 - "$CORPUS/s_base_420_r1.jpg" band.jpg <<'EOF'
import sys
d = open(sys.argv[1], 'rb').read()
i = d.index(b'\xff\xda')  # SOS; a restart marker after each 16-row MCU row
for _ in range(5):          # 64 rows, and the next row the upsampling looks at
    i = next(j for j in range(i + 2, len(d)) if d[j] == 0xFF and 0xD0 <= d[j + 1] <= 0xD7)
open(sys.argv[2], 'wb').write(d[:i] + b'\xff\xd9')
EOF
  echo "$JD -height 64 -nofinish band.jpg $(files s_prog_444_r0)" >run.sh
  echo "$JD $(files s_base_420_r1)" >>run.sh # the same image at its own size
  jpeg_same run.sh
  grep -q "band.jpg: 320x64 c=3 rows=64 .* warnings=0" nat.out || fail "$(cat nat.out)"
  ! grep -q "could not be rebuilt" rep.err || fail "$(cat rep.err)"
  every_decode_replayed
}

t209_jpeg_miss_falls_back_or_aborts() {
  corpus
  "$STANDIN" record -o rec -- "$JD" $(files s_base_420_r1) >/dev/null
  "$STANDIN" record -o rec2 -- "$JT" $(files s_base_420_r1) >/dev/null
  "$JD" $(files s_base_420_r1 s_prog_444_r0) >nat.out
  "$STANDIN" replay -t rec --summary sum.json -- "$JD" $(files s_base_420_r1 s_prog_444_r0) >rep.out 2>err
  cmp nat.out rep.out
  ! grep -q "were not in the recording" err || fail "one miss of two: $(cat err)"
  expect_eq "replayed" 1 "$(json sum.json calls_replayed)"
  expect_eq "fallback" 1 "$(json sum.json calls_fallback)"
  python3 -c 'import json; assert json.load(open("sum.json"))["fallback_reasons"]["not_in_trace"] == 1'
  "$JT" $(files s_prog_444_r0) >tnat.out
  "$STANDIN" replay -t rec2 --summary s2.json -- "$JT" $(files s_prog_444_r0) >trep.out 2>err
  cmp tnat.out trep.out
  expect_eq "tj fallback" 6 "$(json s2.json calls_fallback)"
  # none of a few calls was recorded: said, however few
  grep -q "6 of 6 calls looked up were not in the recording" err || fail "$(cat err)"
  grep -q "If it decodes other images, --on-miss nearest times its decodes" err || fail "$(cat err)"
  ! grep -q "protobuf calls" err || fail "protobuf's hint given for JPEG: $(cat err)"
  set +e
  "$STANDIN" replay -t rec --on-miss abort -- "$JD" $(files s_prog_444_r0) >/dev/null 2>err
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "exit status 0"
  grep -q "replay miss in jpeg.decode for progressive 4:4:4" err || fail "message: $(cat err)"
}

# nearest_800x450 DIR: the recorded latencies of DIR's 320x240 and
# 1920x1080 decodes, and between them the time --on-miss nearest gives an
# 800x450 one (interpolated by pixels): "lo mid hi"
nearest_800x450() {
  "$STANDIN" dump "$1" --format json >"$1.dump.json"
  python3 - "$1.dump.json" <<'PY'
import json, sys
rec = {(r["features"]["width"], r["features"]["height"]): r["latency_ns"]
       for r in map(json.loads, open(sys.argv[1]))}
lo, hi = rec[(320, 240)], rec[(1920, 1080)]
num, den = 800 * 450 - 320 * 240, 1920 * 1080 - 320 * 240
mid = lo + int((hi - lo) * num / den) if hi >= lo else lo - int((lo - hi) * num / den)
print(lo, mid, hi)
PY
}

# --on-miss nearest times a decode that was not recorded as the recorded
# decodes of its class nearest in pixels: 800x450 between 320x240 and
# 1920x1080, interpolated; the same images with another DCT as the ones
# recorded. A class never recorded, or a call that fails, falls back, and
# so does a scaling never recorded (a model may serve unscaled decodes
# only); the same scaling written otherwise (4/8, 1/2) is the same.
t217_jpeg_miss_timed_as_the_nearest_recorded_decodes() {
  corpus
  "$STANDIN" record -o rec -- "$JD" $(files c_base_420 l_base_420) >/dev/null
  "$JD" -dct float $(files c_base_420 m_base_420 l_base_420 s_prog_444_r0) >nat.out
  "$STANDIN" replay -t rec --on-miss nearest --summary s.json \
    -- "$JD" -dct float $(files c_base_420 m_base_420 l_base_420 s_prog_444_r0) >rep.out 2>err
  cmp nat.out rep.out
  grep -q "3 calls not answered from the recording ran for real, timed from" err || fail "$(cat err)"
  grep -q "1 call not in the recording had no recorded call of its API and type (for JPEG, of its kind, scaling and output: pixels or planes) to be timed as: counted as fallback" err ||
    fail "the progressive one: $(cat err)"
  read -r lo mid hi <<<"$(nearest_800x450 rec)"
  python3 - s.json "$lo" "$mid" "$hi" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
lo, mid, hi = map(int, sys.argv[2:5])
assert s["calls_approximated"] == 3 and s["calls_replayed"] == 0, s
assert s["calls_fallback"] == 1 and s["fallback_reasons"]["not_in_trace"] == 1, s
assert s["calls_without_nearest"] == 1, s
assert abs(s["predicted_ns"] - (lo + mid + hi)) <= 1, (s["predicted_ns"], lo, mid, hi)
PY
  "$JD" -scale 1/2 $(files m_base_420) >half.out
  "$STANDIN" replay -t rec --on-miss nearest --summary h.json -- "$JD" -scale 1/2 \
    $(files m_base_420) >rep-half.out
  cmp half.out rep-half.out
  expect_eq "scaled, approximated" 0 "$(json h.json calls_approximated)"
  expect_eq "scaled, fallback" 1 "$(json h.json calls_fallback)"
  "$STANDIN" record -o rhalf -- "$JD" -scale 4/8 $(files c_base_420) >/dev/null
  "$STANDIN" replay -t rhalf --on-miss nearest --summary h2.json -- "$JD" -scale 1/2 \
    $(files m_base_420) >rep-half2.out
  cmp half.out rep-half2.out
  expect_eq "scaled as recorded, approximated" 1 "$(json h2.json calls_approximated)"
  # TurboJPEG: five decodes of a picture not recorded are timed, the one
  # that fails (a scale the library refuses) falls back
  "$STANDIN" record -o rtj -- "$JT" $(files c_base_420 l_base_420) >/dev/null
  "$JT" $(files m_base_420) >tnat.out
  "$STANDIN" replay -t rtj --on-miss nearest --summary t.json -- "$JT" $(files m_base_420) >trep.out
  cmp tnat.out trep.out
  expect_eq "tj approximated" 5 "$(json t.json calls_approximated)"
  expect_eq "tj fallback" 1 "$(json t.json calls_fallback)"
}

# --on-miss nearest times a decode that gives the component planes (raw
# data output; TurboJPEG's YUV functions) only from recorded decodes that
# gave planes, and one that gives pixels only from those that gave pixels:
# the planes skip colour conversion and upsampling.
# A source that hands the library a few bytes a fill, as poppler's
# DCTStream hands it one: replay's drain keeps such pieces without a 0xFF
# out of its scanner until a 0xFF comes, where a marker may end the image.
# Each piece size splits markers, stuffed bytes and restart markers
# differently; rows, warnings and errors must be the native ones, the
# drain must stop at each EOI of a concatenation (the next image is its
# own decode), and a source that fails at the end of a truncated file
# fails where it did natively.
t243_jpeg_source_of_a_few_bytes_a_fill() {
  corpus
  fs=$(files s_base_420_r1 s_prog_444_r0 m_prog_444_r2 s_base_gray_r0 a_arith_420)
  ts=$(files t_base_420 t_prog_444_r2)
  cat $(files s_base_420_r1 s_prog_444_r0 o_prog_422) >concat.jpg
  {
    for n in 1 2 3 7 64 65; do
      echo "$JD -src custom -readsize $n $fs $ts"
    done
    echo "$JD -src custom -readsize 1 -concat concat.jpg"
    echo "$JD -src custom -readsize 2 -eoferr $ts"
  } >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "concatenated images" 3 "$(grep -c '^[^ ]*concat.jpg: .* rows=' nat.out)"
  every_decode_replayed
}

# A truncated image the recording does not hold, read through a suspending
# source that runs out at its end: natively the library returns the rows
# the data holds, then suspends for good and the program gives up. Replay
# waited for the rest of the image to identify it, and the program got no
# row (270 natively). No recorded request starts as this one does (the
# database's rdb_prefix rows), so the decode is a miss at the drain's
# first suspension and the real library decodes it as natively, counted
# as not in the recording. (A truncated copy of a recorded image still
# waits, as the rest may come: only a recording of the truncated one
# answers that, t208.)
# A decode no accelerator would serve is counted by this run, whatever the
# recording holds: one given up of an image the recording does not hold
# (it was counted nowhere: "0 calls"), and the recording's own said only
# where they differ from this run's.
t245_jpeg_not_offloadable_decodes_of_the_run_are_counted() {
  corpus
  "$STANDIN" record -o whole -- "$JD" $(files s_base_420_r1) >/dev/null
  "$STANDIN" record -o stop -- "$JD" -stop 10 $(files s_base_420_r1) >/dev/null
  # an unrecorded image, given up
  "$STANDIN" replay -t whole --summary a.json -- "$JD" -stop 10 $(files o_prog_422) >a.out 2>a.err
  expect_eq "a: ran, missed, replayed" "1 0 0" \
    "$(json a.json calls_not_offloadable_ran) $(json a.json calls_fallback) $(json a.json calls_replayed)"
  grep -q "^standin: replay: 1 call not offloadable (1 ended before its last row) ran for real" a.err ||
    fail "a: $(cat a.err)"
  grep -q "recorded call\|recording holds" a.err && fail "a: the recording holds none: $(cat a.err)"
  # recorded given up, read whole now: served, and the recording's said
  "$STANDIN" replay -t stop --summary b.json -- "$JD" $(files s_base_420_r1) >b.out 2>b.err
  expect_eq "b: ran" 0 "$(json b.json calls_not_offloadable_ran)"
  grep -q "^standin: replay: 1 recorded call was not offloadable (1 ended before its last row)" b.err ||
    fail "b: $(cat b.err)"
  # another mode than recorded: both, each with its reason
  "$STANDIN" replay -t stop --summary c.json -- "$JD" -coef $(files s_base_420_r1) >c.out 2>c.err
  expect_eq "c: ran" "{'jpeg_read_coefficients': 1}" \
    "$(python3 -c 'import json; print(json.load(open("c.json"))["not_offloadable_ran_reasons"])')"
  grep -q "^standin: replay: 1 call not offloadable (1 jpeg_read_coefficients) ran for real" c.err ||
    fail "c: $(cat c.err)"
  grep -q "^standin: replay: the recording holds 1 call not offloadable (1 ended before its last row)" c.err ||
    fail "c: $(cat c.err)"
}

# The time a decode spends in the program's own source callbacks (a source
# that makes its bytes as the library asks: -fillwork busy-waits 100 us a
# fill) is recorded, and the device models keep it: whatif and replay
# predict it on top of the device's time, alike; software's time holds it.
t246_jpeg_source_callback_time_kept_by_device_models() {
  corpus
  f=$(files c_base_420)
  fills=$((($(stat -c %s $f) + 999) / 1000)) # 1000 bytes a fill
  "$STANDIN" record -o rec -- "$JD" -src custom -fillwork 100 $f >rec.out
  read -r src lat <<<"$("$STANDIN" dump rec --format json | python3 -c '
import json, sys
c = [json.loads(l) for l in sys.stdin]
assert len(c) == 1, c
print(c[0]["features"].get("source_ns", 0), c[0]["latency_ns"])')"
  # every fill waited 100 us: a lower bound, whatever the machine's load
  [ "$src" -ge $((fills * 99000)) ] && [ "$src" -le "$lat" ] ||
    fail "source_ns $src for $fills fills of 100 us, of a $lat ns decode"
  "$STANDIN" whatif rec --iface jpeg-core --format json >w.json
  read -r wsrc wpred <<<"$(python3 -c '
import json, sys
p = json.load(open("w.json"))["plans"][0]
a = p["accelerators"][0]
assert p["predicted_ns"] == a["service_ns"] + a["source_ns"] + a["fault_ns"] + a["link_ns"], (p, a)
print(a["source_ns"], p["predicted_ns"])')"
  expect_eq "whatif's source_ns" "$src" "$wsrc"
  "$STANDIN" replay -t rec --iface jpeg-core --summary s.json -- "$JD" -src custom -fillwork 100 $f >rep.out
  cmp rec.out rep.out || fail "replayed output differs"
  expect_eq "replay: source_ns, its API's, predicted" "$src $src $wpred" \
    "$(python3 -c 'import json; s = json.load(open("s.json")); print(s["accelerators"][0]["source_ns"], s["by_api"]["jpeg.decode"]["source_ns"], s["predicted_ns"])')"
  "$STANDIN" replay -t rec --summary sw.json -- "$JD" -src custom -fillwork 100 $f >sw.out
  expect_eq "software: source_ns" 0 \
    "$(python3 -c 'import json; print(json.load(open("sw.json"))["accelerators"][0]["source_ns"])')"
  "$STANDIN" info rec | grep -q "source callbacks took" || fail "info does not say: $("$STANDIN" info rec)"
}

t244_jpeg_unrecorded_truncated_image_from_a_suspending_source() {
  corpus
  "$STANDIN" record -o rec -- "$JD" $(files s_base_420_r1 o_prog_422) >/dev/null
  for src in "suspend" "suspend -chunk 5000" "forget"; do
    echo "$JD -src $src -unread $(files t_base_420 t_prog_444_r2)"
  done >run.sh
  sh run.sh >nat.out
  "$STANDIN" replay -t rec --summary sum.json -- sh run.sh >rep.out 2>rep.err
  cmp nat.out rep.out || fail "replayed output differs: $(diff nat.out rep.out | head -4)"
  expect_eq "rows before the end" 3 "$(grep -c "t_base_420.jpg: error 'Empty input file' after 270 rows" nat.out)"
  expect_eq "misses" "6 6" "$(json sum.json calls_intercepted) $(json sum.json calls_fallback)"
  # a recorded image is still waited for and served whole from such a source
  "$JD" -src suspend $(files o_prog_422 s_base_420_r1) >nat2.out
  "$STANDIN" replay -t rec --summary sum2.json -- "$JD" -src suspend $(files o_prog_422 s_base_420_r1) >rep2.out
  cmp nat2.out rep2.out || fail "recorded images differ"
  expect_eq "served" "2 0" "$(json sum2.json calls_replayed) $(json sum2.json calls_fallback)"
}

t242_jpeg_nearest_tells_planes_from_pixels() {
  corpus
  "$STANDIN" record -o pix -- "$JD" $(files c_base_420 l_base_420) >/dev/null
  "$STANDIN" record -o raw -- "$JD" -raw $(files c_base_420 l_base_420) >/dev/null
  "$JD" -raw $(files m_base_420) >nat-raw.out
  "$JD" $(files m_base_420) >nat-pix.out
  # planes against a recording of pixels, and pixels against one of planes
  "$STANDIN" replay -t pix --on-miss nearest --summary a.json -- "$JD" -raw $(files m_base_420) \
    >a.out 2>a.err
  cmp nat-raw.out a.out
  "$STANDIN" replay -t raw --on-miss nearest --summary b.json -- "$JD" $(files m_base_420) \
    >b.out 2>b.err
  cmp nat-pix.out b.out
  for r in a b; do
    expect_eq "$r: approximated" 0 "$(json $r.json calls_approximated)"
    expect_eq "$r: without nearest" 1 "$(json $r.json calls_without_nearest)"
    grep -q "output: pixels or planes) to be timed as" $r.err || fail "$r: $(cat $r.err)"
  done
  # planes against planes: timed between the two recorded, by pixels
  "$STANDIN" replay -t raw --on-miss nearest --summary c.json -- "$JD" -raw $(files m_base_420) \
    >c.out 2>c.err
  cmp nat-raw.out c.out
  read -r lo mid hi <<<"$(nearest_800x450 raw)"
  python3 - c.json "$mid" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["calls_approximated"] == 1 and s["calls_without_nearest"] == 0, s
assert abs(s["predicted_ns"] - int(sys.argv[2])) <= 1, (s["predicted_ns"], sys.argv[2])
PY
}

# --on-miss nearest groups decodes by restart markers only where the model
# tells them apart: software times an image with markers from recorded ones
# without (and back); jpeg-core, which refuses markers, does not.
t218_jpeg_nearest_across_restart_markers_only_where_the_model_allows() {
  corpus
  "$STANDIN" record -o rec -- "$JD" $(files c_base_420 l_base_420) >/dev/null
  "$JD" $(files s_base_420_r1) >nat.out
  for m in software jpeg-core; do
    "$STANDIN" replay -t rec --iface "$m" --on-miss nearest --summary "$m.json" \
      -- "$JD" $(files s_base_420_r1) >"rep-$m.out" 2>"err-$m"
    cmp nat.out "rep-$m.out" || fail "$m: output differs"
  done
  expect_eq "software, approximated" 1 "$(json software.json calls_approximated)"
  expect_eq "software, fallback" 0 "$(json software.json calls_fallback)"
  expect_eq "jpeg-core, approximated" 0 "$(json jpeg-core.json calls_approximated)"
  expect_eq "jpeg-core, fallback" 1 "$(json jpeg-core.json calls_fallback)"
  # the other way: recorded with markers, replayed without
  "$STANDIN" record -o rec1 -- "$JD" $(files s_base_420_r1) >/dev/null
  "$JD" $(files m_base_420) >nat1.out
  "$STANDIN" replay -t rec1 --on-miss nearest --summary s1.json -- "$JD" $(files m_base_420) \
    >rep1.out 2>err1
  cmp nat1.out rep1.out
  expect_eq "software, from markers, approximated" 1 "$(json s1.json calls_approximated)"
  # a model that counts occurrences (table) is not asked twice: no stand-in
  "$STANDIN" replay -t rec --iface table:trace=rec --on-miss nearest --summary tb.json \
    -- "$JD" $(files s_base_420_r1) >rep-tb.out 2>err-tb
  cmp nat.out rep-tb.out
  expect_eq "table, approximated" 0 "$(json tb.json calls_approximated)"
}

t210_jpeg_several_images_per_object_and_abbreviated_streams() {
  corpus
  fs=$(files $SMALL)
  cat $(files s_base_420_r1 s_prog_444_r0 o_prog_422) >concat.jpg
  # split a baseline file into a tables-only datastream and an abbreviated image
  python3 - "$CORPUS/s_base_422_r0.jpg" <<'EOF'
import sys
d = open(sys.argv[1], 'rb').read()
i, tables, image = 2, b'', d[:2]
while d[i + 1] != 0xDA:
    n = int.from_bytes(d[i + 2:i + 4], 'big')
    seg = d[i:i + 2 + n]
    if d[i + 1] in (0xC4, 0xDB):
        tables += seg
    else:
        image += seg
    i += 2 + n
open('tables.jpg', 'wb').write(b'\xff\xd8' + tables + b'\xff\xd9')
open('abbrev.jpg', 'wb').write(image + d[i:])
EOF
  {
    echo "$JD -one $fs"
    echo "$JD -one -src suspend -chunk 2000 $fs"
    echo "$JD -src mem -concat concat.jpg"
    echo "$JD -tables tables.jpg abbrev.jpg"
    echo "$JD -tables tables.jpg -src suspend -chunk 500 abbrev.jpg"
    # the abbreviated image decoded with the tables a complete one left on
    # the object: its request does not hold them, so it is not offloadable
    # (another image before it would leave others: t224)
    echo "$JD -one $CORPUS/s_base_422_r0.jpg abbrev.jpg"
  } >run.sh
  jpeg_same run.sh
  grep -q "tables read" nat.out || fail "no tables: $(cat nat.out)"
  every_decode_replayed
  # info says which processes' decodes kept their rows: the two that
  # decode abbreviated images after tables-only datastreams, not the others
  "$STANDIN" info rec >info.out
  expect_eq "processes with rows kept" 2 "$(grep -c ' kept \(its\|their\) output rows' info.out)"
  grep -q "tables left by an earlier image" info.out || fail "$(cat info.out)"
}

t211_jpeg_replay_under_valgrind() {
  command -v valgrind >/dev/null || { echo "no valgrind: skipped"; return 0; }
  [ -z "${STANDIN_SANITIZER:-}" ] || { echo "valgrind under a sanitizer: skipped"; return 0; }
  corpus
  fs=$(files s_base_420_r1 s_prog_444_r0 t_base_420)
  cmds=("$JD -src stdio $fs" "$JD -src suspend -quant 16 $fs" "$JD -src custom -eoferr $fs"
    "$JD -strict $fs" "$JD -crop 16,64 -src mem $fs" "$JT $(files s_base_420_r1 o_prog_422)")
  printf '%s\n' "${cmds[@]}" >run.sh
  printf 'valgrind -q --error-exitcode=9 %s || echo "valgrind: $?"\n' "${cmds[@]}" >vg.sh
  sh run.sh >nat.out 2>nat.err
  "$STANDIN" record -o rec -- sh run.sh >/dev/null 2>&1
  "$STANDIN" replay -t rec --summary sum.json -- sh vg.sh >rep.out 2>rep.err
  cmp nat.out rep.out || fail "output under valgrind differs: $(diff nat.out rep.out | head)"
  grep -v '^standin: ' rep.err | cmp - nat.err || fail "valgrind: $(cat rep.err)"
}

t212_jpeg_pil_incremental_decoder() {
  $PYSYS -c 'import PIL' 2>/dev/null || { echo "no python3-pil: skipped"; return 0; }
  corpus
  cat >pil.py <<'EOF'
import hashlib, io, sys
from PIL import Image
for p in sys.argv[1:]:
    im = Image.open(p)
    im.load()
    print(p, im.size, im.mode, hashlib.md5(im.tobytes()).hexdigest())
    im = Image.open(p)
    im.draft("RGB", (im.size[0] // 2, im.size[1] // 2))
    im.load()
    print(p, "draft", im.size, hashlib.md5(im.tobytes()).hexdigest())
    im = Image.open(io.BytesIO(open(p, "rb").read())).convert("L")
    print(p, "L", hashlib.md5(im.tobytes()).hexdigest())
EOF
  echo "$PYSYS pil.py $(files $SMALL a_arith_420 l_base_420 l_prog_422)" >run.sh
  jpeg_same run.sh
  every_decode_replayed
}

t213_jpeg_trace_features_and_types() {
  corpus
  "$STANDIN" record -o rec -- "$JD" -scale 1/2 $(files s_prog_422_r1 o_base_420) >/dev/null
  "$STANDIN" dump rec --format json >d.json
  python3 - d.json <<'EOF'
import json, sys
a, b = [json.loads(l) for l in open(sys.argv[1])]
assert a["api"] == "jpeg.decode" and a["type"] == "progressive 4:2:2", a
f = a["features"]
# restart every MCU row: 320 / 16 = 20 MCUs
assert (f["width"], f["height"], f["components"], f["subsampling"], f["progressive"],
        f["restart"]) == (320, 240, 3, 3, 1, 20), f
assert (f["out_pixels"], f["out_bytes"], f["scale_num"], f["scale_denom"]) == \
    (160 * 120, 160 * 120 * 3, 1, 2), f
assert a["resp_len"] == f["out_bytes"] and a["result"] == 120, a
g = b["features"]
assert b["type"] == "baseline 4:2:0" and (g["width"], g["height"], g["restart"]) == (333, 177, 0), b
assert g["out_pixels"] == 167 * 89 and g["input_bytes"] + 80 == b["req_len"], b
EOF
}

# A recorded request is a decodable JPEG (traces/FORMAT.md): offline tools can
# decode it again. The trace is read by a minimal reader written from the spec.
# The request blob alone decodes to the response. With --keep-pixels the
# response blob is the rows; by default it is their digest (jpeg_req.h),
# from which replay rebuilds them (the other tests replay such recordings).
t214_jpeg_request_blob_decodes_to_the_response() {
  corpus
  "$STANDIN" record -o dig -- djpeg -outfile nat.ppm $(files c_base_420) 2>/dev/null
  "$STANDIN" record --keep-pixels -o rec -- djpeg -outfile nat.ppm $(files c_base_420) 2>/dev/null
  for r in dig rec; do
    python3 - $r/*.trace >$r.txt <<'PY'
import struct, sys, zlib

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i

d = open(sys.argv[1], "rb").read()
off = 28 + struct.unpack_from("<I", d, 16)[0]
blobs, calls = {}, []
while off + 32 <= len(d) and d[off:off + 4] == b"STCK":
    ctype, method = d[off + 4], d[off + 5]
    clen, rlen, nrec = struct.unpack_from("<III", d, off + 12)
    body = d[off + 32:off + 32 + clen]
    off += 32 + clen
    if ctype != 1:
        break
    raw = zlib.decompress(body) if method == 1 else body
    i = 0
    for _ in range(nrec):
        kind = raw[i]
        n, i = varint(raw, i + 1)
        rec, i = raw[i:i + n], i + n
        if kind == 2:
            bid, j = varint(rec, 0)
            blen, j = varint(rec, j)
            blobs[bid] = rec[j:j + blen]
        elif kind == 1:
            j = 2
            for _ in range(7):  # reason thread type site seq start latency
                _, j = varint(rec, j)
            j += 16  # fp
            req, j = varint(rec, j)
            resp, j = varint(rec, j)
            _, j = varint(rec, j)  # req_len
            resp_len, j = varint(rec, j)
            calls.append((rec[0], rec[1], req, resp, resp_len))
(api, flags, req, resp, resp_len), = calls
assert api == 16, api
blob = blobs[req]
assert blob[:4] == b"SJR1", blob[:4]
hl = struct.unpack_from("<I", blob, 4)[0]
open("request.jpg", "wb").write(blob[hl:])
r = blobs[resp]
if r[:4] == b"SJD1":  # a digest: flagged, 24 bytes, rows of the image
    row_bytes, rows = struct.unpack_from("<II", r, 4)
    assert flags & 8 and len(r) == 24 and (row_bytes, rows) == (3 * 320, 240), (flags, r)
    assert resp_len == row_bytes * rows, resp_len
    print("digest")
else:
    assert not flags & 8 and resp_len == len(r), (flags, resp_len, len(r))
    open("response.raw", "wb").write(r)
    print("rows")
PY
  done
  expect_eq "default response" digest "$(cat dig.txt)"
  "$STANDIN" info dig | grep -q "1 decode kept a digest of its output (225.0 KiB in all)" ||
    fail "info does not say so: $("$STANDIN" info dig)"
  ! "$STANDIN" info rec | grep -q "digest" || fail "info speaks of digests for --keep-pixels"
  expect_eq "--keep-pixels response" rows "$(cat rec.txt)"
  djpeg -outfile again.ppm request.jpg
  n=$(stat -c %s response.raw)
  tail -c "$n" again.ppm | cmp - response.raw
  tail -c "$n" nat.ppm | cmp - response.raw
  # the comment and the extra APP2 segment are not part of the request
  [ "$(stat -c %s request.jpg)" -lt "$(stat -c %s "$CORPUS/c_base_420.jpg")" ] || fail "not normalised"
}

# not_rebuilt TAG DIGESTS REPLAYED PROGRAM FILE...: record PROGRAM, make
# every digest in a copy of the recording name other rows, and replay both:
# the copy warns that DIGESTS decodes could not be rebuilt and runs them for
# real; the untouched recording replays REPLAYED calls; outputs are native's.
not_rebuilt() {
  local tag=$1 n=$2 all=$3
  shift 3
  "$@" >$tag.nat
  "$STANDIN" record -o $tag.rec -- "$@" >/dev/null
  mkdir $tag.lie
  python3 "$JPEG_E2E/tamper_trace.py" $tag.rec/*.trace $tag.lie/"$(basename $tag.rec/*.trace)" 0 \
    --jpeg-digest
  "$STANDIN" replay -t $tag.lie --summary $tag.sum -- "$@" >$tag.out 2>$tag.err
  cmp $tag.nat $tag.out || fail "$tag: replayed output differs"
  grep -q "$n recorded JPEG decodes could not be rebuilt.*differ from the recorded ones" $tag.err ||
    fail "$tag: no warning: $(cat $tag.err)"
  expect_eq "$tag: fallback, no response" "$n" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fallback_reasons"]["no_response"])' $tag.sum)"
  "$STANDIN" replay -t $tag.rec --summary $tag.sum2 -- "$@" >$tag.out2 2>$tag.err2
  cmp $tag.nat $tag.out2 || fail "$tag: replayed output differs (untouched)"
  ! grep -q "could not be rebuilt" $tag.err2 || fail "$tag: untouched recording warned"
  expect_eq "$tag: replayed untouched" "$all" "$(json $tag.sum2 calls_replayed)"
}

# A recording whose rows the libjpeg here does not give back (another build,
# or a damaged digest): the database build says so, naming why, and replay
# runs those decodes for real, with the same output.
t216_jpeg_rows_not_rebuilt_fall_back() {
  corpus
  not_rebuilt libjpeg 2 2 "$JD" $(files c_base_420 s_prog_444_r0)
  # a decode the model keeps in software needs no rows: counted in software,
  # not as a fallback (jpeg-core serves no progressive JPEG)
  "$STANDIN" replay -t libjpeg.lie --iface jpeg=jpeg-core --summary core.sum \
    -- "$JD" $(files c_base_420 s_prog_444_r0) >core.out 2>core.err
  cmp libjpeg.nat core.out || fail "jpeg-core: replayed output differs"
  expect_eq "jpeg-core: in software, fallback" "1 1" \
    "$(json core.sum calls_software) $(json core.sum calls_fallback)"
  # TurboJPEG keeps digests too: rgb, bgrx/2, tjDecompress, yuv, yuv planes
  # (and a call that fails, answered from the recording as failed)
  not_rebuilt tj 5 6 "$JT" $(files s_base_420_r1)
}

# Where the decoder leaves its rows (placement.h): every decode carries the
# share of its output lines found outside the caches (how large is the
# machine's and libjpeg-turbo's business, not asserted), and replay delivers
# exactly that share of the rows to memory: all with deliver=memory, none
# with deliver=cache, as many bytes as the rows it copied.
t215_jpeg_output_placement_measured_and_delivered() {
  corpus
  set -- $(files c_base_420 s_prog_422_r1 l_base_420)
  "$JD" "$@" >nat.out
  "$STANDIN" record -o rec -- "$JD" "$@" >rec.out
  cmp nat.out rec.out
  "$STANDIN" export rec --format csv >calls.csv
  python3 - calls.csv <<'PY' >rows.txt
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 3, rows
for r in rows:
    v = int(r["out_cold_permille"])
    assert 0 <= v <= 1000, r
print(sum(int(r["out_bytes"]) for r in rows))
PY
  total=$(cat rows.txt)
  # info says what share the decoder left in memory, when it is not noise
  "$STANDIN" info rec >info.txt
  python3 - calls.csv info.txt <<'PY'
import csv, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out = sum(int(r["out_bytes"]) for r in rows)
cold = sum(int(r["out_bytes"]) * int(r["out_cold_permille"]) / 1000 for r in rows)
m = re.search(r"the decoder left (\d+)% of its", open(sys.argv[2]).read())
if cold >= 0.01 * out:
    assert m and int(m.group(1)) == round(100 * cold / out), (m, cold, out)
else:
    assert not m, m
PY
  for how in memory cache recorded; do
    "$STANDIN" replay -t rec --iface "jpeg=software:deliver=$how" --summary s-$how.json \
      -- "$JD" "$@" >rep-$how.out
    cmp nat.out rep-$how.out
    expect_eq "$how: replayed" 3 "$(json s-$how.json calls_replayed)"
  done
  expect_eq "bytes to memory, deliver=memory" "$total" "$(json s-memory.json bytes_to_memory)"
  # rows copied in later calls are harness time, covered by what the
  # decode's spin kept back for them (t232); past that, owed like an
  # overrun and paid back by later decodes
  python3 - s-memory.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["repaid_ns"] + s["debt_ns"] == s["overrun_ns"] + s["spin_stopped_owed_ns"], s
# (no spin is asserted: under ASan the harness outlasts these decodes)
assert s["harness_ns"] > 0, s
PY
  expect_eq "bytes to memory, deliver=cache" 0 "$(json s-cache.json bytes_to_memory)"
  [ "$(json s-recorded.json bytes_to_memory)" -le "$total" ] || fail "more than the rows"
  # a model with no recording of its own delivers to the caches unless told
  "$STANDIN" replay -t rec --iface jpeg=constant:ns=1000 --summary s-c.json -- "$JD" "$@" >/dev/null
  expect_eq "constant model" 0 "$(json s-c.json bytes_to_memory)"
  "$STANDIN" replay -t rec --iface jpeg=constant:ns=1000,deliver=memory --summary s-cm.json \
    -- "$JD" "$@" >/dev/null
  expect_eq "constant model, deliver=memory" "$total" "$(json s-cm.json bytes_to_memory)"
  # a table takes the placement its own recording measured
  "$STANDIN" replay -t rec --iface jpeg=table:trace=rec --summary s-t.json -- "$JD" "$@" >/dev/null
  expect_eq "table" "$(json s-recorded.json bytes_to_memory)" "$(json s-t.json bytes_to_memory)"
  set +e
  "$STANDIN" replay -t rec --iface jpeg=software:deliver=disk -- "$JD" "$@" >/dev/null 2>bad.err
  rc=$?
  set -e
  expect_eq "bad deliver= status" 2 "$rc"
  grep -q "deliver=disk: say cache, memory or recorded" bad.err || fail "$(cat bad.err)"
  # TurboJPEG: the same, over the caller's buffer
  "$JT" "$@" >tnat.out
  "$STANDIN" record -o tj -- "$JT" "$@" >/dev/null
  "$STANDIN" export tj --format csv >tj.csv
  ttotal=$(python3 -c 'import csv, sys; r = list(csv.DictReader(open(sys.argv[1]))); assert all(0 <= int(x["out_cold_permille"]) <= 1000 for x in r); print(sum(int(x["out_bytes"]) for x in r))' tj.csv)
  for how in memory cache; do
    "$STANDIN" replay -t tj --iface "tj.decode=software:deliver=$how" --summary t-$how.json \
      -- "$JT" "$@" >trep-$how.out
    cmp tnat.out trep-$how.out
  done
  expect_eq "tj: bytes to memory, deliver=memory" "$ttotal" "$(json t-memory.json bytes_to_memory)"
  expect_eq "tj: bytes to memory, deliver=cache" 0 "$(json t-cache.json bytes_to_memory)"
}

# A timing run's decode takes the place of the recorded one only when it
# decoded the same image: the same output size and components (libjpeg), the
# same compressed size (TurboJPEG). A grey image of the same size gave a
# colour decode its time, paired by rows alone.
t222_retime_pairs_a_decode_only_with_the_same_image() {
  corpus
  local api prog other
  for api in jpeg.decode tj.decode; do
    prog=$JD other=s_base_gray_r0
    [ $api = jpeg.decode ] || prog=$JT other=s_base_444_r0
    ln -sf "$CORPUS/s_base_420_r0.jpg" cur.jpg
    "$STANDIN" record --retime=2 -f -o rec -- \
      sh -c "'$prog' cur.jpg >/dev/null; ln -sf '$CORPUS/$other.jpg' cur.jpg" 2>err
    grep -q "retime: none of the .* calls could be retimed" err || fail "$api, other image: $(cat err)"
    ln -sf "$CORPUS/s_base_420_r0.jpg" cur.jpg
    "$STANDIN" record --retime=2 -f -o rec -- "$prog" cur.jpg >/dev/null 2>err
    grep -q "retime: $(calls rec $api) of $(calls rec $api) calls retimed" err ||
      fail "$api, same image: $(cat err)"
  done
}

# A program without libprotobuf-c that writes over its arguments (vips's
# GOption, setproctitle): the timing run's shim looked protobuf-c up in its
# destructor, and the loader, finalising, ran the shim's constructor again
# on that dlopen, which took the rewritten argv. No timing run matched the
# recording's command line: nothing was retimed.
t223_retime_a_program_that_rewrites_its_argv() {
  corpus
  # jpegbench (libjpeg alone), its first argument written over first
  cat >title.c <<EOF
#include <string.h>
#define main bench_main
#include "$(dirname "$B")/bench/jpegbench.c"
#undef main
int main(int argc, char **argv) {
  memset(argv[1], '*', strlen(argv[1])); /* as setproctitle does */
  char *a[] = {argv[0], argv[2], argv[3], NULL};
  return bench_main(3, a);
}
EOF
  gcc -o title title.c -ljpeg
  ldd ./title | grep -q protobuf && fail "linked with libprotobuf-c"
  "$STANDIN" record --retime=1 -o rec -- ./title -x "$CORPUS/s_base_420_r0.jpg" 1 >out 2>err
  grep -q "retime: 4 of 4 calls retimed" err || fail "$(cat err)"
}

# A timing run (record --retime) times calls and keeps nothing else: no call
# stacks, so it neither unwinds nor loads libunwind (nor maps a ring), JPEG
# decodes included, whose header hook took the stack before the decode's
# clock starts. The loader's log (LD_DEBUG=files) says which processes
# initialised libunwind: the recording run only, not its two timing runs.
t219_jpeg_timing_runs_take_no_stacks() {
  corpus
  LD_DEBUG=files LD_DEBUG_OUTPUT=$PWD/ld "$STANDIN" record --retime=2 -o rec -- \
    "$JD" "$CORPUS/c_base_420.jpg" >/dev/null || fail "record failed"
  expect_eq "runs" 3 "$(grep -l 'initialize program: .*/jpegdec' ld.* | wc -l)"
  expect_eq "runs that loaded libunwind" 1 "$(grep -l 'calling init: .*libunwind' ld.* | wc -l)"
  expect_eq "decodes" 1 "$(calls rec jpeg.decode)"
  "$STANDIN" dump rec --format json | grep -q '"module":"[^"]*/jpegdec"' || fail "no call site recorded"
}

# An abbreviated image (no DQT) decoded after a full one on the same object
# uses the tables that one left. Its request holds only its own bytes, so
# a replay that came to it after another image answered it with the rows of
# the recorded predecessor's tables; and one recording holding both got the
# first answer for the second. Such a decode is now not offloadable
# (record and replay see the same on the object), and a request recorded
# with two different answers answers nothing.
t224_jpeg_tables_an_earlier_image_left_are_not_replayed() {
  corpus
  local a="$CORPUS/m_base_420.jpg"
  djpeg "$a" | cjpeg -quality 20 >B.jpg
  python3 - "$a" <<'PY'
import sys
d = open(sys.argv[1], 'rb').read()      # S.jpg: A without its DQT segments
o, i = bytearray(d[:2]), 2
while True:
    m = d[i + 1]
    if m == 0xDA:
        o += d[i:]
        break
    n = d[i + 2] << 8 | d[i + 3]
    if m != 0xDB:
        o += d[i:i + 2 + n]
    i += 2 + n
open('S.jpg', 'wb').write(o)
PY
  "$STANDIN" record -o rec -- "$JD" -one "$a" S.jpg >/dev/null
  "$STANDIN" info rec | grep -q "tables left by an earlier image" || fail "$("$STANDIN" info rec)"
  "$JD" -one B.jpg S.jpg >native.out
  "$STANDIN" replay -t rec --summary s.json -- "$JD" -one B.jpg S.jpg >rep.out 2>/dev/null
  cmp native.out rep.out || fail "S took the recorded predecessor's tables: $(diff native.out rep.out)"
  # one recording, S after each of two images: two answers for one request
  "$STANDIN" record -f -o rec --keep-pixels -- "$JD" -one "$a" S.jpg B.jpg S.jpg >/dev/null
  "$JD" -one "$a" S.jpg B.jpg S.jpg >native.out
  "$STANDIN" replay -t rec -- "$JD" -one "$a" S.jpg B.jpg S.jpg >rep.out 2>/dev/null
  cmp native.out rep.out
}

# What a served decode does when the program steps outside plain reading,
# recorded without and replayed with (the recorded decode served):
# - looping on jpeg_consume_input until jpeg_input_complete after the last
#   row hung: the input controller stayed where the starved start left it;
# - jpeg_crop_scanline after rows started a real decode over and took the
#   crop (240 rows again) where the library refuses (state 205);
# - jpeg_skip_scanlines with two-pass quantisation was emulated where the
#   library refuses it.
t225_jpeg_served_decodes_answer_consume_crop_and_skip_as_the_library() {
  corpus
  local f="$CORPUS/s_base_420_r0.jpg" p="$CORPUS/s_prog_444_r0.jpg" opts
  "$STANDIN" record -o rec -- "$JD" "$f" "$p" >/dev/null
  "$STANDIN" record -o recq -- "$JD" -quant 16 "$f" >/dev/null
  for opts in "-untilcomplete" "-latecrop" "-quant 16 -skip 20"; do
    local r=rec
    [ "$opts" = "-quant 16 -skip 20" ] && r=recq
    # shellcheck disable=SC2086
    "$JD" $opts "$f" "$p" >native.out 2>&1 || true
    # shellcheck disable=SC2086
    timeout 60 "$STANDIN" replay -t $r --summary s.json -- "$JD" $opts "$f" "$p" >rep.out 2>/dev/null ||
      true
    cmp native.out rep.out || fail "$opts: $(diff native.out rep.out)"
    [ "$(json s.json calls_replayed)" -ge 1 ] || fail "$opts: nothing served"
  done
}

# A restart marker inside the data of a scan that has no restart interval
# (a corrupt byte became FF before D4): libjpeg's decoder stops there, gives
# the remaining rows from no data ("premature end of data segment"), and
# reads the rest only in jpeg_finish_decompress. A program that reads every
# row and aborts without finishing (libvips) was recorded with the data up
# to the marker, but replay drains to EOI and kept the marker and every byte
# after it: the request differed, and every such decode ran for real as
# "not in the recording". Both now end the scan's data at the marker, with
# every source, finished or not.
t226_jpeg_restart_marker_without_interval_is_served() {
  corpus
  python3 - "$CORPUS/s_base_420_r0.jpg" rst.jpg "$CORPUS/s_prog_444_r0.jpg" rstp.jpg <<'PY'
import sys
for src, dst in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    b = bytearray(open(src, "rb").read())
    assert b.find(b"\xff\xdd") < 0  # no restart interval
    i = b.find(b"\xff\xda")
    start = i + 2 + int.from_bytes(b[i + 2:i + 4], "big")
    p = start + (len(b) - start) // 3
    b[p:p + 2] = b"\xff\xd4"
    open(dst, "wb").write(bytes(b))
PY
  for src in stdio mem custom suspend; do
    echo "$JD -src $src -nofinish rst.jpg rstp.jpg"
  done >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "warned" 8 "$(grep -c 'rows=240 .* warnings=[1-9]' nat.out)"
  expect_eq "decodes" 8 "$(calls rec jpeg.decode)"
  expect_eq "replayed" "8 0" "$(json sum.json calls_replayed) $(json sum.json calls_fallback)"
  # finished or not, the request is the same: a program that finishes is
  # answered from one that did not, and the other way round
  "$STANDIN" replay -t rec --on-miss abort --summary fin.json -- "$JD" rst.jpg >fin.out 2>/dev/null
  "$JD" rst.jpg | cmp - fin.out
  expect_eq "finished, replayed" 1 "$(json fin.json calls_replayed)"
  "$STANDIN" record -o recfin -- "$JD" -src mem rst.jpg >/dev/null 2>&1
  "$STANDIN" replay -t recfin --on-miss abort --summary nofin.json -- "$JD" -src mem -nofinish rst.jpg \
    >nofin.out 2>/dev/null
  "$JD" -src mem -nofinish rst.jpg | cmp - nofin.out
  expect_eq "not finished, replayed" 1 "$(json nofin.json calls_replayed)"
}

# A marker libjpeg accepts inside the data of a scan (corrupt data: APP0,
# COM, a table, a second SOS) stops its decoder there; the remaining rows
# come from no data, and only jpeg_finish_decompress reads on (and may fail
# on the bogus segment). The request is the data up to the marker. Replay's
# drain read the marker as a segment with a garbage length: a suspending
# source was asked for bytes past the end of the file, and the program got
# no rows (gdk-pixbuf-thumbnailer failed: "too few scanlines"); other
# sources drained past it, and a second SOS's data then made the request
# differ (not in the recording). A decode with one scan is now looked up by
# its data up to that marker too.
t227_jpeg_marker_inside_a_scan_stops_the_drain_there() {
  corpus
  python3 - "$CORPUS/s_base_420_r0.jpg" <<'PY'
import sys
src = open(sys.argv[1], "rb").read()
i = src.find(b"\xff\xda")
start = i + 2 + int.from_bytes(src[i + 2:i + 4], "big")
p = start + (len(src) - start) // 3
# each at its own place: images the same up to the marker are one request
for k, m in enumerate((0xE0, 0xFE, 0xC4, 0xDB, 0xDA)):
    b = bytearray(src)
    b[p + 97 * k:p + 97 * k + 2] = bytes([0xFF, m])
    open("m%02x.jpg" % m, "wb").write(bytes(b))
PY
  for src in stdio mem custom suspend forget; do
    echo "$JD -src $src -nofinish me0.jpg mfe.jpg mc4.jpg mdb.jpg mda.jpg"
  done >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "rows" 25 "$(grep -c 'rows=240 .* warnings=1$' nat.out)"
  expect_eq "replayed" "25 0" "$(json sum.json calls_replayed) $(json sum.json calls_fallback)"
  # finished: the library reads the bogus segment, and fails on some
  mkdir fin && cd fin
  for src in stdio mem suspend; do
    echo "$JD -src $src ../me0.jpg ../mfe.jpg ../mc4.jpg ../mdb.jpg ../mda.jpg"
  done >run.sh
  jpeg_same run.sh --on-miss abort
  grep -q "mda.jpg: error 'Bogus marker length' after 240 rows" nat.out || fail "mda: $(cat nat.out)"
  expect_eq "finished, replayed" "$(json sum.json calls_intercepted) 0" \
    "$(json sum.json calls_replayed) $(json sum.json calls_fallback)"
  # whole images with a comment after their scan, back to back in one
  # suspending source: one served when its scan's data is in, before the
  # comment and EOI are, must have them read by jpeg_finish_decompress, or
  # the next jpeg_read_header starts inside the comment
  cd .. && mkdir cat && cd cat
  python3 - "$CORPUS/s_base_420_r0.jpg" "$CORPUS/s_base_444_r0.jpg" <<'PY'
import sys
a, b = (open(f, "rb").read() for f in sys.argv[1:3])
def trail(x, n):
    return x[:-2] + b"\xff\xfe" + (n + 2).to_bytes(2, "big") + b"c" * n + b"\xff\xd9"
open("cat.jpg", "wb").write(trail(a, 3000) + trail(b, 3000) + trail(a, 100))
PY
  for src in suspend forget; do
    echo "$JD -src $src -chunk 500 -concat cat.jpg"
  done >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "images" 6 "$(grep -c 'rows=240 .* warnings=0$' nat.out)"
  expect_eq "concatenated, replayed" "6 0" "$(json sum.json calls_replayed) $(json sum.json calls_fallback)"
}

# A decode the program gives up is recorded not offloadable; but when the
# recording also holds the same image decoded whole (mupdf decodes a page's
# images again for each band and gives them up after the band's rows), a
# given-up decode is found by its drained request as the whole image. It
# used to be served, timed as the whole image; the recording now keeps
# which occurrences of the image were given up, and replay runs those for
# real (software_reasons: abandoned), from every process. A decode served
# and then given up (one the recording holds whole at that point) is still
# counted: calls_served_given_up.
t228_jpeg_served_decodes_given_up_are_counted() {
  corpus
  local f="$CORPUS/m_base_420.jpg"
  {
    echo "$JD -stop 8 $f"
    echo "$JD -src mem -stop 8 $f"
    echo "$JD $f"
  } >run.sh
  jpeg_same run.sh
  expect_eq "given up, recorded" 2 "$("$STANDIN" dump rec | grep -c NOT-OFFLOADABLE)"
  expect_eq "served, run for real as given up, served given up" "3 1 2 0" \
    "$(json sum.json calls_intercepted) $(json sum.json calls_replayed) $(pyj sum.json 'd["software_reasons"]["abandoned"]') $(json sum.json calls_served_given_up)"
  expect_eq "recorded given up, of whole images" "2 0" \
    "$(pyj sum.json 'd["given_up_recorded"]["of_whole_images"]') $(pyj sum.json 'd["given_up_recorded"]["alone"]')"
  grep -q "^standin: replay: 2 decodes of an image the recording holds decoded whole ran for real, as they were given up at that point when recorded (software_reasons: abandoned)" rep.err ||
    fail "not said: $(grep '^standin:' rep.err)"
  grep -q "given up by the program before" rep.err && fail "said served: $(grep '^standin:' rep.err)"
  # a program that gives up where the recording decoded whole: served, said
  "$JD" -stop 8 "$f" >nat2.out
  "$STANDIN" replay -t rec --summary gave.json -- "$JD" -stop 8 "$f" >rep2.out 2>rep2.err
  cmp nat2.out rep2.out || fail "given up, replayed output differs"
  "$STANDIN" record -o whole -- "$JD" "$f" >/dev/null 2>&1
  "$STANDIN" replay -t whole --summary gave.json -- "$JD" -stop 8 "$f" >rep3.out 2>rep3.err
  cmp nat2.out rep3.out || fail "given up, replayed from a whole decode, output differs"
  expect_eq "served, given up" "1 1" \
    "$(json gave.json calls_replayed) $(json gave.json calls_served_given_up)"
  grep -q "^standin: replay: 1 replayed decode was given up by the program before its last row; it took the whole image's time" rep3.err ||
    fail "not said: $(grep '^standin:' rep3.err)"
  "$STANDIN" replay -t whole --summary whole.json -- "$JD" "$f" >/dev/null 2>whole.err
  expect_eq "none given up" 0 "$(json whole.json calls_served_given_up)"
  grep -q "given up" whole.err && fail "said without cause: $(cat whole.err)"
  true
}

# Which occurrences of an image the recording holds given up, in the
# recorded order (the k-th decode of a request takes the k-th recorded
# occurrence): given up then whole, whole then given up, on one object, on
# A served libjpeg decode spins once, then hands out its rows in later
# calls: that time is kept back from the spin, so it is no overrun of its
# own (every such decode overran by it before, and a program's last decode
# had no later slack to pay it back: djpeg of a 1920x1080 image replayed 2
# ms long). What the rows did not use is spun after the last one, and what
# the end did not as the decode ends, whether the program finishes or
# aborts.
t232_jpeg_rows_served_after_the_spin_are_no_overrun() {
  corpus
  local a="$CORPUS/s_base_420_r0.jpg" args
  for args in "-lines 1" "-lines 1 -nofinish" "-src mem"; do
    rm -rf rec
    echo "$JD -repeat 8 $args $a" >run.sh
    jpeg_same run.sh --iface constant:ns=5000000
    expect_eq "$args: served" 8 "$(json sum.json calls_replayed)"
    # the first decode's estimate is a guess (its response's pages fault
    # in, and a sanitizer's build copies slower), the later ones use what
    # it took; a preemption while rows are served overruns too, and the
    # ASan pass of make check beside another test met several: up to three
    # replays, each miss shown (before, every decode overran, every time)
    local try over=""
    for try in 1 2 3; do
      [ "$try" = 1 ] || "$STANDIN" replay -t rec --iface constant:ns=5000000 --summary sum.json \
        -- sh run.sh >/dev/null 2>&1
      over=$(pyj sum.json 'd["by_api"]["jpeg.decode"]["overruns"]')
      [ "$over" -gt 3 ] || break
      echo "$args, replay $try: $over of 8 decodes overran"
    done
    expect_eq "$args: most decodes without an overrun, in one of three replays" True \
      "$([ "$over" -le 3 ] && echo True || echo False)"
    # the modelled time is spent: each decode's spin and harness add up
    # to its 5 ms, less what it owed
    expect_eq "$args: spun" True \
      "$(pyj sum.json 'd["spin_ns"] + d["harness_ns"] + d["overrun_ns"] >= 8 * 5000000 - d["repaid_ns"] - 8 * 1000')"
  done
}

# two objects whose decodes interleave (-pair 1: the first reads a row, the
# second runs whole, the first reads on), and across two images. Each
# given-up one runs for real, each whole one is served; none is served and
# then given up, and none run for real reads every row (which a swapped
# order would show).
t229_jpeg_given_up_occurrences_run_for_real_in_order() {
  corpus
  local a="$CORPUS/m_base_420.jpg" b="$CORPUS/s_base_420_r1.jpg" c
  # case: jpegdec arguments | decodes, served, given up (run for real)
  while IFS='|' read -r args want; do
    c=$((${c:-0} + 1))
    mkdir "c$c"
    cd "c$c"
    echo "$JD $args" >run.sh
    jpeg_same run.sh --on-miss abort
    expect_eq "$args: intercepted, served, run for real, fallback, served given up, read whole" \
      "$want 0 0 0" \
      "$(json sum.json calls_intercepted) $(json sum.json calls_replayed) $(pyj sum.json 'd["software_reasons"]["abandoned"]') $(json sum.json calls_fallback) $(json sum.json calls_served_given_up) $(json sum.json calls_given_up_read_whole)"
    expect_eq "$args: kept, recorded given up" "$(echo "$want" | cut -d' ' -f3) 0" \
      "$(pyj sum.json 'd["given_up_recorded"]["of_whole_images"]') $(pyj sum.json 'd["given_up_recorded"]["alone"]')"
    cd ..
  done <<EOF2
-stops 8,0 $a $a|2 1 1
-stops 0,8 $a $a|2 1 1
-src mem -stops 8,0,8,0 $a $a $a $a|4 2 2
-stops 16,0,8 -lines 1 $a $a $a|3 1 2
-pair 1 -stops 8,0 $a $a|2 1 1
-pair 1 -stops 0,8 $a $a|2 1 1
-pair 1 -stops 8,0,0,8,0,0 $a $b $b $a $a $b|6 4 2
-pair 1 -stops 0,8,8,0 $a $a $b $b|4 2 2
EOF2
  # The order is the order of the decodes' first calls when recorded, and
  # of their first rows in replay (where a decode is identified): two
  # objects that read their headers in one order and their first rows in
  # the other (-pair 0) take each other's occurrences. Their rows are
  # right; the whole decode ran for real and the given-up one was served,
  # both counted and said.
  mkdir swapped
  cd swapped
  echo "$JD -pair 0 -stops 8,0 $a $a" >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "swapped: served, run for real, served given up, read whole" "1 1 1 1" \
    "$(json sum.json calls_replayed) $(pyj sum.json 'd["software_reasons"]["abandoned"]') $(json sum.json calls_served_given_up) $(json sum.json calls_given_up_read_whole)"
  grep -q "^standin: replay: 1 of them read every row: the program decoded its image in another order than recorded" rep.err ||
    fail "not said: $(grep '^standin:' rep.err)"
  cd ..
  # an image the recording holds only given up: not found (its whole request
  # was never made), run for real as before, and said so
  mkdir alone
  cd alone
  echo "$JD -stops 8,0 $a $b" >run.sh
  jpeg_same run.sh
  expect_eq "alone: intercepted, served, run for real, fallback" "1 1 0 0" \
    "$(json sum.json calls_intercepted) $(json sum.json calls_replayed) $(pyj sum.json 'd["software_reasons"]["abandoned"]') $(json sum.json calls_fallback)"
  expect_eq "alone: recorded given up" "0 1" \
    "$(pyj sum.json 'd["given_up_recorded"]["of_whole_images"]') $(pyj sum.json 'd["given_up_recorded"]["alone"]')"
}

# A program without libprotobuf-c: the shim's first protobuf-c lookup
# searched every loaded object, itself included, and its dlopen of itself
# ran its constructors a second time on the writer thread (glibc 2.36, a
# preloaded object): the configuration was read twice (a bad setting said
# twice) and its fork handlers registered twice. Once now, in both shims.
# A program whose suspending source, when the data has run out, drops the
# bytes the library left unread and offers a fake EOI in their place
# (gdk-pixbuf's loader closed on a truncated image): the library decodes on
# from where the suspension found it, so the rows depend on where that was.
# Replay's drain had taken every byte offered; its request held the dropped
# bytes, was not in the recording, and the real library, reading them, made
# other rows (the thumbnail of a truncated JPEG differed). The recording
# keeps where the program dropped which bytes, and replay gives them back
# to the program's source there, as the library would have left them.
t233_jpeg_bytes_a_program_drops_after_a_suspension() {
  corpus
  head -c 50000 "$CORPUS/l_base_420.jpg" >trunc.jpg
  head -c 60000 "$CORPUS/l_prog_422.jpg" >tprog.jpg
  {
    echo "$JD -src drop -scale 1/8 trunc.jpg"
    echo "$JD -src drop -chunk 4000 trunc.jpg tprog.jpg"
    echo "$JD -src drop $CORPUS/s_base_420_r0.jpg"
  } >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "decodes that dropped bytes, recorded" 3 \
    "$("$STANDIN" dump rec --format json | grep -c '"dropped_bytes":[1-9]')"
  expect_eq "replayed" "$(json sum.json calls_intercepted) 0" \
    "$(json sum.json calls_replayed) $(json sum.json calls_fallback)"
  # another chunk size drops the same bytes at the same place
  echo "$JD -src drop -chunk 1000 trunc.jpg" >run2.sh
  sh run2.sh >nat2.out
  "$STANDIN" replay -t rec --on-miss abort --summary sum2.json -- sh run2.sh >rep2.out 2>rep2.err
  cmp nat2.out rep2.out || fail "another chunk size: $(cat rep2.err)"
  expect_eq "another chunk size, replayed" 1 "$(json sum2.json calls_replayed)"
  # sources that offer the unread bytes again drop none on the way; each
  # decode fails where the data ends, with its last bytes left unread
  # (jpg_unread_final, t234)
  mkdir again && cd again
  for src in suspend forget; do
    echo "$JD -src $src -chunk 300 ../trunc.jpg ../tprog.jpg"
  done >run.sh
  jpeg_same run.sh
  expect_eq "dropped only where each failed" "4 4" "$("$STANDIN" dump rec --format json | python3 -c '
import json, sys
calls = [json.loads(l) for l in sys.stdin]
print(sum(c["flags"] & 2 != 0 for c in calls), sum("dropped_bytes" in c["features"] for c in calls))')"
}

# A suspending source at the end of a truncated file: natively the library
# leaves the bytes of the MCU it could not finish unread in the program's
# source, and PIL reports how many ("image file is truncated (17 bytes not
# processed)"); replay's drain had taken them all, and it said 0. The
# recording keeps them as the decode's drop (jpg_unread_final), replay
# gives them back where its drain stops there, and only a drain stopped
# exactly there is taken for that decode: the whole file's, of which the
# cut one is a prefix, suspended further on, was taken for it too and ran
# for real, not served.
t234_jpeg_bytes_left_unread_where_a_truncated_image_stops() {
  corpus
  local full="$CORPUS/l_base_420.jpg"
  head -c 50000 "$full" >trunc.jpg
  head -c 30000 "$CORPUS/k_prog_444_r2.jpg" >tprog.jpg
  # the program fails (OpenCV), or gives up (PIL)
  echo "$JD -src suspend -unread trunc.jpg $full tprog.jpg" >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "failed: bytes left unread" 2 "$(grep -c "error 'Empty input file' .* [1-9][0-9]* bytes unread$" nat.out)"
  expect_eq "failed: replayed" "3 0" "$(json sum.json calls_replayed) $(json sum.json calls_fallback)"
  mkdir gave && cd gave
  # (not -chunk 5000: the whole file's drain would stop where the cut one's
  # does, with the same bytes offered, and be taken for it)
  {
    echo "$JD -src suspend -giveup -unread ../trunc.jpg $full ../tprog.jpg"
    echo "$JD -src suspend -giveup -chunk 4096 -unread $full ../trunc.jpg $full"
  } >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "given up: bytes left unread" 3 "$(grep -c 'gave up .* [1-9][0-9]* bytes unread$' nat.out)"
  expect_eq "whole files" 3 "$(grep -c 'rows=1080' nat.out)"
  # served: the whole files; given up as recorded: the cut one, whose
  # occurrences the whole file's entry keeps (not the progressive one: the
  # recording holds it whole nowhere, and it runs for real, uncounted)
  expect_eq "given up: served, run for real as given up" "3 2 0" \
    "$(json sum.json calls_replayed) $(pyj sum.json 'd["software_reasons"]["abandoned"]') $(json sum.json reused_samples)"
}

t230_shims_start_once_in_a_program_without_protobuf() {
  corpus
  local f
  f=$(ls "$CORPUS"/s_base_420_r1*.jpg | head -1)
  djpeg "$f" | md5sum >native.md5
  STANDIN_RING_KB=abc "$STANDIN" record -o rec -- djpeg "$f" 2>err | md5sum >rec.md5
  cmp native.md5 rec.md5
  expect_eq "said" 1 "$(grep -c 'STANDIN_RING_KB=abc is not a number' err)"
  LD_DEBUG=files "$STANDIN" replay -t rec -- djpeg "$f" 2>dbg | md5sum >rep.md5
  cmp native.md5 rep.md5
  expect_eq "replay shim started" 1 "$(grep -c 'calling init: .*libstandin-replay.so' dbg)"
}

# A decode whose rows a worker read, and whose object the main thread
# finished or destroyed later (libvips), is the worker's: its thread, from
# the worker's first call of it. whatif's critical path then takes each
# worker's savings on the worker (hand-computed from the dump), and replay
# still answers every decode.
t231_jpeg_decode_ended_by_another_thread_is_the_workers() {
  corpus
  local args
  for args in "" "-finish" "-finish -header"; do
    # A decode is the thread's that spent the most time in the calls that
    # make its image (start, rows). Counting all calls, the ASan pass of two
    # clean-clone make checks gave the main thread, which only reads
    # headers and finishes, a 9.7 ms decode (0 1 2 2): preempted there.
    rm -rf rec
    echo "$B/progs/jpeghandoff -threads 2 $args $(files m_base_420 m_prog_444_r2)" >run.sh
    jpeg_same run.sh
    every_decode_replayed
    "$STANDIN" dump rec --format json >d.json
    local got
    got=$(python3 -c 'import json; print(*sorted(json.loads(l)["thread"] for l in open("d.json")))')
    [ "$got" = "1 1 2 2" ] || "$STANDIN" dump rec | cut -c1-150
    expect_eq "threads ($args)" "1 1 2 2" "$got"
  done
  # -header: main read both headers before the workers began; each
  # worker's second decode starts after the rows of its first, not at its
  # header (the header and finish are a few percent of a decode's time)
  python3 - d.json <<'PY'
import json, sys
calls = [json.loads(l) for l in open(sys.argv[1])]
for t in (1, 2):
    a, b = sorted((c for c in calls if c["thread"] == t), key=lambda c: c["start_ns"])
    assert b["start_ns"] >= a["start_ns"] + a["latency_ns"] // 2, (t, a["start_ns"], b["start_ns"])
PY
  "$STANDIN" whatif rec --iface constant:ns=100000 --cpus 64 --format json >w.json
  python3 - d.json w.json <<'PY'
import json, sys
calls = [json.loads(l) for l in open(sys.argv[1])]
w = json.load(open(sys.argv[2]))["plans"][0]
end, saved = {}, {}
for c in calls:
    t = c["thread"]
    end[t] = max(end.get(t, 0), c["start_ns"] + c["latency_ns"])
    saved[t] = saved.get(t, 0) + c["latency_ns"] - 100000
# main made no call: each worker starts with no shift; the run ends with
# the worker that ends last under the plan
M = max(end.values())
Lp = max(end[t] - saved[t] for t in end)
assert w["saving_critical_path_ns"] == M - Lp, (w["saving_critical_path_ns"], M - Lp)
PY
}

# A program that decodes each image into a buffer it has just mapped takes
# a page fault on each of the buffer's pages inside the decode, and a
# device writing the rows there would take them too: the recording holds
# them (fault_ns: the pages the rows found absent, so the same for each
# decode of one image), a decode into a few rows used again and again has
# next to none, and the device models keep that time, in export, whatif
# and replay. TurboJPEG likewise, where only the decode into fresh pages
# has any.
t235_jpeg_decodes_into_fresh_pages_keep_their_faults() {
  corpus
  local a="$CORPUS/m_base_420.jpg" # 800x450: rows of 1,080,000 bytes, 264 pages
  echo "$JD -whole -repeat 3 $a" >run.sh
  jpeg_same run.sh --iface jpeg-core
  every_decode_replayed
  "$STANDIN" dump -t rec --format json >d.json
  # alike: the same pages times the process's measured cost of one, unless
  # that is more than the decode took (a decode under ASan on a loaded
  # machine: 8.8 ms of decode against 11.7 ms of faults), when it is the
  # decode's time
  expect_eq "three decodes, each faulting alike" "3 1" "$(python3 -c '
import json
f = [json.loads(l) for l in open("d.json")]
v = [c["features"].get("fault_ns", 0) for c in f]
assert all(0 < x <= c["latency_ns"] for x, c in zip(v, f)), v
print(len(v), len(set(x for x, c in zip(v, f) if x < c["latency_ns"]) or {0}))')"
  local whole sum
  whole=$(python3 -c 'import json; print(max(json.loads(l)["features"]["fault_ns"] for l in open("d.json")))')
  sum=$(python3 -c 'import json; print(sum(json.loads(l)["features"]["fault_ns"] for l in open("d.json")))')
  # the device model keeps it: service and link as before, and the faults
  "$STANDIN" export -t rec --format csv --iface jpeg-core >e.csv
  expect_eq "predicted = service + link + faults + source" "3" "$(python3 -c '
import csv
n = 0
for r in csv.DictReader(open("e.csv")):
    assert r["decision"] == "offload", r
    fault = min(int(r["fault_ns"]), int(r["latency_ns"]))
    source = min(int(r["source_ns"] or 0), int(r["latency_ns"]) - fault)
    want = int(r["service_ns"]) + int(r["link_ns"]) + fault + source
    assert int(r["predicted_ns"]) == want, (r["predicted_ns"], want)
    n += 1
print(n)')"
  expect_eq "the replay's prediction holds them" True \
    "$(pyj sum.json "d['predicted_ns'] >= $sum")"
  "$STANDIN" whatif -t rec --iface jpeg-core --format json >w.json
  expect_eq "so does whatif's" True "$(pyj w.json "d['plans'][0]['accelerators'][0]['fault_ns'] == $sum")"
  "$STANDIN" info rec >info.txt
  grep -q "page faults took .* of the .* of the 3 calls that wrote into memory" info.txt ||
    fail "info: $(cat info.txt)"
  # rows into a few rows of the library's pool, again and again
  rm -rf rec
  echo "$JD -repeat 3 $a" >run.sh
  jpeg_same run.sh --iface jpeg-core
  expect_eq "a buffer used again: next to none" True "$(python3 -c '
import json, subprocess, sys
f = [json.loads(l) for l in subprocess.run([sys.argv[1], "dump", "-t", "rec", "--format", "json"],
                                          capture_output=True, text=True).stdout.splitlines()]
print(all(c["features"].get("fault_ns", 0) * 20 < int(sys.argv[2]) for c in f))' "$STANDIN" "$whole")"
  # TurboJPEG: the first decode into a mapped buffer, the others into
  # buffers the program has written a pattern into; the YUV entry points
  # likewise, into one mapped buffer and into planes mapped apart
  rm -rf rec
  echo "$JT -fresh $a" >run.sh
  jpeg_same run.sh --iface jpeg-core
  expect_eq "TurboJPEG: only the fresh buffers' decodes" True "$("$STANDIN" dump -t rec --format json |
    python3 -c '
import json, sys
f = [json.loads(l)["features"].get("fault_ns", 0) for l in sys.stdin]
# rgb fresh, rgb, bgrx/2, gray/4, yuv fresh, yuv, planes fresh, planes, too small
fresh = {0, 4, 6}
ok = len(f) == 9 and all((f[i] > 0) == (i in fresh) for i in range(9))
if not ok:
    print("fault_ns:", f, file=sys.stderr)
print(ok)')"
}

# A program that makes libjpeg's "Corrupt JPEG data" warnings fatal
# (GraphicsMagick does) ends a decode of damaged entropy data partway: the
# recording holds only the bytes the library had read by then, while
# replay drains the whole input before it looks the decode up. Such a
# decode is answered as the failed one whose bytes its input starts with
# (the real library fails at the same place), for every kind of source;
# before, it was a miss said to be "not in the recording". A decode that
# failed because its data ran out (a truncated file) answers no longer
# input that starts so: that is another input.
t236_jpeg_decodes_failed_partway_through_corrupt_data() {
  corpus
  python3 - "$CORPUS" <<'PY'
import sys
for name, step in (("m_base_420", 1499), ("o_prog_422", 997), ("s_prog_444_r0", 701),
                   ("m_prog_444_r2", 997)):
    d = bytearray(open(f"{sys.argv[1]}/{name}.jpg", "rb").read())
    for i in range(len(d) // 4, len(d) - 10, step):
        d[i] ^= 0x5A
    open(f"bad_{name}.jpg", "wb").write(d)
PY
  # the last fails at extraneous bytes before a restart marker, ahead of a
  # marker libjpeg refuses: replay, which sees that marker as it drains,
  # ran such a decode for real without counting it
  local bad="bad_m_base_420.jpg bad_o_prog_422.jpg bad_s_prog_444_r0.jpg bad_m_prog_444_r2.jpg" src
  for src in stdio mem custom suspend; do
    echo "$JD -strict -src $src $bad"
  done >run.sh
  echo "djpeg -strict -outfile o.ppm bad_o_prog_422.jpg; echo rc=\$?" >>run.sh
  jpeg_same run.sh
  expect_eq "failed decodes" 17 "$("$STANDIN" dump rec | grep FAILED | grep -vc NOT-OFFLOADABLE)"
  grep -q "fatal warning 'Corrupt JPEG data" nat.out || fail "not corrupt enough: $(cat nat.out)"
  every_decode_replayed
  # a truncated file's failed decode, then the whole file under its name:
  # another input, a miss run for real
  head -c 30000 "$CORPUS/m_base_420.jpg" >cut.jpg
  "$STANDIN" record -o rcut -- "$JD" -strict cut.jpg >/dev/null 2>&1
  expect_eq "truncated decode" 1 "$("$STANDIN" dump rcut | grep -c FAILED)"
  cp "$CORPUS/m_base_420.jpg" cut.jpg
  "$JD" -strict cut.jpg >whole.nat
  "$STANDIN" replay -t rcut --summary cut.json -- "$JD" -strict cut.jpg >whole.rep 2>/dev/null
  cmp whole.nat whole.rep || fail "whole file: $(cat whole.nat whole.rep)"
  expect_eq "whole file after the truncated one: fallback" 1 "$(json cut.json calls_fallback)"
}

# served_alike WHAT: after jpeg_same run.sh, every offloadable decode was
# served, its WHAT (rows, planes) rebuilt from its digest; kept rather than
# hashed (--keep-pixels) they answer alike; jpeg-core serves some and keeps
# the others in software, never a miss.
served_alike() {
  every_decode_replayed
  grep -q "could not be rebuilt" rep.err && fail "$1 not rebuilt: $(grep '^standin' rep.err)"
  "$STANDIN" record --keep-pixels -o keep -- sh run.sh >keep.out 2>/dev/null
  cmp nat.out keep.out || fail "recorded with --keep-pixels: output differs"
  "$STANDIN" replay -t keep --summary keep.json -- sh run.sh >keep.rep 2>/dev/null
  cmp nat.out keep.rep || fail "replayed from kept $1: output differs"
  expect_eq "kept $1: replayed, fallback" "$(json sum.json calls_replayed) 0" \
    "$(json keep.json calls_replayed) $(json keep.json calls_fallback)"
  "$STANDIN" replay -t rec --iface jpeg-core --summary core.json -- sh run.sh >core.out 2>/dev/null
  cmp nat.out core.out || fail "jpeg-core replay: output differs"
  expect_eq "jpeg-core: fallback" 0 "$(json core.json calls_fallback)"
  [ "$(json core.json calls_replayed)" -gt 0 ] || fail "jpeg-core served none"
}

# Raw data output (jpeg_read_raw_data: component planes as sampled, an
# iMCU row a call; GStreamer's jpegdec decodes so) is served from the
# recording: the planes, the messages and the library's refusal of a
# buffer smaller than an iMCU row, as natively.
t237_jpeg_raw_data_decodes_replayed() {
  corpus
  local fs
  fs=$(files s_base_420_r1 s_prog_444_r0 o_prog_422 o_base_420 s_base_gray_r0 m_base_420 \
    a_arith_420 t_base_420 s_base_422_r0)
  {
    echo "$JD -raw $fs"
    echo "$JD -raw -src mem -scale 1/2 -dct fast $fs"
    echo "$JD -raw -src suspend -chunk 500 $fs"
    # whole planes whose rows past the last point at it (GStreamer's)
    echo "$JD -rawplanes -src custom $fs"
    # a 4:2:0 iMCU row is 16 lines: the library refuses 8 (grey needs 8)
    echo "$JD -raw -lines 8 $(files m_base_420 s_base_gray_r0)"
  } >run.sh
  jpeg_same run.sh
  grep -q "error 'Buffer passed to JPEG library is too small'" nat.out ||
    fail "no refused buffer: $(cat nat.out)"
  grep -q "t_base_420.jpg: .* warnings=2" nat.out || fail "no warnings: $(cat nat.out)"
  expect_eq "not offloadable" 0 "$("$STANDIN" dump rec | grep -c NOT-OFFLOADABLE)"
  served_alike planes
}

# Buffered-image mode (ExactImage decodes so, and progressive displays):
# every output pass over an image of one scan gives a plain decode's rows,
# and is served; several scans, or a pass with other output parameters,
# are not offloadable. The real jpeg_start_output and jpeg_finish_output
# keep the library's state.
t239_jpeg_buffered_image_decodes_replayed() {
  corpus
  local fs
  fs=$(files s_base_420_r1 s_prog_444_r0 o_base_420 s_base_gray_r0 m_base_420 a_arith_420 \
    t_base_420 s_base_422_r0 c_base_420)
  {
    # a progressive display's loop: input first, then output passes
    echo "$JD -buffered $fs"
    echo "$JD -buffered -src suspend -chunk 500 $fs"
    # ExactImage's: an output pass straight after jpeg_start_decompress
    echo "$JD -bufsimple -src mem -scale 1/2 -dct fast $fs"
    echo "$JD -bufsimple -src custom -lines 5 $fs"
    # a pass again gives the same rows; another IDCT for a pass is not
    # offloadable, whichever pass (replay finds out after it looked the
    # decode up: not a miss then)
    echo "$JD -bufsimple -passes 3 $(files o_base_420 s_base_gray_r0)"
    # a first pass that reads no row (the library reads the scan's input
    # as it ends), then one that reads them
    echo "$JD -bufsimple -emptypass $(files m_base_420 s_base_422_r0)"
    echo "$JD -buffered -emptypass -src suspend -chunk 400 $(files m_base_420)"
    echo "$JD -bufsimple -passdct fast $(files o_base_420)"
    echo "$JD -buffered -passes 2 -laterdct float $(files s_base_444_r0)"
  } >run.sh
  jpeg_same run.sh --on-miss abort
  grep -q "t_base_420.jpg: .* warnings=2" nat.out || fail "no warnings: $(cat nat.out)"
  # the progressive image of the four loops, and the last two lines
  expect_eq "not offloadable" "buffered-image mode=6" \
    "$(python3 -c 'import json; r = json.load(open("sum.json"))["not_offloadable_reasons"]; print(" ".join("%s=%d" % kv for kv in sorted(r.items())))')"
  served_alike rows
  # a program that does otherwise than it did when recorded: a second pass
  # over a served image gives its rows again; a pass with another IDCT is
  # the real library's, from the first pass or after a served one
  local f
  f=$(files o_base_420 m_base_420)
  "$STANDIN" record -o one -- "$JD" -bufsimple $f >/dev/null 2>&1
  for more in "-passes 2" "-passes 2 -laterdct fast" "-passdct float"; do
    "$JD" -bufsimple $more $f >more.nat
    "$STANDIN" replay -t one --on-miss abort --summary more.json -- "$JD" -bufsimple $more $f \
      >more.rep 2>more.err || fail "replay of $more: $(cat more.err)"
    cmp more.nat more.rep || fail "$more: output differs: $(cat more.nat more.rep)"
    case "$more" in # served, then the library's: both times count, and said so
    *laterdct*) expect_eq "$more: served, then real" 2 "$(json more.json calls_served_then_real)" ;;
    *) expect_eq "$more: served, then real" 0 "$(json more.json calls_served_then_real)" ;;
    esac
  done
  expect_eq "another IDCT: replayed" 0 "$(json more.json calls_replayed)"
}

# Two arithmetic decodes of one image through sources that suspend every
# 500 and every 300 bytes: that decoder cannot suspend, so each fails
# where its data ran out, recorded with 582 and 382 bytes. Replayed, the
# first one's drain stands at 582 bytes, past both: it is answered as the
# failure nearest to where it stands, its own, not as the other's (whose
# one sample it took, then taken again by the second decode).
t241_jpeg_failures_where_data_ran_out_each_answered_as_its_own() {
  corpus
  {
    echo "$JD -src suspend -chunk 500 $(files a_arith_420)"
    echo "$JD -src suspend -chunk 300 $(files a_arith_420)"
  } >run.sh
  jpeg_same run.sh --on-miss abort
  expect_eq "failed decodes" 2 "$("$STANDIN" dump rec | grep -c FAILED)"
  expect_eq "their requests" 2 "$("$STANDIN" dump rec | grep -o 'fp=[0-9a-f]*' | sort -u | wc -l)"
  every_decode_replayed
  expect_eq "samples reused" 0 "$(json sum.json reused_samples)"
}

# old_recording_replayed DIR WHY ARGS...: a recording made before a kind of
# decode was served (tests/e2e/data/DIR, at 0fa749c) holds it as not
# offloadable, for reason WHY: replay runs such a decode (jpegdec ARGS
# o_base_420.jpg) for real and uncounted, as it did then, not as a miss
# (which --on-miss abort would stop at); recorded now, it is served.
old_recording_replayed() {
  local dir=$1 why=$2 data
  shift 2
  data="$(dirname "$B")/tests/e2e/data"
  cp -r "$data/$dir" old
  cp "$data/raw-recorded-2026-11-30/o_base_420.jpg" .
  "$JD" "$@" o_base_420.jpg >nat.out
  "$STANDIN" replay -t old --on-miss abort --summary sum.json -- \
    "$JD" "$@" o_base_420.jpg >rep.out 2>rep.err || fail "replay: $(cat rep.err)"
  cmp nat.out rep.out || fail "output differs: $(cat nat.out rep.out)"
  expect_eq "not offloadable, intercepted, fallback" "1 0 0" \
    "$(json sum.json calls_not_offloadable) $(json sum.json calls_intercepted) $(json sum.json calls_fallback)"
  grep -q "not offloadable (1 $why" rep.err || fail "not said: $(cat rep.err)"
  "$STANDIN" record -o new -- "$JD" "$@" o_base_420.jpg >/dev/null 2>&1
  "$STANDIN" replay -t new --on-miss abort --summary new.json -- \
    "$JD" "$@" o_base_420.jpg >new.out 2>/dev/null
  cmp nat.out new.out || fail "new recording: output differs"
  expect_eq "new recording: replayed" 1 "$(json new.json calls_replayed)"
}

# raw data decodes: reason 2
t238_jpeg_raw_data_recorded_before_it_was_served() {
  old_recording_replayed raw-recorded-2026-11-30 "raw data output" -raw -src mem
}

# buffered-image decodes: reason 1
t240_jpeg_buffered_image_recorded_before_it_was_served() {
  old_recording_replayed buffered-recorded-2026-11-30 "buffered-image mode" -bufsimple -src mem
}
