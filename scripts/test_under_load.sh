#!/usr/bin/env bash
# The gtest and pytest suites of `make test` while every core is kept busy by competing
# processes (a busy loop per core, at the tests' own priority), RUNS times in a row (default
# 1): a test whose outcome depends on how fast the machine is that day fails here. Used by
# `make test-under-load`; stops at the first run that fails.
set -u
cd "$(dirname "$0")/.."
RUNS=${RUNS:-1}
LOAD=${LOAD_PROCESSES:-$(nproc)}
load=()
stop_load() { [ ${#load[@]} -eq 0 ] || kill "${load[@]}" 2>/dev/null; }
trap stop_load EXIT
for _ in $(seq "$LOAD"); do
  sh -c 'while :; do :; done' &
  load+=($!)
done
echo "test-under-load: $LOAD busy processes (pids ${load[*]}), $RUNS run(s)"
for run in $(seq "$RUNS"); do
  start=$SECONDS
  if ! scripts/run_tests.sh gtest pytest; then
    echo "test-under-load: run $run of $RUNS FAILED after $((SECONDS - start)) s"
    exit 1
  fi
  echo "test-under-load: run $run of $RUNS passed in $((SECONDS - start)) s"
done
