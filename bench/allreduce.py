#!/usr/bin/env python3
"""ringx vs gloo, nccl-tests style: allreduce (SUM and AVG), all_gather, reduce_scatter and
(coalesced) broadcast, same processes.

    PYTHONPATH=build/python .venv/bin/python bench/allreduce.py [--world-sizes 2 3] [--quick]
        [--docs]

Every rank process holds a gloo group and a ringx group over the same ranks; each
measurement alternates gloo and ringx blocks several times and keeps each backend's median
per-operation time, so both see the same machine state. Reported per size:
time (us), algbw = bytes / time, busbw = algbw * 2(n-1)/n (the bytes each rank's link must
carry in a ring), and the ringx/gloo busbw ratio. Compare ratios within one run; absolute
numbers on a shared 2-core machine move from run to run.
"""

import argparse
import datetime
import functools
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import docs_table
from bench_ranks import run_ranks
from latency_method import KIB, MIB, human, parse_sizes

# memcpy reference: copy a buffer too big for the caches (GB/s of bytes copied).
MEMCPY_BYTES = 256 * MIB
FULL_SIZES = [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB,
              256 * MIB]
QUICK_SIZES = [4 * KIB, 64 * KIB, 1 * MIB]


def timed_block(fn, group, iters):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def measure(make_op, groups, size, rounds, budget_s):
    """Median seconds per op for each backend name in `groups`, interleaved."""
    ops = {name: make_op(group) for name, group in groups.items()}
    for op in ops.values():  # warm up connections and caches
        op()
    probe = torch.tensor([max(timed_block(op, groups[name], 1) for name, op in ops.items())])
    dist.all_reduce(probe, op=dist.ReduceOp.MAX, group=groups["gloo"])  # same count everywhere
    probe = probe.item()
    iters = max(1, min(200, int(budget_s / max(probe, 1e-6) / rounds / len(ops))))
    samples = {name: [] for name in ops}
    for _ in range(rounds):
        for name, op in ops.items():
            samples[name].append(timed_block(op, groups[name], iters))
    # Every rank must agree on the figure: take the slowest rank's median.
    out = {}
    for name in ops:
        t = torch.tensor([statistics.median(samples[name])], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["gloo"])
        out[name] = t.item()
    return out


def allreduce_op(size, op=dist.ReduceOp.SUM):
    def make(group):
        t = torch.ones(size // 4, dtype=torch.float32)
        return lambda: dist.all_reduce(t, op=op, group=group)
    return make


def broadcast_op(size):
    def make(group):
        t = torch.ones(size // 4, dtype=torch.float32)
        return lambda: dist.broadcast(t, src=0, group=group)
    return make


def allgather_op(size):
    """`size` is the gathered (output) size."""
    def make(group):
        world = dist.get_world_size(group)
        inp = torch.ones(size // 4 // world)
        out = [torch.empty_like(inp) for _ in range(world)]
        return lambda: dist.all_gather(out, inp, group=group)
    return make


def reduce_scatter_op(size):
    """`size` is the input size; reduce_scatter_tensor, the form FSDP calls."""
    def make(group):
        world = dist.get_world_size(group)
        inp = torch.ones(size // 4 // world * world)
        out = torch.empty(size // 4 // world)
        return lambda: dist.reduce_scatter_tensor(out, inp, group=group)
    return make


def coalesced_broadcast_op(size):
    import ringx

    # A model's worth of parameters: many tensors of mixed sizes adding up to `size`.
    shapes, left, k = [], size // 4, 0
    while left > 0:
        n = min(left, [4096, 262144, 1024, 1048576, 64][k % 5])
        shapes.append(n)
        left -= n
        k += 1

    def make(group):
        tensors = [torch.ones(n) for n in shapes]
        if dist.get_backend(group) == "gloo":
            return lambda: dist._broadcast_coalesced(group, tensors, 16 * MIB, 0)
        return lambda: ringx.broadcast_coalesced(tensors, 0, group=group, bucket_bytes=16 * MIB)
    return make, len(shapes)


def memcpy_gbps(size):
    a = torch.ones(size // 4)
    b = torch.empty_like(a)
    b.copy_(a)
    start = time.perf_counter()
    reps = max(3, int(2e9 // max(size, 1) // 8))
    for _ in range(reps):
        b.copy_(a)
    return size * reps / (time.perf_counter() - start) / 1e9


def worker(rank, world, init, sizes, rounds, budget_s, results):
    import ringx
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    factor = functools.partial(ringx.analysis.bus_bandwidth_factor, group_size=world)
    groups = {"gloo": dist.group.WORLD, "ringx": dist.new_group(backend="ringx")}
    rows = []
    for size in sizes:
        t = measure(allreduce_op(size), groups, size, rounds, budget_s)
        rows.append(("allreduce", size, world, t, factor("allreduce")))
    for size in [s for s in (1 * MIB, 64 * MIB) if s <= max(sizes)]:
        t = measure(allreduce_op(size, dist.ReduceOp.AVG), groups, size, rounds, budget_s)
        rows.append(("allreduce AVG", size, world, t, factor("allreduce")))
        t = measure(allgather_op(size), groups, size, rounds, budget_s)
        rows.append(("all_gather", size, world, t, factor("all_gather")))
        t = measure(reduce_scatter_op(size), groups, size, rounds, budget_s)
        rows.append(("reduce_scatter", size, world, t, factor("reduce_scatter")))
        t = measure(broadcast_op(size), groups, size, rounds, budget_s)
        rows.append(("broadcast", size, world, t, factor("broadcast")))
        make, count = coalesced_broadcast_op(size)
        t = measure(make, groups, size, rounds, budget_s)
        rows.append((f"broadcast_coalesced ({count} tensors)", size, world, t,
                     factor("broadcast")))
    if rank == 0:
        results[rank] = dict(rows=rows, memcpy=memcpy_gbps(
            MEMCPY_BYTES if max(sizes) >= 64 * MIB else max(sizes)))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3, 4],
                        help="4 ranks on this 2-core machine is oversubscribed")
    parser.add_argument("--quick", action="store_true", help="small sizes, short runs (smoke test)")
    parser.add_argument("--sizes", nargs="+", help="allreduce sizes, e.g. 64K 1M 64M")
    parser.add_argument("--rounds", type=int, default=5, help="gloo/ringx alternations per size")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per size, roughly")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.sizes:
        sizes = parse_sizes(args.sizes)
    rounds, budget = (2, 0.05) if args.quick else (args.rounds, args.budget)
    if args.docs:
        docs_table.require("allreduce")
    # The tables as printed, each world size's heading one level down (they sit under a section
    # of docs/benchmarks.md); the first line, about the run, is not a table's.
    as_docs = lambda text: "\n".join("#" + line if line.startswith("## ") else line
                                     for line in text.splitlines()[1:])
    with docs_table.table(args.docs, "allreduce", as_docs):
        tables(args, sizes, rounds, budget)


def tables(args, sizes, rounds, budget):
    print(f"# ringx vs gloo on {os.cpu_count()} cores, torch {torch.__version__}; "
          "busbw = algbw * 2(n-1)/n for allreduce")
    for world in args.world_sizes:
        out = run_ranks(worker, world, sizes, rounds, budget, name=f"bench/allreduce.py, "
                        f"world size {world}")
        rows, memcpy = out["rows"], out["memcpy"]
        print(f"\n## world size {world} (memcpy {memcpy:.1f} GB/s in this run)\n")
        print("| collective | size | gloo time (us) | ringx time (us) | gloo busbw (GB/s) "
              "| ringx busbw (GB/s) | ringx/gloo | ringx busbw / memcpy |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, size, n, t, factor in rows:
            bus = {k: size / v / 1e9 * factor for k, v in t.items()}
            print(f"| {name} | {human(size)} | {t['gloo'] * 1e6:.0f} | {t['ringx'] * 1e6:.0f} "
                  f"| {bus['gloo']:.2f} | {bus['ringx']:.2f} | {bus['ringx'] / bus['gloo']:.2f} "
                  f"| {bus['ringx'] / memcpy:.0%} |")
        # AVG's anchor is ringx's own SUM: the division rides in the last reducing step.
        sums = {size: t["ringx"] for name, size, _, t, _ in rows if name == "allreduce"}
        avg = [f"{human(size)} {t['ringx'] / sums[size]:.2f}x" for name, size, _, t, _ in rows
               if name == "allreduce AVG" and size in sums]
        if avg:
            print(f"\nringx allreduce AVG / SUM time: {', '.join(avg)}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
