"""The OpenMPI side of bench/vs_libraries.py: one rank of an mpirun job (Debian's python3 with
mpi4py and numpy, no torch). Times every case of latency_method on float32 numpy buffers with
the same method as the torch side, in place where torch's call is in place; rank 0 prints
{"collective size": seconds} as one JSON line.

    mpirun -np N python3 bench/openmpi_ranks.py [--quick]"""

import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from latency_method import (cases, element_count, median_single_op_seconds,  # noqa: E402
                            operations, settle)


def make_op(comm, collective, size):
    world = comm.Get_size()
    n = element_count(collective, size, world)
    if collective == "allreduce":
        buf = np.ones(n, dtype=np.float32)
        return lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    if collective == "broadcast":
        buf = np.ones(n, dtype=np.float32)
        return lambda: comm.Bcast(buf, root=0)
    if collective == "all_gather":
        inp = np.ones(n, dtype=np.float32)
        out = np.empty(n * world, dtype=np.float32)
        return lambda: comm.Allgather(inp, out)
    if collective == "reduce_scatter":
        inp = np.ones(n, dtype=np.float32)
        out = np.empty(n // world, dtype=np.float32)
        return lambda: comm.Reduce_scatter_block(inp, out, op=MPI.SUM)
    if collective == "barrier":
        return comm.Barrier
    raise ValueError(collective)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    results = {}
    settle(comm.Barrier)
    for collective, size in cases(args.quick):
        seconds = median_single_op_seconds(make_op(comm, collective, size), comm.Barrier,
                                           operations(size, args.quick))
        results[f"{collective} {size}"] = comm.allreduce(seconds, op=MPI.MAX)
    if comm.Get_rank() == 0:
        print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
