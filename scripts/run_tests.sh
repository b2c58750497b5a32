#!/usr/bin/env bash
# Runs every test suite of ringx and prints one summary. Used by `make test` and CI.
#   gtest (through ctest)  the torch-free core: algorithms x transport x world size
#   pytest                 the Python face, multi-process
#   conformance            PyTorch's own distributed_test.py with BACKEND=ringx
# RINGX_CONFORMANCE_WORLD_SIZES (default "2 3") picks the conformance world sizes.
set -u
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PYTHON=${RINGX_PYTHON:-$(scripts/find_python.sh)}
export PYTHONPATH="$PWD/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# A test that gloo passes and a plugin can reach, but that does not pass for ringx, fails the run.
export STRICT_BASELINE=1

passed=()
failed=()
run_suite() {
  local name=$1
  shift
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

run_suite gtest ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2
run_suite pytest "$PYTHON" -m pytest -q tests/python
run_suite conformance tests/conformance/run_conformance.sh ringx "${RINGX_CONFORMANCE_WORLD_SIZES:-2 3}"

echo
echo "==== summary"
for s in "${passed[@]}"; do echo "  PASSED  $s"; done
for s in "${failed[@]+"${failed[@]}"}"; do echo "  FAILED  $s"; done
echo "suites: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
