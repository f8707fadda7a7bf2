#!/usr/bin/env bash
# End-to-end tests: preload the shims into real programs and check outcomes
# (bytes equal, counts equal, errors reported), never timings.
#   tests/e2e/run.sh [PATTERN...]   runs the tests whose name contains a PATTERN
set -u
B=${B:-build}
B=$(cd "$B" && pwd)
STANDIN="$B/standin"
PB="$B/progs/pbtest"
T=$(mktemp -d /tmp/standin-e2e.XXXXXX)
trap 'rm -rf "$T"' EXIT
# the TSC calibration cache (cli/util.c) goes here, not in the user's home
export STANDIN_CACHE_DIR="$T/cache"
# tests compare standin's standard error, and run two at a time: the line
# that says a run's main thread waited for a CPU would come and go with
# the machine's load (t685 checks it)
export STANDIN_QUIET_WAITS=1
# Debian's python3, where scripts/deps.sh installs what the tests import.
# The first python3 on PATH may be a version manager's shim instead: pyenv's
# took 0.37 s a start against 0.04 s (a 2-core VM), and the tests start
# python3 over a thousand times.
if [ -x /usr/bin/python3 ]; then
  mkdir -p "$T/bin"
  ln -s /usr/bin/python3 "$T/bin/python3"
  export PATH="$T/bin:$PATH"
fi
PASS=0
FAIL=0
FAILED=()

fail() {
  echo "    FAIL: $*" >&2
  return 1
}

# calls DIR [API]: number of recorded calls (of one API)
calls() {
  if [ $# -gt 1 ]; then
    "$STANDIN" dump "$1" | awk -v a="$2" '$5 == a' | wc -l
  else
    "$STANDIN" dump "$1" | wc -l
  fi
}

expect_eq() { # what expected actual
  [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
}

# hung PGID: report the test's processes with their threads' stacks, then
# kill them all
E2E_TIMEOUT=${E2E_TIMEOUT:-300}
hung() {
  echo "    FAIL: still running after ${E2E_TIMEOUT} s (E2E_TIMEOUT); its processes:"
  for p in $(pgrep -g "$1"); do
    echo "    -- pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
    case "$(cat /proc/$p/comm 2>/dev/null)" in bash | sh | sleep) continue ;; esac
    if command -v gdb >/dev/null; then
      timeout 30 gdb -p "$p" -batch -ex "thread apply all bt" 2>/dev/null | grep -E '^(#|Thread)' | cut -c1-220
    fi
  done
  kill -9 -- -"$1"
}

# every tests/e2e/*_tests.sh defines tNNN_* functions
for f in "$(dirname "$0")"/*_tests.sh; do
  # a syntax error would leave the file's later tests undefined, unrun and
  # unreported (it happened once: 8 tests gone, the run still green)
  bash -n "$f" || { echo "e2e: $f does not parse" >&2; exit 2; }
  source "$f"
done

# run_one TEST: run it in $T/TEST as its own process group, under a
# watchdog (a hang becomes a failure with every stuck process's stacks, not
# a CI timeout); its status goes to $T/TEST.rc, its time to $T/TEST.time
run_one() {
  local t=$1 tpid wpid rc s0
  mkdir -p "$T/$t"
  s0=$(date +%s%N)
  # not inside `if`: set -e must stay in force in the test's subshell
  set -m
  (cd "$T/$t" && set -e && "$t") </dev/null >"$T/$t.log" 2>&1 &
  tpid=$!
  (sleep "$E2E_TIMEOUT" && hung "$tpid" >>"$T/$t.log" 2>&1) &
  wpid=$!
  set +m
  { wait "$tpid"; } 2>/dev/null
  rc=$?
  kill -- -"$wpid" 2>/dev/null
  wait "$wpid" 2>/dev/null
  echo $((($(date +%s%N) - s0) / 1000000)) >"$T/$t.time"
  echo "$rc" >"$T/$t.rc"
}

report() { # TEST: its line, and its log if it failed
  local t=$1 rc secs
  rc=$(cat "$T/$t.rc" 2>/dev/null || echo 1)
  secs=$(awk '{printf "%.1f", $1 / 1000}' "$T/$t.time" 2>/dev/null)
  if [ "$rc" -eq 0 ]; then
    PASS=$((PASS + 1))
    echo "  ok   $t (${secs} s)"
  else
    FAIL=$((FAIL + 1))
    FAILED+=("$t")
    echo "  FAIL $t (${secs} s)"
    if grep -q "still running after" "$T/$t.log"; then
      sed -n '/still running after/,$p' "$T/$t.log" | head -400 | sed 's/^/       | /'
    else
      sed 's/^/       | /' "$T/$t.log" | tail -25
    fi
  fi
}

# E2E_JOBS tests at a time (default: one per CPU, at most 4): tests assert
# outcomes, not timings, so they may share the machine.
E2E_JOBS=${E2E_JOBS:-$(n=$(nproc 2>/dev/null || echo 1); [ "$n" -gt 4 ] && n=4; echo "$n")}
TESTS=()
for t in $(declare -F | awk '{print $3}' | grep -E '^t[0-9]{3}_' | sort); do
  if [ $# -gt 0 ]; then
    match=0
    for p in "$@"; do [[ "$t" == *$p* ]] && match=1; done
    [ $match = 1 ] || continue
  fi
  TESTS+=("$t")
done
declare -A RUNNING=()
reap() { # report the tests that have ended; wait until one has if $1 = 1
  local pid
  while :; do
    for pid in "${!RUNNING[@]}"; do
      if [ ! -e "$T/${RUNNING[$pid]}.rc" ] && kill -0 "$pid" 2>/dev/null; then continue; fi
      wait "$pid" 2>/dev/null
      report "${RUNNING[$pid]}"
      unset "RUNNING[$pid]"
      return 0
    done
    [ "$1" = 1 ] || return 0
    sleep 0.05
  done
}
T0=$(date +%s)
for t in "${TESTS[@]}"; do
  while [ ${#RUNNING[@]} -ge "$E2E_JOBS" ]; do reap 1; done
  run_one "$t" &
  RUNNING[$!]=$t
done
while [ ${#RUNNING[@]} -gt 0 ]; do reap 1; done
n=${#TESTS[@]}
[ "$n" -gt "$E2E_JOBS" ] && n=$E2E_JOBS
echo "e2e: $PASS passed, $FAIL failed ($(($(date +%s) - T0)) s, $n at a time)"
[ "$FAIL" -eq 0 ]
