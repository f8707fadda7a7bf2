#!/usr/bin/env bash
# build.sh SCHEMA.proto [MORE.proto...] OUTDIR
# Builds OUTDIR/protogen for your own schema: runs protoc-c on the .proto
# files (into OUTDIR/gen, emptied first), writes a registry of every message
# type they define (registry.sh), and compiles protogen.c with the generated
# code and the registry.
#   CC, CFLAGS        compiler and flags (default: cc, -O2 -g)
#   PROTOC_FLAGS      extra protoc-c flags, e.g. "--proto_path=../common" for
#                     imports (each schema's own directory is already on the
#                     path; imported .proto files must be listed as schemas too)
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: build.sh SCHEMA.proto [MORE.proto...] OUTDIR" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${!#}
PROTOS=("${@:1:$#-1}")
command -v protoc-c >/dev/null || { echo "build.sh: protoc-c not found (apt-get install protobuf-c-compiler)" >&2; exit 1; }

paths=()
for p in "${PROTOS[@]}"; do
  [ -f "$p" ] || { echo "build.sh: $p: no such file" >&2; exit 1; }
  paths+=("--proto_path=$(dirname "$p")")
done
rm -rf "$OUT/gen"
mkdir -p "$OUT/gen"
# shellcheck disable=SC2086 # PROTOC_FLAGS is a list of flags
protoc-c "${paths[@]}" ${PROTOC_FLAGS:-} --c_out="$OUT/gen" "${PROTOS[@]}"
mapfile -t headers < <(cd "$OUT/gen" && find . -name '*.pb-c.h' | sed 's|^\./||' | sort)
mapfile -t sources < <(find "$OUT/gen" -name '*.pb-c.c' | sort)
(cd "$OUT/gen" && "$HERE/registry.sh" "${headers[@]}") >"$OUT/gen/protogen_registry.c"
# shellcheck disable=SC2086 # CFLAGS is a list of flags
${CC:-cc} -std=gnu11 ${CFLAGS:--O2 -g} -I"$OUT/gen" -o "$OUT/protogen" \
  "$HERE/protogen.c" "${sources[@]}" "$OUT/gen/protogen_registry.c" -lprotobuf-c
echo "build.sh: built $OUT/protogen ($(grep -c '^    &' "$OUT/gen/protogen_registry.c") message types)"
