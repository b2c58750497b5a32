"""ringx.ddp and ringx.fsdp on GPU modules over ringx (on one host their bucket allreduces,
gathers and reduce-scatters take the device ring): training matches single-process training on
the GPU. The engines were written for CPU modules and have not been adapted for streams; these
tests say whether they already train GPU modules correctly. torch's own DDP and FSDP2 on GPU
modules, traced: the watcher's per-bucket and per-unit events, checked as on the CPU
(test_torch_engines.py), with FSDP2's collectives on its own streams rather than blocking. Skip
with "no CUDA device" where there is none; on the GPU machine every rank shares its one GPU."""

import functools

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import ringx
from ringx.ddp import DistributedDataParallel as RingxDDP
from ringx.fsdp import FullyShardedDataParallel as RingxFSDP

from harness import run_ranks
from test_torch_engines import _fsdp2, _torch_ddp, check_ddp_trace, check_fsdp_trace

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
BATCH = 4


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 4)).cuda()


def data(world, step):
    g = torch.Generator().manual_seed(1000 + step)
    x, y = torch.randn(world * BATCH, 8, generator=g), torch.randn(world * BATCH, 4, generator=g)
    return x.cuda(), y.cuda()


def relative_error(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


def train(model, world, rank, steps, local=True):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        x, y = data(world, step)
        if local:
            x, y = x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH]
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def reference(world, steps):
    model = make_model(0)
    train(model, world, 0, steps, local=False)
    return [p.detach().cpu() for p in model.parameters()]


def _ddp(rank, world):
    torch.cuda.set_device(0)
    model = make_model(rank)  # rank 0's parameters are broadcast
    ddp = RingxDDP(model, bucket_cap_mb=0.004)  # several buckets
    train(ddp, world, rank, 5)
    got = [p.detach().cpu() for p in model.parameters()]
    errors = [relative_error(a, b) for a, b in zip(got, reference(world, 5))]
    return max(errors), len(ddp.last_iteration()["buckets"]), ringx.cuda_ring()["transport"]


@needs_gpu
def test_ringx_ddp_trains_a_gpu_module_as_single_process_training():
    for error, buckets, transport in run_ranks(_ddp, 2, timeout=300):
        assert error < 1e-5, error
        assert buckets >= 2
        assert transport == "cuda-ipc"


def _fsdp(rank, world):
    torch.cuda.set_device(0)
    model = RingxFSDP(make_model(0))
    train(model, world, rank, 4)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    expected_model = make_model(0)
    train(expected_model, world, 0, 4, local=False)
    expected = {k: v.detach().cpu() for k, v in expected_model.state_dict().items()}
    return max(relative_error(state[k], expected[k]) for k in expected)


@needs_gpu
def test_ringx_fsdp_trains_a_gpu_module_as_single_process_training():
    for error in run_ranks(_fsdp, 2, timeout=300):
        assert error < 1e-5, error


@needs_gpu
def test_torch_ddp_on_a_gpu_module_traced_per_bucket(tmp_path):
    trace_dir = str(tmp_path / "trace")
    steps = 4
    results = run_ranks(functools.partial(_torch_ddp, trace_dir=trace_dir, hook=None,
                                          steps=steps, accumulate=1, device="cuda"), 2,
                        timeout=300)
    check_ddp_trace(trace_dir, tmp_path, results, 2, steps, ringx_wire=True)


@needs_gpu
def test_fsdp2_on_a_gpu_module_traced_per_unit_on_its_streams(tmp_path):
    trace_dir = str(tmp_path / "trace")
    results = run_ranks(functools.partial(_fsdp2, trace_dir=trace_dir, reshard=True,
                                          prefetch=True, param_dtype=torch.float32,
                                          device="cuda"), 2, timeout=300)
    check_fsdp_trace(trace_dir, tmp_path, results, 2, 3, reshard=True, prefetch=True,
                     blocking=False)
