# Record tests (sourced by run.sh). Each runs in its own empty directory.

# Each message goes through get_packed_size, pack, pack_to_buffer, unpack:
# four outermost calls, however many sub-messages it has.
t001_record_basic_counts_outermost_calls_only() {
  "$PB" basic 20 >native.out
  "$STANDIN" record -o rec -- "$PB" basic 20 >rec.out
  cmp native.out rec.out
  expect_eq "calls" 80 "$(calls rec)"
  for api in pb.pack pb.size pb.pack_to_buffer pb.unpack; do
    expect_eq "$api calls" 20 "$(calls rec $api)"
  done
  "$STANDIN" info rec >info.out
  grep -q "calls 80" info.out || fail "info does not report 80 calls"
  grep -q "status: complete" info.out || fail "info does not say complete"
  grep -q "standin.test.Tree" info.out || fail "info lacks the message type"
  # bytes where a side is bytes: an unpack's response is a tree, a pack's request
  grep -q "^pb.unpack .*B  *-$" info.out || fail "unpack's byte columns: $(cat info.out)"
  grep -q "^pb.pack .*s  *-  *[0-9.]* [KMG]*i*B$" info.out || fail "pack's: $(cat info.out)"
  # -t, the trace directory as replay names it, means the same to record
  "$STANDIN" record -t rec2 -- "$PB" basic 20 >rec2.out
  cmp native.out rec2.out
  expect_eq "calls with -t" 80 "$(calls rec2)"
}

t002_record_eight_threads() {
  "$STANDIN" record -o rec -- "$PB" threads 8 15 >rec.out
  "$PB" threads 8 15 >native.out
  cmp native.out rec.out
  expect_eq "calls" $((8 * 15 * 4)) "$(calls rec)"
  # thread indices are creation order: workers are 1..8
  expect_eq "threads" "1 2 3 4 5 6 7 8" "$("$STANDIN" dump rec | awk '{print $4}' | sort -u | tr -d t | sort -n | xargs)"
}

t003_record_fork_child_has_own_file() {
  "$STANDIN" record -o rec -- "$PB" fork 3 5 >rec.out
  "$PB" fork 3 5 >native.out
  cmp native.out rec.out
  expect_eq "trace files" 4 "$(ls rec/*.trace | wc -l)"
  # the parent made 4 calls before forking; each child 20 of its own and
  # none of its parent's unflushed records
  counts=$("$STANDIN" dump rec | awk '{print $1}' | sort | uniq -c | awk '{print $1}' | sort -n | xargs)
  expect_eq "calls per process" "4 20 20 20" "$counts"
}

t004_record_follows_exec() {
  "$STANDIN" record -o rec -- "$PB" exec 5 >rec.out
  expect_eq "trace files" 2 "$(ls rec/*.trace | wc -l)"
  ls rec/*.1.trace >/dev/null || fail "no file for the exec'd image"
  expect_eq "calls" 24 "$(calls rec)"
  "$STANDIN" record -o rec2 --no-follow -- "$PB" exec 5 >rec2.out
  cmp rec.out rec2.out
  expect_eq "trace files with --no-follow" 1 "$(ls rec2/*.trace | wc -l)"
  expect_eq "calls with --no-follow" 4 "$(calls rec2)"
  # a shell that starts the program: nothing recorded, and why
  "$STANDIN" record -o rec3 --no-follow -- sh -c "'$PB' basic 2 >/dev/null" 2>err3
  grep -q "with --no-follow only sh itself was recorded, not the programs it started" err3 ||
    fail "$(cat err3)"
  grep -q "give up root" err3 && fail "root hint: $(cat err3)"
  return 0
}

# Processes in different PID namespaces can have the same pid (every
# sandbox's first process is pid 1), and sandboxes run one after the other
# often get the same namespace inode too. Files are still named by pid;
# whether an existing file is an earlier image of this process (exec) or
# another process is told by the PID namespace and start time in its
# header: only the exec'd image gets an exec number, info and report name
# the second process with the pid "#2" and its namespace, and the Chrome
# export gives each process a track of its own. Needs root, or a user
# namespace that maps us to it.
t038_record_same_pid_in_two_pid_namespaces() {
  local ns=(unshare -p -f --mount-proc)
  [ "$(id -u)" = 0 ] || ns=(unshare -r -p -f --mount-proc)
  "${ns[@]}" true 2>/dev/null || { echo "skipped: no PID namespace"; return 0; }
  local prog=(sh -c "${ns[*]} $PB basic 5; ${ns[*]} $PB exec 5")
  "${prog[@]}" >native.out
  "$STANDIN" record -o rec -- "${prog[@]}" >rec.out
  cmp native.out rec.out
  # the first process with pid 1 names its files 1.trace, 1.1.trace ...;
  # the second, 1-START.trace and 1-START.1.trace for its exec
  local names
  names=$(cd rec && ls *.trace | xargs)
  local f=($names)
  [[ ${f[0]} =~ ^1-([0-9]+)\.1\.trace$ ]] && [ "${f[1]}" = "1-${BASH_REMATCH[1]}.trace" ] &&
    [ "${f[2]}" = 1.trace ] && [ ${#f[@]} = 3 ] || fail "trace files: $names"
  expect_eq "calls" 44 "$(calls rec)"
  "$STANDIN" export -t rec -F json -o rec.json
  python3 - rec.json <<'PY' || fail "processes: $(head -c 3000 rec.json)"
import json, sys
ps = json.load(open(sys.argv[1]))["processes"]
assert all(p["pid"] == 1 and p["pidns"] and p["start_ticks"] for p in ps), ps
# in order of creation: the first sandbox's process, the second's, its exec
got = [(p["exec"], p["calls"]) for p in sorted(ps, key=lambda p: (p["start_ticks"], p["exec"]))]
assert got == [(0, 20), (0, 4), (1, 20)], got
assert len({(p["pidns"], p["start_ticks"]) for p in ps}) == 2, ps
PY
  "$STANDIN" info rec >info.out
  expect_eq "processes named with their namespace" 3 "$(grep -c '^process 1\( #2\)\? in pid:\[[0-9]*\]' info.out)"
  expect_eq "the second process with pid 1" 2 "$(grep -c '^process 1 #2 ' info.out)"
  expect_eq "its exec image" 1 "$(grep -c '^process 1 #2 in pid:\[[0-9]*\] (exec 1)' info.out)"
  expect_eq "parents outside the namespaces" 3 "$(grep -c ', parent outside its PID namespace: ' info.out)"
  "$STANDIN" report --by thread rec >rep.out
  expect_eq "threads in the report" 3 "$(grep -c '^pid 1 .*thread 0' rep.out)"
  expect_eq "threads of the second process" 2 "$(grep -c '^pid 1 #2 ' rep.out)"
  "$STANDIN" export -t rec -F chrome -o chrome.json
  expect_eq "Chrome tracks" 2 "$(python3 -c 'import json, sys
print(len({e["pid"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"}))' chrome.json)"
  # the timing runs of --retime tell the processes apart the same way
  "$STANDIN" record --retime -o ret -- "${prog[@]}" >/dev/null 2>ret.err
  grep -q "44 of 44 calls retimed" ret.err || fail "retime: $(cat ret.err)"
}

# Thousands of sandboxes each have a pid 1: the second and later take names
# of their own (1-START.trace), never scanning the first one's files. Before,
# every new pid 1 read the header of each earlier pid-1 file, and the
# 1,001st found no free name and was not recorded. Here the first process's
# sequence is full (1.trace to 1.999.trace) and the next sandbox still
# records, as the shim preloaded by hand into an existing directory.
t039_record_sandbox_after_a_full_name_sequence() {
  local ns=(unshare -p -f --mount-proc)
  [ "$(id -u)" = 0 ] || ns=(unshare -r -p -f --mount-proc)
  "${ns[@]}" true 2>/dev/null || { echo "skipped: no PID namespace"; return 0; }
  "$STANDIN" record -o rec -- "${ns[@]}" "$PB" basic 2 >/dev/null
  # two processes, not 999 (fd limit: 1024 on Debian by default)
  tee rec/1.{1..500}.trace <rec/1.trace >/dev/null
  tee rec/1.{501..999}.trace <rec/1.trace >/dev/null
  STANDIN_DIR=$PWD/rec LD_PRELOAD=$B/lib/standin/libstandin-record.so \
    "${ns[@]}" "$PB" basic 3 >/dev/null 2>err
  ! grep -q "too many trace files" err || fail "$(cat err)"
  local own
  own=$(cd rec && ls 1-*.trace)
  [[ $own =~ ^1-[0-9]+\.trace$ ]] || fail "its file: $own"
  mkdir own && cp rec/"$own" own/
  expect_eq "its calls" 12 "$(calls own)"
}

t005_record_missing_program_exits_127() {
  set +e
  "$STANDIN" record -o rec -- ./no-such-program 2>err
  rc=$?
  set -e
  expect_eq "exit status" 127 "$rc"
  grep -q "no-such-program: command not found" err || fail "message: $(cat err)"
}

t006_record_unwritable_dir_fails_before_program_starts() {
  mkdir ro && chmod 500 ro
  dir=ro/sub
  # root can write anywhere: use a path below a file instead
  [ "$(id -u)" = 0 ] && dir=/proc/version/x
  set +e
  "$STANDIN" record -o "$dir" -- sh -c 'touch started' 2>err
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "exit status 0"
  [ ! -e started ] || fail "the program ran"
  grep -q "cannot create recording directory" err || fail "message: $(cat err)"
  # a directory whose parents do not exist yet is made with them, as
  # mkdir -p (the program did not run)
  "$STANDIN" record -o new/deeper/rec -- "$PB" basic 1 >/dev/null
  expect_eq "calls" 4 "$(calls new/deeper/rec)"
}

t007_record_static_binary_runs_and_is_explained() {
  printf 'int main(void){return 3;}\n' >s.c
  gcc -static -o static-prog s.c 2>/dev/null || { echo "no static libc: skipped"; return 0; }
  set +e
  "$STANDIN" record -o rec -- ./static-prog 2>err
  rc=$?
  set -e
  expect_eq "exit status" 3 "$rc"
  grep -q "statically linked" err || fail "no warning: $(cat err)"
  "$STANDIN" info rec >info.out
  grep -q "statically linked" info.out || fail "info: $(cat info.out)"
}

t008_record_program_without_calls() {
  "$STANDIN" record -o rec -- true
  "$STANDIN" info rec >info.out
  grep -q "0 calls" info.out || fail "info: $(cat info.out)"
  grep -q "made no protobuf-c" info.out || fail "info: $(cat info.out)"
  # a command line of hundreds of words is cut in the header, at a word
  # shellcheck disable=SC2046
  "$STANDIN" record -o long -- "$PB" basic 1 1 $(seq 1 300) >/dev/null
  head -1 <("$STANDIN" info long) >head.out
  grep -q '^recording long: .*pbtest basic 1 1 1 2 3 .* [0-9]* \.\.\.$' head.out || fail "header: $(cat head.out)"
  [ "$(wc -c <head.out)" -lt 200 ] || fail "header not cut: $(wc -c <head.out) bytes"
}

t009_record_passes_exit_status() {
  set +e
  "$STANDIN" record -o rec -- sh -c 'exit 7'
  rc=$?
  set -e
  expect_eq "exit status" 7 "$rc"
}

t010_record_killed_program_keeps_complete_chunks() {
  "$STANDIN" record -o rec -- "$PB" basic 200000 >/dev/null 2>err &
  spid=$!
  for _ in $(seq 100); do
    sleep 0.05
    f=$(ls rec/*.trace 2>/dev/null | head -1)
    [ -n "$f" ] && [ "$(stat -c %s "$f")" -gt 200000 ] && break
  done
  pkill -KILL -f "pbtest basic 200000" || true
  wait $spid || true
  "$STANDIN" info rec >info.out || true
  grep -q "not closed\|damaged" info.out || fail "info: $(cat info.out)"
  n=$(calls rec 2>/dev/null)
  [ "$n" -gt 0 ] || fail "no calls read back"
}

t011_record_proto3_and_failed_unpack() {
  "$STANDIN" record -o rec -- "$PB" p3 12 >rec.out
  "$PB" p3 12 >native.out
  cmp native.out rec.out
  expect_eq "p3 calls" 36 "$(calls rec)"
  "$STANDIN" record -o rec2 -- "$PB" bad >bad.out
  grep -q "bad unpack -> NULL" bad.out
  "$STANDIN" dump rec2 | grep -q "pb.unpack.*FAILED" || fail "failed unpack not flagged"
}

t012_record_trace_files_are_private() {
  "$STANDIN" record -o rec -- "$PB" basic 2 >/dev/null
  expect_eq "dir mode" 700 "$(stat -c %a rec)"
  for f in rec/*.trace; do expect_eq "mode of $f" 600 "$(stat -c %a "$f")"; done
}

t013_dump_json_lines_parse() {
  "$STANDIN" record -o rec -- "$PB" basic 5 >/dev/null
  "$STANDIN" dump rec --format json --payload >d.json
  python3 - d.json <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 20, len(rows)
packs = [r for r in rows if r["api"] == "pb.pack"]
assert all(r["type"] == "standin.test.Tree" for r in rows)
assert all("message" in r and r["message"]["title"].startswith("tree-") for r in packs), packs[0]
assert all(r["features"]["encoded_size"] == r["resp_len"] for r in packs)
EOF
  expect_eq "limit" 3 "$("$STANDIN" dump rec --limit 3 | wc -l)"
  # --payload alone means JSON lines; with --format text it is refused
  "$STANDIN" dump rec --payload --limit 2 >p.json
  expect_eq "payload implies json" "$(head -2 d.json)" "$(cat p.json)"
  set +e
  "$STANDIN" dump rec --payload --format text >/dev/null 2>err
  rc=$?
  set -e
  expect_eq "payload with text" 2 "$rc"
  grep -q -- "--payload decodes each message into the JSON lines; use --format json" err ||
    fail "message: $(cat err)"
}

t014_record_refuses_to_overwrite_without_force() {
  "$STANDIN" record -o rec -- "$PB" basic 1 >/dev/null
  set +e
  "$STANDIN" record -o rec -- "$PB" basic 1 >/dev/null 2>err
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "second record succeeded"
  grep -q "already holds a recording (1 trace file);" err || fail "message: $(cat err)"
  expect_eq "calls kept" 4 "$(calls rec)"
  "$STANDIN" record -f -o rec -- "$PB" basic 2 >/dev/null
  expect_eq "calls after -f" 8 "$(calls rec)"
}

t015_info_reports_damaged_trace() {
  "$STANDIN" record -o rec -- "$PB" basic 50 >/dev/null
  f=$(ls rec/*.trace)
  size=$(stat -c %s "$f")
  # flip every bit of one byte in the middle of the file (writing a fixed
  # value changed nothing when the byte already held it: a third of runs)
  python3 -c 'import sys; f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]); f.seek(o); b = f.read(1)[0]; f.seek(o); f.write(bytes([b ^ 0xFF]))' "$f" $((size / 2))
  set +e
  "$STANDIN" info rec >info.out 2>&1
  set -e
  grep -q "damaged in the chunk at byte\|not a standin\|header" info.out || fail "info: $(cat info.out)"
  # damaged in its first chunk: no call is left, and whatif says so rather
  # than print a table of zeros
  "$STANDIN" record -o first -- "$PB" basic 5 >/dev/null
  python3 - first/*.trace <<'PY'
import struct, sys
f = open(sys.argv[1], "r+b")
plen = struct.unpack("<I", f.read(20)[16:20])[0]
o = 28 + plen + 40  # inside the first chunk (its header is 36 bytes)
f.seek(o); b = f.read(1)[0]; f.seek(o); f.write(bytes([b ^ 0xFF]))
PY
  set +e
  "$STANDIN" whatif first --iface protoacc >w.out 2>w.err
  rc=$?
  set -e
  expect_eq "whatif's exit status" 1 "$rc"
  grep -q "first: nothing to estimate: its traces are damaged before their first call" w.err ||
    fail "whatif: $(cat w.out w.err)"
}

# A program with libprotobuf-c linked in from its static archive calls its
# own copy, which no shim can stand in front of: record says so before it
# runs, names the function, and info says it again; a program linked
# against the shared library gets no such warning.
t036_record_names_a_library_linked_into_the_program() {
  "$STANDIN" record -o rec -- "$B/progs/pbtest-builtin" basic 3 >out 2>err
  "$B/progs/pbtest" basic 3 | cmp - out
  grep -q "^standin: warning: $B/progs/pbtest-builtin has libprotobuf-c linked into it (it defines protobuf_c_message_[a-z_]* itself)" err ||
    fail "record said: $(cat err)"
  grep -q "give up root" err && fail "the root hint too: $(cat err)"
  "$STANDIN" info rec >info.out
  grep -q "has libprotobuf-c linked into it" info.out || fail "info said: $(cat info.out)"
  "$STANDIN" record -o rec2 -- "$B/progs/pbtest" basic 3 >/dev/null 2>err2
  grep -q "linked into it" err2 && fail "$(cat err2)"
  # a program that dies of its own signal before any call (a limit, a
  # crash): the signal is said once, and no hint about servers follows
  set +e
  "$STANDIN" record -o rec3 -- sh -c 'kill -ABRT $$' 2>err3
  local rc=$?
  set -e
  expect_eq "status" 134 "$rc"
  grep -q "sh was killed by signal 6" err3 || fail "$(cat err3)"
  grep -q "give up root\|status 134" err3 && fail "$(cat err3)"
  return 0
}

# The shim's dlsym (interpose/handles.c) looks more up than the program
# asked for: the program's next dlerror() must still say what its own
# lookup did (a found function: no error; a missing one: an error).
t037_dlsym_on_a_handle_keeps_dlerror_state() {
  "$B/progs/dlsymtest" >native.out
  grep -q "^tjInitDecompress found no-error$" native.out || fail "$(cat native.out)"
  grep -q "^tjNoSuchFunction missing error$" native.out || fail "$(cat native.out)"
  "$STANDIN" record -o rec -- "$B/progs/dlsymtest" >rec.out 2>/dev/null
  cmp native.out rec.out || fail "recorded: $(cat rec.out)"
  "$STANDIN" record -o rec2 -- "$B/progs/pbtest" basic 1 >/dev/null
  "$STANDIN" replay -t rec2 -- "$B/progs/dlsymtest" >rep.out 2>/dev/null
  cmp native.out rep.out || fail "replayed: $(cat rep.out)"
}

t016_shim_exports_only_hooks() {
  syms=$(nm -D --defined-only "$B/lib/standin/libstandin-record.so" | awk '$2 == "T" {print $3}' | sort | xargs)
  expect_eq "exported" "_Exit _exit chroot close close_range closefrom daemon dlclose dlopen dlsym dup2 dup3 execl execle execlp execv execve execvp execvpe fexecve jpeg_CreateDecompress jpeg_abort jpeg_abort_decompress jpeg_consume_input jpeg_crop_scanline jpeg_destroy jpeg_destroy_decompress jpeg_finish_decompress jpeg_finish_output jpeg_read_coefficients jpeg_read_header jpeg_read_raw_data jpeg_read_scanlines jpeg_skip_scanlines jpeg_start_decompress jpeg_start_output kill pipe pipe2 posix_spawn posix_spawnp prctl protobuf_c_message_get_packed_size protobuf_c_message_pack protobuf_c_message_pack_to_buffer protobuf_c_message_unpack pthread_create pthread_exit pthread_kill raise syscall tjDecompress2 tjDecompressHeader3 tjDecompressToYUV2 tjDecompressToYUVPlanes" "$syms"
}

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# note DIR KEY: the value of note KEY in DIR's trace files, summed (notes are
# written at close, in a data chunk).
# note DIR KEY...: each KEY's values in DIR's traces, summed, one line each
note() {
  python3 - "$E2E_DIR" "$@" <<'PYEOF'
import glob, struct, sys, zlib
sys.path.insert(0, sys.argv[1])
from tracefmt import varint
keys = sys.argv[3:]
total = dict.fromkeys(keys, 0)
for path in glob.glob(sys.argv[2] + "/*.trace"):
    data = open(path, "rb").read()
    off = 28 + struct.unpack_from("<I", data, 16)[0]
    while off + 32 <= len(data) and data[off:off + 4] == b"STCK":
        typ, method = data[off + 4], data[off + 5]
        clen = struct.unpack_from("<I", data, off + 12)[0]
        body = data[off + 32:off + 32 + clen]
        off += 32 + clen
        if typ != 1:
            continue
        raw = zlib.decompress(body) if method == 1 else body
        pos = 0
        while pos < len(raw):
            kind = raw[pos]
            n, pos = varint(raw, pos + 1)
            rec, pos = raw[pos:pos + n], pos + n
            if kind != 6:
                continue
            klen, p = varint(rec, 0)
            key = rec[p:p + klen].decode()
            if key in total:
                vlen, q = varint(rec, p + klen)
                total[key] += int(rec[q:q + vlen])
print("\n".join(str(total[k]) for k in keys))
PYEOF
}

# dump DIR as what must not depend on where fingerprints were computed:
# every call's API, type, thread, sizes, result, flags, reason,
# fingerprint and features, in a canonical order
calls_canon() {
  "$STANDIN" dump "$1" --format json | python3 -c '
import json, sys
keep = ("api", "type", "thread", "req_len", "resp_len", "result", "flags", "reason", "fp", "features", "site")
def canon(d):
    d["features"].pop("fault_ns", None)  # the call'"'"'s page faults: not the request'"'"'s
    return {k: d[k] for k in keep}
rows = [json.dumps(canon(d), sort_keys=True) for d in map(json.loads, sys.stdin)]
print("\n".join(sorted(rows)))'
}

# Pack fingerprints and features are derived from the saved bytes on the
# writer thread; the trace must hold what walking the tree on the calling
# thread gives (STANDIN_PACK_FP=walk), for nested, proto3, threaded and
# randomly generated messages, for trees nested too deep to fingerprint, and
# for the same bytes packed again (the writer remembers derivations by
# response blob), from one type or from two; and so must get_packed_size
# calls that took the fingerprint of the pack that followed them.
# (The first calls of a type are walked until the writer has its schema,
# and calls are walked while the writer is behind.)
t017_record_pack_fingerprints_from_bytes_equal_the_walk() {
  i=0
  derived=0
  sized=0
  while read -r prog args; do
    i=$((i + 1))
    STANDIN_PACK_FP=walk "$STANDIN" record -o walk$i -- "$B/progs/$prog" $args >walk$i.out
    "$STANDIN" record -o bytes$i -- "$B/progs/$prog" $args >bytes$i.out
    cmp walk$i.out bytes$i.out
    calls_canon walk$i >walk$i.calls
    calls_canon bytes$i >bytes$i.calls
    [ -s walk$i.calls ] || fail "$prog $args: no calls"
    cmp walk$i.calls bytes$i.calls || fail "$prog $args: traces differ: $(diff walk$i.calls bytes$i.calls | head -4)"
    { read -r w_derived; read -r w_sized; } < <(note walk$i pack_fp_from_bytes size_fp_from_pack)
    { read -r b_derived; read -r b_not; read -r b_sized; read -r b_unpaired; } < \
      <(note bytes$i pack_fp_from_bytes pack_fp_not_derived size_fp_from_pack size_fp_unpaired)
    expect_eq "$prog $args: derived with walk" 0 "$w_derived"
    derived=$((derived + b_derived))
    expect_eq "$prog $args: not derived" 0 "$b_not"
    # get_packed_size then pack: the size takes the pack's fingerprint
    sized=$((sized + b_sized))
    expect_eq "$prog $args: sizes with no pack" 0 "$b_unpaired"
    expect_eq "$prog $args: sizes paired with walk" 0 "$w_sized"
  done <<LIST
pbtest basic 300
pbtest p3 3000
pbtest threads 3 200
pbtest deep 101 300
pbtest same 1000
protogen -n 60 -m all
rpc -n 400 -t 1
LIST
  # how many calls the writer derived depends on when it runs (a short
  # threaded run may end before it has seen a type): most, over all runs
  [ "$derived" -gt 1000 ] || fail "only $derived fingerprints were derived from bytes"
  [ "$sized" -gt 500 ] || fail "only $sized sizes took their pack's fingerprint"
  # too deep: no fingerprint, flagged, from bytes as from the walk
  grep -q '"reason": 2' bytes4.calls || fail "no call flagged too deep"
}

# Unpack features are derived by the writer from the request bytes, and
# remembered by request blob (identical bytes are stored once): every
# unpack of the same bytes carries what the walk of that message gives
# (pbbench packs it once, walked, then unpacks it 500 times), and every
# unpack agrees with the pack of the same message, over distinct messages
# (pbtest basic) and many types, empty messages of several types included
# (protogen: one blob, several types).
t027_record_unpack_features_from_bytes_equal_the_walk() {
  STANDIN_PACK_FP=walk "$STANDIN" record -o un -- "$B/progs/pbbench" unpack 300 500 >/dev/null
  "$STANDIN" dump un --format json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
for r in rows:  # the call'"'"'s page faults: not the request'"'"'s
    r["features"].pop("fault_ns", None)
walked = [r["features"] for r in rows if r["api"] == "pb.pack"]
unpacks = [r["features"] for r in rows if r["api"] == "pb.unpack"]
assert len(walked) == 1 and len(unpacks) == 600, (len(walked), len(unpacks))
assert walked[0]["fields"] > 0 and walked[0]["submsgs"] > 0, walked[0]
bad = [u for u in unpacks if u != walked[0]]
assert not bad, ("unpack features differ from the walk", walked[0], bad[:2])
' || fail "unpack features"
  "$STANDIN" record -o basic -- "$PB" basic 200 >/dev/null
  "$STANDIN" record -o gen -- "$B/progs/protogen" -n 40 -m all >/dev/null
  for d in basic gen; do
  "$STANDIN" dump $d --format json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
for r in rows:  # the call'"'"'s page faults: not the request'"'"'s
    r["features"].pop("fault_ns", None)
# each pack_to_buffer and unpack of one message in pbtest basic share bytes:
# their features must agree, message by message
packs = {}
for r in rows:
    if r["api"] in ("pb.pack", "pb.pack_to_buffer"):
        packs.setdefault((r["type"], r["features"]["encoded_size"]), []).append(r["features"])
n = 0
for r in rows:
    if r["api"] == "pb.unpack":
        cands = packs.get((r["type"], r["features"]["encoded_size"]), [])
        assert r["features"] in cands, ("no pack of", r["type"], "has these features", r["features"])
        n += 1
assert n >= 40, n
' || fail "unpack features ($d)"
  done
}

# A get_packed_size whose call site has been followed by a pack of the
# same message leaves its fingerprint to that pack; when no pack comes (a
# lone size), it is written without one (reason 4), replay runs it for
# real, and its type's sizes walk again. Every other size carries what the
# walk gives, and the program's output is the same recorded and replayed.
t028_record_size_takes_its_packs_fingerprint() {
  "$PB" lonesize 3000 >native.out
  STANDIN_PACK_FP=walk "$STANDIN" record -o walk -- "$PB" lonesize 3000 >walk.out
  "$STANDIN" record -o rec -- "$PB" lonesize 3000 >rec.out
  cmp native.out rec.out
  u=$(note rec size_fp_unpaired)
  expect_eq "sizes flagged" "$u" "$("$STANDIN" dump rec --format json | grep '"api":"pb.size"' | grep -c '"reason":4')"
  [ "$(note rec size_fp_from_pack)" -gt 0 ] || fail "no size took its pack's fingerprint"
  for d in walk rec; do
    "$STANDIN" dump $d --format json | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    r["features"].pop("fault_ns", None)  # the call'"'"'s page faults: not the request'"'"'s
    print(r["api"], r["reason"], r["fp"], json.dumps(r["features"], sort_keys=True))' >$d.rows
  done
  # row by row (one thread: the same order), the flagged sizes aside
  paste -d'|' walk.rows rec.rows | awk -F'|' '{split($2, b, " "); if (b[2] != 4 && $1 != $2) bad++} END {exit bad > 0}' ||
    fail "calls differ from the walk: $(paste -d'|' walk.rows rec.rows | awk -F'|' '$1 != $2' | head -3)"
  "$STANDIN" replay -t rec --summary s.json -- "$PB" lonesize 3000 >rep.out
  cmp native.out rep.out
  expect_eq "fallback calls" "$u" "$(json s.json calls_fallback)"
}

# A hand-built unknown field whose bytes do not read back (a group) is the
# one thing the writer cannot derive: the call is kept, flagged and without
# a fingerprint, so replay runs it for real; the program's output is the
# same.
t018_record_pack_fingerprint_not_derivable_is_flagged() {
  "$STANDIN" record -o rec -- "$PB" oddunknown 3000 >rec.out
  "$PB" oddunknown 3000 >native.out
  cmp native.out rec.out
  n=$(note rec pack_fp_not_derived)
  [ "$n" -gt 0 ] || fail "nothing flagged: $(note rec pack_fp_from_bytes) derived"
  # a get_packed_size that left its fingerprint to such a pack is flagged
  # with it; then its type's sizes walk again, so only a few are
  u=$(note rec size_fp_unpaired)
  [ "$u" -le 2 ] || fail "$u sizes flagged: the type's sizes should walk after the first"
  expect_eq "flagged calls" "$((n + u))" "$("$STANDIN" dump rec --format json | grep -c '"reason":4')"
  "$STANDIN" replay -t rec --summary s.json -- "$PB" oddunknown 3000 >rep.out
  cmp native.out rep.out
}

# The trace writer runs at SCHED_IDLE, so that it never takes a core from the
# program in the middle of a timed call, when the process may raise it back
# (root, CAP_SYS_NICE or RLIMIT_NICE >= 20); otherwise at normal priority,
# which the trace records and info reports.
t019_record_writer_yields_to_the_program() {
  local can=0
  if [ "$(id -u)" = 0 ] || [ "$(ulimit -e)" = unlimited ] || [ "$(ulimit -e)" -ge 20 ]; then can=1; fi
  "$STANDIN" record -o rec -- "$PB" linger 3000 >rec.out &
  local pid=$! tid="" policy=""
  # builtins only in the scan (a fork per thread made one scan outlast the
  # program on a slow-forking, loaded VM); the program may end at any point
  local comm p
  for _ in $(seq 300); do
    for t in /proc/*/task/*; do
      comm=""
      read -r comm 2>/dev/null <"$t/comm" || true
      [ "$comm" = standin-writer ] || continue
      case "$(tr '\0' ' ' 2>/dev/null <"${t%/task/*}/cmdline")" in
      *"$PB linger 3000"*) tid=$t ;;
      esac
    done
    if [ -n "$tid" ]; then
      p=$(awk '{print $41}' "$tid/stat" 2>/dev/null) || p=""
      [ -n "$p" ] && policy=$p
      # root: wait until it has yielded; otherwise it never will
      [ "$policy" = 5 ] || { [ $can = 0 ] && [ -n "$policy" ]; } && break
    fi
    sleep 0.01
  done
  wait $pid
  [ -n "$tid" ] || fail "no standin-writer thread seen"
  "$STANDIN" info rec >info.out
  if [ $can = 1 ]; then
    expect_eq "writer policy (5: SCHED_IDLE)" 5 "$policy"
    grep -q "normal priority" info.out && fail "info says normal priority although the writer yielded"
  else
    expect_eq "writer policy (0: SCHED_OTHER)" 0 "$policy"
    grep -q "normal priority" info.out || fail "info does not say the writer ran at normal priority"
  fi
  STANDIN_WRITER_PRIORITY=normal "$STANDIN" record -o rec2 -- "$PB" basic 3 >/dev/null
  "$STANDIN" info rec2 | grep -q "normal priority" ||
    fail "STANDIN_WRITER_PRIORITY=normal: info does not say so"
  true
}

# --retime runs the program again with a timing-only hook and gives each
# call that run's latency: everything else in the trace stays as recorded.
t020_record_retime_replaces_latencies_only() {
  "$PB" basic 100 >native.out
  "$STANDIN" record -o rec -- "$PB" basic 100 >/dev/null
  "$STANDIN" record --retime -o ret -- "$PB" basic 100 >ret.out 2>ret.err
  cmp native.out ret.out
  grep -q "400 of 400 calls retimed" ret.err || fail "retime summary: $(cat ret.err)"
  [ ! -e ret/.timing ] || fail "the timing run's directory was left behind"
  # same calls, types, sizes, sites and fingerprints; only pid, time and latency differ
  "$STANDIN" dump rec | cut -d' ' -f2,4-6,8- >rec.dump
  "$STANDIN" dump ret | cut -d' ' -f2,4-6,8- >ret.dump
  cmp rec.dump ret.dump || fail "retime changed more than latencies"
  [ "$("$STANDIN" dump ret | awk '{print $7}' | sort | uniq | wc -l)" -gt 1 ] ||
    fail "latencies look constant"
  "$STANDIN" info ret | grep -q "latencies of 400 of 400 calls, from the fastest of 3 timing-only runs" ||
    fail "info does not say the trace was retimed"
  # 1000+ calls under 2 us on average timed with the recorder running:
  # info points at --retime (how long they took depends on the build: the
  # test checks the rule either way)
  "$STANDIN" record -o many -- "$PB" basic 300 >/dev/null
  mean=$("$STANDIN" dump many | awk '{sub("ns", "", $7); s += $7; n++} END {print int(s / n)}')
  if [ "$mean" -lt 1990 ]; then
    "$STANDIN" info many | grep -q "calls this short .* on average) were timed with the recorder" ||
      fail "no word about --retime (mean $mean ns): $("$STANDIN" info many)"
  elif [ "$mean" -gt 2010 ]; then
    "$STANDIN" info many | grep -q "calls this short" && fail "mean $mean ns, yet info suggests --retime"
  fi
  "$STANDIN" record --retime=1 -o manyr -- "$PB" basic 300 >/dev/null 2>&1
  "$STANDIN" info manyr | grep -q "calls this short" && fail "retimed, yet info suggests --retime"
  "$STANDIN" replay -t ret --summary s.json -- "$PB" basic 100 >rep.out
  cmp native.out rep.out
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
  # forked children are paired with the timing run's by what they did
  # (forkpar: they run at once, so they start in any order), else by pid.
  "$STANDIN" record --retime -o fk -- "$PB" fork 3 5 >/dev/null 2>fk.err
  grep -q "64 of 64 calls retimed" fk.err || fail "fork: $(cat fk.err)"
  "$STANDIN" record --retime -o fp -- "$PB" forkpar 3 20 >/dev/null 2>fp.err
  grep -q "240 of 240 calls retimed" fp.err || fail "forkpar: $(cat fp.err)"
}

# A process whose calls differ in the second run keeps its recorded latencies,
# and the user is told.
t021_record_retime_keeps_what_does_not_match() {
  echo 20 >n.txt
  # the input comes through a pipe, which the timing runs cannot read
  # again: they pack 3 messages instead of 20
  cat n.txt | "$STANDIN" record --retime -o rec -- sh -c 'read n; exec "$0" basic "${n:-3}"' "$PB" \
    >/dev/null 2>err.txt
  grep -q "none of the 80 calls could be retimed" err.txt || fail "$(cat err.txt)"
  # a program that made no call is not run again for nothing
  set +e
  "$STANDIN" record --retime=3 -o none -- sh -c 'echo run >>runs.txt; exit 3' 2>none.err
  rc=$?
  set -e
  expect_eq "status" 3 "$rc"
  expect_eq "runs" 1 "$(wc -l <runs.txt)"
  grep -q "no trace to retime; the program was not run again" none.err || fail "$(cat none.err)"
  grep -q "1 process had no counterpart" err.txt || fail "$(cat err.txt)"
  expect_eq "calls" 80 "$(calls rec)"
  "$STANDIN" info rec | grep -q "timing-only" && fail "info claims a retime"
  # a thread pool whose calls differ between the runs (here: the second
  # run's items are smaller) cannot be paired even as a pool
  cat n.txt | "$STANDIN" record --retime=1 -o pool -- sh -c 'read n; exec "$0" pool 4 "${n:-3}"' "$PB" \
    >/dev/null 2>pool.err
  grep -q "none of the .* calls could be retimed" pool.err || fail "pool: $(cat pool.err)"
}

# --retime=N: each call gets its latency in the timing run whose time in
# calls is the lowest, or with --retime-run median the median (checked
# against the runs' own files); a thread pool's calls are paired as a whole
# A program that reads its standard input: the timing runs get a file given
# with < again from its start (they had /dev/null, and nothing could be
# retimed); a pipe cannot be read again, and the message says so.
t023_record_retime_reads_a_file_on_stdin_again() {
  printf '3\n5\n' >in.txt
  "$STANDIN" record --retime -o rec -- sh -c "while read n; do $PB basic \$n; done" \
    <in.txt >/dev/null 2>err
  grep -q "^standin: --retime: 32 of 32 calls retimed" err || fail "file: $(cat err)"
  printf '3\n5\n' | "$STANDIN" record --retime -o rec2 -- sh -c "while read n; do $PB basic \$n; done" \
    >/dev/null 2>err2
  grep -q "none of the 32 calls could be retimed" err2 && grep -q "nor one that reads its standard input, a pipe here" err2 ||
    fail "pipe: $(cat err2)"
}

# by API, size and start order, and the trace still replays exactly.
t022_record_retime_median_and_pools() {
  "$PB" basic 50 >native.out
  local chk
  chk="$(dirname "$PB")/../../tests/e2e/tools/retime_check.py"
  STANDIN_RETIME_KEEP=1 "$STANDIN" record --retime=3 -o r3 -- "$PB" basic 50 >r3.out 2>r3.err
  cmp native.out r3.out
  grep -q "200 of 200 calls retimed (their time .* the fastest run's; the 3 runs' times ranged +0.0%\.\." r3.err ||
    fail "summary: $(cat r3.err)"
  "$STANDIN" dump r3 >r3.dump
  python3 "$chk" r3/.timing r3.dump fastest >chk.txt || fail "not the fastest run's: $(cat chk.txt)"
  grep -q "ok 200 calls, 3 runs" chk.txt || fail "$(cat chk.txt)"
  "$STANDIN" info r3 | grep -Eq "from the fastest of 3 timing-only runs; their times in calls ranged \+0\.0%\.\.[-+][0-9.]+% around it" ||
    fail "info: $("$STANDIN" info r3 | grep latencies)"
  STANDIN_RETIME_KEEP=1 "$STANDIN" record --retime=3 --retime-run median -o m3 -- "$PB" basic 50 >m3.out 2>m3.err
  cmp native.out m3.out
  grep -q "200 of 200 calls retimed (their time .* the median run's; the 3 runs' times ranged " m3.err ||
    fail "summary: $(cat m3.err)"
  "$STANDIN" dump m3 >m3.dump
  python3 "$chk" m3/.timing m3.dump median >chkm.txt || fail "not the median run's: $(cat chkm.txt)"
  "$STANDIN" info m3 | grep -q "from the median of 3 timing-only runs" || fail "info of m3"
  STANDIN_RETIME_KEEP=1 "$STANDIN" record --retime=2 --retime-run=median -o r2 -- "$PB" basic 50 >/dev/null 2>&1
  "$STANDIN" dump r2 >r2.dump
  python3 "$chk" r2/.timing r2.dump median >chk2.txt || fail "not the lower middle of 2: $(cat chk2.txt)"
  "$STANDIN" info r2 | grep -q "from the median of 2 timing-only runs" || fail "info of r2"
  # the choice is refused when it is not a run's or there are no runs
  set +e
  "$STANDIN" record --retime --retime-run slowest -o bad -- "$PB" basic 1 >/dev/null 2>bad.err
  expect_eq "bad pick status" 2 "$?"
  "$STANDIN" record --retime-run median -o bad -- "$PB" basic 1 >/dev/null 2>bad2.err
  expect_eq "pick without runs status" 2 "$?"
  set -e
  grep -q "'slowest' is neither 'fastest' nor 'median'" bad.err || fail "$(cat bad.err)"
  grep -q "give --retime too" bad2.err || fail "$(cat bad2.err)"
  [ ! -e bad ] || fail "a refused recording left bad/"
  # a pool: every call retimed. rotpool's workers take other messages in
  # the timing runs (which read no input: it comes through a pipe) than in
  # the recording, so no thread pairs by itself and all 120 calls pair as a
  # pool's
  echo 1 >rot.txt
  "$PB" rotpool 4 30 <rot.txt >rot.native
  cat rot.txt | "$STANDIN" record --retime=2 -o rot -- "$PB" rotpool 4 30 >rot.out 2>rot.err
  cmp rot.native rot.out
  grep -q "120 of 120 calls retimed" rot.err || fail "rotpool: $(cat rot.err)"
  grep -q "120 of them on threads whose work differed" rot.err || fail "rotpool: $(cat rot.err)"
  "$STANDIN" replay -t rot -- "$PB" rotpool 4 30 <rot.txt >rot.rep
  cmp rot.native rot.rep
  # a queue-fed pool: every call retimed, whichever way the work fell
  "$PB" pool 4 30 >pool.native
  "$STANDIN" record -o plain -- "$PB" pool 4 30 >/dev/null 2>&1
  "$STANDIN" record --retime=3 -o pool -- "$PB" pool 4 30 >pool.out 2>pool.err
  cmp pool.native pool.out
  n=$(calls pool)
  grep -q "$n of $n calls retimed" pool.err || fail "pool: $(cat pool.err)"
  # the same calls as a plain recording's, whichever threads made them
  "$STANDIN" dump plain | cut -d' ' -f5,6,8- | sort >plain.dump
  "$STANDIN" dump pool | cut -d' ' -f5,6,8- | sort >pool.dump
  cmp plain.dump pool.dump || fail "the pool's calls changed"
  "$STANDIN" replay -t pool --summary s.json -- "$PB" pool 4 30 >rep.out
  cmp pool.native rep.out
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
  # bad counts are refused before anything runs
  for bad in 0 16 x ""; do
    set +e
    "$STANDIN" record --retime="$bad" -o bad -- "$PB" basic 1 >/dev/null 2>bad.err
    rc=$?
    set -e
    expect_eq "--retime=$bad status" 2 "$rc"
    grep -q "'$bad' is not a number of runs from 1 to 15" bad.err || fail "$(cat bad.err)"
    [ ! -e bad ] || fail "--retime=$bad created the directory"
  done
}

# rt_stack reuses a remembered stack when the return addresses it found
# are still where they were; the call stacks in the trace must be exactly
# what unwinding every call gives (STANDIN_STACK_MEMO=0), for one call
# site reached through two parents, recursion of varying depth and a frame
# of varying size, at several depths, and on threads (whose stacks end
# before the deepest).
# call_frames DIR: each recorded call's thread and call-stack offsets
call_frames() {
  "$STANDIN" dump "$1" --format json | python3 -c '
import json, sys
for l in sys.stdin:
    c = json.loads(l)
    print(c["thread"], " ".join(str(f["offset"]) for f in c["frames"]))'
}

t031_record_stack_memo_gives_the_unwound_stacks() {
  frames() { call_frames "$@"; }
  for depth in 1 3 6 12; do
    "$STANDIN" record -o memo$depth --stack-depth $depth -- "$B/progs/pbtest" stacks 600 >memo$depth.out
    STANDIN_STACK_MEMO=0 "$STANDIN" record -o unw$depth --stack-depth $depth -- \
      "$B/progs/pbtest" stacks 600 >unw$depth.out
    cmp memo$depth.out unw$depth.out
    frames memo$depth >memo$depth.frames
    frames unw$depth >unw$depth.frames
    expect_eq "depth $depth: calls" 600 "$(wc -l <memo$depth.frames)"
    cmp memo$depth.frames unw$depth.frames ||
      fail "depth $depth: stacks differ: $(diff memo$depth.frames unw$depth.frames | head -4)"
  done
  # the stacks really differ from call to call at depth 6
  [ "$(sort -u memo6.frames | wc -l)" -ge 6 ] || fail "only $(sort -u memo6.frames | wc -l) stacks"
  # on threads, at 8 deeper than their stacks (kept as ending there)
  for depth in 4 8; do
    "$STANDIN" record -o th$depth --stack-depth $depth -- "$B/progs/pbtest" threads 4 200 >th.out
    STANDIN_STACK_MEMO=0 "$STANDIN" record -o thu$depth --stack-depth $depth -- \
      "$B/progs/pbtest" threads 4 200 >thu.out
    frames th$depth | sort >th.frames
    frames thu$depth | sort >thu.frames
    cmp th.frames thu.frames ||
      fail "threads, depth $depth: stacks differ: $(diff th.frames thu.frames | head -4)"
  done
}

# When the writer falls behind, the program's threads wait for ring space;
# info says how often and for how long, and no call is lost. A 64 KiB ring
# (the smallest) holds ~60 packs of 1 KiB: a loop of 20,000 fills it.
t024_record_info_reports_waits_for_ring_space() {
  STANDIN_RING_KB=64 "$STANDIN" record -o small -- "$B/progs/pbbench" pack 1024 20000 >/dev/null
  "$STANDIN" info small >small.info
  grep -q "waited [0-9,]* times* for ring space" small.info || fail "no wait reported: $(head -8 small.info)"
  grep -q "this run: 64.0 KiB" small.info || fail "ring size not reported: $(grep -A2 'ring space' small.info)"
  expect_eq "calls" 20102 "$(calls small)" # 100 warm-up packs and a size
  # and what the writer thread itself cost: a CPU time above zero
  grep -Eq "trace writer thread used [0-9.]+ [mun]?s of CPU \([0-9.]+ [mun]?s a call\)" small.info ||
    fail "writer CPU not reported: $(head -10 small.info)"
  grep -q "trace writer thread used 0 " small.info && fail "writer CPU reported as zero"
  "$STANDIN" record -o few -- "$PB" basic 20 >/dev/null
  "$STANDIN" info few | grep -q "ring space" && fail "waits reported for 80 calls"
  true
}

# Payloads too large for a ring (more than an eighth of it) wait for the
# writer on the heap, at most 8 rings' worth: a writer that falls behind
# (here made to sleep 2 ms a round) makes the program wait instead of
# letting them pile up. 64 KiB packs with a 64 KiB ring: at most 8 wait.
t029_record_bounds_payloads_waiting_on_the_heap() {
  STANDIN_WRITER_STALL_US=2000 STANDIN_RING_KB=64 "$STANDIN" record -o heap -- \
    "$B/progs/pbbench" pack 65536 300 >/dev/null
  "$STANDIN" info heap >heap.info
  expect_eq "calls" 402 "$(calls heap)" # 100 warm-up packs, a size, none lost
  grep -q "waited [0-9,]* times* for ring space" heap.info || fail "no wait: $(head -12 heap.info)"
  local peak
  peak=$(grep -o "8 rings, 512.0 KiB; at most [0-9.]* [KMG]*i*B waited" heap.info) ||
    fail "no bound reported: $(grep -A4 waited heap.info)"
  # at most the bound; and more than one payload did wait (the writer lagged)
  echo "$peak" | awk '{v=$7; u=$8; if (u=="MiB") v*=1024; if (u=="B") v/=1024; exit !(v > 64 && v <= 512)}' ||
    fail "peak outside (64 KiB, 512 KiB]: $peak"
  "$STANDIN" replay -t heap --iface constant:ns=0 -- "$B/progs/pbbench" pack 65536 300 >/dev/null ||
    fail "replay of the bounded recording"
}

# libprotobuf-c calls its own exported functions for every sub-message:
# those calls go straight to it, not through the hooks (interpose/bypass.c).
# A counting shim preloaded beneath the recorder sees only the program's
# calls; with STANDIN_BYPASS_OWN_CALLS=0 it sees the nested ones too.
t025_library_calls_to_itself_skip_the_hooks() {
  [ "$(uname -m)" = x86_64 ] || { echo "skipped: GOT bypass is x86-64 only"; return 0; }
  cat >cnt.c <<'CEOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <protobuf-c/protobuf-c.h>
static unsigned long n;
size_t protobuf_c_message_pack(const ProtobufCMessage *m, uint8_t *o) {
  static size_t (*r)(const ProtobufCMessage *, uint8_t *);
  if (!r) r = (size_t (*)(const ProtobufCMessage *, uint8_t *))dlsym(RTLD_NEXT, "protobuf_c_message_pack");
  n++;
  return r(m, o);
}
__attribute__((destructor)) static void fin(void) { fprintf(stderr, "packs seen %lu\n", n); }
CEOF
  gcc -shared -fPIC -o cnt.so cnt.c
  "$PB" basic 20 >nat.out
  LD_PRELOAD=./cnt.so "$STANDIN" record -o rec -- "$PB" basic 20 >rec.out 2>err
  cmp nat.out rec.out
  # the program's 20 packs, none of the library's own (and none of
  # record's: it reads what pack_to_buffer appended back, t026)
  grep -q "^packs seen 20$" err || fail "bypassed: $(cat err)"
  [ "$(note rec pb_own_calls_bypassed)" -ge 4 ] || fail "bypassed slots: $(note rec pb_own_calls_bypassed)"
  STANDIN_BYPASS_OWN_CALLS=0 LD_PRELOAD=./cnt.so "$STANDIN" record -o rec0 -- "$PB" basic 20 \
    >rec0.out 2>err0
  cmp nat.out rec0.out
  n=$(sed -n 's/^packs seen //p' err0 | sort -n | tail -1) # and standin's own 0
  [ "$n" -gt 20 ] || fail "not bypassed: $(cat err0)"
  expect_eq "calls recorded either way" "$(calls rec)" "$(calls rec0)"
  # replay's real calls go straight to the library too
  LD_PRELOAD=./cnt.so "$STANDIN" replay -t rec --iface constant:ns=0 -- "$PB" basic 20 >rep.out 2>err
  cmp nat.out rep.out
}

# pack_to_buffer into a ProtobufCBufferSimple: record reads the appended
# bytes back instead of packing the tree again; the saved bytes are the
# ones replay then appends (pbtest compares the two packings it made).
t026_record_reads_back_simple_buffers() {
  "$PB" basic 20 >nat.out
  "$STANDIN" record -o rec -- "$PB" basic 20 >rec.out
  cmp nat.out rec.out
  expect_eq "read back" 20 "$(note rec pack_to_buffer_read_back)"
  "$STANDIN" replay -t rec --summary s.json -- "$PB" basic 20 >rep.out
  cmp nat.out rep.out
  expect_eq "replayed" 80 "$(json s.json calls_replayed)"
  expect_eq "fallback" 0 "$(json s.json calls_fallback)"
}

# A program with a libdeflate of its own: its compressor and decompressor
# are allocated before its first protobuf-c call and freed after its last.
# The recorder, which loads libdeflate at that first call, must leave the
# allocator of the program's libdeflate as it was: once it switched it to
# its own heap, whose free stopped the program at a block it had not given.
t034_record_leaves_the_programs_libdeflate_allocator_alone() {
  local pd="$B/progs/pbdeflate"
  "$pd" 3000 >native.out
  "$STANDIN" record -o rec -- "$pd" 3000 >rec.out 2>rec.err || fail "record failed: $(cat rec.err)"
  cmp native.out rec.out || fail "output differs"
  expect_eq "calls" 9000 "$(calls rec)"
  "$STANDIN" replay -t rec --summary s.json -- "$pd" 3000 >rep.out
  cmp native.out rep.out || fail "replayed output differs"
  expect_eq "replayed" 9000 "$(json s.json calls_replayed)"
}

# Every process of a run loads the record shim, a script's shell and its
# tools as well as the program; only a process that records a call loads
# libunwind (and, for its trace, libdeflate): grep, which makes none, maps
# neither, and pbtest maps libunwind once it has made its calls.
t030_record_loads_its_libraries_only_in_calling_processes() {
  "$STANDIN" record -o rec -- sh -c \
    'grep -c -e libunwind -e libdeflate -e liblzma /proc/self/maps; exec "$0" maps 5' \
    "$B/progs/pbtest" >out || fail "record failed"
  expect_eq "standin's libraries mapped by grep" 0 "$(head -1 out)"
  grep -q "^maps libunwind\.so" out || fail "pbtest did not map libunwind: $(grep '^maps' out)"
  expect_eq "calls" 20 "$(calls rec)"
  "$STANDIN" report -t rec --by site >rep || fail "report failed"
  "$STANDIN" dump rec --format json | grep -q '"module":"[^"]*/pbtest"' ||
    fail "no call site in pbtest: $(cat rep)"
  # a program with a libunwind of its own (loaded first): the shim unwinds
  # with it, leaving its caching policy as it was
  "$STANDIN" record -o own -- sh -c 'LD_PRELOAD="$LD_PRELOAD libunwind.so.8" exec "$0" maps 5' \
    "$B/progs/pbtest" >own.out || fail "record with the program's libunwind failed"
  expect_eq "libunwind mapped once" 1 "$(grep -c '^maps libunwind\.so' own.out)"
  expect_eq "calls (program's libunwind)" 20 "$(calls own)"
  "$STANDIN" report -t own --by site >own.rep
  "$STANDIN" dump own --format json | grep -q '"module":"[^"]*/pbtest"' ||
    fail "no call site (program's libunwind): $(cat own.rep)"
}

# Each thread unwinds a call site's stack once and then checks the return
# addresses where it found them (rt_stack's memo); info says how many
# stacks were unwound. A thread whose function makes the calls itself has
# stacks that reach the top of its stack (start_thread, clone3), and a
# deeper --stack-depth than the stack holds ends them early: both used to
# be unwound on every call (the bounds stopped at the trampoline's frame,
# which tail-calls the thread's function; a stack shorter than the depth
# was never kept): all 16,000 of pbtest's calls. Threads on stacks
# the program allocated are asked for the same way.
t035_record_threads_unwind_each_stack_once() {
  unwound() {
    "$STANDIN" info "$1" | sed -n 's/.*call stacks unwound: \([0-9,]*\);.*/\1/p' | tr -d ,
  }
  for depth in 3 8; do
    "$STANDIN" record -o th$depth --stack-depth $depth -- "$PB" threads 2 2000 >th$depth.out
    expect_eq "depth $depth: calls" 16000 "$(calls th$depth)"
    n=$(unwound th$depth)
    [ -n "$n" ] && [ "$n" -le 64 ] || fail "depth $depth: $n stacks unwound for 16,000 calls"
  done
  "$STANDIN" record -o pool -- "$B/progs/rpc" -n 2000 >pool.out
  n=$(unwound pool)
  [ -n "$n" ] && [ "$n" -le 64 ] || fail "rpc's pool: $n stacks unwound for $(calls pool) calls"
  # the count is of unwinds: without the memo, every call's
  STANDIN_STACK_MEMO=0 "$STANDIN" record -o off -- "$PB" threads 2 2000 >off.out
  expect_eq "unwound without the memo" 16000 "$(unwound off)"
  cmp th3.out off.out
  # threads on stacks the program allocated (pthread_attr_setstack): glibc
  # says where they are too, and the stacks are those an unwind gives
  "$STANDIN" record -o us --stack-depth 8 -- "$PB" userstack 2 2000 >us.out
  cmp th3.out us.out
  n=$(unwound us)
  [ -n "$n" ] && [ "$n" -le 64 ] || fail "user stacks: $n stacks unwound for 16,000 calls"
  STANDIN_STACK_MEMO=0 "$STANDIN" record -o usu --stack-depth 8 -- "$PB" userstack 2 2000 >/dev/null
  call_frames us | sort >us.frames
  call_frames usu | sort >usu.frames
  cmp us.frames usu.frames || fail "user stacks differ: $(diff us.frames usu.frames | head -4)"
}

# glibc's daemon() forks, and its parent leaves by an _exit inside libc,
# past the shims' _exit hook: its trace kept none of the calls it made
# before (1,000 packs: "not closed", 0 calls), and replay lost their counts.
# The child, detached, makes its own calls and writes its own trace.
t040_calls_before_daemon_are_kept() {
  cat >d.proto <<'EOF'
syntax = "proto2";
message Item { optional int32 id = 1; }
EOF
  cat >d.c <<'EOF'
#include <stdio.h>
#include <unistd.h>
#include "d.pb-c.h"
static void packs(int n) {
  for (int i = 0; i < n; i++) {
    Item it = ITEM__INIT;
    uint8_t b[16];
    it.has_id = 1, it.id = i;
    item__pack(&it, b);
  }
}
int main(void) {
  packs(100);
  if (daemon(1, 1) != 0)
    return 9;
  packs(5);
  FILE *f = fopen("child.done", "w");
  if (f)
    fclose(f);
  return 0;
}
EOF
  protoc-c --c_out=. d.proto
  gcc -o d d.c d.pb-c.c -lprotobuf-c
  "$STANDIN" record -o rec -- ./d 2>/dev/null
  for _ in $(seq 200); do [ -e child.done ] && break; sleep 0.05; done
  # the detached child's trace is written by its writer thread, created
  # after its first call and closed at its exit: wait for its calls (a
  # wait for no trace "not closed" could look before the file existed)
  for _ in $(seq 200); do [ "$(calls rec 2>/dev/null)" = 105 ] && break; sleep 0.05; done
  for _ in $(seq 200); do "$STANDIN" info rec 2>/dev/null | grep -q "not closed" || break; sleep 0.05; done
  expect_eq "calls" 105 "$(calls rec)"
  "$STANDIN" info rec | grep -q "not closed" && fail "$("$STANDIN" info rec)"
  rm -f child.done
  "$STANDIN" replay -t rec --summary s.json -- ./d 2>/dev/null
  for _ in $(seq 200); do [ -e child.done ] && break; sleep 0.05; done
  # (the detached child's 5 are counted if it ends before replay does)
  [ "$(json s.json calls_replayed)" -ge 100 ] || fail "the parent's calls: $(json s.json calls_replayed)"
}

# A program that builds a message descriptor at run time and frees it after
# its calls: the writer thread read the descriptor (name, schema) when it
# reached the type's first call, after the program had unmapped it, and
# the program died with SIGSEGV (every run). A descriptor in no loaded
# object is now captured on the calling thread at its first call, and kept
# for every call queued with it (a dlclose on another thread, which makes
# the writer forget its types, crashed 5 runs in 10 with a first version).
# Replay does not answer such types: a program may free one and build
# another at its address, as the last run here does (an M's address given
# to an N), and replay answered the N with the M's bytes.
t041_record_descriptors_freed_after_their_calls() {
  cat >x.proto <<'EOF'
syntax = "proto2";
package hd;
message M { optional int32 a = 1; optional string s = 2; }
message N { optional sint32 a = 1; optional string s = 2; }
EOF
  cat >plug.c <<'EOF'
int plug_value(void) { return 42; }
EOF
  cat >prog.c <<'EOF'
/* prog N [reuse]: pack and unpack an M through a copy of its descriptor in
 * a mapping unmapped right after the calls; N times, while a thread loads
 * and unloads a library; then as many in a forked child. reuse: an M and
 * then an N, each through a heap copy freed after its pack. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "x.pb-c.h"
static atomic_int done;
static void *loader(void *arg) {
  while (!atomic_load(&done)) {
    void *h = dlopen("./plug.so", RTLD_NOW);
    if (h)
      dlclose(h);
  }
  return arg;
}
static void calls(int from, int n) {
  for (int i = from; i < from + n; i++) {
    ProtobufCMessageDescriptor *d = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d == MAP_FAILED)
      exit(3);
    memcpy(d, &hd__m__descriptor, sizeof *d);
    Hd__M m = HD__M__INIT;
    m.base.descriptor = d;
    m.has_a = 1, m.a = i;
    m.s = "hello";
    uint8_t out[64];
    size_t len = protobuf_c_message_pack(&m.base, out);
    Hd__M *u = (Hd__M *)protobuf_c_message_unpack(d, NULL, len, out);
    printf("%d: %zu bytes, a=%d s=%s\n", i, len, u ? u->a : -1, u ? u->s : "-");
    protobuf_c_message_free_unpacked(&u->base, NULL);
    munmap(d, 4096);
  }
  fflush(stdout);
}
static void pack_through_copy(const ProtobufCMessageDescriptor *of, int a) {
  ProtobufCMessageDescriptor *d = malloc(sizeof *d);
  memcpy(d, of, sizeof *d);
  Hd__M m = HD__M__INIT; /* an N has the same layout */
  m.base.descriptor = d;
  m.has_a = 1, m.a = a;
  uint8_t out[64];
  size_t len = protobuf_c_message_pack(&m.base, out);
  printf("%s:", of->name);
  for (size_t k = 0; k < len; k++)
    printf(" %02x", out[k]);
  printf("\n");
  free(d);
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  if (argc > 2) {
    pack_through_copy(&hd__m__descriptor, -3);
    pack_through_copy(&hd__n__descriptor, -3);
    return 0;
  }
  pthread_t t;
  pthread_create(&t, NULL, loader, NULL);
  calls(0, n);
  atomic_store(&done, 1);
  pthread_join(t, NULL);
  pid_t p = fork();
  if (p == 0) {
    calls(1000, n);
    _exit(0);
  }
  int st;
  waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 9;
}
EOF
  protoc-c --c_out=. x.proto
  gcc -shared -fPIC -o plug.so plug.c
  gcc -o prog prog.c x.pb-c.c -lprotobuf-c -ldl -pthread
  ./prog 200 >native.out
  local rc r
  for r in 1 2 3; do
    rc=0
    "$STANDIN" record -f -o rec -- ./prog 200 >rec.out 2>err.txt || rc=$?
    expect_eq "record's exit, run $r" 0 "$rc"
    cmp native.out rec.out
  done
  expect_eq "calls" 800 "$(calls rec)"
  "$STANDIN" info rec | grep -q "pb.unpack  *hd.M  *400 " || fail "$("$STANDIN" info rec)"
  # replay runs such calls for real, and says why
  "$STANDIN" replay -t rec --summary s.json -- ./prog 200 >rep.out 2>err.txt
  cmp native.out rep.out
  expect_eq "replayed" 0 "$(json s.json calls_replayed)"
  expect_eq "runtime types" 800 \
    "$(python3 -c 'import json; print(json.load(open("s.json"))["fallback_reasons"]["runtime_type"])')"
  grep -q "message types were built at run time" err.txt || fail "$(cat err.txt)"
  # another type at a freed one's address is not answered as the first
  ./prog 1 reuse >native.out
  grep -q "hd.N:" native.out || fail "$(cat native.out)"
  "$STANDIN" record -f -o rec -- ./prog 1 reuse >/dev/null
  "$STANDIN" replay -t rec -- ./prog 1 reuse >rep.out 2>/dev/null
  cmp native.out rep.out || fail "$(diff native.out rep.out)"
}

# -o naming a symbolic link that loops was refused as "a exists and is
# not a directory"; the reason is said now. A file still gets the first.
t042_record_into_a_link_that_loops_says_why() {
  ln -s a b
  ln -s b a
  touch f
  local rc=0
  "$STANDIN" record -o a -- "$PB" basic 1 >/dev/null 2>err || rc=$?
  expect_eq "exit" 1 "$rc"
  expect_eq "message" "standin: cannot use a as the recording directory: Too many levels of symbolic links; choose another with -o" "$(cat err)"
  rc=0
  "$STANDIN" record -o f -- "$PB" basic 1 >/dev/null 2>err || rc=$?
  expect_eq "a file: exit" 1 "$rc"
  grep -q "f exists and is not a directory" err || fail "$(cat err)"
}

# run.info held the command line as it was, so a shell script's own lines
# became lines of run.info, and one that began "wall_ns=" or
# "launcher_pid=" (or "status=") was read for the run's: the estimates
# started from the script's number. The command is one line now (its
# newlines escaped), and the keys written after it are read from their
# last line, which also reads recordings made before right.
t043_a_scripts_lines_are_not_run_infos_keys() {
  "$STANDIN" record -o rec -- sh -c 'x=1
wall_ns=40000000000
launcher_pid=1
'"$PB"' basic 30 >/dev/null' 2>/dev/null
  # (and the main thread's wait for a CPU, where /proc/PID/schedstat is)
  expect_eq "run.info lines" 9 "$(grep -vc '^\(main_cpu_wait_ns\|main_cpu_ns\|cpus\)=' rec/run.info)"
  grep -q "^command=sh -c \\$'x=1\\\\nwall_ns=40000000000\\\\nlauncher_pid=1\\\\n" rec/run.info ||
    fail "$(cat rec/run.info)"
  # and read back by a shell, it is the command that ran, word for word
  local cmd
  cmd=$(sed -n 's/^command=//p' rec/run.info)
  eval "set -- $cmd"
  expect_eq "words" 3 $#
  expect_eq "the script" "x=1
wall_ns=40000000000
launcher_pid=1
$PB basic 30 >/dev/null" "$3"
  local wall
  wall=$(sed -n 's/^wall_ns=//p' rec/run.info)
  "$STANDIN" whatif rec --iface protoacc --format json >w.json 2>err
  [ ! -s err ] || fail "whatif: $(cat err)"
  expect_eq "wall" "$wall run.info False" "$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["wall_ns"], d["wall_source"], d["first_process_made_calls"])' w.json)"
  # a run.info written before: the script's lines are lines of their own
  python3 -c 'import sys
p = sys.argv[1]; s = open(p).read().replace("\\n", "\n", 3)
open(p, "w").write(s)' rec/run.info
  expect_eq "old run.info lines" 12 "$(grep -vc '^\(main_cpu_wait_ns\|main_cpu_ns\|cpus\)=' rec/run.info)"
  "$STANDIN" whatif rec --iface protoacc --format json >w.json 2>err
  [ ! -s err ] || fail "whatif, old run.info: $(cat err)"
  expect_eq "wall, old run.info" "$wall run.info False" "$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["wall_ns"], d["wall_source"], d["first_process_made_calls"])' w.json)"
}

# A process that cannot create its trace (no descriptor to spare under
# `ulimit -n 5`) made calls: record, info and the readers say so instead
# of "no intercepted call", and a new recording into the directory clears
# the note (and what an interrupted --retime left).
t044_a_process_that_could_not_create_its_trace_is_named() {
  (ulimit -n 5 && "$STANDIN" record -o rec -- "$PB" basic 5 >/dev/null 2>err) || fail "record: $(cat err)"
  grep -q "1 process (pid [0-9]*) made intercepted calls that are not in rec: its trace could not be created (Too many open files).*ulimit -n" err || fail "$(cat err)"
  ! grep -q "no intercepted call" err || fail "$(cat err)"
  "$STANDIN" info rec >out 2>err || true
  grep -q "made intercepted calls that are not recorded" out || fail "info: $(cat out err)"
  ! "$STANDIN" report rec >out 2>err || fail "report of nothing succeeded"
  grep -q "calls were not recorded: pid [0-9]* could not create its trace (Too many open files)" err || fail "report: $(cat err)"
  # the second process of a script is not recorded, the first is
  "$STANDIN" record -o mix -- sh -c "$PB basic 5; ulimit -n 5; $PB basic 5" >/dev/null 2>err
  grep -q "recorded 1 process into mix" err || fail "$(cat err)"
  grep -q "1 process (pid [0-9]*) made intercepted calls that are not in mix" err || fail "$(cat err)"
  "$STANDIN" report mix >out 2>err
  grep -q "warning: mix lacks the calls of 1 process" err || fail "report: $(cat err)"
  expect_eq "calls reported" 20 "$("$STANDIN" report mix --format json | python3 -c 'import json, sys; print(json.load(sys.stdin)["calls"])')"
  # recording again clears the notes
  touch rec/1.trace.retime
  "$STANDIN" record -o rec -- "$PB" basic 5 >/dev/null 2>err
  ! grep -q "not in rec" err || fail "$(cat err)"
  expect_eq "left in rec" "" "$(ls rec | grep -v -e '\.trace$' -e '^run\.info$' || true)"
}

# --no-follow takes the record shim out of LD_PRELOAD for the programs the
# recorded one starts, and keeps the program's own preloads: past 4 KiB of
# them, those beyond were dropped as well.
t045_no_follow_keeps_a_long_preload_list() {
  local z p=""
  z=$(ls /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)
  [ -n "$z" ] || { echo "no libz.so.1: skipped"; return 0; }
  for _ in $(seq 200); do p="$p$z:"; done
  LD_PRELOAD=$p "$STANDIN" record -o rec --no-follow -- sh -c 'printf %s "$LD_PRELOAD" | tr ":" "\n"' >pre.out 2>/dev/null
  expect_eq "preloads kept" 200 "$(grep -c libz pre.out)"
  ! grep -q libstandin-record pre.out || fail "the record shim was kept"
}

# A pack into a fresh mapping takes its pages' faults inside the call:
# record counts them (faults.h) and keeps their time in the call's fault_ns,
# at most its latency; packs into a buffer already touched take none. A
# replay on a device model serves every pack, the output unchanged.
t046_record_counts_the_page_faults_inside_a_call() {
  "$PB" fresh 20 >native.out
  "$STANDIN" record -o rec -- "$PB" fresh 20 >rec.out
  cmp native.out rec.out
  "$STANDIN" dump rec --format json >d.json
  python3 - d.json <<'PY' || fail "fault_ns: $(head -c 3000 d.json)"
import json, sys
packs = [c for c in map(json.loads, open(sys.argv[1])) if c["api"] == "pb.pack"]
assert len(packs) == 40, len(packs)
f = [c["features"]["fault_ns"] for c in packs]
assert all(0 <= x <= c["latency_ns"] for x, c in zip(f, packs)), f
# the first pack faults the reused buffer in (a thread counts its first
# call of each API); the other 19 take no fault
assert f[0] > 0 and f[1:20] == [0] * 19, f[:20]
# 64 KiB into a fresh mapping: 16 pages; counted once the long calls arm
# the count, and it backs off at most twice (2 + 4 calls) after the 19
assert sum(1 for x in f[20:] if x > 0) >= 12, f[20:]
PY
  "$STANDIN" info rec >info.out
  grep -q "page faults took .* of the .* calls that wrote into memory" info.out ||
    fail "info: $(cat info.out)"
  "$STANDIN" replay -t rec --iface protoacc --summary s.json -- "$PB" fresh 20 >rep.out
  cmp native.out rep.out
  expect_eq "packs served" 40 "$(python3 -c 'import json; print(json.load(open("s.json"))["calls_replayed"])')"
  # the replay keeps the faults the recorded calls took, as whatif does
  "$STANDIN" whatif rec --iface protoacc --format json >w.json
  local w r
  w=$(python3 -c 'import json; print(json.load(open("w.json"))["plans"][0]["accelerators"][0]["fault_ns"])')
  r=$(python3 -c 'import json; print(json.load(open("s.json"))["accelerators"][0]["fault_ns"])')
  [ "$w" -gt 0 ] || fail "whatif kept no fault time"
  expect_eq "fault time kept, replay as whatif" "$w" "$r"
  expect_eq "faults beyond protoacc's time" 0 \
    "$(python3 -c 'import json; print(json.load(open("s.json"))["by_api"]["pb.pack"]["faults_over_model_ns"])')"
  # a model that predicts nothing: all of the recorded fault time is beyond
  # it, which the harness takes (the summary says so beside the overruns)
  "$STANDIN" replay -t rec --iface constant:ns=0 --summary s0.json -- "$PB" fresh 20 >rep0.out
  cmp native.out rep0.out
  python3 - d.json s0.json <<'PY' || fail "faults_over_model_ns: $(cat s0.json)"
import json, sys
want = sum(c["features"]["fault_ns"] for c in map(json.loads, open(sys.argv[1])) if c["api"] == "pb.pack")
got = json.load(open(sys.argv[2]))["by_api"]["pb.pack"]["faults_over_model_ns"]
assert want > 0 and got == want, (got, want)
PY
  # record --retime's timing-only runs count nothing (a thread's first call
  # was counted, and nothing stopped it there: every call took two
  # getrusage calls)
  if command -v strace >/dev/null; then
    STANDIN_TIMING=1 STANDIN_DIR="$PWD/tm" LD_PRELOAD="$B/lib/standin/libstandin-record.so" \
      strace -f -qq -c -e trace=getrusage -o st.txt "$PB" fresh 20 >tm.out
    cmp native.out tm.out
    ! grep -q getrusage st.txt || fail "timing-only run counted faults: $(cat st.txt)"
  fi
}
