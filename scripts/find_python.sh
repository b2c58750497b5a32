#!/usr/bin/env bash
# Prints the Python interpreter that ringx builds against and runs with: RINGX_PYTHON if set,
# else the project's virtual environment (.venv, created by scripts/setup.sh with the torch
# pinned in scripts/requirements.txt). The one place every script and the Makefile ask.
set -u
if [ -n "${RINGX_PYTHON:-}" ]; then
  if ! "$RINGX_PYTHON" -c "import torch" >/dev/null 2>&1; then
    echo "find_python: RINGX_PYTHON=$RINGX_PYTHON cannot import torch" >&2
  fi
  command -v "$RINGX_PYTHON" || echo "$RINGX_PYTHON"
  exit 0
fi
echo "$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python"
