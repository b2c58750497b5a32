#!/usr/bin/env bash
# Sanitizer and fuzzing legs of `make test` (and `make sanitize` alone), over the torch-free
# libraries (core, trace, viewer model: torch itself is not instrumented):
#
#   tsan        gcc, -fsanitize=thread: every gtest (the communication thread, work queue,
#               recorder and writer, live server and client, the viewer's live source)
#   asan+fuzz   clang, -fsanitize=address,undefined plus libFuzzer coverage: every gtest, then
#               each tests/fuzz/fuzz_* target over its committed corpus for FUZZ_SECONDS
#               (default 10), and over the inputs in tests/fuzz/regressions/ that once crashed
#
#   tsan-core   what make test runs: the TSan leg over the core's gtests alone (the transports,
#               the communication thread, the work queue, point-to-point: where the threads
#               meet), the rest in make sanitize (make test's time on CI: docs/testing.md)
#
# Any sanitizer report stops the test that made it (halt on error), so it fails the leg.
# Usage: scripts/sanitizers.sh [tsan|tsan-core|asan|all]   (build dirs: build-tsan, build-asan)
set -u
cd "$(dirname "$0")/.."
WHICH=${1:-all}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
JOBS=${JOBS:-2}
# Without the viewer too: the trace model, the analyses and ringx-trace (which the analysis tests
# run) build with no ImGui or GLFW, as the layering says (scripts/check_layers.py). The TSan
# build is a unity build, CMakeLists.txt's default (each target's sources compiled a few to a
# translation unit: 115 s instead of 168 on the idle 2-core machine); the ASan build compiles
# every file on its own, which is what catches a file that forgets an include that a unit-mate
# brought in.
TORCH_FREE=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGX_BUILD_PYTHON=OFF -DRINGX_BUILD_VIEWER=OFF
  -DRINGX_BUILD_CUDA=OFF)
SANITIZED_TARGETS=(ringx_core_tests ringx_trace_tests ringx_trace_model_tests ringx_analysis_tests
  ringx_nccl_tests)
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1 abort_on_error=0 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 ${UBSAN_OPTIONS:-}"

configure_and_build() {
  local dir=$1
  shift
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S . -B "$dir" "${TORCH_FREE[@]}" "$@" >"$dir.configure.log" 2>&1 ||
      { cat "$dir.configure.log"; return 1; }
  fi
  # Only what the legs run (the gtest executables, their tools, the fuzzers): the benchmarks
  # would add instrumented builds nobody runs.
  cmake --build "$dir" -j "$JOBS" --target "${SANITIZED_TARGETS[@]}" >"$dir.build.log" 2>&1 ||
    { tail -40 "$dir.build.log"; return 1; }
}

# Every gtest of a build but those matching `skip` (a regex), or with a third argument only
# those with that ctest label; on failure, the failing tests' output (the sanitizer's report).
run_gtests() {
  local dir=$1 skip=$2 only=()
  [ -z "${3:-}" ] || only=(-L "$3")
  # AnalysisScale builds and analyses a million events, 5-15x slower instrumented, for no
  # thread or memory use the smaller tests lack. SummaryScale's peak-memory test measures
  # RSS, which the sanitizers' shadow memory inflates by design (both run in the plain gtest
  # leg).
  if ctest --test-dir "$dir" -j 2 --timeout 300 "${only[@]+"${only[@]}"}" \
    -E "^(AnalysisScale\.|SummaryScale\.PeakMemory${skip:+|$skip})" >"$dir.ctest.log" 2>&1; then
    echo "   $(grep -E 'tests passed' "$dir.ctest.log")"
  else
    ctest --test-dir "$dir" --rerun-failed --output-on-failure --timeout 300 2>&1 | tail -80
    grep -E 'tests passed|Failed|Timeout' "$dir.ctest.log" | tail -20
    return 1
  fi
}

tsan() {
  echo "-- tsan: building (gcc, -fsanitize=thread)"
  configure_and_build build-tsan -DRINGX_SANITIZE=thread || return 1
  # ChromeExport.ManyEventsStream exports 100,000 events on one thread: 57 s under TSan (the
  # slowest test of the leg but the collective sweeps) with no thread to check; the trace
  # reader's threads it starts from are the loader tests' (ASan runs it).
  run_gtests build-tsan 'ChromeExport\.ManyEventsStream$'
}

# One libFuzzer target: the inputs that once crashed it, then FUZZ_SECONDS over its corpus.
fuzz_one() {
  local target=$1 work=$2 name status=0
  name=$(basename "$target")
  mkdir -p "$work/$name"
  # Crashers found earlier: each must now run clean (libFuzzer runs the files it is given).
  if [ -d "tests/fuzz/regressions/$name" ]; then
    if ! "$target" tests/fuzz/regressions/"$name"/* >"$work/$name.regressions.log" 2>&1; then
      echo "FAILED $name on a regression input:"
      tail -30 "$work/$name.regressions.log"
      status=1
    fi
  fi
  # New inputs go to a scratch corpus; the committed seeds are only read.
  if "$target" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$work/$name-" -print_final_stats=1 "$work/$name" "tests/fuzz/corpus/$name" \
    >"$work/$name.log" 2>&1; then
    echo "   $name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$name.log" | grep -o '[0-9]*$') executions, $(ls "$work/$name" | wc -l) new corpus inputs, no findings"
  else
    echo "FAILED $name: a finding (input saved as $work/$name-crash-*); its report:"
    grep -A30 -m1 -E "ERROR|runtime error|deadly signal" "$work/$name.log" | head -40
    status=1
  fi
  return $status
}

asan_and_fuzz() {
  echo "-- asan+ubsan: building (clang-14, -fsanitize=address,undefined, libFuzzer targets)"
  local SANITIZED_TARGETS=("${SANITIZED_TARGETS[@]}" ringx_fuzzers)
  CC=clang-14 CXX=clang++-14 configure_and_build build-asan -DRINGX_SANITIZE=address,undefined \
    -DRINGX_FUZZ=ON -DCMAKE_UNITY_BUILD=OFF || return 1
  local status=0
  run_gtests build-asan "" || status=1

  local work
  work=$(mktemp -d)
  # Each fuzzer is one process on one core: JOBS of them run at once, each target's lines
  # printed when it ends (so they never interleave).
  local pids=() target
  for target in build-asan/bin/fuzz_*; do
    fuzz_one "$target" "$work" >"$work/$(basename "$target").out" 2>&1 &
    pids+=($!)
    if [ ${#pids[@]} -ge "$JOBS" ]; then
      wait "${pids[0]}" || status=1
      pids=("${pids[@]:1}")
    fi
  done
  for pid in "${pids[@]+"${pids[@]}"}"; do wait "$pid" || status=1; done
  cat "$work"/*.out
  return $status
}

# The core's gtests alone (ctest label "core"): only ringx_core_tests is built.
tsan_core() {
  echo "-- tsan (core): building (gcc, -fsanitize=thread)"
  local SANITIZED_TARGETS=(ringx_core_tests)
  configure_and_build build-tsan -DRINGX_SANITIZE=thread || return 1
  # Three sweeps whose threads meet as their smaller siblings' do (Broadcast.BinomialTree...,
  # the other HierarchicalAllreduce and Allreduce tests), over more sizes and world sizes: 73 s
  # of the leg's 230 test-seconds under TSan on the idle machine (the tsan leg runs them).
  run_gtests build-tsan "Broadcast\.EveryAlgorithmRootWorldSizeAndSize|HierarchicalAllreduce\.EveryOpAndDtypeOnUnevenHosts|Allreduce\.Float32SumEveryWorldSizeAndCount" core
}

status=0
case "$WHICH" in
  tsan) tsan || status=1 ;;
  tsan-core) tsan_core || status=1 ;;
  asan) asan_and_fuzz || status=1 ;;
  all)
    tsan || status=1
    asan_and_fuzz || status=1
    ;;
  *)
    echo "usage: scripts/sanitizers.sh [tsan|tsan-core|asan|all]" >&2
    exit 2
    ;;
esac
exit $status
