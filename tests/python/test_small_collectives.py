"""The small-collective paths (issue 17): a synchronous call runs on the caller's thread when
its group is idle, behind queued work it waits its turn, more ranks than cores stay correct,
and errors of a call that ran on the caller's thread surface there, naming the collective."""

import os
import signal
import threading
import time

import pytest
import torch
import torch.distributed as dist

import ringx
from harness import run_ranks

KIB = 1 << 10


def _every_small_collective(rank, world, rounds, group=None):
    """Runs `rounds` rounds of each collective at a few small sizes and checks every result."""
    for i in range(rounds):
        for n in (1, 1000, 16 * KIB):
            t = torch.full((n,), float(rank + i))
            dist.all_reduce(t, group=group)
            assert torch.equal(t, torch.full((n,), float(sum(range(world)) + world * i))), (i, n)
            b = torch.full((n,), float(rank))
            dist.broadcast(b, src=i % world, group=group)
            assert torch.equal(b, torch.full((n,), float(i % world))), (i, n)
            out = torch.empty(n * world)
            dist.all_gather_into_tensor(out, torch.full((n,), float(rank)), group=group)
            assert torch.equal(out, torch.arange(world).float().repeat_interleave(n)), (i, n)
            share = torch.empty(n)
            dist.reduce_scatter_tensor(share, torch.arange(world).float().repeat_interleave(n)
                                       + i, group=group)
            assert torch.equal(share, torch.full((n,), float(world * (rank + i)))), (i, n)
            dist.barrier(group=group)


def _synchronous_calls_run_on_the_caller(rank, world):
    before = ringx.calls()
    _every_small_collective(rank, world, rounds=3)
    middle = ringx.calls()
    works = [dist.all_reduce(torch.ones(1000), async_op=True) for _ in range(5)]
    for w in works:
        w.wait()
    after = ringx.calls()
    return (middle["caller_thread"] - before["caller_thread"],
            middle["comm_thread"] - before["comm_thread"],
            after["caller_thread"] - middle["caller_thread"],
            after["comm_thread"] - middle["comm_thread"])


def test_synchronous_calls_run_on_the_callers_thread_and_async_ones_on_the_comm_thread():
    for inline, queued, inline_async, queued_async in run_ranks(
            _synchronous_calls_run_on_the_caller, 3):
        assert (inline, queued) == (3 * 3 * 5, 0)
        assert (inline_async, queued_async) == (0, 5)


def _sync_call_behind_queued_work(rank, world):
    # Async allreduces of 1 MiB keep the communication thread busy; the synchronous call
    # issued behind them must wait its turn (not jump the queue on this thread), and every
    # result must be the one of the issue order. Meanwhile a second thread runs synchronous
    # collectives on another group: two callers at once, each running inline on its own.
    other = dist.new_group(list(range(world)))
    errors = []

    def other_thread():
        try:
            _every_small_collective(rank, world, rounds=5, group=other)
        except BaseException as e:  # noqa: BLE001  reported below
            errors.append(repr(e))

    thread = threading.Thread(target=other_thread)
    thread.start()
    queued_before = ringx.calls()["comm_thread"]
    big = [torch.full((1 << 18,), float(rank + k)) for k in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in big]
    # Reads big[-1] in order: it must see the reduced value, so it ran after the asyncs.
    chained = big[-1][:1000]
    dist.all_reduce(chained)
    waited_on_queue = ringx.calls()["comm_thread"] - queued_before
    for w in works:
        w.wait()
    thread.join()
    total = sum(range(world))
    assert not errors, errors
    for k, t in enumerate(big[:-1]):
        assert torch.equal(t, torch.full_like(t, float(total + world * k))), k
    # big[-1]'s first 1000 elements: reduced once by the async call, then again by the sync one
    expected_last = float(total + world * 7)
    assert torch.equal(big[-1][:1000], torch.full((1000,), expected_last * world))
    assert torch.equal(big[-1][1000:], torch.full((big[-1].numel() - 1000,), expected_last))
    return waited_on_queue, ringx.calls(other)


def test_a_synchronous_call_behind_queued_work_waits_its_turn_while_another_thread_runs_inline():
    for waited_on_queue, other_calls in run_ranks(_sync_call_behind_queued_work, 2):
        # the 8 async calls, plus the synchronous one if it found them still queued
        assert waited_on_queue in (8, 9)
        assert other_calls["caller_thread"] > 0


def _caller_waits_without_holding_the_gil(rank, world):
    # The rank that arrives late makes the other wait inside an inline allreduce; its other
    # Python threads (a heartbeat, a data loader) must keep running meanwhile.
    ticks = [0]
    stop = threading.Event()

    def heartbeat():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    thread = threading.Thread(target=heartbeat)
    thread.start()
    if rank == 1:
        time.sleep(1.0)
    before = ticks[0]
    t = torch.ones(1000)
    dist.all_reduce(t)
    during = ticks[0] - before
    stop.set()
    thread.join()
    assert torch.equal(t, torch.full((1000,), float(world)))
    return during, ringx.calls()["caller_thread"]


def test_a_caller_waiting_inline_lets_other_python_threads_run():
    (during, inline), _ = run_ranks(_caller_waits_without_holding_the_gil, 2)
    assert inline == 1
    assert during > 100  # ~1000 heartbeats in the second rank 0 waited


def _oversubscribed(rank, world):
    # Every rank on the same single core: more ranks than cores, the yielding wait.
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    group = dist.new_group(list(range(world)))  # made after the pinning: sees one core
    _every_small_collective(rank, world, rounds=4, group=group)
    big = torch.full((1 << 20,), float(rank))
    dist.all_reduce(big, group=group)
    assert torch.equal(big, torch.full_like(big, float(sum(range(world)))))
    return ringx.transports(group)


def test_more_ranks_than_cores_stay_correct():
    for transports in run_ranks(_oversubscribed, 3, timeout=240):
        assert transports.count("shm") == 2  # the shared-memory wait path was the one taken


def _peer_dies_during_an_inline_call(rank, world):
    t = torch.ones(1000)
    dist.all_reduce(t)  # inline, fine
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001  the test checks the type and text
        raised_on = threading.current_thread().name
        try:
            dist.all_reduce(t)
            again = None
        except Exception as e2:  # noqa: BLE001
            again = str(e2)
        return type(e).__mro__, str(e), raised_on, again, ringx.calls()
    return None


def test_an_error_in_an_inline_call_is_raised_by_the_call_itself():
    results = run_ranks(_peer_dies_during_an_inline_call, 2, allow_errors=True)
    status, value = results[0]
    assert status == "ok" and value is not None, value
    mro, message, raised_on, again, calls = value
    assert dist.DistBackendError in mro
    assert "allreduce #1" in message and "rank 1" in message, message
    assert raised_on == "MainThread"
    assert calls["comm_thread"] == 0 and calls["caller_thread"] >= 2
    assert again is not None and "failed earlier" in again, again
    assert results[1][0] == "missing"


def _mismatch_inline(rank, world):
    t = torch.ones(1000 if rank == 0 else 2000)
    with pytest.raises(dist.DistBackendError) as raised:
        dist.all_reduce(t)
    return str(raised.value)


def test_a_mismatch_found_inline_is_an_error_on_both_callers():
    for message in run_ranks(_mismatch_inline, 2):
        assert "allreduce #0" in message and "mismatch" in message, message
