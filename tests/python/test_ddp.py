"""torch's DistributedDataParallel on a ringx group: gradients, no_sync, comm hooks."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from harness import run_ranks


def _ddp_matches_single_process_training(rank, world):
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    torch.manual_seed(rank)  # different start on every rank: DDP must broadcast rank 0's
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001)  # many buckets
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), model.parameters()))
    ddp.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    torch.manual_seed(123)
    x, y = torch.randn(world * 4, 8), torch.randn(world * 4, 4)
    mine = slice(rank * 4, rank * 4 + 4)
    for step in range(4):
        ref_loss = nn.functional.mse_loss(reference(x), y)
        reference.zero_grad()
        ref_loss.backward()
        ddp.zero_grad()
        if step % 2 == 0:
            with ddp.no_sync():  # local accumulation only: gradients differ from the reference
                nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
            assert any(not torch.allclose(a.grad, b.grad)
                       for a, b in zip(reference.parameters(), model.parameters()))
        else:
            nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
            for a, b in zip(reference.parameters(), model.parameters()):
                assert torch.allclose(a.grad, b.grad, atol=1e-6), (a.grad - b.grad).abs().max()
    return True


def test_ddp_with_allreduce_hook_and_no_sync():
    run_ranks(_ddp_matches_single_process_training, 2)


def _fp16_compress_hook(rank, world):
    model = nn.Linear(32, 32)
    ddp = nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    torch.manual_seed(rank)
    ddp(torch.randn(8, 32)).sum().backward()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(grads) for _ in range(world)]
    dist.all_gather(everyone, grads)
    assert all(torch.equal(everyone[0], g) for g in everyone)
    return True


def test_ddp_fp16_compress_hook():
    run_ranks(_fp16_compress_hook, 3)
