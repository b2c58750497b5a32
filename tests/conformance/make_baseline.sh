#!/usr/bin/env bash
# Records the conformance baselines that run_conformance.sh compares ringx with, for the torch
# of the project's environment, at world sizes 2 and 3 (about an hour on 2 cores):
#   gloo_passing_ws<N>.txt       the tests that pass with BACKEND=gloo
#   plugin_reachable_ws<N>.txt   the tests that pass with a stand-in plugin named "ringx" that
#                                hands out gloo groups (gloo_standin/): what the suite lets a
#                                plugin backend reach
# Tests that can only skip on this machine (no GPU, world size) are skipped before spawning,
# as in make test; RINGX_CONFORMANCE_EARLY_SKIP=0 records with every skip decided by the suite
# in its ranks (slower: every skipped test still starts WORLD_SIZE interpreters).
# BASELINE_OUT writes the lists elsewhere than this directory (make torch-matrix takes one per
# torch release; run_conformance.sh reads them with BASELINE_DIR).
#   tests/conformance/make_baseline.sh [WORLD_SIZES]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-$("$REPO/scripts/find_python.sh")}"
OUT="${CONFORMANCE_OUT:-$REPO/build/conformance}-baseline"
LISTS="${BASELINE_OUT:-$HERE}"
mkdir -p "$OUT" "$LISTS"
# Neither run wants the real ringx: where it is installed (make torch-matrix), import torch
# would load it through its entry point, ahead of the stand-in.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
for ws in ${1:-2 3}; do
  PYTHON="$PY" CONFORMANCE_OUT="$OUT/gloo" "$HERE/run_conformance.sh" gloo "$ws" || true
  header="# torch $("$PY" -c 'import torch; print(torch.__version__)'), world size $ws: written by make_baseline.sh"
  { echo "$header"; cat "$OUT/gloo/gloo_ws${ws}_passed.txt"; } >"$LISTS/gloo_passing_ws${ws}.txt"
  # The stand-in is found before build/python, and the driver skips nothing ringx-specific
  # for it: it only lifts gates for the real ringx (RINGX_CONFORMANCE_UNGATE=0).
  PYTHONPATH="$HERE/gloo_standin" RINGX_CONFORMANCE_UNGATE=0 PYTHON="$PY" \
    CONFORMANCE_OUT="$OUT/standin" "$HERE/run_conformance.sh" ringx "$ws" || true
  # Reachable: every test the suite ran for the plugin, passed or failed (a stand-in failure
  # can come from its groups being gloo's, which ringx must still pass).
  { echo "$header"; sed -n 's/^\(PASSED\|FAILED\) //p' "$OUT/standin/ringx_ws${ws}_summary.txt" | sort; } \
    >"$LISTS/plugin_reachable_ws${ws}.txt"
  echo "ws=$ws: $(grep -vc '^#' "$LISTS/gloo_passing_ws${ws}.txt") pass on gloo," \
    "$(grep -vc '^#' "$LISTS/plugin_reachable_ws${ws}.txt") with the stand-in plugin"
done
