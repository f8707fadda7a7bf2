#!/usr/bin/env bash
# make_corpus.sh OUTDIR [--quick] [--with-tests]: generate the JPEG corpus the
# bundled workloads, tests and validation decode.
#
# Source images are procedural (imagegen.c: gradients, shapes, textures and
# noise, so compression ratios are close to photographs'), encoded with
# cjpeg (libjpeg-turbo-progs). The set spans thumbnails to 12 megapixels,
# baseline and progressive, 4:4:4, 4:2:2, 4:2:0 and greyscale, some with
# restart markers: both what a baseline-only decoder such as core_jpeg
# accepts and what it must refuse. File names say what each file is:
#   WWWWxHHHH_SUB_MODE[_rstN]_qQ.jpg   SUB: 444 422 420 grey; MODE: base prog;
#                                      rstN: a restart marker every N MCU rows
# zero-padded so that sorted order is size order.
#
# --quick: only the images up to 640x480 (for tests; about a second).
# --with-tests: also the JPEG record/replay test corpus, made by
#   tests/e2e/make_corpus.sh into OUTDIR/tests: the odd cases a decoder meets
#   (arithmetic coding, comments and APP markers, truncated files), kept in a
#   subfolder so that workloads given OUTDIR do not pick them up. That script
#   needs B=BUILD_DIR with progs/jpegmkppm built.
# Idempotent: existing files are kept; a file is written under a temporary
# name and renamed, so an interrupted run leaves no partial JPEG, and runs
# side by side (parallel tests) do not trip over each other.
# IMAGEGEN=path uses an already built imagegen (e.g. build/progs/imagegen);
# otherwise it is compiled from source into a temporary directory.
set -euo pipefail

usage() { echo "usage: make_corpus.sh OUTDIR [--quick] [--with-tests]" >&2; exit 2; }
[ $# -ge 1 ] || usage
OUT=$1
shift
QUICK=0
WITH_TESTS=0
for opt in "$@"; do
  case $opt in
    --quick) QUICK=1 ;;
    --with-tests) WITH_TESTS=1 ;;
    *) usage ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
command -v cjpeg >/dev/null || { echo "make_corpus.sh: cjpeg not found (apt-get install libjpeg-turbo-progs, or scripts/deps.sh)" >&2; exit 1; }

#      width height subsampling mode restart quality
QUICK_SET="
  64   64   420  base 0  75
  160  120  444  base 0  90
  160  120  grey base 0  85
  200  150  422  base 0  80
  333  251  420  base 0  70
  320  240  420  prog 0  85
  320  240  420  base 4  85
  320  240  444  prog 0  75
  480  640  422  prog 0  80
  640  480  420  base 0  85
  640  480  grey prog 8  90
  640  480  444  base 2  80
"
FULL_SET="
  800  450  420  base 0  85
  1024 768  444  base 0  90
  1024 768  420  prog 0  80
  1280 720  422  base 0  85
  1280 720  420  base 16 85
  1920 1080 420  base 0  85
  1920 1080 420  prog 0  85
  1920 1080 grey base 0  80
  2048 1536 444  prog 0  92
  2592 1944 420  base 0  85
  3000 2000 422  prog 0  85
  4000 3000 420  base 0  85
  4000 3000 444  base 32 90
  3000 4000 420  prog 0  80
"

mkdir -p "$OUT"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/standin-corpus.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
GEN=${IMAGEGEN:-}
if [ -z "$GEN" ]; then
  GEN="$TMP/imagegen"
  ${CC:-cc} -O2 -o "$GEN" "$HERE/imagegen.c"
fi

set_list=$QUICK_SET
[ "$QUICK" = 1 ] || set_list="$QUICK_SET$FULL_SET"
made=0
seed=0
while read -r w h sub mode rst q; do
  [ -n "$w" ] || continue
  seed=$((seed + 1))
  name=$(printf '%04dx%04d_%s_%s' "$w" "$h" "$sub" "$mode")
  [ "$rst" = 0 ] || name="${name}_rst$rst"
  name="${name}_q$q.jpg"
  [ -e "$OUT/$name" ] && continue
  opts=(-quality "$q")
  case $sub in
    444) opts+=(-sample 1x1) ;;
    422) opts+=(-sample 2x1) ;;
    420) opts+=(-sample 2x2) ;;
    grey) opts+=(-grayscale) ;;
  esac
  [ "$mode" = prog ] && opts+=(-progressive)
  [ "$rst" = 0 ] || opts+=(-restart "$rst")
  grey=()
  [ "$sub" = grey ] && grey=(grey)
  "$GEN" "$w" "$h" "$seed" "${grey[@]}" >"$TMP/src"
  # a temporary name of this run's own: tests run side by side may make the
  # same corpus at once (the same bytes: the last rename wins)
  cjpeg "${opts[@]}" -outfile "$OUT/.$name.$$.tmp" "$TMP/src"
  mv -f "$OUT/.$name.$$.tmp" "$OUT/$name"
  made=$((made + 1))
done <<<"$set_list"
echo "make_corpus.sh: $made new, $(ls "$OUT"/*.jpg | wc -l) JPEG files in $OUT"
if [ "$WITH_TESTS" = 1 ]; then
  tests_corpus="$HERE/../../tests/e2e/make_corpus.sh"
  [ -x "$tests_corpus" ] || { echo "make_corpus.sh: --with-tests needs $tests_corpus" >&2; exit 1; }
  "$tests_corpus" "$OUT/tests"
  echo "make_corpus.sh: test cases in $OUT/tests"
fi
