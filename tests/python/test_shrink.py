"""When a rank dies, the others go on: a group shrunk to its survivors (dist.shrink_group on
torch >= 2.10, ringx.shrink_group on any), and an abort that fails every issued Work at once."""

import os
import signal
import threading
import time

import pytest
import torch
import torch.distributed as dist

import ringx
from harness import run_ranks


def _shrink(excluded, group=None, flags=0):
    """The shrink a user of this torch calls: torch's own where it has one, else ringx's.
    RINGX_TEST_SHRINK=ringx: ringx's own part (what it runs on torch 2.9) on this torch too."""
    if os.environ.get("RINGX_TEST_SHRINK") == "ringx":
        return ringx._elastic._shrink_group_here(excluded, group, flags, None)
    return ringx.shrink_group(excluded, group=group, shrink_flags=flags)


# Each shrink path: torch's dist.shrink_group (torch >= 2.10), ringx's own (torch 2.9).
PATHS = pytest.mark.parametrize("path", ["torch", "ringx"])


def _killed_rank_is_shrunk_away(rank, world):
    t = torch.full((1 << 16,), float(rank + 1))
    dist.all_reduce(t)
    assert t[0].item() == sum(range(1, world + 1))
    pair = dist.new_group([0, 1])  # shrinking the default group ends the other groups
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(3):
            dist.all_reduce(t)
        first_error = "no error"
    except dist.DistBackendError as e:
        first_error = str(e)
    # What torchft's errored() and torch's getError read: the first failure, a peer's.
    parent = dist.group.WORLD._get_backend(torch.device("cpu"))
    recorded = (parent.error or "",
                str(parent.get_error()) if hasattr(parent, "get_error") else "")
    started = time.monotonic()
    group = _shrink([world - 1])
    shrink_s = time.monotonic() - started
    # The shrunken group is the default one now, its ranks renumbered, and ringx underneath.
    assert group.size() == world - 1 and group.rank() == rank
    assert dist.get_world_size() == world - 1
    u = torch.full((1 << 16,), float(rank + 1))
    dist.all_reduce(u)
    gathered = [torch.zeros(2) for _ in range(world - 1)]
    dist.all_gather(gathered, torch.tensor([float(rank), 7.0]))
    dist.barrier()
    ended = pair not in dist.distributed_c10d._world.pg_group_ranks
    return (first_error, recorded, shrink_s, u[0].item(), [g.tolist() for g in gathered],
            dist.get_backend(), ended, dist.get_process_group_ranks(group))


@PATHS
def test_a_killed_rank_is_shrunk_away_and_the_survivors_go_on(path):
    results = run_ranks(_killed_rank_is_shrunk_away, 4, group_timeout_s=20, allow_errors=True,
                        env={"RINGX_TEST_SHRINK": path})
    assert results[3][0] == "missing"
    for rank in range(3):
        status, value = results[rank]
        assert status == "ok", value
        first_error, (error, error_type), shrink_s, total, gathered, backend, ended, ranks = value
        assert "rank 3" in first_error, first_error  # the dead peer is named
        assert "rank 3" in error, error
        assert error_type in ("", "ErrorType.REMOTE_ERROR"), error_type
        assert shrink_s < 10, shrink_s  # never waits out the group's timeout for rank 3
        assert total == 1 + 2 + 3
        assert gathered == [[0.0, 7.0], [1.0, 7.0], [2.0, 7.0]]
        assert backend == "ringx", backend
        assert ended and ranks == [0, 1, 2]


def _excluded_rank_alive(rank, world):
    if rank == 1:
        # Excluded while alive: it takes no part, and the others never wait for it.
        time.sleep(0.5)
        return "stayed out"
    group = _shrink([1])
    t = torch.full((8,), float(rank))
    dist.all_reduce(t)
    return group.rank(), group.size(), t[0].item()


def test_a_shrink_that_excludes_a_live_rank_goes_on_without_it():
    results = run_ranks(_excluded_rank_alive, 3, group_timeout_s=20, allow_errors=True)
    assert results[1] == ("ok", "stayed out")
    assert results[0] == ("ok", (0, 2, 0.0 + 2.0))
    assert results[2] == ("ok", (1, 2, 0.0 + 2.0))


def _two_subgroups_shrunk_at_once(rank, world):
    # Ranks 0 and 1 shrink group a (0, 1, 2) without 2 while ranks 2 and 3 shrink group b
    # (1, 2, 3) without 1: two shrinks of two groups at the same time, each of whose callers
    # leaves out a live member of the other.
    a = dist.new_group([0, 1, 2])
    b = dist.new_group([1, 2, 3])
    if rank in (0, 1):
        small = _shrink([2], group=a)
    else:
        small = _shrink([0], group=b)  # rank 1 is b's group rank 0
    t = torch.full((4,), float(rank))
    dist.all_reduce(t, group=small)
    # The default group is untouched by a subgroup's shrink.
    w = torch.ones(2)
    dist.all_reduce(w)
    return small.size(), small.rank(), t[0].item(), w[0].item()


@PATHS
def test_two_subgroups_shrink_at_the_same_time_and_the_default_group_stays(path):
    results = run_ranks(_two_subgroups_shrunk_at_once, 4, group_timeout_s=20,
                        env={"RINGX_TEST_SHRINK": path})
    assert results == [(2, 0, 1.0, 4.0), (2, 1, 1.0, 4.0), (2, 0, 5.0, 4.0), (2, 1, 5.0, 4.0)]


def _second_death_during_the_shrink(rank, world):
    dist.all_reduce(torch.ones(4))
    if rank == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == 2:
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)  # dies before it takes part in the shrink
    started = time.monotonic()
    try:
        _shrink([3])
        first = "no error"
    except Exception as e:  # noqa: BLE001  what the user sees, whatever its type
        first = f"{type(e).__name__}: {e}"
    failed_after = time.monotonic() - started
    group = _shrink([2, 3])
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    return first, failed_after, group.size(), t[0].item()


def test_a_second_death_during_a_shrink_is_a_clear_error_and_a_second_shrink_works():
    results = run_ranks(_second_death_during_the_shrink, 4, group_timeout_s=3, allow_errors=True)
    for rank in (0, 1):
        status, value = results[rank]
        assert status == "ok", value
        first, failed_after, size, total = value
        assert "rank 2" in first and "shrink" in first, first
        assert failed_after < 3 + 5, failed_after
        assert size == 2 and total == 1 + 2


def _stuck_rank_shrunk_away_with_abort(rank, world):
    if rank == 2:
        time.sleep(4)  # alive but stuck: never joins the allreduce below
        return "stuck"
    stuck = dist.all_reduce(torch.ones(1 << 12), async_op=True)
    time.sleep(0.3)
    started = time.monotonic()
    # SHRINK_ABORT: the allreduce waiting on rank 2 fails now instead of at the 30 s timeout.
    group = _shrink([2], flags=getattr(dist, "SHRINK_ABORT", ringx._elastic.SHRINK_ABORT))
    try:
        stuck.wait()
        stuck_error = "completed"
    except Exception as e:  # noqa: BLE001
        stuck_error = str(e)
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    return stuck_error, time.monotonic() - started, group.size(), t[0].item()


def test_a_stuck_rank_is_shrunk_away_with_abort_and_its_collective_fails_at_once():
    results = run_ranks(_stuck_rank_shrunk_away_with_abort, 3, group_timeout_s=30,
                        allow_errors=True)
    for rank in (0, 1):
        status, value = results[rank]
        assert status == "ok", value
        stuck_error, elapsed, size, total = value
        assert "aborted" in stuck_error and "SHRINK_ABORT" in stuck_error, stuck_error
        assert elapsed < 3, elapsed  # not the group's 30 s timeout
        assert size == 2 and total == 1 + 2


def _abort_fails_issued_work(rank, world):
    if rank == 1:
        time.sleep(3)  # never joins rank 0's collective in time
        return "late"
    pg = dist.group.WORLD
    works = [dist.all_reduce(torch.ones(1 << 10), async_op=True) for _ in range(3)]
    aborted_at = []

    def abort():
        time.sleep(0.2)
        aborted_at.append(time.monotonic())
        pg.abort()

    threading.Thread(target=abort).start()
    errors = []
    for work in works:
        try:
            work.wait()
            errors.append("completed")
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))
    failed_within = time.monotonic() - aborted_at[0]
    future_error = ""
    try:
        works[-1].get_future().wait()
    except Exception as e:  # noqa: BLE001
        future_error = str(e)
    return errors, failed_within, future_error


def test_abort_fails_every_issued_work_at_once_naming_the_abort():
    results = run_ranks(_abort_fails_issued_work, 2, group_timeout_s=30, allow_errors=True)
    status, value = results[0]
    assert status == "ok", value
    errors, failed_within, future_error = value
    assert all("aborted" in e for e in errors), errors
    assert failed_within < 2, failed_within  # not the group's 30 s timeout
    assert "aborted" in future_error, future_error


def _what_the_backend_says(rank, world):
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    works = str(backend.get_error()) if hasattr(backend, "get_error") else ""
    return bool(getattr(backend, "supports_shrinking", False)), works, backend.error


def test_the_backend_says_it_can_shrink_and_that_it_works():
    shrinks = hasattr(dist, "shrink_group")  # torch >= 2.10
    for can_shrink, error_type, error in run_ranks(_what_the_backend_says, 2):
        assert can_shrink == shrinks
        assert error is None
        assert error_type in ("", "ErrorType.SUCCESS"), error_type
