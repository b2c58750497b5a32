"""Bad input, mismatched calls, timeouts and dead peers: clear errors, never a hang."""

import datetime
import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from harness import run_ranks


def _peer_killed_mid_job(rank, world):
    t = torch.ones(1 << 20)
    dist.all_reduce(t)
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for _ in range(5):
            dist.all_reduce(t)
    except dist.DistBackendError as e:  # what ProcessGroupNCCL raises for a lost peer
        return str(e), time.monotonic() - start
    return "no error", time.monotonic() - start


def test_sigkilled_peer_is_an_error_naming_it_on_every_rank():
    results = run_ranks(_peer_killed_mid_job, 3, group_timeout_s=20, allow_errors=True)
    assert results[2][0] == "missing"
    for rank in (0, 1):
        status, (message, elapsed) = results[rank]
        assert status == "ok"
        assert "allreduce #1" in message, message
        assert "rank 2" in message, message
        assert elapsed < 20 + 5, elapsed


def _stuck_peer(rank, world):
    if rank == 1:
        time.sleep(4)  # arrives long after rank 0's timeout
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(10))
    except dist.DistBackendError as e:
        return str(e), time.monotonic() - start
    return "no error", time.monotonic() - start


def test_stuck_peer_times_out_within_the_group_timeout():
    results = run_ranks(_stuck_peer, 2, group_timeout_s=1)
    message, elapsed = results[0]
    assert "timed out" in message and "rank 1" in message and "allreduce #0" in message, message
    assert elapsed < 1 + 3, elapsed
    # The late rank learns that the group failed instead of waiting forever.
    late_message, late_elapsed = results[1]
    assert "allreduce #0" in late_message, late_message
    assert late_elapsed < 3, late_elapsed


def _per_call_timeout(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    if rank == 0:
        opts = dist.AllreduceOptions()
        opts.timeout = datetime.timedelta(milliseconds=500)
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="timeout 500 ms"):
            pg.allreduce([torch.ones(4)], opts).wait()
        elapsed = time.monotonic() - start
        assert elapsed < 3, elapsed
    # Work.wait(timeout) on a receive that never comes
    if rank == 1:
        work = dist.irecv(torch.empty(3), src=0, tag=99)
        with pytest.raises(dist.DistBackendError, match="did not complete within 300 ms"):
            work.wait(timeout=datetime.timedelta(milliseconds=300))
    time.sleep(1)
    return True


def test_per_call_timeouts():
    run_ranks(_per_call_timeout, 2, group_timeout_s=60)


def _size_mismatch(rank, world):
    try:
        dist.all_reduce(torch.ones(10 if rank == 0 else 20))
    except dist.DistBackendError as e:
        return str(e)
    return "no error"


def test_mismatched_sizes_are_an_error_on_both_sides():
    for message in run_ranks(_size_mismatch, 2):
        assert "mismatch" in message and "allreduce #0" in message, message
        assert "40 bytes" in message and "80 bytes" in message, message


def _bad_input(rank, world):
    # Bad arguments are the Python types torch users catch: TypeError for a dtype or kind of
    # tensor that does not fit, ValueError for sizes, counts and ranks.
    with pytest.raises(TypeError, match="cannot apply ReduceOp.BAND to a Float tensor"):
        dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BAND)
    with pytest.raises(ValueError, match=r"tensor_list\[1\] has 4 elements"):
        dist.all_gather([torch.empty(3), torch.empty(4)], torch.ones(3))
    with pytest.raises(TypeError, match="sparse"):
        dist.all_reduce(torch.eye(3).to_sparse())
    with pytest.raises(ValueError, match="root rank 7 is not in this group"):
        dist.broadcast(torch.ones(1), 7)
    with pytest.raises(TypeError, match="has dtype"):
        dist.all_gather_into_tensor(torch.empty(2 * world, dtype=torch.int32), torch.ones(2))
    with pytest.raises(ValueError, match="must have world_size"):
        dist.reduce_scatter_tensor(torch.empty(1), torch.ones(2 * world + 1))
    with pytest.raises(ValueError, match="split sizes add up to"):
        dist.all_to_all_single(torch.empty(world), torch.ones(world), [2] * world, [1] * world)
    # Errors raised before any communication leave the group usable.
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(world)))
    return True


def test_bad_input_is_a_clear_error_and_group_stays_usable():
    run_ranks(_bad_input, 2)
