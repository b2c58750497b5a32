#!/usr/bin/env python3
"""Small and large collectives: ringx beside OpenMPI and gloo, timed as a user would.

    PYTHONPATH=build/python .venv/bin/python bench/vs_openmpi.py [--world-sizes 2 3 4]
        [--runs 3] [--quick] [--docs]

Per world size, whole runs of each side alternate (`--runs` of each, the order flipping every
run): a torch job whose ranks hold a gloo and a ringx group over the same processes and take
turns case by case, and an OpenMPI job (`mpirun -np N`, Debian's openmpi-bin and
python3-mpi4py, numpy buffers; bench/openmpi_ranks.py). Both sides time a case the same way
(bench/latency_method.py: a barrier, one operation, the median over many, the slowest rank's),
and the table holds each side's median across its runs. The two cannot share processes.

torch's dispatch floor is the same dist.all_reduce through torch's "fake" backend, which
returns at once without communicating: what any backend pays before it does anything.
3 and 4 ranks on a 2-core machine are oversubscribed, for every side alike.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys

import torch
import torch.distributed as dist

import docs_table
from bench_ranks import run_ranks
from latency_method import (cases, element_count, human, median_single_op_seconds, operations,
                            settle)

HERE = os.path.dirname(os.path.abspath(__file__))
# torch 2.13 renamed the tensor forms (the old names warn).
ALL_GATHER_INTO_TENSOR = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER_TENSOR = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
# Debian's interpreter: python3-mpi4py and python3-numpy are installed for it.
MPI_PYTHON = "/usr/bin/python3"


def torch_op(collective, size, group):
    world = dist.get_world_size(group)
    n = element_count(collective, size, world)
    if collective == "allreduce":
        t = torch.ones(n)
        return lambda: dist.all_reduce(t, group=group)
    if collective == "broadcast":
        t = torch.ones(n)
        return lambda: dist.broadcast(t, src=0, group=group)
    if collective == "all_gather":
        inp, out = torch.ones(n), torch.empty(n * world)
        return lambda: ALL_GATHER_INTO_TENSOR(out, inp, group=group)
    if collective == "reduce_scatter":
        inp, out = torch.ones(n), torch.empty(n // world)
        return lambda: REDUCE_SCATTER_TENSOR(out, inp, group=group)
    if collective == "barrier":
        return lambda: dist.barrier(group=group)
    raise ValueError(collective)


def torch_worker(rank, world, init, quick, results):
    import ringx  # noqa: F401  registers the backend

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    groups = {"gloo": dist.group.WORLD, "ringx": dist.new_group(backend="ringx")}
    for group in groups.values():
        settle(lambda g=group: dist.barrier(group=g))
    out = {}
    for index, (collective, size) in enumerate(cases(quick)):
        order = list(groups) if index % 2 == 0 else list(reversed(groups))
        for name in order:
            group = groups[name]
            seconds = median_single_op_seconds(torch_op(collective, size, group),
                                               lambda g=group: dist.barrier(group=g),
                                               operations(size, quick))
            slowest = torch.tensor([seconds], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=groups["gloo"])
            out[f"{name} {collective} {size}"] = slowest.item()
    if rank == 0:
        results[0] = out
    dist.destroy_process_group()


def floor_worker(rank, world, init, results):
    """dist.all_reduce of 4 KiB through torch's fake backend (no communication at all)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    t = torch.ones(1024)
    results[0] = {"floor": median_single_op_seconds(lambda: dist.all_reduce(t), lambda: None,
                                                    2000)}
    dist.destroy_process_group()


def openmpi_run(world, quick):
    mpirun = shutil.which("mpirun")
    if mpirun is None or subprocess.run([MPI_PYTHON, "-c", "import mpi4py, numpy"],
                                        capture_output=True).returncode != 0:
        raise SystemExit("bench/vs_openmpi.py needs OpenMPI and mpi4py: apt-get install "
                         "openmpi-bin python3-mpi4py python3-numpy (make setup does)")
    argv = [mpirun, "--oversubscribe", "-np", str(world)]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += [MPI_PYTHON, os.path.join(HERE, "openmpi_ranks.py")] + (["--quick"] if quick else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"bench/vs_openmpi.py: mpirun -np {world} failed:\n{done.stdout}\n"
                         f"{done.stderr}")
    return {f"OpenMPI {key}": value for key, value in json.loads(lines[-1]).items()}


def measure(world, runs, quick):
    """{"side collective size": [seconds of each run]} for OpenMPI, gloo and ringx."""
    samples = {}
    for run in range(runs):
        sides = [lambda: run_ranks(torch_worker, world, quick,
                                   name=f"bench/vs_openmpi.py, world size {world}"),
                 lambda: openmpi_run(world, quick)]
        for side in (sides if run % 2 == 0 else reversed(sides)):
            for key, value in side().items():
                samples.setdefault(key, []).append(value)
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--runs", type=int, default=3, help="whole runs of each side")
    parser.add_argument("--quick", action="store_true", help="two sizes, short (smoke test)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    if args.docs:
        docs_table.require("vs_openmpi")
    # The markdown table (the lines about the floor and the goal are prose's).
    as_docs = lambda text: "\n".join(line for line in text.splitlines() if line.startswith("|"))
    with docs_table.table(args.docs, "vs_openmpi", as_docs):
        table(args, runs)


def table(args, runs):
    floor = run_ranks(floor_worker, 1, name="bench/vs_openmpi.py, dispatch floor")["floor"]
    print(f"# ringx beside OpenMPI and gloo on {os.cpu_count()} cores, torch "
          f"{torch.__version__}: time per operation (us), median of {runs} whole run(s) of "
          f"each side;\n# torch's dispatch floor (4 KiB dist.all_reduce through the fake "
          f"backend): {floor * 1e6:.1f} us\n")
    print("| world size | collective | size | OpenMPI (us) | gloo (us) | ringx (us) "
          "| OpenMPI / ringx |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    goal = None
    for world in args.world_sizes:
        samples = measure(world, runs, args.quick)
        for collective, size in cases(args.quick):
            t = {side: statistics.median(samples[f"{side} {collective} {size}"]) * 1e6
                 for side in ("OpenMPI", "gloo", "ringx")}
            print(f"| {world} | {collective} | {human(size)} | {t['OpenMPI']:.1f} "
                  f"| {t['gloo']:.1f} | {t['ringx']:.1f} | {t['OpenMPI'] / t['ringx']:.2f} |")
            if (world, collective, size) == (2, "allreduce", 4096):
                goal = (t["ringx"], floor * 1e6 + t["OpenMPI"])
        sys.stdout.flush()
    if goal:
        print(f"\n4 KiB allreduce, 2 ranks: ringx {goal[0]:.1f} us; torch's floor + OpenMPI "
              f"{goal[1]:.1f} us (goal: within 2x, ratio {goal[0] / goal[1]:.2f})")


if __name__ == "__main__":
    main()
