#!/usr/bin/env python3
"""What `import ringx` adds to a fresh process's start (a spawned rank, a torchrun rank): the
CPU time of `import torch, torch.distributed` beside `import torch, torch.distributed, ringx`,
each in a fresh interpreter, alternating, --rounds times; medians, and ringx's part.

    PYTHONPATH=build/python .venv/bin/python bench/import_cost.py [--rounds 7]

Also whether `import ringx` left torch's FSDP2 unloaded (it wraps FSDP2 when the job imports
it: python/ringx/_watch.py); FSDP2 brings in torch.export and sympy. On torch 2.13, 5 rounds,
2026-11-30: ringx added 0.722 s to torch's 1.389 with FSDP2 imported at `import ringx`, 0.027 s
with it deferred."""

import argparse
import os
import resource
import statistics
import subprocess
import sys

FSDP2_STATE = "torch.distributed.fsdp._fully_shard._fsdp_state"
SIDES = {
    "torch": "import torch, torch.distributed",
    "torch + ringx": "import torch, torch.distributed, ringx",
}


def cpu_seconds(code):
    """User + system CPU of a fresh interpreter running `code`, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1"), check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    samples = {side: [] for side in SIDES}
    for r in range(args.rounds):
        for side in (list(SIDES) if r % 2 == 0 else list(reversed(SIDES))):
            seconds, _ = cpu_seconds(SIDES[side])
            samples[side].append(seconds)
    _, loaded = cpu_seconds(SIDES["torch + ringx"]
                            + f"\nimport sys; print({FSDP2_STATE!r} in sys.modules)")
    median = {side: statistics.median(values) for side, values in samples.items()}
    print(f"# CPU time to import, fresh interpreter, median of {args.rounds} alternating rounds")
    for side, seconds in median.items():
        print(f"{side:>14}: {seconds:.3f} s")
    print(f"{'ringx adds':>14}: {median['torch + ringx'] - median['torch']:.3f} s")
    print(f"FSDP2 loaded by import ringx: {loaded.strip()}")


if __name__ == "__main__":
    main()
