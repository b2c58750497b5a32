#!/usr/bin/env python3
"""Set-up cost with torch: gloo beside ringx at the world sizes torch processes reach here.

    PYTHONPATH=build/python .venv/bin/python bench/setup_cost.py [--sizes 8 16 32] [--rounds 3]
        [--docs]

For each world size, gloo and ringx in turn, `--rounds` times (alternating, so that both see
the same machine), fresh rank processes each run init_process_group, one 4 KiB allreduce, a
barrier and 50 more 4 KiB allreduces. Printed per run: the time from the start of the rank
processes to the end of the first allreduce on the slowest rank (issue 34's start-up measure:
what a job waits for before its first collective, `import ringx`, rendezvous and connections
included), the file descriptors a rank opened from its start to the end of that allreduce
(sockets, pipes, shared-memory files), and the mean of the 50 allreduces; then, per world
size, each backend's median time, ringx's time over gloo's in each round and their median.

The rank processes are forks of this one, which has imported torch but not ringx, so that the
time starts with the ranks' own work. Before issue 34 they were spawned, each a fresh
interpreter importing torch: 32 such imports on 2 cores take ~25 s, the same for both
backends, which buried the backends' own start-up (at 32 ranks that way read ringx 30.0 s
against gloo 27.2 s, where forks measured 0.9 s against 0.45 s). The torch-free scale to 1,024
ranks is bench/scale_cost.cc (bench_scale_cost).
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import docs_table
from bench_ranks import launch_ranks


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def worker(rank, world, init, backend, results):
    inherited = open_fds()  # a fork holds its parent's descriptors: count only the rank's own
    if backend == "ringx":
        import ringx  # noqa: F401  (registers the backend)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
    x = torch.ones(1024)  # 4 KiB
    dist.all_reduce(x)
    first = time.time()  # the slowest rank's, less launch_ranks' "launched"
    fds = open_fds() - inherited
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
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each backend per world size, alternating (default 3)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.docs:
        docs_table.require("setup_cost")
    with docs_table.table(args.docs, "setup_cost"):
        table(args)


def table(args):
    print(f"set-up with torch {torch.__version__}, {os.cpu_count()} cores: start of the rank "
          "processes (forked, torch imported) to the end of the first 4 KiB allreduce (slowest "
          "rank), fds each rank opened, then 50 x 4 KiB allreduce")
    print(f"{'N':>4} {'backend':>8} {'first_s':>8} {'fds':>6} {'ar_4KiB_us':>11}")
    for size in args.sizes:
        first = {"gloo": [], "ringx": []}
        for _ in range(args.rounds):
            for backend in ("gloo", "ringx"):
                r, launched = launch_ranks(worker, size, backend, name=f"setup_cost {backend}",
                                           start_method="fork")
                first[backend].append(r["first"] - launched)
                print(f"{size:>4} {backend:>8} {first[backend][-1]:8.2f} {r['fds']:6.1f} "
                      f"{r['each'] * 1e6:11.0f}", flush=True)
        # Each round's ratio compares two runs that saw the same machine; their median is the
        # figure (the machine is shared: a run's time moves with what else runs).
        ratios = [r / g for g, r in zip(first["gloo"], first["ringx"])]
        gloo, ringx = (statistics.median(first[b]) for b in ("gloo", "ringx"))
        print(f"{size:>4} median of {args.rounds}: gloo {gloo:.2f} s, ringx {ringx:.2f} s; "
              f"ringx/gloo per round {' '.join(f'{x:.2f}' for x in ratios)}, median "
              f"{statistics.median(ratios):.2f}", flush=True)


if __name__ == "__main__":
    main()
