#!/usr/bin/env python3
"""What a call through torch adds to ringx's collective: ringx through torch beside the same
algorithms from C++ ranks (bench_ringx_ranks), plain and with the CPU of one torch call spent
before every call, alternated round by round so that the machine's speed is the same for all.

    PYTHONPATH=build/python .venv/bin/python bench/call_cost.py [--world-sizes 2 3]
        [--rounds 3] [--quick]

The per-call cost is measured first (bench/vs_libraries.py's floor_worker): a 4 KiB
dist.all_reduce on a ringx group of one rank, which is torch's dispatch plus ringx's own
per-call work with nothing to send. `bench_ringx_ranks --call-cost-us` spends that much CPU
before each C++ call, barriers too. Where "through torch" matches "C++ + call", the call's way
through torch costs that and no more; where it is above, the difference is what the spin does
not reproduce (with more ranks than cores, ranks that share a core pay each other's calls).
Every side times a case as bench/latency_method.py does (a barrier, one operation, the median
over many, the slowest rank's); each cell is the median over the rounds.
"""

import argparse
import datetime
import os
import statistics
import sys

import torch.distributed as dist

from bench_ranks import run_ranks, slowest
from latency_method import SETTLE_BARRIERS, case_arguments, human, median_single_op_seconds, \
    operations, settle
from vs_libraries import floor_worker, ringx_core_run, ringx_ranks_binary, torch_op

CASES = [("allreduce", 4 << 10), ("allreduce", 64 << 10), ("allreduce", 1 << 20),
         ("broadcast", 4 << 10), ("barrier", 0)]
QUICK_CASES = [("allreduce", 4 << 10), ("barrier", 0)]


def torch_worker(rank, world, init, chosen, quick, results):
    """ringx through torch, the default group, every case of `chosen`."""
    import ringx  # noqa: F401  registers the backend

    dist.init_process_group("ringx", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    settle(dist.barrier, SETTLE_BARRIERS)
    out = {}
    for collective, size in chosen:
        seconds = median_single_op_seconds(torch_op(collective, size, None), dist.barrier,
                                           operations(size, quick))
        out[f"{collective} {size}"] = slowest(seconds, None)
    if rank == 0:
        results[0] = out
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of every side")
    parser.add_argument("--quick", action="store_true", help="two cases, short (smoke test)")
    args = parser.parse_args()
    chosen = QUICK_CASES if args.quick else CASES
    rounds = 1 if args.quick else args.rounds
    binary = ringx_ranks_binary()
    calls = run_ranks(floor_worker, 1, name="bench/call_cost.py, per-call cost")
    cost_us = calls["ringx call"] * 1e6
    print(f"# per call through torch (a 4 KiB all_reduce on a one-rank ringx group): "
          f"{cost_us:.1f} us, of which torch's floor {calls['floor'] * 1e6:.1f} us; "
          f"{os.cpu_count()} cores; median of {rounds} alternated round(s)\n")
    print("| world size | collective | size | through torch (us) | C++ ranks (us) "
          "| C++ + call (us) | torch / (C++ + call) |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    case_text = case_arguments(args.quick, chosen)
    for world in args.world_sizes:
        samples = {}
        sides = [("torch", lambda: run_ranks(torch_worker, world, chosen, args.quick,
                                             name=f"bench/call_cost.py, {world} ranks")),
                 ("C++", lambda: ringx_core_run(world, case_text, binary)),
                 ("C++ + call", lambda: ringx_core_run(world, case_text, binary, cost_us))]
        for r in range(rounds):
            for side, run in sides if r % 2 == 0 else reversed(sides):
                for key, seconds in run().items():
                    key = key.removeprefix("ringx, no torch ")
                    samples.setdefault((side, key), []).append(seconds * 1e6)
        for collective, size in chosen:
            t = {side: statistics.median(samples[(side, f"{collective} {size}")])
                 for side, _ in sides}
            print(f"| {world} | {collective} | {human(size)} | {t['torch']:.1f} "
                  f"| {t['C++']:.1f} | {t['C++ + call']:.1f} "
                  f"| {t['torch'] / t['C++ + call']:.2f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
