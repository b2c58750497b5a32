"""torch DDP on the GPU, profiled by torch.profiler and nothing else: its bucket caps predicted
from the base run's profiler folder (`ringx-trace whatif`, analysis/profiler_ddp_plan.h), then
each run for real, alternating (needs a CUDA device; `make gpu-check` runs it with --quick).

The job: 8 x Linear(2048) under torch DDP over NCCL (world size 1: the GPU machine has one GPU;
NCCL will not put two ranks on one device), a loss.item() each step as training loops do, profiled
with CPU and CUDA activities and record_shapes (what DDP's buckets are recovered from). Each
configuration's measured step is its own profiler folder's recorded step (the same definition
the prediction scales). The table: predicted, measured, error, the measured rounds' spread.

    python bench/cuda_profiler_whatif.py [--rounds 3] [--steps 20] [--quick]
"""

import argparse
import datetime
import os
import statistics
import sys
import tempfile

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ranks import run_ranks  # noqa: E402

WIDTH, LAYERS, BATCH = 2048, 8, 256
BASE_CAP = 25
CAPS = [1, 4, 100]  # each layer is 16 MiB: 8 buckets, 8, 2 against the default's 6


def run_dir(root, cap, r):
    return os.path.join(root, f"cap{cap:g}-round{r}")


def worker(rank, world, init, root, rounds, steps, backend, results):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.cuda.set_device(0)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    x = torch.randn(BATCH, WIDTH, device="cuda")
    y = torch.randn(BATCH, WIDTH, device="cuda")

    def run(cap, where):
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]).cuda()
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0], bucket_cap_mb=cap)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        handler = tensorboard_trace_handler(where, worker_name=f"rank{rank}") if where else None
        # The first steps are not profiled: the first builds DDP's buckets again in readiness
        # order.
        with profile(activities=activities, record_shapes=True,
                     schedule=schedule(wait=1, warmup=2, active=steps - 3),
                     on_trace_ready=handler) as prof:
            for _ in range(steps):
                opt.zero_grad()
                loss = nn.functional.mse_loss(ddp(x), y)
                loss.backward()
                opt.step()
                loss.item()
                prof.step()
        torch.cuda.synchronize()
        del ddp, opt, model

    run(BASE_CAP, None)  # warms the allocator, NCCL and cuBLAS, not analysed
    for r in range(rounds):
        caps = [BASE_CAP] + CAPS
        if r % 2:
            caps.reverse()
        for cap in caps:
            run(cap, run_dir(root, cap, r))
    results[rank] = {}
    dist.destroy_process_group()


def analyse(root, rounds):
    from ringx.analysis import whatif

    labels = [f"bucket_cap_mb={c:g}" for c in CAPS]
    predicted = {label: [] for label in labels}
    measured = {c: [] for c in [BASE_CAP] + CAPS}
    base_error, buckets = [], {}
    for r in range(rounds):
        result = whatif(run_dir(root, BASE_CAP, r), bounds=False, bucket_cap_mb=CAPS)
        if not result.get("ddp"):
            raise SystemExit("cuda_profiler_whatif: torch DDP's buckets were not recovered from "
                             "the profile: " + "; ".join(result.get("notes", [])))
        base_error.append(result["baseline_error"])
        buckets[f"bucket_cap_mb={BASE_CAP:g}"] = result["ddp"]["buckets"]
        for row in result["rows"]:
            if row["change"] in predicted:
                if row.get("error"):
                    raise SystemExit(f"cuda_profiler_whatif: {row['change']}: {row['error']}")
                predicted[row["change"]].append(row["predicted_step_ns"])
                buckets[row["change"]] = row.get("buckets", 0)
        for cap in measured:
            measured[cap].append(whatif(run_dir(root, cap, r), bounds=False)["recorded_step_ns"])
    return base_error, buckets, predicted, measured, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 12 steps")
    parser.add_argument("--traces", help="keep the profiler folders here (default: deleted)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_profiler_whatif: needs a CUDA device")
    rounds, steps = (2, 12) if args.quick else (args.rounds, args.steps)
    print(f"# device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; torch DDP over "
          f"NCCL, world size 1, {LAYERS} x Linear({WIDTH}), batch {BATCH}")
    with tempfile.TemporaryDirectory(prefix="ringx-cuda-whatif-") as scratch:
        root = args.traces or scratch
        run_ranks(worker, 1, root, rounds, steps, "nccl", name="cuda_profiler_whatif")
        base_error, buckets, predicted, measured, labels = analyse(root, rounds)
    base = statistics.median(measured[BASE_CAP])
    print(f"\nbase bucket_cap_mb={BASE_CAP} ({buckets.get(f'bucket_cap_mb={BASE_CAP:g}')} "
          f"buckets): {base / 1e6:.2f} ms measured; the profile's unchanged replay "
          f"{statistics.median(base_error) * 100:+.1f}% from its recorded step; medians of "
          f"{rounds} rounds")
    print("| change | buckets | predicted | measured | rounds | error |")
    print("|---|---|---|---|---|---|")
    errors = []
    for label, cap in zip(labels, CAPS):
        p, m = statistics.median(predicted[label]), statistics.median(measured[cap])
        errors.append(abs(p / m - 1))
        print(f"| {label} | {buckets.get(label, '?')} | {p / 1e6:.2f} ms | {m / 1e6:.2f} ms | "
              f"{min(measured[cap]) / 1e6:.2f}-{max(measured[cap]) / 1e6:.2f} ms | "
              f"{(p / m - 1) * 100:+.1f}% |")
    print(f"\nmedian |error| {statistics.median(errors) * 100:.1f}%, worst {max(errors) * 100:.1f}%")


if __name__ == "__main__":
    main()
