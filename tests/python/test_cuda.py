"""CUDA tensors in ringx's collectives (backend/c10d/cuda_staging.h): results against torch's
own arithmetic, stream ordering as users of ProcessGroupNCCL expect, the Work's CUDA future, and
torch's DDP on a GPU over ringx. The GPU tests skip with "no CUDA device" where there is none
(CI, the development machine); on the GPU machine every rank shares its one GPU."""

import re
import shutil
import subprocess

import pytest
import torch
import torch.distributed as dist

import ringx

from harness import run_ranks

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _nvcc_major():
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    m = re.search(r"release (\d+)\.", subprocess.run([nvcc, "--version"], capture_output=True,
                                                       text=True).stdout)
    return m.group(1) if m else None


def test_cuda_support_follows_the_torch_ringx_was_built_against():
    cuda = ringx.features()["cuda"]
    assert cuda["on"] == ringx._C.cuda_built()
    if torch.version.cuda is None:
        assert not ringx._C.cuda_built()
        assert "is a CPU build" in cuda["detail"]
    elif _nvcc_major() == torch.version.cuda.split(".")[0]:
        assert ringx._C.cuda_built(), "torch has CUDA and nvcc of its CUDA is here: " + cuda["detail"]
    else:  # no nvcc, or another CUDA's: pip's build leaves CUDA out and says why
        assert ringx._C.cuda_built() or "left out: " in cuda["detail"], cuda["detail"]


def _collectives(rank, world):
    dev = torch.device("cuda", 0)
    out = {}
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        t = (torch.arange(1000, device=dev) % 16).to(dtype) * (rank + 1)  # exact in bfloat16
        dist.all_reduce(t)
        out[f"sum-{dtype}"] = t.cpu().float().numpy()
    t = torch.full((999,), float(rank + 1), device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["avg"] = t.cpu().numpy()
    t = torch.full((5,), float(rank), device=dev)
    dist.broadcast(t, src=world - 1)
    out["broadcast"] = t.cpu().numpy()
    whole = torch.empty(world * 3, device=dev)
    dist.all_gather_into_tensor(whole, torch.full((3,), float(rank), device=dev))
    out["all_gather"] = whole.cpu().numpy()
    share = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(share, torch.arange(world * 4, device=dev, dtype=torch.float32))
    out["reduce_scatter"] = share.cpu().numpy()
    a2a = torch.empty(world, device=dev)
    dist.all_to_all_single(a2a, torch.full((world,), float(rank), device=dev))
    out["all_to_all"] = a2a.cpu().numpy()
    return out


@needs_gpu
@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_on_cuda_tensors_gives_torchs_results(world):
    factor = sum(r + 1 for r in range(world))
    for rank, out in enumerate(run_ranks(_collectives, world)):
        expected = ((torch.arange(1000) % 16) * factor).float().numpy()
        for dtype in ("torch.float32", "torch.bfloat16", "torch.int64"):
            assert (out[f"sum-{dtype}"] == expected).all(), dtype
        assert (out["avg"] == factor / world).all()
        assert (out["broadcast"] == world - 1).all()
        assert list(out["all_gather"]) == [float(r) for r in range(world) for _ in range(3)]
        assert list(out["reduce_scatter"]) == [world * (rank * 4 + i) for i in range(4)]
        assert list(out["all_to_all"]) == [float(r) for r in range(world)]


def _stream_ordering(rank, world):
    dev = torch.device("cuda", 0)
    t = torch.zeros(1 << 20, device=dev)
    torch.cuda._sleep(500_000_000)  # the caller's stream is busy for a long while
    t.fill_(rank + 1)  # ... and only then writes the input
    work = dist.all_reduce(t, async_op=True)
    returned_at_once = not work.is_completed()  # queued behind the sleep
    work.wait()  # orders the current stream; the host goes on
    still_pending = not work.is_completed()
    result = t[:3].cpu()  # synchronises the current stream, which waits for the collective
    fut = dist.all_reduce(torch.ones(2, device=dev), async_op=True).get_future()
    value = fut.wait()[0].cpu()
    return returned_at_once, still_pending, result.numpy(), value.numpy()


@needs_gpu
def test_work_is_stream_ordered_and_wait_does_not_block_the_host():
    world = 2
    for returned_at_once, still_pending, result, value in run_ranks(_stream_ordering, world):
        assert returned_at_once and still_pending
        assert (result == sum(r + 1 for r in range(world))).all()
        assert (value == world).all()


def _ddp_on_gpu(rank, world):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = model.cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    torch.manual_seed(1 + rank)
    x = torch.randn(8, 16).cuda()  # the CPU generator's numbers, as the reference below draws
    ddp(x).sum().backward()
    return [p.grad.cpu().numpy() for p in model.parameters()]


@needs_gpu
def test_torch_ddp_on_a_gpu_over_ringx_averages_gradients():
    world = 2
    results = run_ranks(_ddp_on_gpu, world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    grads = [torch.zeros_like(p) for p in model.parameters()]
    for rank in range(world):
        model.zero_grad()
        torch.manual_seed(1 + rank)
        model(torch.randn(8, 16)).sum().backward()
        for g, p in zip(grads, model.parameters()):
            g += p.grad / world
    for per_rank in results:
        for got, want, first in zip(per_rank, grads, results[0]):
            assert (got == first).all()  # every rank holds the same average
            assert torch.allclose(torch.from_numpy(got), want, rtol=1e-4, atol=1e-5)


def _staged_in_flight(rank, world):
    dev = torch.device("cuda", 0)
    # Broadcast is always staged through host memory: many calls in flight at once, as DDP's
    # buckets are issued, each behind the gate of the one before it on the communication stream.
    sent = [torch.full((1000 * (i + 1),), float(rank * 100 + i), device=dev) for i in range(24)]
    works = [dist.broadcast(t, src=i % world, async_op=True) for i, t in enumerate(sent)]
    for w in works:
        w.wait()
    # ringx.broadcast_coalesced (what DDP's start-up calls) over a GPU module's tensors: several
    # buckets and dtypes, a non-contiguous tensor.
    tensors = [torch.full((300,), float(rank), device=dev),
               torch.full((7, 5), rank + 1, dtype=torch.int64, device=dev),
               torch.full((40, 30), float(rank), device=dev).t(),
               torch.full((2,), rank, dtype=torch.float16, device=dev)]
    ringx.broadcast_coalesced(tensors, src=world - 1, bucket_bytes=1024)
    return [t.cpu().numpy() for t in sent], [t.cpu().float().numpy() for t in tensors]


@needs_gpu
def test_staged_calls_in_flight_and_coalesced_broadcast_of_cuda_tensors():
    world = 2
    for sent, coalesced in run_ranks(_staged_in_flight, world):
        for i, t in enumerate(sent):
            assert (t == (i % world) * 100 + i).all(), f"broadcast {i}"
        root = world - 1
        assert [float(t.flat[0]) for t in coalesced] == [root, root + 1, root, root]
        assert all((t == t.flat[0]).all() for t in coalesced)
