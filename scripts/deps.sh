#!/usr/bin/env bash
# Install the Debian packages standin needs to build, test and demo.
# Only missing packages are installed; uses sudo when not root.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  libunwind-dev            # call sites (record)
  libprotobuf-c-dev protobuf-c-compiler  # the protobuf API we interpose
  zlib1g-dev               # trace chunk checksums (crc32) and the zlib format
  libdeflate-dev           # fast zlib-format compression of trace chunks
  libxxhash-dev            # request fingerprints and payload de-duplication (XXH3-128)
  check                    # unit tests
  libjpeg62-turbo-dev libturbojpeg0-dev libjpeg-turbo-progs  # JPEG API + cjpeg/djpeg
  valgrind                 # leak checks in tests
  python3-pil              # a JPEG decoder with its own suspending source (e2e t212)
  clang libclang-rt-dev    # fuzzing: libFuzzer with ASan/UBSan (make fuzz, make check)
  uftrace ltrace time      # make bench compares against them; /usr/bin/time for peak memory
  knot-dnsutils dnstap-ldns  # real protobuf-c programs the tests record and replay (kdig, dnstap-ldns)
  bind9-dnsutils           # dnstap-read: bind9 unpacks dnstap frames through libdns and jemalloc (t722)
  maptool                  # navit's OpenStreetMap converter: large protobuf-c unpacks the tests replay
  riemann-c-client         # riemann-client: a protobuf-c network client the tests record and replay
  poppler-utils webp       # pdftoppm and cwebp: real libjpeg programs the tests record and replay
  jpeginfo                 # jpeginfo -c: scaled decodes and libjpeg warnings the tests replay (t712)
  ghostscript              # gs: a real libjpeg program whose source suspends
  mapserver-bin            # mapserv: vector tiles, protobuf-c packs of deep trees, the tests record and replay
  php8.2-cli php8.2-gd php8.2-pinba  # PHP loads extensions with RTLD_DEEPBIND: GD's libjpeg and pinba's protobuf-c (t710)
  php8.2-fpm libfcgi-bin   # php-fpm: workers that give up root, asked over FastCGI with cgi-fcgi (t711)
  faketime                 # libfaketime preloaded into standin: its clock must not become standin's (t647)
  graphicsmagick           # gm: a real libjpeg program that makes corrupt-data warnings fatal (t718)
  gstreamer1.0-tools gstreamer1.0-plugins-good  # gst-launch-1.0 with jpegdec: raw data (planar YUV) decodes on a streaming thread (t719)
  exactimage               # econvert: a real libjpeg program that decodes in buffered-image mode (t720)
  postgresql-15-postgis-3  # PostGIS's vector tiles: protobuf-c in a forking PostgreSQL server and its parallel workers (t723)
  postgresql-15-decoderbufs  # Debezium's logical decoding plugin: protobuf-c packs in a PostgreSQL backend (t724)
  collectd-core            # collectd's pinba plugin: protobuf-c unpacks of UDP packets on a daemon's thread (t725)
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
