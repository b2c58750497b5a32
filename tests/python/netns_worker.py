"""One rank of a fault test (test_partitions.py), run in a network-namespace host.

It joins the group, checks one allreduce, prints READY, then runs allreduces of one size
(a given number of them, or until one fails), and prints a JSON line: the error's type and message, when it came
(time.monotonic(), which every namespace shares), and how long destroy_process_group took."""

import argparse
import datetime
import json
import sys
import time

import torch
import torch.distributed as dist

import ringx


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--init", required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--elements", type=int, required=True)
    parser.add_argument("--subgroup", action="store_true", help="run on new_group(all ranks)")
    parser.add_argument("--iterations", type=int, default=0,
                        help="collectives to run (0: until one fails, at most 60 s)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("ringx", init_method=args.init, rank=args.rank,
                            world_size=args.world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    timeout = datetime.timedelta(seconds=args.timeout)
    # new_group's own default timeout is torch's 30 minutes, not the world's: pass it.
    group = dist.new_group(list(range(args.world)), timeout=timeout) if args.subgroup else None
    t = torch.ones(args.elements)
    dist.all_reduce(t, group=group)
    report = {"rank": args.rank, "correct": bool((t == args.world).all()),
              "transports": ringx.transports(group)}
    print("READY", flush=True)
    start = time.monotonic()
    done = 0
    try:
        while (done < args.iterations if args.iterations
               else time.monotonic() - start < 60):
            dist.all_reduce(t, group=group)
            done += 1
        report["error_type"] = None
    except Exception as e:  # noqa: BLE001  the test checks the type
        report["error_at"] = time.monotonic()
        report["error_type"] = type(e).__name__
        report["error_mro"] = [c.__name__ for c in type(e).__mro__]
        report["message"] = str(e).splitlines()[0] if str(e) else ""
    report["collectives"] = done
    print(f"rank {args.rank}: {report.get('error_type')} after {done} collectives; destroying",
          file=sys.stderr, flush=True)
    destroy_start = time.monotonic()
    try:
        dist.destroy_process_group()
        report["destroy_error"] = None
    except Exception as e:  # noqa: BLE001
        report["destroy_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
    report["destroy_s"] = time.monotonic() - destroy_start
    print(json.dumps(report), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
