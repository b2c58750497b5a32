"""One replica of a fault-tolerant DDP job: torchft's Manager over ringx (or over torchft's
gloo groups, to compare). Replicas come and go; the others keep committing steps, and one that
joins late heals from a peer.

    python -c "from torchft._torchft import LighthouseServer as L; import time; \\
               l = L(bind='[::]:29510', min_replicas=2); print(l.address()); time.sleep(1e9)" &
    python samples/torchft_ddp.py --lighthouse http://localhost:29510 --replica-id 0 &
    python samples/torchft_ddp.py --lighthouse http://localhost:29510 --replica-id 1 &

Each step trains on the same batch in every replica (seeded by the step), so the average of the
replicas' gradients is each replica's own whoever takes part: the weights after N committed
steps are those of N plain SGD steps, however many replicas died or joined on the way
(tests/python/test_torchft.py checks that). A line of JSON per step on stdout:
{"replica", "step", "committed", "participants", "time"}; with --save, the final weights."""

import argparse
import json
import time
from datetime import timedelta

import torch
import torch.nn as nn
from torch.distributed import TCPStore
from torchft import DistributedDataParallel, Manager
from torchft.optim import OptimizerWrapper


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(8, 16, generator=g), torch.randint(4, (8,), generator=g)


def process_group(kind, timeout):
    if kind == "ringx":
        from ringx.torchft import ProcessGroupRingx
        return ProcessGroupRingx(timeout=timeout)
    from torchft.process_group import ProcessGroupBabyGloo, ProcessGroupGloo
    return ProcessGroupGloo(timeout=timeout) if kind == "gloo" else ProcessGroupBabyGloo(
        timeout=timeout)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lighthouse", required=True, help="the Lighthouse's address")
    parser.add_argument("--replica-id", type=int, required=True)
    parser.add_argument("--steps", type=int, default=30, help="committed steps to train")
    parser.add_argument("--pg", choices=["ringx", "gloo", "babygloo"], default="ringx")
    parser.add_argument("--min-replicas", type=int, default=2)
    parser.add_argument("--step-seconds", type=float, default=0.05,
                        help="sleep per step (stands for the step's compute)")
    parser.add_argument("--save", help="write the final weights here (torch.save)")
    parser.add_argument("--stop-file",
                        help="instead of --steps: train until this file holds a step number, "
                        "then up to that step (replicas that come and go end together)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    timeout = timedelta(seconds=10)
    store = TCPStore("localhost", 0, is_master=True, wait_for_workers=False)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def state_dict():
        return {"model": model.state_dict(), "optim": optimizer.state_dict()}

    def load_state_dict(state):
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optim"])

    manager = Manager(pg=process_group(args.pg, timeout), min_replica_size=args.min_replicas,
                      load_state_dict=load_state_dict, state_dict=state_dict,
                      replica_id=f"replica_{args.replica_id}", store_addr="localhost",
                      store_port=store.port, rank=0, world_size=1,
                      lighthouse_addr=args.lighthouse, port=0, timeout=timeout,
                      quorum_timeout=timedelta(seconds=30), connect_timeout=timeout,
                      # Every replica starts from the same seeded weights: nothing to sync at
                      # step 0 (with init_sync, all but one replica would heal then and add no
                      # gradient to that step). A replica that joins later heals from a peer.
                      init_sync=False)
    ddp = DistributedDataParallel(manager, model)
    opt = OptimizerWrapper(manager, optimizer)
    loss_fn = nn.CrossEntropyLoss()
    def target():
        if not args.stop_file:
            return args.steps
        try:
            with open(args.stop_file) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None  # not yet said

    while (t := target()) is None or manager.current_step() < t:
        step = manager.current_step()
        x, y = batch(step)
        opt.zero_grad()
        loss_fn(ddp(x), y).backward()
        opt.step()
        print(json.dumps({"replica": args.replica_id, "step": step,
                          "committed": manager.current_step() > step,
                          "participants": manager.num_participants(), "time": time.time()}),
              flush=True)
        time.sleep(args.step_seconds)
    if args.save:
        torch.save(model.state_dict(), args.save)
    manager.shutdown(wait=False)


if __name__ == "__main__":
    main()
