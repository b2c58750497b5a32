"""Runs a function on every rank of a real multi-process ringx group.

    results = run_ranks(fn, world_size=3)          # fn(rank, world_size) -> picklable

Each rank is a fresh process (rank_processes.py: from a fork server that imported torch and
ringx), joins a file:// rendezvous with backend="ringx" (or the `backend` given: "gloo" for
the anchor runs), runs fn, and sends back its return value or the text of its exception. A
rank that does not finish within `timeout` seconds is killed and reported: tests never hang.
"""

import atexit
import faulthandler
import importlib.util
import os
import queue as queue_module
import subprocess
import sys
import tempfile
import time
import traceback

import rank_processes

# The samples' port choice (below the ephemeral range) is the tests' too.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples"))
from spawn_ranks import free_port  # noqa: E402,F401

# Where the build put the package and the programs: the directory that holds ringx (a
# subprocess's PYTHONPATH) and build/bin beside it. Found without importing ringx (and torch).
PYTHONPATH = os.path.dirname(os.path.dirname(importlib.util.find_spec("ringx").origin))
BIN = os.path.join(PYTHONPATH, "..", "bin")
RINGX_TRACE = os.path.join(BIN, "ringx-trace")
VIEWER = os.path.join(BIN, "ringx-viewer")


def viewer(*args, timeout=120):
    """Runs ringx-viewer with `args` on the test session's own virtual display (one Xvfb per
    session, virtual_display.py); returns the CompletedProcess, output as text."""
    from virtual_display import session_display  # Xvfb only where a test draws

    return subprocess.run([VIEWER, *map(str, args)], env=session_display().env(),
                          capture_output=True, text=True, timeout=timeout)


class RankFailed(Exception):
    pass


def ringx_shm_segments(creators):
    """The names in /dev/shm of the shared-memory segments that the processes `creators` (pids)
    made: a segment is named "ringx-<creator's pid>-<token>-<what>" (segmentName in
    backend/transport/shm/segment.cc), so another ringx job on the machine goes unseen, as
    testing::ringxShmEntries(pids) does for the C++ tests."""
    prefixes = tuple(f"ringx-{pid}-" for pid in creators)
    assert prefixes, "whose segments? (no processes given)"
    return sorted(name for name in os.listdir("/dev/shm") if name.startswith(prefixes))


def _rank_main(fn, rank, world_size, init_method, queue, timeout_s, env, backend, stacks_after,
               init_kwargs):
    # A rank still running when run_ranks is about to kill it prints every thread's Python stack
    # to its stderr first: where it hung.
    faulthandler.dump_traceback_later(stacks_after, exit=False)
    os.environ.update(env(rank) if callable(env) else env)
    import torch.distributed as dist
    import datetime
    import ringx  # noqa: F401  registers the backend

    try:
        dist.init_process_group(
            backend, init_method=init_method, rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s), **init_kwargs)
        result = fn(rank, world_size)
        queue.put((rank, "ok", result))
        dist.destroy_process_group()
    except BaseException as e:  # report everything, including assertion failures
        queue.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    # A forked rank ends with os._exit, which skips what a spawned one's interpreter runs at
    # exit (ringx writes out its trace there): run it.
    faulthandler.cancel_dump_traceback_later()
    atexit._run_exitfuncs()


def rank_context():
    """The fork server the tests' ranks start from (rank_processes.py), torch and ringx
    imported: run_ranks' ranks and the fault tests' (netns_hosts.Hosts.fork)."""
    return rank_processes.context(["torch", "torch.distributed", "ringx", "harness"],
                                  [os.path.dirname(os.path.abspath(__file__))])


def run_ranks(fn, world_size, timeout=120, group_timeout_s=60, env=None, allow_errors=False,
              backend="ringx", pids=None, init_kwargs=None):
    """Returns [result of rank 0, ...] (results must pickle by value: return
    tensor.numpy(), not tensors, which torch would send as shared-memory handles). `env` is a dict, or a function of the rank
    returning one, applied in each rank before it joins. With allow_errors, a failed rank's entry is
    ("error", text) and a killed/vanished rank's entry is ("missing", None). `pids`, a list when
    given, receives the ranks' process ids (in rank order). `init_kwargs`: more arguments to
    init_process_group (enable_reconfigure=True, say)."""
    ctx = rank_context()
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_method = "file://" + os.path.join(tmp, "rendezvous")
        procs = [
            ctx.Process(target=_rank_main,
                        args=(fn, r, world_size, init_method, queue, group_timeout_s, env or {},
                              backend, max(1.0, timeout - 2.0), init_kwargs or {}))
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
        if pids is not None:
            pids[:] = [p.pid for p in procs]
        results = {}
        deadline = time.monotonic() + timeout
        while len(results) < world_size and time.monotonic() < deadline:
            try:
                rank, status, value = queue.get(timeout=0.2)
                results[rank] = (status, value)
            except queue_module.Empty:
                if all(not p.is_alive() for p in procs) and queue.empty():
                    break
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
    out = []
    for r in range(world_size):
        status, value = results.get(r, ("missing", None))
        if status == "missing" and not allow_errors:
            value = f"no report; process exit code {procs[r].exitcode}"
        if not allow_errors and status != "ok":
            raise RankFailed(f"rank {r} {status}: {value}")
        out.append(value if (status == "ok" and not allow_errors) else (status, value))
    return out


def reduce_reference(inputs, op, group_size, premul_factor=None):
    """What a reduction of the members' tensors `inputs` (in rank order) with `op` ("SUM",
    "AVG", "PREMUL_SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR") must give, computed
    locally in the dtype: integer overflow wraps as torch's own arithmetic does, and on bool
    tensors SUM is OR and PRODUCT is AND, as torch's + and * are."""
    import torch

    acc = inputs[0].clone()
    if op == "PREMUL_SUM":
        acc = acc * premul_factor
    for other in inputs[1:]:
        if op in ("SUM", "AVG"):
            acc = acc + other
        elif op == "PREMUL_SUM":
            acc = acc + other * premul_factor
        elif op == "PRODUCT":
            acc = acc * other
        elif op == "MIN":
            acc = torch.minimum(acc, other)
        elif op == "MAX":
            acc = torch.maximum(acc, other)
        elif op == "BAND":
            acc = acc & other
        elif op == "BOR":
            acc = acc | other
        elif op == "BXOR":
            acc = acc ^ other
        else:
            raise ValueError(f"no reference for reduce op {op}")
    if op == "AVG":
        acc.div_(group_size)
    return acc
