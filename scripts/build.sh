#!/usr/bin/env bash
# `make` (and every target that builds first): cmake --build with everything the compiler and
# make print kept in BUILD_DIR/build.log, and on the terminal only the progress: one line
# redrawn in place on a terminal, a line at each quarter elsewhere (a log, CI), a last line
# with the time and the warning count, nothing at all when everything was up to date. A
# failed build prints its errors from the log. V=1 prints everything instead, as cmake does.
#   scripts/build.sh BUILD_DIR JOBS [TARGET...]
set -uo pipefail
BUILD_DIR=$1
JOBS=$2
shift 2
targets=()
for target in "$@"; do targets+=(--target "$target"); done
build=(cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}")
# --no-print-directory: make's "Entering/Leaving directory" lines, which it adds whenever it runs
# below another make (as here, under the Makefile) and which say nothing here.
if grep -q '^CMAKE_GENERATOR:INTERNAL=Unix Makefiles' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  build+=(-- --no-print-directory)
fi
if [ -n "${V:-}" ]; then
  exec "${build[@]}"
fi

log=$BUILD_DIR/build.log
start=$SECONDS
"${build[@]}" >"$log" 2>&1 &
pid=$!
tty=0
[ -t 1 ] && tty=1
percent() {  # the newest "[ 42%]" (make) or "[12/345]" (ninja) in the log, as a number
  grep -oE '^\[ *[0-9]+%\]|^\[[0-9]+/[0-9]+\]' "$log" | tail -n 1 |
    awk -F'[][/% ]+' '{ if (NF >= 4 && $3 > 0) print int(100 * $2 / $3); else print $2 + 0 }'
}
compiled() { grep -cE '^\[[^]]*\] (Building|Linking)' "$log"; }
shown=0
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  [ "$(compiled)" -gt 0 ] || continue
  p=$(percent)
  [ -n "$p" ] || continue
  if [ $tty = 1 ]; then
    printf '\rringx build: %3d%% (%d s)' "$p" $((SECONDS - start))
  elif [ "$p" -ge $((shown + 25)) ] && [ "$p" -lt 100 ]; then
    shown=$((p / 25 * 25))
    echo "ringx build: $shown% ($((SECONDS - start)) s)"
  fi
done
wait "$pid"
rc=$?
[ $tty = 1 ] && [ "$(compiled)" -gt 0 ] && printf '\r\033[K'
if [ $rc -ne 0 ]; then
  echo "ringx build: FAILED after $((SECONDS - start)) s; the errors (all of it: $log):"
  grep -E -B 2 -A 6 'error:|Error [0-9]+|CMake Error|undefined reference|No rule to make' "$log" |
    head -n 150
  exit $rc
fi
if [ "$(compiled)" -gt 0 ]; then
  warnings=$(grep -c 'warning:' "$log")
  echo "ringx build: done in $((SECONDS - start)) s ($warnings compiler warnings; the log: $log)"
fi
