#!/usr/bin/env python3
"""Allreduce when the job's cores are contended: gloo beside ringx, and ringx beside itself
on quiet cores.

    PYTHONPATH=build/python .venv/bin/python bench/contended.py [--world-sizes 2 3]
        [--sizes 4K 64K 1M 16M 64M] [--quick] [--docs]

What a user's script does: each rank fills its tensor (through torch's intra-op threads),
enters a barrier and times one allreduce; the median over many, the slowest rank's
(bench/latency_method.py's method, with the fill before each barrier). One torch job per
setting, its ranks holding a gloo and a ringx group that take turns size by size:

  quiet            one intra-op thread per rank, nothing else running: the reference;
  busy process     the same, and a process beside the job that keeps one core busy;
  default threads  torch's default intra-op threads (one per core in every rank, as with
                   torch.multiprocessing.spawn and no OMP_NUM_THREADS): OpenMP workers that
                   spin for milliseconds after each fill, beside the ranks;
  default threads, busy process: both;
  default threads, passive OpenMP: with OMP_WAIT_POLICY=passive (the workers sleep at once
                   after a parallel region): how much of the default-threads cost is their
                   spinning, which no backend controls.

Printed per setting and size: gloo and ringx times, ringx / gloo, and ringx / ringx quiet.
Goals (issue 34): ringx never slower than gloo; within 1.5x of quiet at >= 1 MiB.
"""

import argparse
import datetime
import os
import statistics
import subprocess
import sys

import torch
import torch.distributed as dist

import docs_table
from bench_ranks import run_ranks, slowest
from latency_method import KIB, MIB, human, median_single_op_seconds, operations, parse_sizes, \
    settle

SIZES = [4 * KIB, 64 * KIB, 1 * MIB, 16 * MIB, 64 * MIB]
QUICK_SIZES = [4 * KIB, 1 * MIB]
# (name, torch intra-op threads per rank (0: torch's default), busy process, extra environment)
SETTINGS = [
    ("quiet", 1, False, {}),
    ("busy process", 1, True, {}),
    ("default threads", 0, False, {}),
    ("default threads, busy process", 0, True, {}),
    ("default threads, passive OpenMP", 0, False, {"OMP_WAIT_POLICY": "passive"}),
]


def worker(rank, world, init, threads, sizes, quick, results):
    import ringx  # noqa: F401  (registers the backend)

    # run_ranks set one thread; torch's default is one per usable core.
    torch.set_num_threads(threads or len(os.sched_getaffinity(0)))
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    groups = {"gloo": dist.group.WORLD, "ringx": dist.new_group(backend="ringx")}
    for group in groups.values():
        settle(lambda g=group: dist.barrier(group=g), 500 if quick else 2000)
    out = {}
    for index, size in enumerate(sizes):
        t = torch.empty(size // 4)
        for name in (list(groups) if index % 2 == 0 else list(reversed(groups))):
            group = groups[name]

            def fill_and_barrier(g=group):
                t.fill_(1.0)
                dist.barrier(group=g)

            count = 10 if quick else min(200, operations(size))
            seconds = median_single_op_seconds(lambda g=group: dist.all_reduce(t, group=g),
                                               fill_and_barrier, count)
            out[f"{name} {size}"] = slowest(seconds, groups["gloo"])
    if rank == 0:
        results[0] = out
    dist.destroy_process_group()


def run_setting(world, setting, sizes, quick):
    name, threads, busy, env = setting
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # the ranks inherit it; OpenMP reads it as it loads
    competitor = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        return run_ranks(worker, world, threads, sizes, quick,
                         name=f"bench/contended.py, {name}, world size {world}")
    finally:
        if competitor:
            competitor.kill()
            competitor.wait()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--sizes", nargs="+", help="allreduce sizes, e.g. 64K 1M 64M")
    parser.add_argument("--quick", action="store_true", help="two sizes, short (smoke test)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    sizes = parse_sizes(args.sizes) if args.sizes else QUICK_SIZES if args.quick else SIZES
    if args.docs:
        docs_table.require("contended")
    with docs_table.table(args.docs, "contended",
                          lambda text: "\n".join(line for line in text.splitlines()
                                                 if line.startswith("|"))):
        table(args, sizes)


def table(args, sizes):
    print(f"# allreduce on contended cores ({len(os.sched_getaffinity(0))} cores, torch "
          f"{torch.__version__}): fill, barrier, one timed allreduce; median, slowest rank\n")
    print("| world size | setting | size | gloo (us) | ringx (us) | ringx / gloo "
          "| ringx / ringx quiet |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for world in args.world_sizes:
        quiet = None
        for setting in SETTINGS:
            t = run_setting(world, setting, sizes, args.quick)
            quiet = quiet or {size: t[f"ringx {size}"] for size in sizes}
            for size in sizes:
                gloo, ringx = t[f"gloo {size}"], t[f"ringx {size}"]
                print(f"| {world} | {setting[0]} | {human(size)} | {gloo * 1e6:.1f} "
                      f"| {ringx * 1e6:.1f} | {ringx / gloo:.2f} | {ringx / quiet[size]:.2f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
