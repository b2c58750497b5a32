"""What the Python samples share: run `train(args)` on every rank, and end it.

Under torchrun (RANK in the environment) this process is one rank; otherwise it starts
args.world_size processes with the env:// variables torchrun would set.
"""
import argparse
import os
import socket
import sys

import torch
import torch.multiprocessing as mp


def _spawned(rank, train, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(args.world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(args.world_size))
    train(args)


def run(train, args):
    if getattr(args, "trace", None):
        os.environ["RINGX_TRACE_DIR"] = args.trace  # read when the ringx group is created
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    torch.set_num_threads(1)
    if "RANK" in os.environ:  # launched by torchrun or by hand
        train(args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_spawned, args=(train, args, port), nprocs=args.world_size)


def arguments(doc, steps):
    """The options every sample has (--world-size, --steps, --trace); each adds its own."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--trace", metavar="DIR", help="record a trace of every rank into DIR")
    return parser


def same_on_every_rank(tensor):
    """Whether every rank holds the same values as `tensor` (a collective)."""
    import torch.distributed as dist
    everyone = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, tensor)
    return all(torch.equal(everyone[0], other) for other in everyone)


def finish(args, elapsed, what, agree):
    """Rank 0 prints the run's speed and whether every rank ends with the same `what`; every
    rank leaves the group, and exits with 1 when they do not agree."""
    import torch.distributed as dist
    if dist.get_rank() == 0:
        print(f"{dist.get_world_size()} ranks, {args.steps} steps in {elapsed:.2f} s "
              f"({elapsed / args.steps * 1e3:.1f} ms/step); {what} identical on all ranks: "
              f"{agree}", flush=True)
    dist.destroy_process_group()
    if not agree:
        sys.exit(1)
