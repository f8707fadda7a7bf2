#!/usr/bin/env bash
# Build the JPEG test corpus once: make_corpus.sh DIR (B=build dir).
# Pictures come from build/progs/jpegmkppm, JPEGs from Debian's cjpeg:
#   s_*   320x240, every mode: {base,prog} x {444,422,420,gray} x {r0,r1}
#         (r1: a restart marker every MCU row)
#   o_*   333x177 (not a multiple of the MCU size)
#   m_*   800x450, l_* 1920x1080, x_* 4000x3000 (12 megapixels)
#   c_*   with a comment and an extra APP marker; a_* arithmetic coding
#   t_*   truncated copies (60% of the file)
#   k_*   corrupt copies: a marker libjpeg refuses (FF 28), then two bytes
#         that read as a segment length past the end, at 40% of the file
set -euo pipefail
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
B=$(cd "${B:-build}" && pwd)
MK="$B/progs/jpegmkppm"
STAMP="$DIR/.corpus-v2"
[ -e "$STAMP" ] && exit 0
# tests run side by side (run.sh E2E_JOBS): one makes the corpus, the
# others wait for it
exec 9>"$DIR/.lock"
flock 9
[ -e "$STAMP" ] && exit 0
mkdir -p "$DIR"
cd "$DIR"
"$MK" 320 240 >s.ppm
"$MK" 320 240 gray >s.pgm
"$MK" 333 177 >o.ppm
"$MK" 800 450 >m.ppm
"$MK" 1920 1080 >l.ppm
"$MK" 4000 3000 >x.ppm
sample() { case $1 in 444) echo 1x1 ;; 422) echo 2x1 ;; 420) echo 2x2 ;; esac; }
for ss in 444 422 420 gray; do
  for mode in base prog; do
    for rst in 0 1; do
      args=(-quality 85)
      [ "$mode" = prog ] && args+=(-progressive)
      [ "$rst" = 1 ] && args+=(-restart 1)
      if [ "$ss" = gray ]; then
        cjpeg "${args[@]}" -grayscale s.pgm >"s_${mode}_${ss}_r${rst}.jpg"
      else
        cjpeg "${args[@]}" -sample "$(sample $ss)" s.ppm >"s_${mode}_${ss}_r${rst}.jpg"
      fi
    done
  done
done
cjpeg -quality 90 -sample 2x2 o.ppm >o_base_420.jpg
cjpeg -quality 90 -progressive -sample 2x1 o.ppm >o_prog_422.jpg
cjpeg -quality 85 -sample 2x2 m.ppm >m_base_420.jpg
cjpeg -quality 85 -progressive -sample 1x1 -restart 2 m.ppm >m_prog_444_r2.jpg
cjpeg -quality 80 -sample 2x2 l.ppm >l_base_420.jpg
cjpeg -quality 80 -progressive -sample 2x1 l.ppm >l_prog_422.jpg
cjpeg -quality 85 -sample 2x2 x.ppm >x_base_420.jpg
cjpeg -quality 85 -sample 2x2 s.ppm | wrjpgcom -comment "standin test corpus" >c_base_420.jpg
# an APP2 segment before the frame header (libjpeg skips it)
python3 - c_base_420.jpg <<'PY'
import sys
p = sys.argv[1]
d = open(p, 'rb').read()
app = b'\xff\xe2' + (2 + 300).to_bytes(2, 'big') + bytes(range(256)) + bytes(44)
open(p, 'wb').write(d[:2] + app + d[2:])
PY
cjpeg -quality 85 -arithmetic -sample 2x2 s.ppm >a_arith_420.jpg 2>/dev/null || rm -f a_arith_420.jpg
for f in m_base_420 m_prog_444_r2; do
  n=$(stat -c %s $f.jpg)
  head -c $((n * 6 / 10)) $f.jpg >t_${f#m_}.jpg
done
for f in m_base_420 m_prog_444_r2; do
  python3 - $f.jpg k_${f#m_}.jpg <<'PY'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
i = len(d) * 4 // 10
while d[i - 1] == 0xFF or d[i] == 0xFF:  # not inside a stuffed byte or marker
    i += 1
d[i:i + 4] = b'\xff\x28\xfe\xfe'
open(sys.argv[2], 'wb').write(d)
PY
done
rm -f ./*.ppm ./*.pgm
touch "$STAMP"
