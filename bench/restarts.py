#!/usr/bin/env python3
"""torchrun restarts with torchrun's defaults, gloo beside ringx in one run: of N tries, how
many second attempts complete after a rank raised in the first.

    PYTHONPATH=build/python .venv/bin/python bench/restarts.py [--tries 10]

Each try is `torchrun --standalone --nproc-per-node 2 --max-restarts 1` over
tests/python/restart_worker.py: rank 1 raises after joining and one allreduce in attempt 0;
attempt 1 must join a group on the same TCPStore (torch 2.13's agent shares it across
attempts) and check an allreduce and a broadcast. The backends alternate try by try.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "tests", "python", "restart_worker.py")


def one_try(backend):
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ)
        env.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
        start = time.monotonic()
        try:
            run = subprocess.run(
                [sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc-per-node=2", "--max-restarts=1", WORKER, backend, "1:after", out],
                env=env, capture_output=True, text=True, timeout=180)
            seconds = time.monotonic() - start
            ok = run.returncode == 0 and sorted(os.listdir(out)) == [
                "attempt-1-rank-0", "attempt-1-rank-1"]
            why = "" if ok else last_error(run.stderr)
        except subprocess.TimeoutExpired:
            seconds, ok, why = time.monotonic() - start, False, "hang (killed after 180 s)"
    return ok, seconds, why


def last_error(stderr):
    """The last error a worker raised (not the planned one), else torchrun's last line."""
    lines = stderr.strip().splitlines() or ["(no output)"]
    raised = [line for line in lines
              if line.startswith("[rank") and "Error: " in line and "on purpose" not in line]
    if not raised:
        return lines[-1][:200]
    return raised[-1].split("Error: ", 1)[1][:200]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=10)
    args = parser.parse_args()
    results = {"gloo": [], "ringx": []}
    for _ in range(args.tries):
        for backend in results:
            results[backend].append(one_try(backend))
    print(f"torchrun --max-restarts 1, rank 1 raises in attempt 0; {args.tries} tries each")
    print(f"{'backend':8} {'attempt 1 completed':>20} {'seconds per try (median)':>26}")
    for backend, runs in results.items():
        ok = sum(1 for r in runs if r[0])
        median = sorted(r[1] for r in runs)[len(runs) // 2]
        print(f"{backend:8} {f'{ok} of {len(runs)}':>20} {median:>26.1f}")
    for backend, runs in results.items():
        for why in sorted({r[2] for r in runs if not r[0]}):
            print(f"  {backend} failed: {why}")


if __name__ == "__main__":
    main()
