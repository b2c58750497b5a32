"""A torchrun worker whose ranks fail on purpose in early attempts (tests/python/test_restarts.py).

    torchrun --standalone --nproc-per-node N --max-restarts K restart_worker.py \
        BACKEND PLAN OUT_DIR

PLAN lists, per attempt, the rank that raises and when, comma-separated: "1:after" (after
joining the group and one allreduce), "0:before" (before init_process_group), "1:joined"
(after joining, while the others wait in an allreduce), "-" (nobody). An attempt past the
plan's end runs to the end: it checks an allreduce and a broadcast, and writes
OUT_DIR/attempt-A-rank-R with "ok".
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist

backend, plan, out_dir = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
if backend == "ringx":
    import ringx  # noqa: F401

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
failing, when = -1, ""
if attempt < len(plan) and plan[attempt] != "-":
    failing, when = plan[attempt].split(":")
    failing = int(failing)


def maybe_fail(point):
    if rank == failing and when == point:
        raise RuntimeError(f"rank {rank} fails on purpose {point} in attempt {attempt}")


maybe_fail("before")
dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
maybe_fail("joined")
t = torch.full((4096,), float(rank + 1))
dist.all_reduce(t)
expected = world * (world + 1) / 2
assert torch.equal(t, torch.full((4096,), expected)), (attempt, t[:4])
maybe_fail("after")
b = torch.full((7,), float(rank))
dist.broadcast(b, src=world - 1)
assert torch.equal(b, torch.full((7,), float(world - 1))), b
with open(os.path.join(out_dir, f"attempt-{attempt}-rank-{rank}"), "w") as f:
    f.write("ok")
dist.destroy_process_group()
