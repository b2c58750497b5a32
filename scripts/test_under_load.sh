#!/usr/bin/env bash
# The gtest and pytest suites of `make test` while every core is kept busy by competing
# processes (scripts/with_load.sh), RUNS times in a row (default 1): a test whose outcome
# depends on how fast the machine is that day fails here. Used by `make test-under-load`;
# stops at the first run that fails.
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--loaded" ]; then exec scripts/with_load.sh "$0" --loaded; fi
RUNS=${RUNS:-1}
echo "test-under-load: $RUNS run(s)"
for run in $(seq "$RUNS"); do
  start=$SECONDS
  if ! scripts/run_tests.sh gtest pytest; then
    echo "test-under-load: run $run of $RUNS FAILED after $((SECONDS - start)) s"
    exit 1
  fi
  echo "test-under-load: run $run of $RUNS passed in $((SECONDS - start)) s"
done
