"""A group's timeout changed through torch after the group was made applies to every later
collective of that group on ringx, as on gloo: `_set_pg_timeout` (torch 2.9 to 2.13, a deprecated
alias of `set_timeout` since 2.14) and `dist.set_timeout` (torch 2.14 on). torch 2.13's own
`_set_pg_timeout` knows only gloo and NCCL: on ringx it warned and changed nothing
(ringx/_timeout.py)."""

import datetime
import functools
import time
import warnings

import pytest
import torch
import torch.distributed as dist

from harness import run_ranks

CPU = torch.device("cpu")
SHORT = datetime.timedelta(seconds=1)
LONG = datetime.timedelta(seconds=60)
# How torch sets a group's timeout, by release: both where torch has set_timeout.
SETTERS = ["_set_pg_timeout"] + (["set_timeout"] if hasattr(dist, "set_timeout") else [])


def _set_timeout(setter, timeout, group=None):
    """Sets the group's timeout the way `setter` does; returns the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if setter == "set_timeout":
            dist.set_timeout(timeout, group)
        else:
            dist.distributed_c10d._set_pg_timeout(timeout, group)
    return [str(w.message) for w in caught]


def _both_ranks_ready(store, rank):
    """Both ranks are past init_process_group (under a timeout of the test's own, not the
    group's), so a short group timeout cannot catch a rank still starting."""
    store.set(f"ready{rank}", "1")
    store.wait(["ready0", "ready1"], LONG)


def _backend_timeout(backend):
    if backend != "ringx":
        return None
    return dist.group.WORLD._get_backend(CPU).timeout


def _shortened(setter, backend, rank, world):
    store = dist.distributed_c10d._get_default_store()
    _both_ranks_ready(store, rank)
    dist.all_reduce(torch.ones(4))  # connected, under the long timeout the group was made with
    warned = _set_timeout(setter, SHORT)
    timeout = _backend_timeout(backend)
    if rank == 1:  # never joins the next collective; stays until rank 0 has given up on it
        store.wait(["given_up"], LONG)
        return None, 0.0, warned, timeout
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        message = "no error"
    except RuntimeError as e:  # DistBackendError on ringx
        message = str(e)
    elapsed = time.monotonic() - start
    store.set("given_up", "1")
    return message, elapsed, warned, timeout


@pytest.mark.parametrize("setter", SETTERS)
@pytest.mark.parametrize("backend", ["ringx", "gloo"])
def test_a_shortened_timeout_fails_the_next_collective_a_peer_never_joins(backend, setter,
                                                                         tmp_path):
    results = run_ranks(functools.partial(_shortened, setter, backend), 2, backend=backend,
                        group_timeout_s=LONG.total_seconds(),
                        env={"RINGX_DUMP_DIR": str(tmp_path)})
    message, elapsed, warned, timeout = results[0]
    assert not [w for w in warned if "only supported" in w], warned
    # Well within the timeout the group was made with: the short one applied.
    assert elapsed < LONG.total_seconds() / 3, (elapsed, message)
    if backend == "ringx":
        assert "allreduce #1" in message and "timeout 1000 ms" in message, message
        assert [r[3] for r in results] == [SHORT, SHORT]
    else:
        assert "1000ms" in message or "1000 ms" in message, message


def _lengthened(setter, backend, rank, world):
    store = dist.distributed_c10d._get_default_store()
    _both_ranks_ready(store, rank)
    warned = _set_timeout(setter, LONG, dist.group.WORLD)
    timeout = _backend_timeout(backend)
    if rank == 1:
        time.sleep(6 * SHORT.total_seconds())  # joins long after the timeout it was made with
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    return t.tolist(), warned, timeout


@pytest.mark.parametrize("setter", SETTERS)
@pytest.mark.parametrize("backend", ["ringx", "gloo"])
def test_a_lengthened_timeout_waits_for_a_peer_that_joins_late(backend, setter):
    results = run_ranks(functools.partial(_lengthened, setter, backend), 2, backend=backend,
                        group_timeout_s=SHORT.total_seconds())
    for values, warned, timeout in results:
        assert values == [3.0] * 4
        assert not [w for w in warned if "only supported" in w], warned
        if backend == "ringx":
            assert timeout == LONG
