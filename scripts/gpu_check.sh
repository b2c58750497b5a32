#!/usr/bin/env bash
# `make gpu-check`: the GPU runbook as one command (scripts/gpu_check.py does the steps).
#
#   scripts/gpu_check.sh [REPORT_DIR]      (default build/gpu-check)
#
# On the GPU machine (one H100, torch 2.11 with CUDA at python3, nvcc, CMake; no network): carry
# build/gpu-bundle (make gpu-bundle, here) and run it; it builds the torch-free core, the CUDA
# kernels and the Python extension against that machine's torch, runs every GPU test and bench,
# and writes report.md, report.json and logs.tar.gz into REPORT_DIR; it exits non-zero on any
# failure. Here, without a GPU, it does the same against a CUDA torch (.venv-cuda, torch 2.14.1
# from this machine's disk): everything builds, and every GPU test is reported skipped ("no CUDA
# device").
# Not part of make test (the CUDA torch and its nvidia-* wheels are several GB).
#
# The Python: GPU_CHECK_PYTHON if set; else python3 if its torch is a CUDA build; else .venv-cuda.
set -eu
cd "$(dirname "$0")/.."
TORCH_CUDA_VERSION="${TORCH_CUDA_VERSION:-2.14.1}"
is_cuda_torch() { "$1" -c 'import sys, torch; sys.exit(not torch.version.cuda)' 2>/dev/null; }

if [ -n "${GPU_CHECK_PYTHON:-}" ]; then
  PY=$GPU_CHECK_PYTHON
elif is_cuda_torch python3; then
  PY=$(command -v python3)
else
  VENV=.venv-cuda
  if ! is_cuda_torch "$VENV/bin/python"; then
    echo "gpu-check: making $VENV with torch $TORCH_CUDA_VERSION (a CUDA build; several GB)"
    base=$("$(scripts/find_python.sh)" -c 'import sys, os; print(os.path.join(sys.base_prefix, "bin", "python3"))')
    "$base" -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_CUDA_VERSION" numpy \
      pytest expecttest 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
  fi
  PY=$PWD/$VENV/bin/python
fi
exec "$PY" scripts/gpu_check.py "$@"
