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
    mp.spawn(_spawned, args=(train, args, free_port()), nprocs=args.world_size)


def free_port():
    """A TCP port that nothing holds now, for rank 0 to listen on once it starts. Chosen below
    the kernel's ephemeral range (ip_local_port_range): a port that bind(0) hands out comes
    from that range, where the next connection any process opens may take it as its own before
    rank 0 binds it; below it only a listener choosing its port by number can, and the pid
    spreads this process's choice from another's."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 0
    first = 10000
    span = ephemeral - first
    for i in range(256 if span >= 1024 else 0):
        port = first + (os.getpid() * 7919 + i * 104729) % span
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue  # held, or in TIME_WAIT
            return port
    with socket.socket() as s:  # no room below that range: what the kernel hands out
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
