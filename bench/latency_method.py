"""How bench/vs_libraries.py times a collective, in one place for all of its sides: the torch
ranks (gloo and ringx), the OpenMPI ranks, which run under mpirun with Debian's python3 and
mpi4py, without torch, and the oneCCL ranks (bench/oneccl_ranks.cc, C++: a port of settle()
and median_single_op_seconds(), given its cases and their operation counts on the command line
by case_arguments(), so that they are defined here only). Nothing here imports torch or MPI.

The method is what a user's timing would see: a barrier, then one collective, timed alone;
the figure is the median over many such single operations, taken on every rank, and the
slowest rank's median is the one reported. The number of operations depends only on the
size, so every rank (and every library) runs the same count.

Also here, for every benchmark: how sizes are written ("64K", "1M") and read back."""

import statistics
import time

KIB, MIB = 1 << 10, 1 << 20
COLLECTIVES = ["allreduce", "broadcast", "all_gather", "reduce_scatter", "barrier"]
ALLREDUCE_SIZES = [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB,
                   256 * MIB]
# all_gather, reduce_scatter and broadcast: two latency sizes, and the 1 MiB and 64 MiB that
# issue 34 compares the libraries at.
OTHER_SIZES = [4 * KIB, 64 * KIB, 1 * MIB, 64 * MIB]
QUICK_SIZES = [4 * KIB, 64 * KIB]


def cases(quick=False):
    """(collective, bytes) pairs to time, in order. Sizes are of the whole buffer: the
    allreduced or broadcast tensor, the gathered output, the reduce-scattered input."""
    out = []
    for collective in COLLECTIVES:
        if collective == "barrier":
            out.append((collective, 0))
            continue
        sizes = QUICK_SIZES if quick else (
            ALLREDUCE_SIZES if collective == "allreduce" else OTHER_SIZES)
        out += [(collective, size) for size in sizes]
    return out


def operations(size, quick=False):
    """How many single operations to time at `size` bytes: many for small ones (their times
    jump with the scheduler), a few for the largest (256 MiB through gloo takes seconds)."""
    if quick:
        return 20
    return max(3, min(400, (256 * MIB) // max(size, 1)))


def case_arguments(quick=False, chosen=None):
    """cases() (or the (collective, size) pairs `chosen`) with their operations() as one
    command-line argument for a rank program in another language:
    "allreduce:4096:400,...,barrier:0:400"."""
    return ",".join(f"{collective}:{size}:{operations(size, quick)}"
                    for collective, size in (chosen if chosen is not None else cases(quick)))


SETTLE_BARRIERS = 5000
# With --quick (the smoke tests that make test runs beside other work): enough to start every
# side alike. Under load each of oneCCL's barriers waited out a scheduler tick (8 ms), and its
# 5000 took 40 s in each of its four settings.
SETTLE_BARRIERS_QUICK = 200


def settle_barriers(quick=False):
    """How many barriers settle() runs first: SETTLE_BARRIERS, or SETTLE_BARRIERS_QUICK."""
    return SETTLE_BARRIERS_QUICK if quick else SETTLE_BARRIERS


def settle(barrier, count=SETTLE_BARRIERS):
    """Barriers before the first timing: right after start-up, ranks that happen to share a core
    run their first thousands of operations in lock-step with the scheduler (10x slower) until
    it spreads them out. Both sides settle alike; the count is the same on every rank."""
    for _ in range(count):
        barrier()


def median_single_op_seconds(op, barrier, count):
    """Median of `count` timings of op(), each run alone right after barrier()."""
    op()  # connections, caches and buffers warm
    samples = []
    for _ in range(count):
        barrier()
        start = time.perf_counter()
        op()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def element_count(collective, size, world):
    """float32 elements of each rank's input, so that the sides move identical buffers."""
    elements = size // 4
    if collective == "all_gather":
        return elements // world  # each rank's share of the gathered output
    return elements // world * world if collective == "reduce_scatter" else elements


def human(size):
    if size == 0:
        return "-"
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def parse_sizes(texts):
    """Byte counts of command-line sizes such as 64K and 1M."""
    unit = {"K": KIB, "M": MIB}
    return [int(x[:-1]) * unit[x[-1].upper()] for x in texts]
