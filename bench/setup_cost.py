#!/usr/bin/env python3
"""Set-up cost with torch: gloo beside ringx at the world sizes torch processes reach here.

    PYTHONPATH=build/python .venv/bin/python bench/setup_cost.py [--sizes 8 16 32] [--docs]

For each world size, gloo and ringx in turn, fresh rank processes (bench_ranks.run_ranks)
each run init_process_group, one 4 KiB allreduce, a barrier and 50 more 4 KiB allreduces.
Printed per backend: the time from starting the processes to the end of the first allreduce
on the slowest rank (what issue 19 measured: process start, import torch, rendezvous and
connections), the open file descriptors per rank after it, and then the mean of the 50
allreduces. The torch-free scale to 1,024 ranks is bench/scale_cost.cc (bench_scale_cost).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

import docs_table
from bench_ranks import run_ranks


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def worker(rank, world, init, backend, launched, results):
    if backend == "ringx":
        import ringx  # noqa: F401  (registers the backend)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
    x = torch.ones(1024)  # 4 KiB
    dist.all_reduce(x)
    first = time.time() - launched
    fds = open_fds()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(50):
        dist.all_reduce(x)
    each = (time.perf_counter() - start) / 50
    # The slowest rank's figures: what the job waits for.
    figures = torch.tensor([first, each, float(fds)], dtype=torch.float64)
    dist.all_reduce(figures, op=dist.ReduceOp.MAX)
    total_fds = torch.tensor([float(fds)], dtype=torch.float64)
    dist.all_reduce(total_fds)
    if rank == 0:
        results[0] = {"first": figures[0].item(), "each": figures[1].item(),
                      "fds": total_fds.item() / world}
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.docs:
        docs_table.require("setup_cost")
    with docs_table.table(args.docs, "setup_cost"):
        table(args)


def table(args):
    print(f"set-up with torch {torch.__version__}, {os.cpu_count()} cores: start of the rank "
          "processes to the end of the first 4 KiB allreduce (slowest rank), fds per rank, "
          "then 50 x 4 KiB allreduce")
    print(f"{'N':>4} {'backend':>8} {'first_s':>8} {'fds':>6} {'ar_4KiB_us':>11}")
    for size in args.sizes:
        for backend in ("gloo", "ringx"):
            r = run_ranks(worker, size, backend, time.time(), name=f"setup_cost {backend}")
            print(f"{size:>4} {backend:>8} {r['first']:8.2f} {r['fds']:6.1f} "
                  f"{r['each'] * 1e6:11.0f}", flush=True)


if __name__ == "__main__":
    main()
