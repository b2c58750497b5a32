"""The device ring through torch.distributed (backend/c10d/cuda_staging.h, backend/device/ring):
allreduce, all_gather_into_tensor and reduce_scatter_tensor of CUDA tensors among one host's
ranks run as our kernels over CUDA IPC, and give the host-staged path's results. On the GPU
machine every rank shares its one GPU; elsewhere these skip with "no CUDA device" (the protocol
itself is tested on the CPU: tests/cpp/device_ring_test.cc)."""

import pytest
import torch
import torch.distributed as dist

import ringx

from harness import run_ranks

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int32,
          torch.int64, torch.uint8, torch.bool, torch.complex64)


def _exact(n, dtype, rank, device):
    """Small integers: every reduction order gives the same bits in every dtype."""
    t = (torch.arange(n, device=device) * 3 + rank * 5) % 7 - 3
    if dtype == torch.bool:
        return (t % 2).to(torch.bool)
    if dtype == torch.uint8:
        return (t + 3).to(dtype)
    return t.to(dtype)


def _results(rank, world):
    dev = torch.device("cuda", 0)
    before = ringx.cuda_ring()
    out = {"before": before}
    # Sizes: empty, fewer than the ranks, one-shot, several ring rounds and channels.
    for n in (0, 1, 3, 1000, 70_001, 3_000_017):
        for dtype in DTYPES:
            t = _exact(n, dtype, rank, dev)
            op = dist.ReduceOp.MAX if dtype == torch.bool else dist.ReduceOp.SUM
            dist.all_reduce(t, op=op)
            out[f"allreduce {n} {dtype}"] = t.cpu().view(-1).to(torch.float64).numpy() \
                if not dtype.is_complex else torch.view_as_real(t.cpu()).numpy()
        whole = torch.empty(n * world, device=dev)
        dist.all_gather_into_tensor(whole, torch.full((n,), float(rank), device=dev))
        out[f"all_gather {n}"] = whole.cpu().numpy()
        share = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(share, torch.arange(n * world, device=dev, dtype=torch.float32))
        out[f"reduce_scatter {n}"] = share.cpu().numpy()
    # AVG, a non-contiguous tensor, and many asynchronous calls in flight at once (more than the
    # ring's 16 outstanding collectives), as DDP's buckets are issued.
    t = torch.full((999,), float(rank + 1), device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["avg"] = t.cpu().numpy()
    strided = torch.full((64, 64), float(rank), device=dev).t()[::2]
    dist.all_reduce(strided)
    out["strided"] = strided.cpu().numpy()
    buffers = [torch.full((1000 * (i + 1),), float(rank + i), device=dev) for i in range(40)]
    works = [dist.all_reduce(b, async_op=True) for b in buffers]
    for w in works:
        w.wait()
    out["pipelined"] = [b.cpu().numpy() for b in buffers]
    out["after"] = ringx.cuda_ring()
    out["transports"] = ringx.transports(device="cuda")
    return out


def _check(world, per_rank):
    for rank, out in enumerate(per_rank):
        for n in (0, 1, 3, 1000, 70_001, 3_000_017):
            for dtype in DTYPES:
                want = sum(_exact(n, dtype, r, "cpu").to(torch.int64) for r in range(world))
                if dtype == torch.bool:
                    want = torch.stack([_exact(n, dtype, r, "cpu") for r in range(world)]).any(0)
                want = want.to(dtype)
                got = out[f"allreduce {n} {dtype}"]
                want = torch.view_as_real(want).numpy() if dtype.is_complex \
                    else want.view(-1).to(torch.float64).numpy()
                assert (got == want).all(), f"allreduce of {n} {dtype} on rank {rank}"
            assert list(out[f"all_gather {n}"]) == [float(r) for r in range(world) for _ in range(n)]
            assert list(out[f"reduce_scatter {n}"]) == [world * (rank * n + i) for i in range(n)]
        assert (out["avg"] == sum(r + 1 for r in range(world)) / world).all()
        assert (out["strided"] == sum(range(world))).all()
        for i, b in enumerate(out["pipelined"]):
            assert (b == sum(r + i for r in range(world))).all(), f"pipelined call {i}"


@needs_gpu
@pytest.mark.parametrize("world", [2, 4])
def test_device_ring_runs_every_collective_it_takes_with_the_staged_paths_results(world):
    per_rank = run_ranks(_results, world, timeout=600)
    _check(world, per_rank)
    for rank, out in enumerate(per_rank):
        assert out["before"]["transport"] is None
        assert out["after"] == {"transport": "cuda-ipc", "why": ""}
        assert out["transports"] == ["self" if r == rank else "cuda-ipc" for r in range(world)]


@needs_gpu
def test_turned_off_the_same_collectives_are_staged_with_the_same_results():
    world = 2
    per_rank = run_ranks(_results, world, timeout=600, env={"RINGX_DEVICE_RING": "0"})
    _check(world, per_rank)
    for rank, out in enumerate(per_rank):
        assert out["after"]["transport"] is None
        assert "RINGX_DEVICE_RING=0" in out["after"]["why"]
        assert out["transports"][1 - rank] == "staged:shm"


def _dies(rank, world):
    import os
    dev = torch.device("cuda", 0)
    t = torch.ones(1 << 20, device=dev)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    if rank == world - 1:
        big = torch.ones(64 << 20, device=dev)
        dist.all_reduce(big, async_op=True)
        import time
        time.sleep(0.2)
        os._exit(0)  # mid-ring, as a crash
    big = torch.ones(64 << 20, device=dev)
    try:
        dist.all_reduce(big)
        torch.cuda.synchronize()
        work = dist.all_reduce(torch.ones(4, device=dev), async_op=True)
        work.get_future().wait()
    except Exception as e:  # noqa: BLE001 - the error's text is what is checked
        return str(e)
    return "no error"


@needs_gpu
def test_a_rank_dying_mid_ring_is_an_error_naming_it_on_every_other_rank():
    world = 3
    results = run_ranks(_dies, world, timeout=300, allow_errors=True)
    for rank in range(world - 1):
        text = results[rank] if isinstance(results[rank], str) else str(results[rank])
        assert f"rank {world - 1}" in text and "died" in text, text


def _probe(rank, world):
    dist.all_reduce(torch.ones(4))  # connects the ranks (CPU tensors)
    return ringx.cuda_ring(), ringx.transports(device="cuda")


def test_cuda_transports_without_a_cuda_collective_say_why():
    for rank, (ring, transports) in enumerate(run_ranks(_probe, 2)):
        assert ring["transport"] is None and "no allreduce" in ring["why"], ring
        assert transports[rank] == "self" and transports[1 - rank] == "staged:shm", transports
    with pytest.raises(ValueError, match="device must be"):
        ringx.transports(device="tpu")
