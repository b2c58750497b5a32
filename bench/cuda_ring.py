"""The device ring on a GPU against host staging, from one run (needs a CUDA device; the GPU
machine's check runs it with --quick).

Every rank shares GPU 0 (the GPU machine has one). Two ringx groups over the same ranks: the
default group, whose CUDA collectives take the device ring (CUDA IPC, our kernels), and one made
with RINGX_DEVICE_RING=0, whose CUDA collectives are staged through host memory (the path
between hosts, gloo's way). For each size, allreduce bus bandwidth (nccl-tests' busbw: bytes *
2(n-1)/n per second) of both, alternated round by round, best of the rounds; beside them the
GPU's device-to-device copy bandwidth (torch copy_, same run), the ceiling a ring on one GPU
shares among its ranks. Then a DDP training step (torch DDP) over each group.

    python bench/cuda_ring.py [--world-sizes 2 4] [--quick]
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ranks import run_ranks  # noqa: E402


def busbw(size, seconds, world):
    return size * 2 * (world - 1) / world / seconds


def time_allreduce(t, group, iters):
    dist.all_reduce(t, group=group)  # warm
    torch.cuda.synchronize()
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def copy_bandwidth(size, iters):
    a = torch.empty(size, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(iters):
        b.copy_(a)
    end.record()
    end.synchronize()
    return size / (begin.elapsed_time(end) / 1000 / iters)


def ddp_step_times(groups, steps):
    """Seconds per DDP step over each group, steps alternated between them."""
    import ringx  # noqa: F401  (the backend)
    torch.manual_seed(0)
    width = 2048
    models = []
    for group in groups:
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(8)]).cuda()
        models.append(torch.nn.parallel.DistributedDataParallel(model, process_group=group))
    x = torch.randn(64, width, device="cuda")
    best = [float("inf")] * len(groups)
    for step in range(steps + 1):
        for i, ddp in enumerate(models):
            dist.barrier(group=groups[i])
            torch.cuda.synchronize()
            start = time.perf_counter()
            ddp(x).sum().backward()
            torch.cuda.synchronize()
            if step > 0:  # the first builds the buckets
                best[i] = min(best[i], time.perf_counter() - start)
    return best


def worker(rank, world, init, sizes, rounds, ddp_steps, results):
    import ringx
    torch.cuda.set_device(0)
    dist.init_process_group("ringx", init_method=init, rank=rank, world_size=world)
    ring_group = dist.group.WORLD
    dist.all_reduce(torch.ones(1, device="cuda"), group=ring_group)  # sets the device ring up
    os.environ["RINGX_DEVICE_RING"] = "0"
    staged_group = dist.new_group(backend="ringx")
    dist.all_reduce(torch.ones(1, device="cuda"), group=staged_group)
    del os.environ["RINGX_DEVICE_RING"]
    out = {"ring": ringx.cuda_ring(ring_group), "staged": ringx.cuda_ring(staged_group), "rows": []}
    for size in sizes:
        t = torch.zeros(size // 4, device="cuda")
        iters = max(3, min(200, (64 << 20) // max(size, 1)))
        best = {"ring": float("inf"), "staged": float("inf")}
        for _ in range(rounds):  # alternated: both see the machine as it is that moment
            best["ring"] = min(best["ring"], time_allreduce(t, ring_group, iters))
            best["staged"] = min(best["staged"], time_allreduce(t, staged_group, iters))
        copy = copy_bandwidth(size, iters) if rank == 0 else 0
        out["rows"].append((size, busbw(size, best["ring"], world),
                            busbw(size, best["staged"], world), copy))
    out["ddp"] = ddp_step_times([ring_group, staged_group], ddp_steps)
    if rank == 0:
        results[0] = out
    dist.destroy_process_group()


def gbps(x):
    return f"{x / 1e9:8.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--quick", action="store_true", help="4 KiB to 64 MiB, fewer rounds")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_ring: needs a CUDA device")
    top = (64 << 20) if args.quick else (1 << 30)
    sizes = [s for s in (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30)
             if s <= top]
    rounds, ddp_steps = (2, 3) if args.quick else (5, 10)
    print(f"# device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; every rank on GPU 0")
    for world in args.world_sizes:
        out = run_ranks(worker, world, sizes, rounds, ddp_steps, name="cuda_ring")
        print(f"\n## {world} ranks: device ring {out['ring']}, staged {out['staged']}")
        print("| bytes | device ring busbw GB/s | host-staged busbw GB/s | ring / staged | "
              "GPU copy GB/s |")
        print("|---|---|---|---|---|")
        for size, ring, staged, copy in out["rows"]:
            print(f"| {size} | {gbps(ring)} | {gbps(staged)} | {ring / staged:6.2f}x | {gbps(copy)} |")
        ring_s, staged_s = out["ddp"]
        print(f"\nDDP step (8 x Linear(2048), batch 64), torch DDP: over the device ring "
              f"{ring_s * 1e3:.2f} ms, host-staged {staged_s * 1e3:.2f} ms "
              f"({staged_s / ring_s:.2f}x)")
        if out["ring"]["transport"] != "cuda-ipc":
            raise SystemExit("cuda_ring: the default group has no device ring: " + out["ring"]["why"])


if __name__ == "__main__":
    main()
