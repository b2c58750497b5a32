#!/usr/bin/env bash
# Runs every test suite of ringx and prints one summary. Used by `make test` and CI.
#   layers                 no #include runs from a lower folder up to a higher one, and the
#                          Python extension links nothing of the trace column above the
#                          recorder (scripts/check_layers.py)
#   gtest (through ctest)  the torch-free core: algorithms x transport x world size
#   sanitizers             the core's gtests under TSan (scripts/sanitizers.sh tsan-core; make
#                          sanitize runs every torch-free gtest under TSan and ASan+UBSan, and
#                          the libFuzzer targets)
#   pytest                 the Python face, multi-process (three streams at once: below)
#   conformance            PyTorch's own distributed_test.py with BACKEND=ringx, at world
#                          sizes 2 and 3, strict against the gloo baseline
#   torch-compat           the torch-version shims (backend/c10d/torch_compat.h) and the backend
#                          class compile against torch 2.11's headers too (about 15 s; make
#                          torch-matrix compiles and tests every release from 2.9 to 2.15)
# It always runs all of them: variables that would run less (PYTEST_ARGS and the conformance
# switches that run_conformance.sh takes when run by hand) are reported and ignored. Named
# suites as arguments (scripts/run_tests.sh gtest pytest) run only those, each in full: what
# scripts/test_under_load.sh does.
set -u
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PYTHON=$(scripts/find_python.sh)
for var in PYTEST_ARGS PYTEST_ADDOPTS WORLD_SIZES BACKEND BASELINE_DIR STRICT_BASELINE \
  RINGX_CONFORMANCE_UNGATE RINGX_CONFORMANCE_EARLY_SKIP; do
  if [ -n "${!var+set}" ]; then
    echo "run_tests: ignoring $var=${!var}: make test runs every test" >&2
    unset "$var"
  fi
done
export PYTHONPATH="$PWD/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# The failure tests make every rank dump its flight recorder: keep those dumps out of the
# default /tmp/ringx-flight-recorder-<user>.
export RINGX_DUMP_DIR=${RINGX_DUMP_DIR:-$(mktemp -d /tmp/ringx-test-dumps.XXXXXX)}
mkdir -p "$RINGX_DUMP_DIR"
# A test that gloo passes and a plugin can reach, but that does not pass for ringx, fails the run.
export STRICT_BASELINE=1

passed=()
failed=()
suites=("$@")
run_suite() {
  local name=$1
  shift
  if [ ${#suites[@]} -gt 0 ] && [[ " ${suites[*]} " != *" $name "* ]]; then return; fi
  echo
  echo "==== $name: $*"
  local start=$SECONDS
  if "$@"; then
    passed+=("$name")
    echo "==== $name: PASSED ($((SECONDS - start)) s)"
  else
    failed+=("$name")
    echo "==== $name: FAILED ($((SECONDS - start)) s)"
  fi
}

run_suite layers "$PYTHON" scripts/check_layers.py --extension "$(ls "$BUILD_DIR"/python/ringx/_C*.so)"
run_suite gtest ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2
run_suite sanitizers scripts/sanitizers.sh tsan-core
# pytest in three streams at once, balanced by each stream's time in make test with a busy
# loop per core (bench/make_test_time.sh): the quick runs of the benchmarks and torchft's job;
# the fault tests between network-namespace hosts, the restarts, the shrinks, the samples under
# torchrun and the viewer's (tests that mostly wait: timeouts waited out, processes starting),
# with the FSDP engine's and the comm hooks' tests; the rest. In one stream the suite kept the
# 2 cores busy only 118% of the time. Each stream has its own flight-recorder dump directory
# (test_flight_recorder reads its dumps back by rank) and its own log, printed as the streams
# end, in order.
STREAMS=("tests/python/test_bench.py tests/python/test_torchft.py"
  "tests/python/test_partitions.py tests/python/test_shrink_hosts.py tests/python/test_restarts.py
   tests/python/test_shrink.py tests/python/test_samples.py tests/python/test_viewer.py
   tests/python/test_ringx_fsdp.py tests/python/test_comm_hooks.py")
pytest_streams() {
  local logs status=0 pids=() names=() files rest=() i
  logs=$(mktemp -d /tmp/ringx-pytest.XXXXXX)
  for i in "${!STREAMS[@]}"; do
    read -r -a files <<<"${STREAMS[$i]//$'\n'/ }"
    rest+=("${files[@]/#/--ignore=}")
    names+=("$(basename -a "${files[@]}" | tr '\n' ' ')")
    RINGX_DUMP_DIR=$(mktemp -d "$RINGX_DUMP_DIR/stream$i.XXXXXX") \
      "$PYTHON" -m pytest -q "${files[@]}" >"$logs/$i.log" 2>&1 &
    pids+=($!)
  done
  i=${#STREAMS[@]}
  names+=("tests/python but the above")
  RINGX_DUMP_DIR=$(mktemp -d "$RINGX_DUMP_DIR/stream$i.XXXXXX") \
    "$PYTHON" -m pytest -q tests/python "${rest[@]}" >"$logs/$i.log" 2>&1 &
  pids+=($!)
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || status=1
    echo "-- ${names[$i]}"
    cat "$logs/$i.log"
  done
  rm -rf "$logs"
  return $status
}
run_suite pytest pytest_streams
run_suite conformance env PYTHON="$PYTHON" tests/conformance/run_conformance.sh ringx "2 3"
run_suite torch-compat "$PYTHON" scripts/torch_matrix.py --header-check 2.11.0

echo
echo "==== summary"
for s in "${passed[@]}"; do echo "  PASSED  $s"; done
for s in "${failed[@]+"${failed[@]}"}"; do echo "  FAILED  $s"; done
echo "suites: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
