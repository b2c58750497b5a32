"""Transport choice per edge: shared memory within a host, TCP between hosts."""

import torch
import torch.distributed as dist

import ringx

from harness import ringx_shm_segments, run_ranks


def _transports(rank, world):
    # Connections are made on demand: a barrier (of three ranks: every pair) makes them.
    dist.barrier()
    return ringx.transports()


def test_same_host_ranks_use_shared_memory_by_default():
    for rank, transports in enumerate(run_ranks(_transports, 3)):
        assert transports == ["self" if p == rank else "shm" for p in range(3)]


def test_ringx_transport_tcp_forces_tcp():
    for rank, transports in enumerate(run_ranks(_transports, 3, env={"RINGX_TRANSPORT": "tcp"})):
        assert transports == ["self" if p == rank else "tcp" for p in range(3)]


def _random_allreduce(rank, world):
    g = torch.Generator().manual_seed(rank)
    t = torch.randn(1_000_003, generator=g)
    dist.all_reduce(t)
    small = torch.randn(1001, generator=g, dtype=torch.float64)
    dist.all_reduce(small, op=dist.ReduceOp.MAX)
    return _transports(rank, world), t.numpy(), small.numpy()


def _two_hosts(rank):
    # Ranks 0,1 claim host "a" and 2,3 host "b": shm inside each pair, TCP across.
    return {"RINGX_HOST_ID": "a" if rank < 2 else "b"}


def test_mixed_hosts_give_identical_results():
    mixed = run_ranks(_random_allreduce, 4, env=_two_hosts)
    shm = run_ranks(_random_allreduce, 4)
    tcp = run_ranks(_random_allreduce, 4, env={"RINGX_TRANSPORT": "tcp"})
    for rank in range(4):
        transports = mixed[rank][0]
        for peer in range(4):
            if peer != rank:
                same_host = (peer < 2) == (rank < 2)
                assert transports[peer] == ("shm" if same_host else "tcp"), transports
        # The ring reduces in the same order whatever carries the bytes: bit-identical.
        assert (mixed[rank][1] == shm[rank][1]).all()
        assert (mixed[rank][1] == tcp[rank][1]).all()
        assert (mixed[rank][1] == mixed[0][1]).all()
        assert (mixed[rank][2] == tcp[rank][2]).all()


def test_sigkilled_rank_leaves_nothing_in_dev_shm():
    from test_failures import _peer_killed_mid_job

    pids = []
    results = run_ranks(_peer_killed_mid_job, 3, group_timeout_s=20, allow_errors=True,
                        pids=pids)
    assert results[2][0] == "missing"
    for rank in (0, 1):
        message, elapsed = results[rank][1]
        assert "rank 2" in message and "allreduce #1" in message, message
        assert elapsed < 20 + 5
    assert ringx_shm_segments(pids) == []
