#!/usr/bin/env bash
# `make pip-check`: what a user of pip does, from scratch. In a fresh virtual environment
# (build/pip-check-venv) with torch (TORCH_VERSION, default 2.13.0): `pip install .` (an isolated
# build, which asks for that same torch: python/build_backend/ringx_build.py), then a 2-rank
# torchrun job that all-reduces on backend="ringx" without `import ringx` (torch's backend
# autoloading) and checks the sum. About 6 minutes on 2 cores, most of it compiling; not part of
# make test for that reason. make torch-matrix does the --no-build-isolation form per release.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
VENV=build/pip-check-venv
rm -rf "$VENV"
base=$("$(scripts/find_python.sh)" -c 'import sys, os; print(os.path.join(sys.base_prefix, "bin", "python3"))')
"$base" -m venv "$VENV"
quiet() { "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }
quiet "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==${TORCH_VERSION:-2.13.0}"
quiet "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$REPO"
"$VENV/bin/python" -c 'import torch, ringx; print("pip-check: ringx built against torch",
  torch.__version__, "| CUDA:", ringx.features()["cuda"]["detail"])'
job=$(mktemp -d)/allreduce.py
cat >"$job" <<'PY'
import torch, torch.distributed as dist
dist.init_process_group("ringx")  # no `import ringx`: torch loads it through its entry point
t = torch.full((4,), float(dist.get_rank() + 1))
dist.all_reduce(t)
expected = float(sum(range(1, dist.get_world_size() + 1)))
assert t.tolist() == [expected] * 4, t
print(f"pip-check: rank {dist.get_rank()} all_reduce on {dist.get_backend()}: {t.tolist()}")
dist.destroy_process_group()
PY
cd "$(dirname "$job")"  # away from the source tree: the installed package must be used
"$REPO/$VENV/bin/torchrun" --standalone --nproc-per-node 2 "$job" 2>&1 | grep '^pip-check'
echo "pip-check: passed"
