#!/bin/sh
# Builds ringx against a CUDA build of torch (in its own environment, .venv-cuda) and checks
# that the result imports, says it has CUDA, registers backend="ringx" for "cuda", and still
# runs CPU collectives. It runs no GPU code: this machine kind has nvcc but no GPU. Not part of
# make test: the CUDA torch and its nvidia-* wheels are several GB. Run it after touching
# CMakeLists.txt's CUDA parts or backend/c10d/cuda_staging.*.
set -eu
cd "$(dirname "$0")/.."
TORCH_CUDA_VERSION="${TORCH_CUDA_VERSION:-2.14.1}"
VENV=.venv-cuda
BUILD=build-cuda
if ! "$VENV/bin/python" -c "import torch; assert torch.version.cuda" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==$TORCH_CUDA_VERSION" numpy pytest expecttest
fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PWD/$VENV/bin/python" \
  -DRINGX_BUILD_TESTS=OFF -DRINGX_BUILD_VIEWER=OFF -DRINGX_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$BUILD" -j "${JOBS:-2}" --target ringx_c10d_python
PYTHONPATH="$BUILD/python" "$VENV/bin/python" - <<'PY'
import torch.distributed as dist
import ringx
assert ringx._C.cuda_built(), "built against a CUDA torch, but ringx has no CUDA"
assert dist.Backend.backend_capability["ringx"] == ["cpu", "cuda"], dist.Backend.backend_capability
print("cuda-build-check: ringx built with CUDA, registered for", dist.Backend.backend_capability["ringx"])
PY
cd tests/python
PYTHONPATH="../../$BUILD/python" "../../$VENV/bin/python" -m pytest -q test_cuda.py test_collectives.py
