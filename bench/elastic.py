#!/usr/bin/env python3
"""Going on after a death, gloo beside ringx in one run (alternating, medians of --rounds):

  abort        2 ranks, rank 1 stuck (alive, never joining); rank 0 issues 3 allreduces, then
               ProcessGroup.abort(): the time from abort() to every Work failed (the group's
               timeout is 5 s, so 5 s means the abort failed nothing).
  shrink       4 ranks running allreduces of 1 MiB, rank 3 SIGKILLed: the time from the kill
               to a survivor's error, and from the error to its first allreduce on
               dist.shrink_group([3])'s group (torch >= 2.10; ringx.shrink_group's own path on
               2.9). gloo cannot shrink (TypeError).
  reconfigure  the same death, the survivors going on through dist._reconfigure with their
               handles (torch >= 2.14, where gloo reconfigures too).

    PYTHONPATH=build/python .venv/bin/python bench/elastic.py [--rounds 5] [--docs]

A figure is a survivor's (rank 0's); "-" where that torch or backend has no such call.
"""

import argparse
import os
import signal
import statistics
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "python"))
import docs_table  # noqa: E402  (beside this file)
from harness import run_ranks  # noqa: E402  (tests/python is not a package)

BACKENDS = ["gloo", "ringx"]
ELEMENTS = 1 << 18  # 1 MiB of float32


def _abort_job(rank, world):
    import torch
    import torch.distributed as dist
    if rank == 1:
        time.sleep(6)  # stuck past the group's timeout: never joins rank 0's allreduces
        return None
    works = [dist.all_reduce(torch.ones(1 << 10), async_op=True) for _ in range(3)]
    time.sleep(0.2)
    started = time.monotonic()
    dist.group.WORLD.abort()
    for work in works:
        try:
            work.wait()
        except Exception:  # noqa: BLE001  failed, as it should
            pass
    return time.monotonic() - started


def _death_job(rank, world):
    """Rank 3 dies mid-allreduce; the others go on by os.environ["BENCH_HOW"]."""
    import torch
    import torch.distributed as dist
    import ringx
    how = os.environ["BENCH_HOW"]
    store = dist.distributed_c10d._get_default_store()
    if how == "reconfigure":
        store.set(f"bench/first/{rank}", dist._get_reconfigure_handle())
        handles = [store.get(f"bench/first/{r}").decode() for r in range(world)]
        dist._reconfigure(uuid=1, handles=handles).wait()
    t = torch.ones(ELEMENTS)
    for _ in range(3):
        dist.all_reduce(t)
    if rank == world - 1:
        store.set("bench/killed_at", repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        while True:
            dist.all_reduce(t)
    except Exception:  # noqa: BLE001  the dead peer
        error_at = time.time()
    if how == "shrink":
        ringx.shrink_group([world - 1])
    else:
        store.set(f"bench/second/{rank}", dist._get_reconfigure_handle())
        handles = [store.get(f"bench/second/{r}").decode() for r in range(world - 1)]
        dist._reconfigure(uuid=2, handles=handles).wait()
    u = torch.full((ELEMENTS,), 1.0)
    dist.all_reduce(u)
    assert u[0].item() == world - 1, u[0].item()
    killed_at = float(store.get("bench/killed_at").decode())
    return error_at - killed_at, time.time() - error_at


def measure(what, backend):
    """Seconds (a number or a pair), or the reason there is none."""
    import torch.distributed as dist
    if what == "shrink" and backend == "gloo":
        return "cannot shrink"
    if what == "reconfigure" and not hasattr(dist, "_reconfigure"):
        return "needs torch 2.14"
    if what == "abort":
        results = run_ranks(_abort_job, 2, timeout=60, group_timeout_s=5, backend=backend,
                            allow_errors=True)
    else:
        init = {"enable_reconfigure": True} if what == "reconfigure" else None
        results = run_ranks(_death_job, 4, timeout=60, group_timeout_s=10, backend=backend,
                            allow_errors=True, env={"BENCH_HOW": what}, init_kwargs=init)
    status, value = results[0]
    return value if status == "ok" else f"failed: {str(value).splitlines()[0][:60]}"


def cell(values):
    numbers = [v for v in values if not isinstance(v, str)]
    if len(numbers) < len(values):
        return next(v for v in values if isinstance(v, str))
    if isinstance(numbers[0], tuple):
        detect = statistics.median(v[0] for v in numbers)
        go_on = statistics.median(v[1] for v in numbers)
        return f"{detect * 1e3:6.0f} ms + {go_on * 1e3:5.0f} ms"
    return f"{statistics.median(numbers) * 1e3:6.1f} ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.docs:
        docs_table.require("elastic")
    import torch
    rows = ["abort", "shrink", "reconfigure"]
    values = {(r, b): [] for r in rows for b in BACKENDS}
    for _ in range(args.rounds):
        for row in rows:
            for backend in BACKENDS:  # alternating, so a slow spell hits both
                values[(row, backend)].append(measure(row, backend))
    with docs_table.table(args.docs, "elastic"):
        print(f"torch {torch.__version__}, medians of {args.rounds} rounds; abort: to every "
              f"Work failed; shrink, reconfigure: kill -> error + error -> first allreduce")
        print(f"{'':<12} {'gloo':>24} {'ringx':>24}")
        for row in rows:
            print(f"{row:<12} {cell(values[(row, 'gloo')]):>24} "
                  f"{cell(values[(row, 'ringx')]):>24}")


if __name__ == "__main__":
    main()
