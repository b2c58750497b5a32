#!/usr/bin/env bash
# Prints the Python interpreter that can import torch.
# RINGX_PYTHON overrides; otherwise Debian's /usr/bin/python3 (python3-torch),
# then whatever python3 is first on PATH.
set -u
for candidate in "${RINGX_PYTHON:-}" /usr/bin/python3 python3; do
  [ -n "$candidate" ] || continue
  if "$candidate" -c "import torch" >/dev/null 2>&1; then
    command -v "$candidate"
    exit 0
  fi
done
if [ -n "${RINGX_PYTHON:-}" ]; then
  echo "RINGX_PYTHON=$RINGX_PYTHON cannot import torch" >&2
fi
echo "/usr/bin/python3"
