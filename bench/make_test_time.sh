#!/usr/bin/env bash
# How long `make test` (CI's .ci/run) takes from a fresh clone on a busy machine: clones this
# checkout's HEAD into a new directory and runs .ci/run there with a busy loop on every core
# (scripts/with_load.sh), printing each suite's time (run_tests.sh) and the total. The
# README's make-test figure comes from this. Takes most of an hour on the 2-core machine.
#   bench/make_test_time.sh [DIR]   (default /tmp/ringx-fresh-<pid>; removed first if there)
set -u
cd "$(dirname "$0")/.."
dir=${1:-/tmp/ringx-fresh-$$}
rm -rf "$dir"
git clone -q . "$dir" || exit 1
echo "make_test_time: $(git -C "$dir" log --oneline -1) in $dir"
# The real traces some tests read lie beside the project (../shared/traces), which a clone
# elsewhere does not have beside it: point the tests at this checkout's.
[ -d ../shared/traces ] && export RINGX_SHARED_TRACES=${RINGX_SHARED_TRACES:-$(cd ../shared/traces && pwd)}
start=$SECONDS
scripts/with_load.sh env -C "$dir" CI=true .ci/run
rc=$?
echo "make_test_time: fresh clone, every core busy: rc=$rc in $((SECONDS - start)) s"
exit $rc
