#!/usr/bin/env python3
"""ringx.ddp vs torch DDP: training step time, same processes, interleaved.

    PYTHONPATH=build/python .venv/bin/python bench/ddp.py [--world-size 2] [--quick] [--docs]

Every rank process holds a gloo group and a ringx group over the same ranks and four
copies of each model, wrapped as
    torch DDP  on gloo    the anchor: what PyTorch users run on CPU today
    ringx.ddp  on gloo    the same wire: the engine's own overhead (goal: within 5%)
    ringx.ddp  on ringx   the product (goal: no slower than torch DDP on gloo)
    torch DDP  on ringx   the backend alone
Rounds alternate the four so that all see the same machine state; each configuration's
figure is the median step time (forward, backward, SGD step) over its rounds. For
ringx.ddp the engine's own timings give the share of communication hidden behind
backward (last_iteration()["hidden_share"]: the one definition in analysis/figures.h,
1 - sum of min(exposed, wire) / sum of wire over the iteration's buckets).
Compare ratios within one run; absolute times on a shared 2-core machine drift.
"""

import argparse
import datetime
import os
import socket
import statistics

import torch
import torch.distributed as dist
import torch.nn as nn

import docs_table
from bench_ranks import run_ranks, timed_rounds


def mlp(width=512, depth=6):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def mlp_batch(generator, rows=64, width=512):
    return (torch.randn(rows, width, generator=generator),
            torch.randn(rows, width, generator=generator))


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(128 * 16, 256), nn.ReLU(),
                                  nn.Linear(256, 10))

    def forward(self, x):
        return self.head(self.features(x))


def conv_batch(generator):
    return torch.randn(16, 3, 32, 32, generator=generator), torch.randn(16, 10,
                                                                        generator=generator)


MODELS = {"mlp 6x512": (mlp, mlp_batch), "conv net": (SmallConvNet, conv_batch)}
CONFIGS = [("torch DDP", "gloo"), ("ringx.ddp", "gloo"), ("ringx.ddp", "ringx"),
           ("torch DDP", "ringx")]


def hidden_share(ddp):
    """Share of this iteration's wire time hidden behind backward's compute, as the engine
    computes it with analysis/figures.h (the definition ringx-trace summary and the viewer
    print)."""
    return ddp.last_iteration()["hidden_share"]


def worker(rank, world, init, rounds, steps, results):
    import ringx  # noqa: F401  registers the backend
    from ringx.ddp import DistributedDataParallel as RingxDDP

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    groups = {"gloo": dist.group.WORLD, "ringx": dist.new_group(backend="ringx")}
    out = {}
    for model_name, (make_model, make_batch) in MODELS.items():
        runs = {}
        for engine, backend in CONFIGS:
            torch.manual_seed(0)
            model = make_model()
            wrap = RingxDDP if engine == "ringx.ddp" else nn.parallel.DistributedDataParallel
            ddp = wrap(model, process_group=groups[backend])
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
            runs[(engine, backend)] = (ddp, opt)
        generator = torch.Generator().manual_seed(rank)
        x, y = make_batch(generator)

        def step(ddp, opt):
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()

        for ddp, opt in runs.values():  # warm up (and let ringx.ddp rebuild its buckets)
            for _ in range(3):
                step(ddp, opt)
        hidden = {key: [] for key in runs}

        def record_hidden(key, ddp):
            if key[0] == "ringx.ddp":
                share = hidden_share(ddp)
                if share is not None:
                    hidden[key].append(share)

        timed = timed_rounds(runs, step, rounds, steps, groups["gloo"], after_step=record_hidden)
        out[model_name] = {
            key: (timed[key]["seconds"],
                  statistics.mean(hidden[key]) if hidden[key] else None)
            for key in runs}
        out[model_name]["params"] = sum(p.numel() for p in make_model().parameters())
    results[rank] = out
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10, help="steps per round")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke test)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 2, 3
    if args.docs:
        docs_table.require("ddp")
    results = run_ranks(worker, args.world_size, args.rounds, args.steps, name="bench/ddp.py")
    with docs_table.table(args.docs, "ddp"):
        report(results, args)


def report(results, args):
    print(f"DDP step time, world size {args.world_size} on {socket.gethostname()} "
          f"({os.cpu_count()} cores), median of {args.rounds} interleaved rounds x "
          f"{args.steps} steps; rank 0's view")
    for model_name, runs in results.items():
        anchor = runs[("torch DDP", "gloo")][0]
        print(f"\n{model_name} ({runs['params'] / 1e6:.2f} M parameters, "
              f"{runs['params'] * 4 / (1 << 20):.1f} MiB of gradients)")
        print(f"  {'engine':<10} {'backend':<7} {'step ms':>8} {'vs torch DDP/gloo':>18} "
              f"{'comm hidden':>12}")
        for engine, backend in CONFIGS:
            seconds, hidden = runs[(engine, backend)]
            hidden_text = f"{hidden * 100:.0f}%" if hidden is not None else "-"
            print(f"  {engine:<10} {backend:<7} {seconds * 1e3:8.2f} {seconds / anchor:17.2f}x "
                  f"{hidden_text:>12}")
        overhead = runs[("ringx.ddp", "gloo")][0] / anchor - 1
        print(f"  engine overhead on the same wire (ringx.ddp/gloo vs torch DDP/gloo): "
              f"{overhead * 100:+.1f}%")


if __name__ == "__main__":
    main()
