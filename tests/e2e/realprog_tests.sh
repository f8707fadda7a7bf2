# Programs we did not write that use protobuf-c (Debian packages), recorded
# and replayed as a user would. Skipped when the package is not installed.

# kdig (knot-dnsutils) packs one dnstap message per DNS query and response
# with protobuf-c; dnstap-ldns reads them back with protobuf-c unpack.
make_dnstap() { # FILE N: N queries answered by a local REFUSED responder
  port=$((20000 + RANDOM % 20000))
  rm -f ready.txt # a previous responder's says ready too
  python3 "$(dirname "$B")/tests/e2e/tools/dns_refuser.py" "$port" 3 >ready.txt &
  for _ in $(seq 50); do grep -q ready ready.txt 2>/dev/null && break; sleep 0.05; done
  names=$(for i in $(seq 1 "$2"); do printf 'h%d.example.com ' "$i"; done)
  # shellcheck disable=SC2086
  "${@:3}" kdig -E "$1" @127.0.0.1 -p "$port" +timeout=1 +retry=0 +noall $names >/dev/null 2>&1 || true
}

t701_dnstap_reader_replays_identically() {
  command -v kdig >/dev/null && command -v dnstap-ldns >/dev/null || { echo "skipped: no kdig/dnstap-ldns"; return 0; }
  make_dnstap q.tap 80
  dnstap-ldns -r q.tap >native.out
  expect_eq "messages" 160 "$(wc -l <native.out)"
  "$STANDIN" record -o rec -- dnstap-ldns -r q.tap >rec.out
  cmp native.out rec.out
  expect_eq "unpack calls" 160 "$(calls rec pb.unpack)"
  "$STANDIN" dump rec --format json --payload --limit 1 | grep -q '"type":"dnstap.Dnstap"' || fail "type"
  "$STANDIN" replay -t rec --summary s.json -- dnstap-ldns -r q.tap >rep.out
  cmp native.out rep.out
  expect_eq "replayed" 160 "$(json s.json calls_replayed)"
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
}

# kdig puts the current time in every message: a replay sees requests that
# were never recorded. They must run for real and be counted, not answered.
# Under --on-miss nearest they still run for real, timed from the recorded
# messages of their type nearest in size.
t702_dnstap_writer_diverges_and_falls_back() {
  command -v kdig >/dev/null || { echo "skipped: no kdig"; return 0; }
  make_dnstap q.tap 20 "$STANDIN" record -o rec --
  [ "$(calls rec pb.pack_to_buffer)" -ge 38 ] || fail "pack calls: $(calls rec pb.pack_to_buffer)"
  make_dnstap q2.tap 20 "$STANDIN" replay -t rec --summary s.json --
  # (a message identical to a recorded one may still match: same content)
  python3 - <<'PY'
import json
s = json.load(open("s.json"))
# a lost UDP answer makes kdig time out and log one message less
assert s["calls_intercepted"] >= 38, s
assert s["calls_replayed"] + s["calls_fallback"] == s["calls_intercepted"], s
assert s["fallback_reasons"]["not_in_trace"] >= 30, s
PY
  command -v dnstap-ldns >/dev/null && [ "$(dnstap-ldns -r q2.tap | wc -l)" -ge 38 ]
  # --on-miss nearest times them as recorded messages of their size instead
  make_dnstap q3.tap 20 "$STANDIN" replay -t rec --iface protoacc --on-miss nearest --summary s3.json --
  python3 - <<'PY'
import json
s = json.load(open("s3.json"))
assert s["calls_intercepted"] >= 38, s
assert s["calls_fallback"] == 0, s
assert s["calls_approximated"] >= 30, s
assert s["calls_replayed"] + s["calls_approximated"] + s["calls_software"] == s["calls_intercepted"], s
assert s["approximated_size_gap"] < 0.2, s
PY
}

# riemann-client (riemann-c-client) sends each event as a protobuf-c Msg
# (get_packed_size, pack) over TCP and unpacks the server's answer. Its
# replay must put the same bytes on the wire, every call answered.
riemann_send() { # LOG EVENTS CMD-PREFIX...: send EVENTS events to a fresh stub
  # a fresh file per stub: the last call's still says ready, with its port
  rm -f ready.txt
  python3 "$(dirname "$B")/tests/e2e/tools/riemann_stub.py" "$1" 5 >ready.txt &
  local stub=$!
  for _ in $(seq 200); do grep -q ready ready.txt 2>/dev/null && break; sleep 0.05; done
  local port
  port=$(awk '{print $2}' ready.txt)
  [ -n "$port" ] || fail "the stub server did not start"
  seq 1 "$2" | sed 's/$/ ok/' >events.txt
  "${@:3}" riemann-client send -0 -S svc -h host1 -a k=v -t t1 127.0.0.1 "$port" <events.txt
  kill "$stub" 2>/dev/null || true
  wait "$stub" 2>/dev/null || true
}

t703_riemann_client_sends_the_same_bytes_on_replay() {
  command -v riemann-client >/dev/null || { echo "skipped: no riemann-client"; return 0; }
  riemann_send native.log 100
  expect_eq "messages" 100 "$(wc -l <native.log)"
  riemann_send rec.log 100 "$STANDIN" record -o rec --
  cmp native.log rec.log
  expect_eq "pack calls" 100 "$(calls rec pb.pack)"
  expect_eq "size calls" 100 "$(calls rec pb.size)"
  expect_eq "unpack calls" 100 "$(calls rec pb.unpack)"
  riemann_send rep.log 100 "$STANDIN" replay -t rec --summary s.json --
  cmp native.log rep.log
  expect_eq "replayed" 300 "$(json s.json calls_replayed)"
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
}

# tjbench (libjpeg-turbo-progs) decodes one JPEG through TurboJPEG for as
# long as -benchtime says, so a faster replay makes more calls than were
# recorded (later occurrences reuse the recorded samples), and it cuts its
# own argv at the file name's dot: the trace keeps the argv it started with.
t704_tjbench_replays_a_timed_loop_and_keeps_its_argv() {
  command -v tjbench >/dev/null || { echo "skipped: no tjbench"; return 0; }
  corpus
  cp "$CORPUS/m_base_420.jpg" in.jpg
  tjbench in.jpg -benchtime 0.05 -warmup 0 -quiet >/dev/null
  mv in_full.ppm native.ppm
  "$STANDIN" record -o rec -- tjbench in.jpg -benchtime 0.05 -warmup 0 -quiet >/dev/null
  cmp native.ppm in_full.ppm
  rm in_full.ppm
  n=$(calls rec tj.decode)
  [ "$n" -ge 1 ] || fail "tj.decode calls: $n"
  "$STANDIN" info rec | grep -q "^process .*: tjbench in\\.jpg -benchtime 0\\.05" || fail "argv: $("$STANDIN" info rec | grep process)"
  # -benchtime is no part of a request: a run 4 times longer, each decode
  # 4 times faster, matches the recorded decodes however many it makes
  "$STANDIN" replay -t rec --iface scale:factor=0.25 --summary s.json -- tjbench in.jpg -benchtime 0.2 -warmup 0 -quiet >/dev/null
  cmp native.ppm in_full.ppm
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
  expect_eq "every call replayed" "$(json s.json calls_intercepted)" "$(json s.json calls_replayed)"
  echo "recorded $n decodes, replayed $(json s.json calls_replayed), reused $(json s.json reused_samples) samples"
}

# maptool (navit) converts OpenStreetMap PBF files: every block is a
# protobuf-c unpack of a large tree (a PrimitiveBlock: string tables and
# packed arrays of thousands of coordinates), freed piece by piece by the
# program. Its replay must rebuild each tree exactly, both ways (pieces and
# one block), and with a model that refuses nothing.
t705_maptool_replays_openstreetmap_blocks() {
  command -v maptool >/dev/null || { echo "skipped: no maptool"; return 0; }
  pbf="$(dirname "$B")/tests/e2e/data/grid.osm.pbf"
  maptool -D --protobuf -i "$pbf" >native.txt 2>/dev/null
  [ "$(wc -l <native.txt)" -gt 10000 ] || fail "maptool dumped $(wc -l <native.txt) lines"
  "$STANDIN" record -o rec -- maptool -D --protobuf -i "$pbf" >rec.txt 2>/dev/null
  cmp native.txt rec.txt
  expect_eq "PrimitiveBlock unpacks" 4 "$("$STANDIN" dump rec | grep -c " pb.unpack OSMPBF.PrimitiveBlock ")"
  for how in "--iface software" "--iface protoacc --unpack-trees block"; do
    # shellcheck disable=SC2086
    "$STANDIN" replay -t rec $how --summary s.json -- maptool -D --protobuf -i "$pbf" >rep.txt 2>/dev/null
    cmp native.txt rep.txt || fail "$how: output differs"
    expect_eq "$how: replayed" "$(calls rec)" "$(json s.json calls_replayed)"
    expect_eq "$how: fallback" 0 "$(json s.json calls_fallback)"
  done
}

# pdf_pages_replay ARGV...: ARGV renders doc.pdf, made here (baseline,
# progressive with restart markers, grey with restart markers), into
# @OUT@-N.ppm (@OUT@ stands for native, rec or rep). Recorded, then
# replayed on software and jpeg-core, the pages are the native ones, no call
# falls back, and jpeg-core keeps the progressive and restart-marker pages
# in software, saying why. The recording is left in rec.
pdf_pages_replay() {
  corpus
  python3 "$(dirname "$B")/tests/e2e/tools/jpeg_pdf.py" doc.pdf \
    "$CORPUS/o_base_420.jpg" "$CORPUS/m_prog_444_r2.jpg" "$CORPUS/s_base_gray_r1.jpg"
  "${@//@OUT@/native}"
  "$STANDIN" record -o rec -- "${@//@OUT@/rec}"
  for p in 1 2 3; do cmp "native-$p.ppm" "rec-$p.ppm"; done
  expect_eq "decodes" 3 "$(calls rec jpeg.decode)"
  for m in software jpeg-core; do
    rm -f rep-*.ppm
    "$STANDIN" replay -t rec --iface $m --summary $m.json -- "${@//@OUT@/rep}" 2>$m.err
    for p in 1 2 3; do cmp "native-$p.ppm" "rep-$p.ppm" || fail "$m: page $p differs"; done
    expect_eq "$m: fallback" 0 "$(json $m.json calls_fallback)"
  done
  expect_eq "software: replayed" 3 "$(json software.json calls_replayed)"
  expect_eq "jpeg-core: replayed, in software" "1 2" \
    "$(json jpeg-core.json calls_replayed) $(json jpeg-core.json calls_software)"
  grep -q "of the recording's calls, 1 stays in software on jpeg-core: progressive JPEG" jpeg-core.err ||
    fail "no reason given: $(cat jpeg-core.err)"
}

# pdftoppm (poppler) renders a PDF whose pages are JPEG images embedded as
# they are (DCTDecode): C++ that feeds libjpeg from its own source manager,
# three decodes of different kinds in one process. On jpeg-core the
# progressive and the restart-marker pages stay in software, for real.
t706_pdftoppm_replays_embedded_jpegs() {
  command -v pdftoppm >/dev/null || { echo "skipped: no pdftoppm"; return 0; }
  pdf_pages_replay pdftoppm -r 30 doc.pdf @OUT@
  # its call sites are C++: shown demangled, and a plan selects them either way
  "$STANDIN" report rec --by site --format json >site.json
  grep -q " < SplashOutputDev::drawImage+0x" site.json || fail "site not demangled: $(cat site.json)"
  for g in 'SplashOutputDev::draw*' '_ZN15SplashOutputDev9drawImage*'; do
    printf 'accel s software\noffload site=%s to s\n' "$g" >plan.txt
    expect_eq "site=$g" 3 "$("$STANDIN" report rec --plan plan.txt --format json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["plan"]["offloaded"])')"
  done
}

# cwebp (libwebp's encoder) reads a JPEG with libjpeg, row by row, into its
# picture, then encodes it: the rows replay delivers are what it encodes.
t707_cwebp_encodes_the_replayed_rows() {
  command -v cwebp >/dev/null || { echo "skipped: no cwebp"; return 0; }
  corpus
  for f in o_base_420 s_prog_420_r1; do
    cwebp -quiet "$CORPUS/$f.jpg" -o "native_$f.webp"
    "$STANDIN" record -f -o rec -- cwebp -quiet "$CORPUS/$f.jpg" -o "rec_$f.webp"
    cmp "native_$f.webp" "rec_$f.webp"
    expect_eq "$f: decodes" 1 "$(calls rec jpeg.decode)"
    "$STANDIN" replay -t rec --iface scale:factor=0.5 --summary s.json -- \
      cwebp -quiet "$CORPUS/$f.jpg" -o "rep_$f.webp"
    cmp "native_$f.webp" "rep_$f.webp" || fail "$f: the WebP differs"
    expect_eq "$f: replayed" 1 "$(json s.json calls_replayed)"
  done
}

# mapserv (MapServer 8) serves vector tiles: each tile is one process that
# sizes and packs a vector_tile.Tile (layers of features, tags, geometry)
# with protobuf-c. A shell loop asks for five tiles, so recording and replay
# follow five execs, and the replay's tiles must be the recorded bytes. A
# tile that was never recorded runs for real (or, under abort, stops its
# process with the call site named); on protoacc get_packed_size stays in
# software, with the reason.
t708_mapserv_vector_tiles_replay_identically() {
  command -v mapserv >/dev/null || { echo "skipped: no mapserv"; return 0; }
  python3 "$(dirname "$B")/tests/e2e/tools/mvt_map.py" tiles.map ms.conf 100
  cat >tiles.sh <<SH
#!/bin/sh
export MAPSERVER_CONFIG_FILE="$PWD/ms.conf"
for t in "\$@"; do
  mapserv -nh "QUERY_STRING=map=$PWD/tiles.map&mode=tile&tilemode=gmap&tile=\$t&layers=all&map.imagetype=mvt"
done
SH
  chmod +x tiles.sh
  set -- 0+0+0 0+0+1 1+0+1 0+1+1 1+1+1
  ./tiles.sh "$@" >native.out
  [ "$(head -c 1 native.out | od -An -tx1)" = " 1a" ] || fail "not a vector tile: $(head -c 200 native.out)"
  "$STANDIN" record -o rec -- ./tiles.sh "$@" >rec.out
  cmp native.out rec.out
  expect_eq "processes" 5 "$("$STANDIN" info rec | grep -c '^process .*: mapserv ')"
  expect_eq "pack calls" 5 "$(calls rec pb.pack)"
  expect_eq "size calls" 5 "$(calls rec pb.size)"
  "$STANDIN" report rec --by site | grep -q "msMVTWriteTile+0x" || fail "no call site: $("$STANDIN" report rec --by site)"
  "$STANDIN" replay -t rec --summary sw.json -- ./tiles.sh "$@" >sw.out
  cmp native.out sw.out || fail "software: the tiles differ"
  expect_eq "software: replayed" 10 "$(json sw.json calls_replayed)"
  "$STANDIN" replay -t rec --iface protoacc --summary pa.json -- ./tiles.sh "$@" >pa.out 2>pa.err
  cmp native.out pa.out || fail "protoacc: the tiles differ"
  expect_eq "protoacc: replayed, in software" "5 5" \
    "$(json pa.json calls_replayed) $(json pa.json calls_software)"
  grep -q "of the recording's calls, 5 stay in software on protoacc: get_packed_size has no device counterpart" pa.err ||
    fail "no reason given: $(cat pa.err)"
  # a zoom-2 tile was never recorded: it runs for real, or stops mapserv
  ./tiles.sh 0+0+0 2+1+2 >native2.out
  "$STANDIN" replay -t rec --summary miss.json -- ./tiles.sh 0+0+0 2+1+2 >miss.out
  cmp native2.out miss.out || fail "fallback: the tiles differ"
  expect_eq "replayed, fallback" "2 2" "$(json miss.json calls_replayed) $(json miss.json calls_fallback)"
  "$STANDIN" replay -t rec --on-miss abort -- ./tiles.sh 2+1+2 >abort.out 2>abort.err && fail "abort: mapserv went on"
  grep -q "replay miss in pb.size for vector_tile.Tile (called from msMVTWriteTile in .*libmapserver" abort.err ||
    fail "abort message: $(cat abort.err)"
  [ ! -s abort.out ] || fail "abort: mapserv wrote $(wc -c <abort.out) bytes"
}

# Ghostscript renders t706's PDF (pdfi, its C PDF interpreter): its
# DCTDecode filter feeds libjpeg from a suspending source, so
# jpeg_start_decompress returns "suspended" until the filter has read
# enough of the stream (50 times over the three pages, by ltrace). Replay's
# rows must be the recorded ones all the same, and on jpeg-core the
# progressive and restart-marker pages stay in software.
t709_ghostscript_replays_jpegs_from_a_suspending_source() {
  command -v gs >/dev/null || { echo "skipped: no gs"; return 0; }
  pdf_pages_replay gs -q -dSAFER -dNOPAUSE -dBATCH -sDEVICE=ppmraw -r30 -o @OUT@-%d.ppm doc.pdf
}

# PHP loads every extension with RTLD_DEEPBIND, so GD's libjpeg and pinba's
# protobuf-c bind to their own libraries before the preloaded hooks
# (deepbind.c points them back). GD decodes each image (a truncated one
# with libjpeg's warning, which PHP prints when told not to ignore it) and the script prints an MD5 of
# its pixels, as PNG; pinba packs one message per flush, sent over UDP to a
# port nobody listens on. Its messages hold times and resource usage: a
# replay sees new ones, which run for real (or, under --on-miss nearest,
# are timed from the recorded ones).
t710_php_extensions_loaded_with_deepbind_are_recorded() {
  command -v php >/dev/null && php -m 2>/dev/null | grep -qx gd || { echo "skipped: no php with gd"; return 0; }
  [ -z "${STANDIN_SANITIZER:-}" ] || { echo "RTLD_DEEPBIND under a sanitizer (it refuses it): skipped"; return 0; }
  corpus
  cat >gd.php <<'EOF2'
<?php
foreach (array_slice($argv, 1) as $f) {
  $im = imagecreatefromjpeg($f);
  if (!$im) { echo basename($f), ": failed\n"; continue; }
  ob_start(); imagepng($im); $png = ob_get_clean();
  echo basename($f), ": ", imagesx($im), "x", imagesy($im), " ", md5($png), "\n";
  imagedestroy($im);
}
EOF2
  local imgs php=(php -d gd.jpeg_ignore_warning=0 -d pinba.enabled=0)
  imgs=$(files c_base_420 m_base_420 s_prog_422_r0 s_base_444_r1 s_base_gray_r0 t_base_420 a_arith_420)
  # shellcheck disable=SC2086
  "${php[@]}" gd.php $imgs >native.out 2>&1
  expect_eq "images" 7 "$(grep -c ': [0-9]*x[0-9]* ' native.out)"
  grep -q "Premature end of JPEG file" native.out || fail "no warning for the truncated image: $(cat native.out)"
  # shellcheck disable=SC2086
  "$STANDIN" record -o rec -- "${php[@]}" gd.php $imgs >rec.out 2>&1
  grep -v '^standin: ' rec.out | cmp - native.out || fail "recorded output differs"
  expect_eq "decodes recorded" 7 "$(calls rec jpeg.decode)"
  for iface in software jpeg-core; do
    # shellcheck disable=SC2086
    "$STANDIN" replay -t rec --iface $iface --summary s-$iface.json -- "${php[@]}" gd.php $imgs >rep.out 2>&1
    grep -v '^standin: ' rep.out | cmp - native.out || fail "$iface: replayed output differs"
    expect_eq "$iface: fallback" 0 "$(json s-$iface.json calls_fallback)"
  done
  expect_eq "software: replayed" 7 "$(json s-software.json calls_replayed)"

  php -m 2>/dev/null | grep -qx pinba || { echo "pinba: skipped (no php pinba)"; return 0; }
  cat >pinba.php <<'EOF2'
<?php
for ($i = 0; $i < 50; $i++) {
  $t = pinba_timer_start(array("group" => "db", "op" => "q" . ($i % 7)));
  pinba_timer_stop($t);
  pinba_flush("script-$i");
}
echo "flushed\n";
EOF2
  local port=$((20000 + RANDOM % 20000))
  local opts=(-d pinba.enabled=1 -d pinba.server=127.0.0.1:$port)
  "$STANDIN" record -o recp -- php "${opts[@]}" pinba.php >rec.out
  expect_eq "pinba output" flushed "$(cat rec.out)"
  # 50 flushes and the one at exit
  expect_eq "pinba packs recorded" 51 "$(calls recp pb.pack_to_buffer)"
  "$STANDIN" dump recp --format json --limit 1 | grep -q '"type":"Pinba.Request"' || fail "type"
  "$STANDIN" replay -t recp --summary sp.json -- php "${opts[@]}" pinba.php >rep.out
  expect_eq "pinba replayed output" flushed "$(cat rep.out)"
  expect_eq "pinba packs seen" 51 "$(json sp.json calls_intercepted)"
  expect_eq "pinba packs run for real" 51 \
    "$(($(json sp.json calls_fallback) + $(json sp.json calls_replayed)))"
}

# php-fpm: a master running as root forks workers that run as nobody, with
# GD loaded by the master (RTLD_DEEPBIND) before the fork. Recorded into a
# directory the workers can write, stopped with SIGQUIT sent to standin
# (the master then stops its workers with SIGTERM, which PHP's handler
# sends again), replayed: the same thumbnails over FastCGI, every decode
# in a closed trace and replayed in the workers. Root only.
t711_php_fpm_workers_are_recorded_and_replayed() {
  command -v php-fpm8.2 >/dev/null && command -v cgi-fcgi >/dev/null ||
    { echo "skipped: no php-fpm8.2 or cgi-fcgi"; return 0; }
  [ "$(id -u)" = 0 ] || { echo "skipped: needs root (php-fpm's workers change user)"; return 0; }
  [ -z "${STANDIN_SANITIZER:-}" ] || { echo "RTLD_DEEPBIND under a sanitizer (it refuses it): skipped"; return 0; }
  corpus
  # the workers, as nobody, read the script and the images and write traces
  local d port
  d=$(mktemp -d /tmp/standin-t711.XXXXXX)
  chmod 755 "$d"
  cp "$CORPUS"/c_base_420.jpg "$CORPUS"/m_base_420.jpg "$CORPUS"/s_prog_422_r0.jpg "$CORPUS"/s_base_444_r1.jpg "$d"/
  chmod 644 "$d"/*.jpg
  cat >"$d/thumb.php" <<'EOF2'
<?php
$im = imagecreatefromjpeg(__DIR__ . "/" . basename($_GET["f"]));
$t = imagescale($im, 48);
echo imagesx($t), "x", imagesy($t), ":";
for ($y = 0; $y < imagesy($t); $y += 3) for ($x = 0; $x < imagesx($t); $x += 3) echo " ", imagecolorat($t, $x, $y);
EOF2
  chmod 644 "$d/thumb.php"
  port=$((20000 + RANDOM % 20000))
  cat >fpm.conf <<EOF2
[global]
error_log = $PWD/fpm.log
daemonize = no
[www]
listen = 127.0.0.1:$port
user = nobody
group = nogroup
pm = static
pm.max_children = 2
clear_env = no
EOF2
  serve() { # serve OUT [STANDIN ARGS...]: start php-fpm, fetch, stop it
    local out=$1
    shift
    "$@" php-fpm8.2 -n -d extension=gd -y "$PWD/fpm.conf" -F >/dev/null 2>>serve.err &
    local pid=$!
    for _ in $(seq 100); do
      SCRIPT_FILENAME=$script REQUEST_METHOD=GET QUERY_STRING=f=c_base_420.jpg \
        cgi-fcgi -bind -connect 127.0.0.1:$port >/dev/null 2>&1 && break
      sleep 0.1
    done
    : >"$out"
    for f in c_base_420 m_base_420 s_prog_422_r0 s_base_444_r1 m_base_420; do
      SCRIPT_FILENAME=$script REQUEST_METHOD=GET QUERY_STRING=f=$f.jpg \
        cgi-fcgi -bind -connect 127.0.0.1:$port | md5sum >>"$out"
    done
    kill -QUIT $pid
    wait $pid || true
  }
  local script=$d/thumb.php
  serve native.out
  # five answers, none empty, four images
  expect_eq "responses" 5 "$(grep -vc d41d8cd98f00b204e9800998ecf8427e native.out)"
  expect_eq "distinct responses" 4 "$(sort -u native.out | wc -l)"
  mkdir -m 1777 "$d/rec"
  serve rec.out "$STANDIN" record -o "$d/rec" --
  cmp native.out rec.out || fail "recorded responses differ"
  # the readiness probe's decode too
  expect_eq "decodes recorded" 6 "$(calls "$d/rec" jpeg.decode)"
  "$STANDIN" info "$d/rec" >info.txt
  expect_eq "workers' traces closed" 0 "$(grep -c "not closed" info.txt)"
  serve rep.out "$STANDIN" replay -t "$d/rec" --summary s.json --
  cmp native.out rep.out || fail "replayed responses differ"
  expect_eq "replayed" 6 "$(json s.json calls_replayed)"
  # a pool that chroots its workers into the scripts' directory (chroot =):
  # they decode there, as nobody, where the recording is out of sight
  printf 'chroot = %s\n' "$d" >>fpm.conf
  script=/thumb.php
  mkdir -m 1777 "$d-rec"
  serve croot.out "$STANDIN" record -o "$d-rec" --
  cmp native.out croot.out || fail "chroot: recorded responses differ"
  expect_eq "chroot: decodes recorded" 6 "$(calls "$d-rec" jpeg.decode)"
  serve crep.out "$STANDIN" replay -t "$d-rec" --summary cs.json --
  cmp native.out crep.out || fail "chroot: replayed responses differ"
  expect_eq "chroot: replayed" 6 "$(json cs.json calls_replayed)"
  rm -rf "$d" "$d-rec"
}

# jpeginfo -c (Debian's jpeginfo) checks JPEG files by decoding each one
# scaled down (libjpeg's scaled IDCT), and prints libjpeg's warning for a
# truncated file: every decode, the warnings included, must replay the
# same, under software and on jpeg-core, which keeps its scaled,
# progressive and restart-marker decodes in software and says why.
t712_jpeginfo_checks_replayed_decodes() {
  command -v jpeginfo >/dev/null || { echo "skipped: no jpeginfo"; return 0; }
  corpus
  set -- "$CORPUS"/*.jpg
  printf 'jpeginfo -c' >ji.sh
  printf ' %s' "$@" >>ji.sh
  jpeg_same ji.sh
  grep -q "WARNING Premature end of JPEG file" rep.out || fail "no truncated file's warning"
  every_decode_replayed
  # (jpeginfo exits 1 when a file has a warning, replayed or not)
  "$STANDIN" replay -t rec --iface jpeg=jpeg-core --summary core.json -- sh ji.sh >core.out \
    2>core.err || expect_eq "jpeg-core: exit status" 1 "$?"
  cmp nat.out core.out || fail "jpeg-core: output differs"
  grep -q "stay in software on jpeg-core: scaled decode" core.err || fail "$(cat core.err)"
  expect_eq "jpeg-core: fallback" 0 "$(json core.json calls_fallback)"
}

# Python's ctypes (as PyTurboJPEG decodes) dlopens libturbojpeg and looks
# every function up on its handle, which finds the library's own
# definitions, not the shim's: standin saw none of those calls. The shim's
# dlsym now answers a lookup of a hooked function with the hook when the
# handle found the very function it stands in front of (interpose/handles.c).
t713_python_ctypes_turbojpeg_reaches_the_hooks() {
  corpus
  set -- "$CORPUS"/*.jpg
  printf '%s %s' "$PYSYS" "$(dirname "$B")/tests/e2e/tools/tj_ctypes.py" >tj.sh
  printf ' %s' "$@" >>tj.sh
  jpeg_same tj.sh
  [ "$(calls rec tj.decode)" -ge 20 ] || fail "tj.decode calls: $(calls rec tj.decode)"
  every_decode_replayed
}

# pdftoppm with a corrupt JPEG on a page (an invalid marker in its scan):
# poppler's source returns FALSE at the end of the image's stream, so its
# decodes suspend there. Replay's drain read the marker's next two bytes as
# a segment length past the end and suspended for good: poppler got no
# rows and rendered the page blank, and libjpeg's warning was gone. The
# decode is now not offloadable and runs for real; the page beside it
# still replays.
t714_pdftoppm_page_with_a_corrupt_jpeg() {
  command -v pdftoppm >/dev/null || { echo "skipped: no pdftoppm"; return 0; }
  pdf_page_runs_for_real k_base_420
  grep -q "premature end of data segment" native.err || fail "no warning: $(cat native.err)"
  grep -q "premature end of data segment" rep.err || fail "warning lost: $(cat rep.err)"
  # poppler's call sites are longer than report's column: a label cut at
  # its end read "drawImage+0x10" for "+0x10d"; one cut in its middle says so
  "$STANDIN" report rec --by site >sites.txt
  "$STANDIN" report rec --by site --format json >sites.json
  python3 - sites.txt sites.json <<'PYEOF2' || fail "site labels: $(cat sites.txt)"
import json, sys
full = [g["key"] for g in json.load(open(sys.argv[2]))["groups"]]
rows = open(sys.argv[1]).read().split("\n")
i = next(k for k, l in enumerate(rows) if l.startswith("GROUP"))
shown = [l[:rows[i].index(" CALLS") - 4].rstrip() for l in rows[i + 1:] if l.strip()]
assert len(shown) == len(full) and any(len(f) > 60 for f in full), (shown, full)
for s, f in zip(shown, full):
    if s != f:
        head, tail = s.split("...")
        assert f.startswith(head) and f.endswith(tail), (s, f)
PYEOF2
}

# pdf_page_runs_for_real JPEG: pdftoppm of a page of corpus JPEG JPEG, not
# offloadable, beside a page of o_base_420: every page the same natively,
# recorded and replayed; the one replayed, the other run for real
pdf_page_runs_for_real() {
  corpus
  python3 "$(dirname "$B")/tests/e2e/tools/jpeg_pdf.py" doc.pdf "$CORPUS/$1.jpg" \
    "$CORPUS/o_base_420.jpg"
  pdftoppm -r 30 doc.pdf native 2>native.err
  "$STANDIN" record -o rec -- pdftoppm -r 30 doc.pdf rec 2>/dev/null
  "$STANDIN" replay -t rec --summary sum.json -- pdftoppm -r 30 doc.pdf rep 2>rep.err
  for p in 1 2; do
    cmp "native-$p.ppm" "rec-$p.ppm" || fail "recorded page $p differs"
    cmp "native-$p.ppm" "rep-$p.ppm" || fail "replayed page $p differs"
  done
  expect_eq "replayed, not offloadable, fallback" "1 1 0" \
    "$(json sum.json calls_replayed) $(json sum.json calls_not_offloadable) $(json sum.json calls_fallback)"
}

# pdftoppm with a truncated JPEG on a page: poppler's source returns FALSE
# where the image's stream ends, and poppler renders the rows libjpeg
# returned until then. Replay waited for the rest of the image to identify
# the decode, so poppler got no rows and the page was blank. The recorded
# decode ended there; a replayed one that suspends where it did runs for real.
t715_pdftoppm_page_with_a_truncated_jpeg() {
  command -v pdftoppm >/dev/null || { echo "skipped: no pdftoppm"; return 0; }
  pdf_page_runs_for_real t_base_420
  grep -v '^standin: ' rep.err | cmp - native.err || fail "stderr differs: $(cat rep.err)"
}

# gdk-pixbuf's JPEG loader feeds libjpeg through a suspending source and
# reads every row without jpeg_finish_decompress. With a corrupt image
# whose scan holds an APP0 or COM marker, libjpeg stops at it and returns
# every row; replay's drain read the marker as a segment with a garbage
# length and waited for bytes past the end of the file: the loader got no
# rows, and the thumbnailer failed ("too few scanlines") where it writes a
# thumbnail natively (t227).
t716_gdk_pixbuf_thumbnailer_with_a_marker_inside_the_scan() {
  command -v gdk-pixbuf-thumbnailer >/dev/null || { echo "skipped: no gdk-pixbuf-thumbnailer"; return 0; }
  corpus
  python3 - "$CORPUS/m_base_420.jpg" <<'PY'
import sys
src = open(sys.argv[1], "rb").read()
i = src.find(b"\xff\xda")
start = i + 2 + int.from_bytes(src[i + 2:i + 4], "big")
for k, m in enumerate((0xE0, 0xFE)):
    b = bytearray(src)
    p = start + (len(src) - start) * (k + 1) // 3
    b[p:p + 2] = bytes([0xFF, m])
    open("m%02x.jpg" % m, "wb").write(bytes(b))
PY
  for m in e0 fe; do
    gdk-pixbuf-thumbnailer -s 64 m$m.jpg native-$m.png
    "$STANDIN" record -o rec-$m -- gdk-pixbuf-thumbnailer -s 64 m$m.jpg rec-$m.png 2>/dev/null
    "$STANDIN" replay -t rec-$m --on-miss abort --summary sum-$m.json -- \
      gdk-pixbuf-thumbnailer -s 64 m$m.jpg rep-$m.png 2>/dev/null
    cmp native-$m.png rec-$m.png
    cmp native-$m.png rep-$m.png
    expect_eq "$m: replayed" "1 0" "$(json sum-$m.json calls_replayed) $(json sum-$m.json calls_fallback)"
  done
}

# gdk-pixbuf's loader, closed on a truncated JPEG, drops the bytes libjpeg
# left unread when its source suspended and offers a fake EOI instead;
# libjpeg decodes the rest of the rows from nothing. Replay's drain had
# taken those bytes, so its request was not in the recording and the real
# library, reading them, made another thumbnail (t233).
t717_gdk_pixbuf_thumbnailer_with_a_truncated_jpeg() {
  command -v gdk-pixbuf-thumbnailer >/dev/null || { echo "skipped: no gdk-pixbuf-thumbnailer"; return 0; }
  corpus
  head -c 50000 "$CORPUS/l_base_420.jpg" >t1.jpg
  head -c 30000 "$CORPUS/m_base_420.jpg" >t2.jpg
  printf 'for f in t1 t2; do gdk-pixbuf-thumbnailer -s %s $f.jpg $f-$1.png; done\n' 128 >run.sh
  sh run.sh native
  "$STANDIN" record -o rec -- sh run.sh rec 2>/dev/null
  local iface
  for iface in software constant:ns=2000000; do
    "$STANDIN" replay -t rec --iface $iface --on-miss abort --summary sum-$iface.json -- \
      sh run.sh rep-$iface 2>/dev/null
    cmp t1-native.png t1-rep-$iface.png
    cmp t2-native.png t2-rep-$iface.png
    expect_eq "$iface: replayed" "2 0" \
      "$(json sum-$iface.json calls_replayed) $(json sum-$iface.json calls_fallback)"
  done
  cmp t1-native.png t1-rec.png
}

# GraphicsMagick makes libjpeg's "Corrupt JPEG data" warnings fatal: its
# decode of damaged entropy data ends partway, recorded as failed with the
# bytes read by then. Replayed, it is that failed decode (not a miss), and
# gm fails with the native message; the sound file around it converts to
# the native pixels.
t718_graphicsmagick_fails_on_corrupt_data_as_recorded() {
  command -v gm >/dev/null || { echo "skipped: no gm (graphicsmagick)"; return 0; }
  corpus
  # damage that gm gives up on at a warning: extraneous bytes before a
  # restart marker, and a bad Huffman code
  python3 - "$CORPUS" <<'PY'
import sys
for k, name in enumerate(("m_prog_444_r2", "l_prog_422")):
    d = bytearray(open(f"{sys.argv[1]}/{name}.jpg", "rb").read())
    for i in range(len(d) // 4, len(d) - 10, 997):
        d[i] ^= 0x5A
    open(f"bad{k + 1}.jpg", "wb").write(d)
PY
  cp "$CORPUS/m_base_420.jpg" good.jpg
  cat >run.sh <<'SH'
gm convert good.jpg -resize 50% good-$1.ppm
for f in bad1 bad2; do gm convert $f.jpg $f-$1.ppm; echo rc=$?; done
SH
  sh run.sh native >nat.out 2>nat.err
  expect_eq "gm's messages" 2 "$(grep -c "Corrupt JPEG data" nat.err)"
  expect_eq "exit statuses" "rc=1 rc=1" "$(echo $(cat nat.out))"
  "$STANDIN" record -o rec -- sh run.sh rec >rec.out 2>/dev/null
  expect_eq "failed decodes" 2 "$("$STANDIN" dump rec | grep FAILED | grep -vc NOT-OFFLOADABLE)"
  local iface
  for iface in software jpeg-core; do
    "$STANDIN" replay -t rec --iface $iface --on-miss abort --summary sum-$iface.json -- \
      sh run.sh rep-$iface >rep.out 2>rep.err
    cmp nat.out rep.out || fail "$iface: $(cat rep.out)"
    grep -v '^standin: ' rep.err | cmp - nat.err || fail "$iface: stderr $(cat rep.err)"
    cmp good-native.ppm good-rep-$iface.ppm || fail "$iface: pixels differ"
    expect_eq "$iface: intercepted, fallback" "3 0" \
      "$(json sum-$iface.json calls_intercepted) $(json sum-$iface.json calls_fallback)"
  done
}

# replayed_on_both EXT: rec (of `sh run.sh rec`) replayed on software and
# on jpeg-core (`sh run.sh rep-IFACE`, --on-miss abort, summaries in
# sum-IFACE.json): every *-native.EXT file the same recorded and replayed,
# every decode's rows rebuilt, no fallback.
replayed_on_both() {
  local ext=$1 iface out
  for iface in software jpeg-core; do
    "$STANDIN" replay -t rec --iface $iface --on-miss abort --summary sum-$iface.json -- \
      sh run.sh rep-$iface >/dev/null 2>rep.err || fail "$iface: $(cat rep.err)"
    grep -q "could not be rebuilt" rep.err && fail "$iface: $(cat rep.err)"
    for out in *-native.$ext; do
      cmp "$out" "${out%-native.$ext}-rep-$iface.$ext" || fail "$iface: ${out%-native.$ext} differs"
      cmp "$out" "${out%-native.$ext}-rec.$ext" || fail "recorded: ${out%-native.$ext} differs"
    done
    expect_eq "$iface: fallback" 0 "$(json sum-$iface.json calls_fallback)"
  done
}

# GStreamer's jpegdec decodes to planar YUV with jpeg_read_raw_data, on a
# streaming thread of the pipeline, its rows past a plane's last pointing
# at its last row (the bottom iMCU row's dummy rows land there): every
# decode served, the planes as natively, one image or a stream of them.
t719_gstreamer_jpegdec_raw_data_replayed() {
  command -v gst-launch-1.0 >/dev/null && gst-inspect-1.0 jpegdec >/dev/null 2>&1 ||
    { echo "skipped: no gst-launch-1.0 with jpegdec (gstreamer1.0-plugins-good)"; return 0; }
  corpus
  local f i
  for f in m_base_420 o_prog_422 s_base_444_r0 s_base_gray_r0 l_base_420; do
    cp "$CORPUS/$f.jpg" "$f.jpg"
  done
  for i in 0 1 2 3; do cp "$CORPUS/s_base_420_r$((i % 2)).jpg" "frame$i.jpg"; done
  cat >run.sh <<'SH'
for f in m_base_420 o_prog_422 s_base_444_r0 s_base_gray_r0 l_base_420; do
  gst-launch-1.0 -q filesrc location=$f.jpg ! jpegdec ! filesink location=$f-$1.yuv
done
gst-launch-1.0 -q multifilesrc location=frame%d.jpg index=0 stop-index=3 \
  caps=image/jpeg,framerate=30/1 ! jpegdec ! filesink location=frames-$1.yuv
SH
  sh run.sh native >/dev/null 2>&1 || fail "gst-launch-1.0 failed natively"
  "$STANDIN" record -o rec -- sh run.sh rec >/dev/null 2>&1
  expect_eq "decodes" 9 "$(calls rec jpeg.decode)"
  expect_eq "not offloadable" 0 "$("$STANDIN" dump rec | grep -c NOT-OFFLOADABLE)"
  replayed_on_both yuv
  local iface
  for iface in software jpeg-core; do
    expect_eq "$iface: intercepted" 9 "$(json sum-$iface.json calls_intercepted)"
  done
  [ "$(json sum-software.json calls_replayed)" -eq 9 ] || fail "software: not every decode served"
}

# ExactImage's econvert decodes every JPEG in buffered-image mode: once
# for its header and size (jpeg_start_decompress, then
# jpeg_finish_decompress, which reads the image to its end), then again
# with one output pass. The second decode of an image of one scan is
# served; the progressive images, and the first decodes (given up before
# any row), run for real as recorded. Scaled decodes too.
t720_exactimage_buffered_image_decodes_replayed() {
  command -v econvert >/dev/null || { echo "skipped: no econvert (exactimage)"; return 0; }
  corpus
  local f
  for f in m_base_420 o_prog_422 s_base_444_r0 s_base_gray_r0 l_base_420 s_base_422_r1; do
    cp "$CORPUS/$f.jpg" "$f.jpg"
  done
  cat >run.sh <<'SH'
for f in m_base_420 o_prog_422 s_base_444_r0 s_base_gray_r0 l_base_420 s_base_422_r1; do
  econvert -i $f.jpg -o $f-$1.ppm
  econvert -i $f.jpg --scale 0.5 -o $f-half-$1.ppm
done
SH
  sh run.sh native >/dev/null 2>&1 || fail "econvert failed natively"
  "$STANDIN" record -o rec -- sh run.sh rec >/dev/null 2>&1
  expect_eq "decodes" 24 "$(calls rec jpeg.decode)"
  # 10 of the 12 second decodes (o_prog_422's are progressive)
  expect_eq "offloadable" 10 "$("$STANDIN" dump rec | grep -vc NOT-OFFLOADABLE)"
  replayed_on_both ppm
  expect_eq "software: served" 10 "$(json sum-software.json calls_replayed)"
}

# pdftoppm's source suspends at the end of an image's stream and poppler
# then stops reading rows: a page whose JPEG is cut short draws the rows
# the data holds. Replayed from a recording of other pages, the drain
# waited for the rest of the image and poppler drew none of it; it is now
# a miss at the first suspension, and the page is drawn as natively.
t721_pdftoppm_draws_an_unrecorded_truncated_image() {
  command -v pdftoppm >/dev/null || { echo "skipped: no pdftoppm"; return 0; }
  corpus
  python3 "$(dirname "$B")/tests/e2e/tools/jpeg_pdf.py" doc.pdf "$CORPUS/s_base_420_r1.jpg"
  python3 "$(dirname "$B")/tests/e2e/tools/jpeg_pdf.py" cut.pdf "$CORPUS/t_base_420.jpg"
  "$STANDIN" record -o rec -- pdftoppm -r 30 doc.pdf rec >/dev/null 2>&1
  pdftoppm -r 30 cut.pdf native 2>native.err
  "$STANDIN" replay -t rec --summary sum.json -- pdftoppm -r 30 cut.pdf rep 2>rep.err
  cmp native-1.ppm rep-1.ppm || fail "the page differs from the native one"
  # given up before its last row, as recorded decodes given up are: not
  # offloadable, so neither served nor counted a miss, but said to have run
  expect_eq "served, missed" "0 0" "$(json sum.json calls_replayed) $(json sum.json calls_fallback)"
  expect_eq "ran, not offloadable" 1 "$(json sum.json calls_not_offloadable_ran)"
  grep -q "^standin: replay: 1 call not offloadable (1 ended before its last row) ran for real" rep.err ||
    fail "the decode it gave up is not said: $(cat rep.err)"
}

# bind9's dnstap-read (bind9-dnsutils) unpacks each frame through libdns,
# which links protobuf-c, and allocates with jemalloc; -y prints every
# field it reads as YAML. Replayed over the file it recorded, every unpack
# is answered from the trace; over another file, whose messages were never
# recorded, every one runs for real and the output is that file's.
t722_bind9_dnstap_read_replays_and_misses_other_files() {
  command -v kdig >/dev/null && command -v dnstap-read >/dev/null || { echo "skipped: no kdig/dnstap-read"; return 0; }
  make_dnstap q.tap 60
  make_dnstap q2.tap 30
  dnstap-read -y q.tap >native.out
  dnstap-read -y q2.tap >native2.out
  [ "$(grep -c '^type: MESSAGE' native.out)" = 120 ] || fail "expected 120 messages natively"
  "$STANDIN" record -o rec -- dnstap-read -y q.tap >rec.out
  cmp native.out rec.out
  expect_eq "unpack calls" 120 "$(calls rec pb.unpack)"
  "$STANDIN" replay -t rec --summary s.json -- dnstap-read -y q.tap >rep.out
  cmp native.out rep.out
  expect_eq "replayed" 120 "$(json s.json calls_replayed)"
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
  "$STANDIN" replay -t rec --summary s2.json -- dnstap-read -y q2.tap >rep2.out
  cmp native2.out rep2.out
  expect_eq "replayed, other file" 0 "$(json s2.json calls_replayed)"
  expect_eq "not in trace, other file" 60 \
    "$(python3 -c 'import json; print(json.load(open("s2.json"))["fallback_reasons"]["not_in_trace"])')"
}

# A PostgreSQL server of a test's own, for extensions that use protobuf-c:
# pg_init makes PGD (a directory the server's user can enter, with a copy
# of standin and its shims: the checkout may be in a home only its owner
# can enter) and a cluster in it; pg_serve OUT [STANDIN ARGS...] starts the
# server (under standin with them), runs $PGD/q.sql into OUT and stops it.
# PG_OPTS holds the server's extra options. postgres refuses to run as
# root: as root, the server runs as postgres.
PGB=/usr/lib/postgresql/15/bin
pg_init() {
  PG_AS=()
  [ "$(id -u)" != 0 ] || PG_AS=(runuser -u postgres --)
  PGD=$(mktemp -d "/tmp/standin-$1.XXXXXX")
  chmod 755 "$PGD"
  mkdir -p "$PGD/b/lib/standin"
  cp "$STANDIN" "$PGD/b/"
  cp "$B"/lib/standin/*.so "$PGD/b/lib/standin/"
  [ "$(id -u)" != 0 ] || chown -R postgres "$PGD"
  (cd "$PGD" && "${PG_AS[@]}" $PGB/initdb -D "$PGD/data" -A trust) >initdb.log 2>&1 ||
    { cat initdb.log; fail "initdb"; }
}
pg_sql() { # FILE: the queries pg_serve runs next (readable by the server's user)
  cp "$1" "$PGD/q.sql"
  chmod 644 "$PGD/q.sql"
}
pg_serve() {
  local out=$1
  shift
  # from a directory the server's user can enter
  (cd "$PGD" && exec "${PG_AS[@]}" "$@" $PGB/postgres -D "$PGD/data" -k "$PGD" -p 5432 \
    -c listen_addresses= "${PG_OPTS[@]}" >>"$PGD/server.log" 2>&1) &
  local pid=$!
  for _ in $(seq 100); do
    (cd "$PGD" && "${PG_AS[@]}" psql -h "$PGD" -p 5432 -X -q -d postgres -c 'select 1') >/dev/null 2>&1 && break
    sleep 0.2
  done
  local rc=0
  (cd "$PGD" && "${PG_AS[@]}" psql -h "$PGD" -p 5432 -X -q -v ON_ERROR_STOP=1 -d postgres -f q.sql) \
    >"$out" 2>psql.err || rc=$?
  # a fast shutdown, to the postmaster itself (runuser does not pass
  # SIGINT on); the server is stopped whether the queries ran or not
  local pm
  pm=$(head -1 "$PGD/data/postmaster.pid" 2>/dev/null || true)
  kill -INT "${pm:-$pid}" 2>/dev/null || true
  wait $pid || true
  [ $rc = 0 ] || cat psql.err
  return $rc
}

# PostGIS's ST_AsMVT and ST_AsGeobuf pack with protobuf-c inside a
# PostgreSQL server: a postmaster that forks a backend per connection and
# parallel workers per query, each loading postgis-3.so (and with it
# libprotobuf-c) with dlopen after the fork. A parallel ST_AsMVT packs each
# worker's partial tile in the worker and unpacks them in the backend.
# Replayed, the backend's tiles must come out byte-identical; the workers
# split the table by timing, so their partial tiles may be new requests
# (misses run for real), and the tile they make has the same length.
pg_record() { # setup.sql once, then q.sql natively (native.out) and recorded ($PGD/rec)
  pg_sql setup.sql
  pg_serve setup.out
  pg_sql q.sql
  pg_serve native.out
  pg_serve rec.out "$PGD/b/standin" record -o "$PGD/rec" --
  cmp native.out rec.out || fail "recorded output differs"
  "$STANDIN" info "$PGD/rec" >info.txt
  expect_eq "traces closed" 0 "$(grep -c 'not closed' info.txt)"
}

t723_postgis_vector_tiles_in_a_forking_server() {
  [ -x $PGB/postgres ] && [ -e /usr/lib/postgresql/15/lib/postgis-3.so ] ||
    { echo "skipped: no postgresql-15-postgis-3"; return 0; }
  pg_init t723
  local d=$PGD
  PG_OPTS=(-c max_worker_processes=4)
  cat >q.sql <<'EOF2'
\pset format unaligned
\pset tuples_only on
select z||'/'||x||'/'||y, length(t), md5(t) from (
  select z, x, y, (select ST_AsMVT(q, 'pts', 4096, 'geom') from (
     select id, name, ST_AsMVTGeom(geom, ST_TileEnvelope(z, x, y, ST_MakeEnvelope(0,0,4000,4000,3857))) as geom
     from pts where geom && ST_TileEnvelope(z, x, y, ST_MakeEnvelope(0,0,4000,4000,3857))) q) as t
  from (select 2 z, x, y from generate_series(0,3) x, generate_series(0,3) y) tiles) s order by 1;
select length(ST_AsGeobuf(q, 'geom')), md5(ST_AsGeobuf(q, 'geom')) from (select * from pts where id < 500) q;
set max_parallel_workers_per_gather = 2; set parallel_setup_cost = 0; set parallel_tuple_cost = 0;
set min_parallel_table_scan_size = 0; set parallel_leader_participation = off;
select length(ST_AsMVT(q, 'big')) from (select k, ST_AsMVTGeom(geom, ST_MakeEnvelope(0,0,4000,4000,3857)) geom from big) q;
EOF2
  # the tables, natively: points with a name each, and points whose one
  # attribute takes 50 values (a tile's length then does not depend on the
  # order the workers' partial tiles come in)
  cat >setup.sql <<'EOF2'
create extension postgis;
create table pts as select i as id, 'name '||i as name,
  ST_SetSRID(ST_MakePoint((i*37)%1000 * 4.0, (i*91)%1000 * 4.0), 3857) as geom from generate_series(1, 3000) i;
create table big as select i % 50 as k,
  ST_SetSRID(ST_MakePoint((i*37)%4000, (i*91)%4000), 3857) as geom from generate_series(1, 40000) i;
EOF2
  pg_record
  expect_eq "tiles and the geobuf natively" 17 "$(grep -c '|' native.out)"
  grep -q 'parallel worker' info.txt || fail "no parallel worker recorded"
  [ "$(calls "$d/rec" pb.unpack)" -ge 1 ] || fail "no partial tile unpacked"
  pg_serve rep.out "$d/b/standin" replay -t "$d/rec" --summary "$d/s.json" --
  cmp native.out rep.out || fail "replayed output differs"
  # the backend's 16 tiles and its geobuf, each sized and packed
  [ "$(json "$d/s.json" calls_replayed)" -ge 34 ] || fail "too few replayed"
  python3 - "$d/s.json" <<'EOF2' || fail "fallbacks other than not_in_trace"
import json, sys
d = json.load(open(sys.argv[1]))
bad = {k: v for k, v in d["fallback_reasons"].items() if v and k != "not_in_trace"}
sys.exit(1 if bad or d["processes"] < 2 else 0)
EOF2
  rm -rf "$d"
}

# Debezium's decoderbufs, a PostgreSQL logical decoding output plugin:
# the backend that reads a replication slot sizes and packs one protobuf
# RowMessage per change (inserts, updates and deletes of a table with text,
# double and bytea columns) with protobuf-c, loaded into the forked backend
# by name. Peeking does not consume the slot, so every server run decodes
# the same changes; replayed, they come out byte-identical, each answered
# from the recording.
t724_decoderbufs_logical_decoding_in_a_postgres_backend() {
  [ -x $PGB/postgres ] && [ -e /usr/lib/postgresql/15/lib/decoderbufs.so ] ||
    { echo "skipped: no postgresql-15-decoderbufs"; return 0; }
  pg_init t724
  local d=$PGD
  PG_OPTS=(-c wal_level=logical -c max_wal_senders=2 -c max_replication_slots=2)
  cat >setup.sql <<'EOF2'
create table t (id int primary key, name text, v double precision, b bytea);
select 'slot' from pg_create_logical_replication_slot('s', 'decoderbufs');
insert into t select i, 'name '||i, i*0.5, decode(repeat('ab', i % 40), 'hex') from generate_series(1, 300) i;
update t set name = name || '!' where id % 7 = 0;
delete from t where id % 11 = 0;
EOF2
  cat >q.sql <<'EOF2'
\pset format unaligned
\pset tuples_only on
select count(*), md5(string_agg(encode(data, 'hex'), ',' order by lsn)) from pg_logical_slot_peek_binary_changes('s', NULL, NULL);
select encode(data, 'hex') from pg_logical_slot_peek_binary_changes('s', NULL, NULL) order by lsn limit 3;
EOF2
  pg_record
  # 300 inserts, 42 updates and 27 deletes, and each transaction's begin
  # and commit
  expect_eq "changes natively" 375 "$(head -1 native.out | cut -d'|' -f1)"
  [ "$(calls "$d/rec" pb.pack)" -ge 375 ] || fail "the changes were not packed: $(cat info.txt)"
  pg_serve rep.out "$d/b/standin" replay -t "$d/rec" --summary "$d/s.json" --
  cmp native.out rep.out || fail "replayed output differs"
  expect_eq "every call replayed" "$(json "$d/s.json" calls_intercepted)" "$(json "$d/s.json" calls_replayed)"
  expect_eq "fallbacks" 0 "$(json "$d/s.json" calls_fallback)"
  rm -rf "$d"
}

# collectd_pinba OUT N FIRST [PREFIX...]: collectd with its pinba plugin
# (which unpacks each UDP packet with protobuf-c on a thread of its own)
# receives Pinba messages FIRST .. FIRST + N - 1; OUT gets the last value of
# each of the plugin's cumulative csv series once all N are counted
collectd_pinba() {
  local out=$1 n=$2 first=$3 port=$((20000 + RANDOM % 20000))
  shift 3
  rm -rf "csv-$out" "$out.log"
  cat >"$out.conf" <<EOF2
Interval 1
BaseDir "$PWD"
PluginDir "/usr/lib/collectd"
TypesDB "/usr/share/collectd/types.db"
LoadPlugin logfile
<Plugin logfile>
  LogLevel info
  File "$PWD/$out.log"
</Plugin>
LoadPlugin pinba
LoadPlugin csv
<Plugin pinba>
  Address "127.0.0.1"
  Port "$port"
  <View "all">
  </View>
</Plugin>
<Plugin csv>
  DataDir "$PWD/csv-$out"
</Plugin>
EOF2
  "$@" collectd -f -C "$out.conf" >"$out.stdout" 2>&1 &
  local pid=$! got=""
  for _ in $(seq 100); do grep -q "entering read-loop" "$out.log" 2>/dev/null && break; sleep 0.1; done
  python3 "$(dirname "$B")/tests/e2e/tools/pinba_send.py" "$port" "$n" "$first"
  # The series of an interval are written one after another: a snapshot
  # counts when one pass over the files finds the same number of lines in
  # each and all N counted. The cumulative series only (DERIVE in
  # types.db): memory-peak is the last interval's maximum.
  for _ in $(seq 150); do
    awk -F, 'FNR == 1 && NR > 1 {print f, n, v} FNR == 1 {f = FILENAME} {n = FNR; v = $2}
      END {if (NR) print f, n, v}' csv-"$out"/*/pinba-all/* 2>/dev/null >snap.txt
    [ "$(awk '{print $2}' snap.txt | sort -u | wc -l)" = 1 ] &&
      [ "$(awk '$1 ~ /total_requests/ {print $3}' snap.txt)" = "$n" ] && break
    sleep 0.1
  done
  awk '$1 !~ /memory-peak/ {sub(/.*\//, "", $1); sub(/-[0-9-]*$/, "", $1); print $1, $3}' snap.txt |
    sort >"$out"
  kill -TERM "$pid"
  wait "$pid" || true
}

# collectd, a daemon that loads its plugins with dlopen: messages 0-999
# recorded, replayed (every unpack answered from the recording, the
# counters collectd writes the same), then messages 500-1499: the 500 the
# recording never saw fall back to libprotobuf-c, with the same counters as
# a native run of them.
t725_collectd_pinba_plugin_unpacks_udp_packets_on_replay() {
  [ -e /usr/lib/collectd/pinba.so ] || { echo "skipped: no collectd-core"; return 0; }
  collectd_pinba native 1000 0
  expect_eq "counted natively" "total_requests 1000" "$(grep total_requests native)"
  collectd_pinba rec.out 1000 0 "$STANDIN" record -o rec --
  cmp native rec.out || fail "recorded counters differ: $(cat rec.out)"
  expect_eq "unpack calls" 1000 "$(calls rec pb.unpack)"
  collectd_pinba rep.out 1000 0 "$STANDIN" replay -t rec --summary s.json --
  cmp native rep.out || fail "replayed counters differ: $(cat rep.out)"
  expect_eq "replayed" 1000 "$(json s.json calls_replayed)"
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
  collectd_pinba native2 1000 500
  ! cmp -s native native2 || fail "messages 500-1499 counted as 0-999 were"
  collectd_pinba rep2.out 1000 500 "$STANDIN" replay -t rec --summary s2.json --
  cmp native2 rep2.out || fail "counters differ when half the messages are new: $(cat rep2.out)"
  expect_eq "replayed, half new" 500 "$(json s2.json calls_replayed)"
  expect_eq "not in the trace" 500 \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fallback_reasons"]["not_in_trace"])' s2.json)"
}
