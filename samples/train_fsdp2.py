#!/usr/bin/env python3
"""Train with torch's own FSDP2 (fully_shard) over backend="ringx", traced unit by unit.

    PYTHONPATH=build/python .venv/bin/python samples/train_fsdp2.py --world-size 2 --trace DIR
    PYTHONPATH=build/python .venv/bin/torchrun --standalone --nproc-per-node 2 \\
        samples/train_fsdp2.py --trace DIR

The model is train_fsdp.py's (an input projection, --blocks residual MLP blocks, a head);
`fully_shard` is applied to every block and then to the whole model, as torch's FSDP2 guide
does. Nothing here is ringx's but the backend name: with --trace (RINGX_TRACE_DIR) ringx
records every collective and, watching FSDP2 itself, every unit's all-gathers (with whether
compute waited for them), forward and backward compute, reshards, reduce-scatters and memory
counters from FSDP2's own parameter sizes, as a ringx.fsdp trace has them:

    build/bin/ringx-trace summary DIR            # includes an "FSDP engine" section
    build/bin/ringx-trace whatif DIR             # what other schedules would have taken
    build/bin/ringx-viewer DIR

--reshard-after-forward false keeps every block gathered from forward to backward
(SHARD_GRAD_OP); --prefetch N sets explicit forward and backward prefetching N blocks ahead.
"""

import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

import ringx  # noqa: F401  registers backend "ringx"
import spawn_ranks
from train_fsdp import Block, batch, make_model


def train(args):
    dist.init_process_group("ringx")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same weights everywhere: fully_shard keeps each rank's shard
    model = make_model(args.blocks)
    blocks = [m for m in model if isinstance(m, Block)]
    for block in blocks:
        fully_shard(block, reshard_after_forward=args.reshard_after_forward)
    fully_shard(model, reshard_after_forward=args.reshard_after_forward)
    if args.prefetch:
        for i, block in enumerate(blocks):
            block.set_modules_to_forward_prefetch(blocks[i + 1:i + 1 + args.prefetch])
            block.set_modules_to_backward_prefetch(blocks[max(0, i - args.prefetch):i][::-1])
    opt = torch.optim.SGD(model.parameters(), lr=0.002, momentum=0.9)

    start = time.perf_counter()
    for step in range(args.steps):
        ringx.trace.mark_step(step)  # no-ops unless tracing is on
        x, y = batch(rank, step)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    elapsed = time.perf_counter() - start

    # Every rank holds its shard of the same parameters: the full ones agree everywhere.
    agree = spawn_ranks.same_on_every_rank(
        torch.cat([p.full_tensor().reshape(-1) for p in model.parameters()]))
    spawn_ranks.finish(args, elapsed, "parameters", agree)


def main():
    parser = spawn_ranks.arguments(__doc__, steps=30)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--reshard-after-forward", type=lambda v: v.lower() == "true",
                        default=True, metavar="true|false")
    parser.add_argument("--prefetch", type=int, default=0, metavar="N",
                        help="explicit forward/backward prefetch depth (0: FSDP2's default)")
    spawn_ranks.run(train, parser.parse_args())


if __name__ == "__main__":
    main()
