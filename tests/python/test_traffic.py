"""ringx.traffic (ringx's own transport counters) and ringx.wire.tcp_traffic (the kernel's
TCP counters), the two tools bench/fsdp.py measures bytes on the wire with: over TCP they
must agree to the byte, and over shared memory ringx's count must match the ring's volume."""

import time

import pytest
import torch
import torch.distributed as dist

import ringx
import ringx.wire

from harness import run_ranks

COUNT = 1 << 20  # float32 elements: 4 MiB, the ring algorithm


def _quiet():
    """Everything sent before has been transmitted and read: both ranks passed a barrier,
    and the last barrier messages had time to leave the socket buffers."""
    dist.barrier()
    time.sleep(0.3)


def _fence(name):
    """Waits until every rank took its snapshot, so that no rank sends (the all_reduce, or
    destroy_process_group's traffic) while another still reads its counters: bytes arriving
    between ringx.traffic() and tcp_traffic() would be counted by one and not the other.
    The harness's store is a FileStore, so this fence puts nothing on a TCP socket."""
    store = dist.distributed_c10d._get_default_store()
    store.add(name, 1)
    deadline = time.monotonic() + 60
    while store.add(name, 0) < dist.get_world_size():
        assert time.monotonic() < deadline, f"fence {name} timed out"
        time.sleep(0.01)


def _sum(entries, channel=None, transport=None):
    return (sum(e["sent"] for e in entries
                if channel in (None, e["channel"]) and transport in (None, e["transport"])),
            sum(e["received"] for e in entries
                if channel in (None, e["channel"]) and transport in (None, e["transport"])))


def _measure(rank, world):
    # Connections are made on demand, and their set-up bytes are not payload: make them first
    # (a collective connection brings the point-to-point one along).
    dist.all_reduce(torch.zeros(1))
    _quiet()
    ours0, kernel0, wire0 = ringx.traffic(), ringx.wire.tcp_traffic(), ringx.wire.bytes_sent([None])
    _fence("before")
    t = torch.full((COUNT,), float(rank))
    dist.all_reduce(t)
    payload = torch.arange(50_000, dtype=torch.float64)
    if rank == 0:
        dist.send(payload, 1)
    elif rank == 1:
        dist.recv(payload, 0)
    _quiet()
    ours1, kernel1, wire1 = ringx.traffic(), ringx.wire.tcp_traffic(), ringx.wire.bytes_sent([None])
    _fence("after")
    delta = [dict(a, sent=a["sent"] - b["sent"], received=a["received"] - b["received"])
             for a, b in zip(ours1, ours0)]
    return delta, (kernel1.sent - kernel0.sent, kernel1.received - kernel0.received), wire1 - wire0


def test_ringx_counters_equal_the_kernels_over_tcp():
    for rank, (delta, kernel, wire) in enumerate(run_ranks(_measure, 2,
                                                           env={"RINGX_TRANSPORT": "tcp"})):
        assert {e["transport"] for e in delta} == {"tcp"}
        # Every byte ringx counted went through a TCP socket, and nothing else did.
        assert _sum(delta) == kernel, (rank, delta, kernel)
        assert wire == kernel[0]
        sent, _ = _sum(delta, channel="collective")
        # The ring at world size 2 sends half the tensor twice (reduce-scatter, all-gather),
        # plus the collective headers of the all_reduce and the barrier.
        assert 4 * COUNT <= sent < 4 * COUNT + 1024
        p2p_sent, p2p_received = _sum(delta, channel="p2p")
        if rank == 0:
            assert 8 * 50_000 < p2p_sent < 8 * 50_000 + 64 and p2p_received == 0
        else:
            assert 8 * 50_000 < p2p_received < 8 * 50_000 + 64 and p2p_sent == 0


def test_shared_memory_traffic_is_counted_by_ringx_not_by_the_kernel():
    for rank, (delta, kernel, wire) in enumerate(run_ranks(_measure, 2)):
        collective = [e for e in delta if e["channel"] == "collective"]
        assert [e["transport"] for e in collective] == ["shm"]
        sent, received = _sum(collective)
        assert 4 * COUNT <= sent < 4 * COUNT + 1024 and received == sent
        # Only point-to-point (always TCP) reached the kernel's counters.
        assert _sum(delta, transport="tcp") == kernel
        # bytes_sent: the kernel's TCP plus ringx's shared memory, i.e. all of it.
        assert wire == _sum(delta)[0]


def _on_gloo(rank, world):
    group = dist.new_group(backend="gloo")
    with pytest.raises(ValueError, match="ringx.traffic needs a ringx process group"):
        ringx.traffic(group)
    # No rank may leave (and close its gloo connections) while the other is still inside
    # gloo's connectFullMesh: on a busy machine it was, and failed "closed by peer".
    dist.barrier(group=group)
    return True


def test_traffic_needs_a_ringx_group():
    assert run_ranks(_on_gloo, 2) == [True, True]
