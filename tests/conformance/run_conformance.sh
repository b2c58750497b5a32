#!/usr/bin/env bash
# Run PyTorch's distributed conformance suite (distributed_test.py) against a c10d backend,
# once per world size, through tests/conformance/test_distributed_conformance.py.
#
#   tests/conformance/run_conformance.sh [BACKEND] [WORLD_SIZES]
#
#   BACKEND       default: $BACKEND, else ringx
#   WORLD_SIZES   default: $WORLD_SIZES, else "2 3"   (space separated)
#
# Environment:
#   PYTHON            interpreter (default: scripts/find_python.sh: $RINGX_PYTHON, else .venv)
#   CONFORMANCE_OUT   output directory (default: build/conformance under the repo root)
#   PYTEST_ARGS       extra pytest arguments, e.g. PYTEST_ARGS="-k all_reduce"
#   RINGX_USE_INSTALLED=1  test the ringx installed in PYTHON's environment, not build/python
#   BASELINE_DIR      where gloo_passing_ws<N>.txt / plugin_reachable_ws<N>.txt live (default:
#                     this directory).  For a non-gloo backend, tests that pass under gloo
#                     but not here are listed, each marked as either suite-gated to gloo or
#                     a regression (in plugin_reachable_ws<N>.txt, i.e. the suite runs it
#                     for a plugin backend, or in ringx_ungated.txt).  STRICT_BASELINE=1
#                     makes regressions (or, with no plugin_reachable list, any missing
#                     test), and baseline tests that were not collected at all, a failure too.
#
# Per world size N it writes, in CONFORMANCE_OUT:
#   <backend>_ws<N>.xml           junit xml from pytest
#   <backend>_ws<N>.log           full pytest output (ranks' logs included for failures)
#   <backend>_ws<N>_summary.txt   counts, then PASSED/FAILED/SKIPPED test names
#   <backend>_ws<N>_passed.txt    names of the passing tests, sorted, one per line
# and prints "ws=N: N passed, N failed, N skipped".  Exits non-zero if any test failed or
# errored, or pytest itself failed (e.g. the backend could not be imported).
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

BACKEND_ARG="${1:-${BACKEND:-ringx}}"
WORLD_SIZES_ARG="${2:-${WORLD_SIZES:-2 3}}"
PY="${PYTHON:-$("$REPO/scripts/find_python.sh")}"
OUT="${CONFORMANCE_OUT:-$REPO/build/conformance}"
BASELINE_DIR="${BASELINE_DIR:-$HERE}"
case "$OUT" in /*) ;; *) OUT="$REPO/$OUT" ;; esac
mkdir -p "$OUT"

# The ringx built in build/python, unless RINGX_USE_INSTALLED=1 asks for the one installed in
# PYTHON's environment (make torch-matrix: pip install --no-build-isolation . per torch release).
if [ "${RINGX_USE_INSTALLED:-0}" != 1 ]; then
  export PYTHONPATH="$REPO/build/python${PYTHONPATH:+:$PYTHONPATH}"
fi
export BACKEND="$BACKEND_ARG"
# Let the suite pick per-test temp dirs itself; a stale value from the caller is harmless
# but keep the scratch space out of the repo.
unset TEMP_DIR

cd "$REPO" || exit 2
overall=0
for ws in $WORLD_SIZES_ARG; do
  xml="$OUT/${BACKEND}_ws${ws}.xml"
  log="$OUT/${BACKEND}_ws${ws}.log"
  summary="$OUT/${BACKEND}_ws${ws}_summary.txt"
  passed_list="$OUT/${BACKEND}_ws${ws}_passed.txt"
  rm -f "$xml" "$log" "$summary" "$passed_list"
  echo "=== backend=$BACKEND world_size=$ws (python: $PY; log: $log)"
  start=$(date +%s)
  # PYTEST_ARGS is split like a shell command line, so quoting works: -k 'a or b'
  eval "extra_args=(${PYTEST_ARGS:-})"
  WORLD_SIZE="$ws" "$PY" -m pytest "$HERE/test_distributed_conformance.py" \
      -q -rfEs -p no:cacheprovider --junitxml="$xml" "${extra_args[@]}" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))

  baseline="$BASELINE_DIR/gloo_passing_ws${ws}.txt"
  RINGX_CONFORMANCE_DIR="$HERE" "$PY" - "$xml" "$summary" "$passed_list" "$ws" "$secs" "$rc" "$BACKEND" "$baseline" \
      "${STRICT_BASELINE:-0}" <<'EOF'
import os, sys
import xml.etree.ElementTree as ET

import torch

xml, summary, passed_list, ws, secs, rc, backend, baseline, strict = sys.argv[1:]
rc = int(rc)
passed, failed, skipped = [], [], []
if os.path.exists(xml):
    for tc in ET.parse(xml).getroot().iter("testcase"):
        name = tc.get("name")
        tags = {child.tag for child in tc}
        if tags & {"failure", "error"}:
            failed.append(name)
        elif "skipped" in tags:
            skipped.append(name)
        else:
            passed.append(name)
bad = bool(failed) or rc not in (0,)
lines = [f"ws={ws}: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped"
         f"  ({secs}s, pytest rc={rc}, backend={backend})"]
suite_ran = rc in (0, 1) and os.path.exists(xml)
if not suite_ran:
    lines.append(f"  pytest could not run the suite (rc={rc}: import/collection/usage error"
                 f" or interrupted) -- see the log")

missing = []
collected = set(passed) | set(failed) | set(skipped)
if suite_ran and backend != "gloo" and strict == "1" and not os.path.exists(baseline):
    lines.append(f"  no baseline {baseline}: record it with tests/conformance/make_baseline.sh")
    bad = True
if suite_ran and backend != "gloo" and os.path.exists(baseline) and collected:
    with open(baseline) as f:
        recorded = f.readline()
        f.seek(0)
        expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    # A baseline is only good for the torch it was recorded with (its first line says which).
    if not recorded.startswith(f"# torch {torch.__version__},"):
        lines.append(f"  {os.path.basename(baseline)} was not recorded with torch "
                     f"{torch.__version__} (its first line: {recorded.strip()!r}); re-record "
                     f"it with tests/conformance/make_baseline.sh")
        if strict == "1":
            bad = True
    not_collected = sorted(expected - collected)
    if not_collected:
        lines.append(f"  {len(not_collected)} baseline tests not collected in this run "
                     f"(deselected by PYTEST_ARGS, or gone from the suite?)")
        lines += [f"    not collected: {n}" for n in not_collected]
        if strict == "1":
            bad = True
    expected &= collected
    missing = sorted(expected - set(passed))
    lines.append(f"  vs gloo baseline ({os.path.basename(baseline)}): "
                 f"{len(expected) - len(missing)}/{len(expected)} also pass here")
    # The suite itself skips many tests for any backend that is not gloo (hard-coded
    # BACKEND == "gloo" gates); plugin_reachable_ws<N>.txt lists the ones it does run
    # for a plugin, so a real regression (a reachable test not passing) stands out.
    reachable_file = os.path.join(os.path.dirname(baseline),
                                  os.path.basename(baseline).replace("gloo_passing", "plugin_reachable"))
    reachable = None
    if os.path.exists(reachable_file):
        with open(reachable_file) as f:
            reachable = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        # Tests whose gloo-only gate the driver lifts for ringx count as reachable too.
        ungated_file = os.path.join(os.environ["RINGX_CONFORMANCE_DIR"], "ringx_ungated.txt")
        if backend == "ringx" and os.path.exists(ungated_file):
            with open(ungated_file) as f:
                reachable |= {l.split()[0] for l in f if l.strip() and not l.startswith("#")}
    status = {n: "FAILED" for n in failed}
    status.update({n: "SKIPPED" for n in skipped})
    for m in missing:
        note = ""
        if reachable is not None:
            note = ("  <-- REGRESSION: reachable by a plugin backend" if m in reachable
                    else "  (suite runs it only for gloo)")
        lines.append(f"    not passing here: {m} [{status[m]}]{note}")
    if reachable is not None:
        regressions = [m for m in missing if m in reachable]
        lines.append(f"  plugin-reachable baseline tests not passing: {len(regressions)}")
    if strict == "1" and (regressions if reachable is not None else missing):
        bad = True
print("\n".join(lines))
with open(summary, "w") as f:
    f.write("\n".join(lines) + "\n")
    for tag, names in (("PASSED", passed), ("FAILED", failed), ("SKIPPED", skipped)):
        for n in sorted(names):
            f.write(f"{tag} {n}\n")
with open(passed_list, "w") as f:
    f.write("".join(n + "\n" for n in sorted(passed)))
if failed:
    print("  failed: " + " ".join(sorted(failed)))
sys.exit(1 if bad else 0)
EOF
  [ $? -eq 0 ] || overall=1
done
exit $overall
