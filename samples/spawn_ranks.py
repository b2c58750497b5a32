"""What the Python samples share: run `train(args)` on every rank.

Under torchrun (RANK in the environment) this process is one rank; otherwise it starts
args.world_size processes with the env:// variables torchrun would set.
"""
import os
import socket

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
