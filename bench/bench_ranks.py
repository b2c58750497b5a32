"""Starting a benchmark's ranks (every bench/*.py that runs ranks): one spawned process per
rank, a file:// rendezvous in a temporary directory, and a shared dict each rank's worker
writes its results into; rank 0's come back."""

import os
import tempfile

import torch
import torch.multiprocessing as mp


def _rank_main(worker, *args):
    # One compute thread per rank: the ranks share the machine's cores, and torch's default
    # (a thread per core in every rank) oversubscribes them and makes the timings noise.
    torch.set_num_threads(1)
    worker(*args)


def run_ranks(worker, world_size, *args, name):
    """Runs worker(rank, world_size, init_method, *args, results) on every rank, each with one
    torch compute thread, and returns results[0]; exits naming the benchmark `name` when a
    rank fails."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # inherited by the ranks
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp, ctx.Manager() as manager:
        results = manager.dict()
        init = "file://" + os.path.join(tmp, "rendezvous")
        procs = [ctx.Process(target=_rank_main, args=(worker, r, world_size, init, *args, results))
                 for r in range(world_size)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs) or 0 not in results:
            raise SystemExit(f"{name}: a rank failed")
        return dict(results[0])
