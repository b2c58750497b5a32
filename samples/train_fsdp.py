#!/usr/bin/env python3
"""Train a small transformer-like model fully sharded (ringx.fsdp) over backend="ringx".

    PYTHONPATH=build/python .venv/bin/python samples/train_fsdp.py --world-size 2
    PYTHONPATH=build/python .venv/bin/torchrun --standalone --nproc-per-node 2 samples/train_fsdp.py

The model is an input projection, --blocks residual MLP blocks (norm, up, GELU, down) and a
head. Every block is its own FSDP unit (auto_wrap_policy={Block}); the projection and head
form the root unit. Each rank keeps 1/world of every unit's parameters: a block's are
all-gathered just before it computes (the next block's are prefetched) and freed after; its
gradients are reduce-scattered into the shards during backward. At the end the ranks check
that the full state dict (gathered) is identical everywhere, and rank 0 prints the engine's
memory accounting next to the FSDP paper's formula.

With --trace DIR every rank records a trace (every collective, and per unit: gathers with
whether compute waited for them, forward/backward compute, reshards, reduce-scatters, and
the memory counters) into DIR; then

    build/bin/ringx-trace summary DIR            # includes an "FSDP engine" section
    build/bin/ringx-trace export DIR -o t.json   # open in https://ui.perfetto.dev
"""

import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ringx
import spawn_ranks
from ringx.fsdp import FullyShardedDataParallel as FSDP

DIM = 128


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def make_model(blocks):
    return nn.Sequential(nn.Linear(64, DIM), *[Block() for _ in range(blocks)],
                         nn.Linear(DIM, 1))


def batch(rank, step, size=32):
    # Each rank sees its own shard of a synthetic regression problem: y = sum(sin(x)).
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(size, 64, generator=g)
    return x, torch.sin(x).sum(dim=1, keepdim=True)


def train(args):
    dist.init_process_group("ringx")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # different weights on every rank: sync_module_states fixes that
    model = FSDP(make_model(args.blocks), auto_wrap_policy={Block}, sync_module_states=True,
                 sharding_strategy=args.strategy)
    opt = torch.optim.SGD(model.parameters(), lr=0.002, momentum=0.9)

    start = time.perf_counter()
    for step in range(args.steps):
        ringx.trace.mark_step(step)  # no-ops unless tracing is on
        if step == 1:
            model.reset_peak_memory()  # the first step has no sharded gradients yet
        x, y = batch(rank, step)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # gathers each block again, reduce-scatters its gradients
        opt.step()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    elapsed = time.perf_counter() - start

    state = model.state_dict()  # full tensors, the unwrapped model's names (collective)
    agree = spawn_ranks.same_on_every_rank(
        torch.cat([v.reshape(-1).float() for v in state.values()]))
    if rank == 0:
        units = model.units()
        memory = model.memory_stats()
        total = sum(numel for *_, numel in units)
        largest = max(numel for name, *_, numel in units if name)
        root = sum(numel for name, *_, numel in units if not name)
        sharded = args.strategy in ("FULL_SHARD", "SHARD_GRAD_OP")
        shard_factor = world if sharded else 1
        # Shards and their gradients, the root and two blocks gathered (current and
        # prefetched), one block's unsharded gradient and its reduce-scatter output.
        formula = 4 * (2 * total / shard_factor + root + 3 * largest + largest / shard_factor)
        print(f"{len(units)} units ({args.strategy}); per rank: shards "
              f"{memory['sharded_bytes'] / 1024:.0f} KiB of {4 * total / 1024:.0f} KiB, peak held "
              f"{memory['peak_bytes'] / 1024:.0f} KiB (FULL_SHARD formula "
              f"{formula / 1024:.0f} KiB)", flush=True)
    spawn_ranks.finish(args, elapsed, "full state dict", agree)


def main():
    parser = spawn_ranks.arguments(__doc__, steps=30)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--strategy", default="FULL_SHARD",
                        choices=["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"])
    spawn_ranks.run(train, parser.parse_args())


if __name__ == "__main__":
    main()
