#!/usr/bin/env bash
# `make pip-check`: the README's install, as a new user runs it. In a fresh virtual environment
# (build/pip-check/venv) holding only torch (TORCH_VERSION, default 2.13.0, this machine's CPU
# build):
#   1. `pip install --no-build-isolation .` before the README's line that brings the build tool:
#      it must fail with ringx's one line naming scikit-build-core, not a traceback;
#   2. the README's install commands as the README prints them, then a 2-rank torchrun job
#      (an all-reduce and a torch DDP step) with the installed package: scripts/readme_install.py,
#      which make torch-matrix runs for each release it installs.
# About 2.5 minutes on the idle 2-core machine (2026-11-30), most of it compiling; not part of
# make test for that reason.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=build/pip-check
VENV=$OUT/venv
rm -rf "$OUT"
mkdir -p "$OUT"
python=$(scripts/find_python.sh)
base=$("$python" -c 'import sys, os; print(os.path.join(sys.base_prefix, "bin", "python3"))')
"$base" -m venv "$VENV"
quiet() { "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }
quiet "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==${TORCH_VERSION:-2.13.0}"

# 1. Without the build tool: what the user sees is ringx's line, and no traceback.
if (cd "$OUT" && "$REPO/$VENV/bin/python" -m pip install --no-build-isolation "$REPO") \
  >"$OUT/without-build-tool.log" 2>&1; then
  echo "pip-check: FAILED: the install without scikit-build-core succeeded" >&2
  exit 1
fi
line=$(grep -o 'ringx: cannot build here.*' "$OUT/without-build-tool.log" || true)
if [[ "$line" != *"scikit-build-core"* ]] || grep -q Traceback "$OUT/without-build-tool.log"; then
  echo "pip-check: FAILED: without scikit-build-core pip did not show ringx's one line:" >&2
  cat "$OUT/without-build-tool.log" >&2
  exit 1
fi
echo "pip-check: without scikit-build-core, pip shows: $line"

# 2. The README's lines, then torchrun.
"$python" scripts/readme_install.py --python "$VENV/bin/python" --out "$OUT" | sed 's/^readme_install/pip-check/'
echo "pip-check: passed"
