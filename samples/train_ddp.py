#!/usr/bin/env python3
"""Train a small model on several CPU processes with DDP over backend="ringx".

    PYTHONPATH=build/python .venv/bin/python samples/train_ddp.py --world-size 2
    PYTHONPATH=build/python .venv/bin/torchrun --standalone --nproc-per-node 2 samples/train_ddp.py

Without RANK in the environment it starts --world-size processes itself, with the same
env:// variables torchrun would set. Each rank starts from different random weights.
--engine ringx (the default) wraps the model in ringx.ddp.DistributedDataParallel, whose
constructor broadcasts rank 0's weights and whose C++ engine times every gradient bucket;
--engine torch uses torch's DDP after an explicit ringx.broadcast_coalesced. Either way
gradients are averaged with ringx's ring allreduce, and at the end the ranks check that
their weights are bit-identical.

With --trace DIR every rank records a trace (every collective, ringx.ddp's per-bucket and
per-phase events, and forward/backward/optimizer spans and step markers from this
script) into DIR; then

    build/bin/ringx-trace summary DIR            # per-collective table, arrival skew
    build/bin/ringx-trace export DIR -o t.json   # open in https://ui.perfetto.dev

With --profile as well, torch.profiler records two steps in the middle of the run on every
rank into DIR/rank<N>.pt.trace.json, and the viewer puts its operator spans under the
rank's ringx lanes, on one clock:

    build/bin/ringx-viewer DIR DIR/rank*.pt.trace.json --search ProfilerStep
"""

import contextlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ringx
import spawn_ranks


def make_model(width=256, layers=1):
    """64 inputs, `layers` hidden Linear(width, width) layers, one output (the default: 83k
    parameters, 0.3 MB of gradients)."""
    hidden = [m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), *hidden, nn.Linear(width, 1))


def batch(rank, step, size=64):
    # Each rank sees its own shard of a synthetic regression problem: y = sum(sin(x)).
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(size, 64, generator=g)
    return x, torch.sin(x).sum(dim=1, keepdim=True)


def profiler(args, rank):
    """torch.profiler over two steps in the middle of the run (--profile), else nothing."""
    if not args.profile:
        return contextlib.nullcontext()
    from torch.profiler import ProfilerActivity, profile, schedule
    path = os.path.join(args.trace, f"rank{rank}.pt.trace.json")
    return profile(activities=[ProfilerActivity.CPU],
                   schedule=schedule(wait=max(0, args.steps // 2 - 1), warmup=1, active=2,
                                     repeat=1),
                   on_trace_ready=lambda p: p.export_chrome_trace(path))


def train(args):
    dist.init_process_group("ringx")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank = dist.get_rank()
    torch.manual_seed(rank)  # deliberately different weights on every rank...
    model = make_model(args.width, args.layers)
    if args.engine == "ringx":
        # The constructor checks every rank built the same model and broadcasts rank 0's
        # weights; small buckets (the default 0.1 MB) so that several overlap with backward.
        ddp = ringx.ddp.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    else:
        params = [p.data for p in model.parameters()]
        ringx.broadcast_coalesced(params, src=0)  # ...until rank 0's are copied everywhere
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    start = time.perf_counter()
    with profiler(args, rank) as prof:
        for step in range(args.steps):
            ringx.trace.mark_step(step)  # no-ops unless tracing is on
            x, y = batch(rank, step, args.batch)
            with ringx.trace.span("forward", track="compute"):
                loss = nn.functional.mse_loss(ddp(x), y)
            opt.zero_grad()
            with ringx.trace.span("backward", track="compute"):
                loss.backward()  # DDP allreduces gradient buckets on ringx, overlapped with backward
            with ringx.trace.span("optimizer", track="compute"):
                opt.step()
            if prof is not None:
                prof.step()
            if rank == 0 and (step % 20 == 0 or step == args.steps - 1):
                print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    elapsed = time.perf_counter() - start

    agree = spawn_ranks.same_on_every_rank(
        torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    if rank == 0 and args.engine == "ringx":
        it = ddp.last_iteration()
        wire = sum(b["wire_end_ns"] - b["wire_start_ns"] for b in it["buckets"])
        print(f"ringx.ddp, last step: {len(it['buckets'])} buckets, allreduce {wire / 1e3:.0f} us, "
              f"exposed after backward {it['exposed_ns'] / 1e3:.0f} us", flush=True)
    spawn_ranks.finish(args, elapsed, "weights", agree)


def main():
    parser = spawn_ranks.arguments(__doc__, steps=100)
    parser.add_argument("--engine", choices=["ringx", "torch"], default="ringx",
                        help="ringx.ddp (C++ engine, per-bucket timing) or torch's DDP")
    parser.add_argument("--bucket-cap-mb", type=float, default=0.1,
                        help="gradient bucket size (torch's DDP defaults to 25: one bucket for "
                             "this model, so no allreduce overlaps backward)")
    parser.add_argument("--width", type=int, default=256, help="the hidden layers' width")
    parser.add_argument("--layers", type=int, default=1, help="how many hidden Linear(width, width)")
    parser.add_argument("--batch", type=int, default=64, help="samples a rank a step")
    parser.add_argument("--profile", action="store_true",
                        help="with --trace: also record two steps with torch.profiler into "
                             "DIR/rank<N>.pt.trace.json")
    args = parser.parse_args()
    if args.profile and not args.trace:
        parser.error("--profile writes next to the ringx trace: give --trace DIR too")
    spawn_ranks.run(train, args)


if __name__ == "__main__":
    main()
