"""Starting a benchmark's ranks (every bench/*.py that runs ranks): one process per rank
(spawned; forked where the start itself is measured), a file:// rendezvous in a temporary
directory, and a shared dict each rank's worker writes its results into; rank 0's come back.
And timing the engines a worker holds in interleaved rounds (timed_rounds)."""

import os
import tempfile
import time

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
    rank fails. Each rank is a fresh interpreter (spawned) that imports torch itself."""
    return launch_ranks(worker, world_size, *args, name=name)[0]


def launch_ranks(worker, world_size, *args, name, start_method="spawn"):
    """run_ranks with the start method chosen, returning (results[0], launched): launched is
    time.time() right before the first rank process started. start_method "fork" makes the
    ranks copies of this process, torch already imported, so that a rank's time from
    `launched` is its own work (bench/setup_cost.py)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # inherited by the ranks
    ctx = mp.get_context(start_method)
    with tempfile.TemporaryDirectory() as tmp, ctx.Manager() as manager:
        results = manager.dict()
        init = "file://" + os.path.join(tmp, "rendezvous")
        procs = [ctx.Process(target=_rank_main, args=(worker, r, world_size, init, *args, results))
                 for r in range(world_size)]
        launched = time.time()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs) or 0 not in results:
            raise SystemExit(f"{name}: a rank failed")
        return dict(results[0]), launched


def timed_rounds(runs, step, rounds, steps, barrier_group, wire_groups=None, before_step=None,
                 after_step=None):
    """Times step(model, opt) for every (model, opt) of `runs` ({key: (model, opt)}): in each of
    `rounds` rounds every key in turn, after a barrier on `barrier_group`, runs `steps` steps,
    so all keys see the same machine state. Returns {key: {"seconds": median over the rounds
    of the mean step time}}, plus "sent", the bytes put on the wire per step
    (ringx.wire.bytes_sent over `wire_groups`, read outside the timing), when wire_groups is
    given. before_step(key) and after_step(key, model) run around each step, inside the
    timing (what the caller records there is part of the step)."""
    import statistics
    import time

    import torch.distributed as dist

    if wire_groups is not None:
        from ringx.wire import bytes_sent
    times = {key: [] for key in runs}
    sent = {key: 0 for key in runs}
    for _ in range(rounds):
        for key, (model, opt) in runs.items():
            dist.barrier(group=barrier_group)
            before = bytes_sent(wire_groups) if wire_groups is not None else 0
            start = time.perf_counter()
            for _ in range(steps):
                if before_step:
                    before_step(key)
                step(model, opt)
                if after_step:
                    after_step(key, model)
            times[key].append((time.perf_counter() - start) / steps)
            if wire_groups is not None:
                sent[key] += bytes_sent(wire_groups) - before
    out = {key: {"seconds": statistics.median(times[key])} for key in runs}
    if wire_groups is not None:
        for key in runs:
            out[key]["sent"] = sent[key] / (rounds * steps)
    return out


def slowest(seconds, group):
    """The largest of every rank's `seconds` (what the job waits for), over `group`."""
    import torch.distributed as dist

    value = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=group)
    return value.item()
