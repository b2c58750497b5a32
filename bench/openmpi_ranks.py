"""The OpenMPI side of bench/vs_libraries.py: one rank of an mpirun job (Debian's python3 with
mpi4py and numpy, no torch). Times every case of latency_method on float32 numpy buffers with
the same method as the torch side, in place where torch's call is in place; rank 0 prints
{"collective size": seconds} as one JSON line.

The buffers are in 4 KiB pages, as torch's CPU tensors are (torch asks for transparent huge
pages only under THP_MEM_ALLOC_ENABLE=1; the machines here give them only when asked) and as
the C++ sides' are: numpy asks for huge pages for every buffer of 4 MiB or more, and
OpenMPI's single copy (process_vm_readv) reads those 2-3x faster (64 MiB broadcast at 2
ranks: 6.6-6.8 ms from numpy's huge pages, 18.9 ms from 4 KiB pages, measured together), so
numpy's default would time another buffer than the other sides move. --huge-pages keeps it.

    mpirun -np N python3 bench/openmpi_ranks.py [--quick] [--huge-pages]"""

import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from latency_method import (cases, element_count, median_single_op_seconds,  # noqa: E402
                            operations, settle, settle_barriers)


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
    parser.add_argument("--huge-pages", action="store_true",
                        help="numpy's default: huge pages for buffers of 4 MiB or more")
    args = parser.parse_args()
    np.core.multiarray._set_madvise_hugepage(args.huge_pages)
    comm = MPI.COMM_WORLD
    results = {}
    settle(comm.Barrier, settle_barriers(args.quick))
    for collective, size in cases(args.quick):
        seconds = median_single_op_seconds(make_op(comm, collective, size), comm.Barrier,
                                           operations(size, args.quick))
        results[f"{collective} {size}"] = comm.allreduce(seconds, op=MPI.MAX)
    if comm.Get_rank() == 0:
        print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
