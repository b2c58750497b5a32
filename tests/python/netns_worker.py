"""One rank of a fault test (test_partitions.py), run in a network-namespace host.

It joins the group, checks one allreduce, prints READY, then runs allreduces of one size (or,
with --p2p, rank 0 sends and rank 1 receives), a given number of them or until one fails, and
prints a JSON line: the error's type and message, when it came (time.monotonic(), which every
namespace shares), how long destroy_process_group took, and the threads that outlived it.

Faults it can make itself: --garbage-after S writes garbage into its TCP connections to other
ranks S seconds after READY (a broken or hostile peer: the others must notice)."""

import argparse
import datetime
import gc
import json
import os
import select
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist

import ringx
import ringx.wire


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="ringx", help="ringx, or gloo to compare")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--init", required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--elements", type=int, required=True)
    parser.add_argument("--subgroup", action="store_true", help="run on new_group(all ranks)")
    parser.add_argument("--iterations", type=int, default=0,
                        help="collectives to run (0: until one fails, at most 60 s)")
    parser.add_argument("--p2p", action="store_true",
                        help="rank 0 sends, rank 1 receives, instead of allreduces")
    parser.add_argument("--store", help="HOST:PORT of a TCPStore served by another process "
                        "(instead of rank 0's, from --init)")
    parser.add_argument("--new-groups", action="store_true",
                        help="each iteration makes a new group of all ranks, runs its "
                        "allreduce there and destroys it (its ring ports listen each time)")
    parser.add_argument("--shrink-without",
                        help="after the failure, the ranks not in this list (\"2,3\") shrink the "
                        "group without them (dist.shrink_group) and run --after allreduces on it")
    parser.add_argument("--after", type=int, default=5,
                        help="with --shrink-without: allreduces on the shrunken group")
    parser.add_argument("--garbage-after", type=float,
                        help="write garbage into the connections to other ranks this many "
                        "seconds after READY")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.ones(4).sum()  # torch's own lazily started threads, before the baseline
    threads_before = _threads()
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.store:
        host, port = args.store.rsplit(":", 1)
        store = dist.TCPStore(host, int(port), args.world, is_master=False, timeout=timeout)
        dist.init_process_group(args.backend, store=store, rank=args.rank, world_size=args.world,
                                timeout=timeout)
    else:
        dist.init_process_group(args.backend, init_method=args.init, rank=args.rank,
                                world_size=args.world, timeout=timeout)
    # new_group's own default timeout is torch's 30 minutes, not the world's: pass it.
    group = dist.new_group(list(range(args.world)), timeout=timeout) if args.subgroup else None
    t = torch.ones(args.elements)
    dist.all_reduce(t, group=group)
    report = {"rank": args.rank, "correct": bool((t == args.world).all()),
              "transports": ringx.transports(group) if args.backend == "ringx" else None}
    store_port = int(args.store.rsplit(":", 1)[1] if args.store else args.init.rsplit(":", 1)[1])
    if args.garbage_after is not None:
        threading.Thread(target=_write_garbage, args=(args.garbage_after, store_port, report),
                         daemon=True).start()
    print("READY", flush=True)
    start = time.monotonic()
    done = 0
    message = torch.arange(64, dtype=torch.float32)
    try:
        while (done < args.iterations if args.iterations
               else time.monotonic() - start < 60):
            if args.new_groups:
                if args.rank == args.world - 1:
                    time.sleep(0.2)  # the others' new ports listen meanwhile
                fresh = dist.new_group(list(range(args.world)), timeout=timeout)
                dist.all_reduce(t, group=fresh)
                dist.destroy_process_group(fresh)
                report["correct"] &= bool((t == args.world ** (done + 2)).all())
            elif not args.p2p:
                dist.all_reduce(t, group=group)
            elif args.rank == 0:
                dist.send(message, 1)
            elif args.rank == 1:
                got = torch.empty_like(message)
                dist.recv(got, 0)
            done += 1
        report["error_type"] = None
    except Exception as e:  # noqa: BLE001  the test checks the type
        report["error_at"] = time.monotonic()
        report["error_type"] = type(e).__name__
        report["error_mro"] = [c.__name__ for c in type(e).__mro__]
        report["message"] = str(e).splitlines()[0] if str(e) else ""
    report["collectives"] = done
    if args.shrink_without is not None:
        excluded = sorted(int(r) for r in args.shrink_without.split(","))
        if args.rank not in excluded:
            _go_on_without(excluded, args, report)
    print(f"rank {args.rank}: {report.get('error_type')} after {done} collectives; destroying",
          file=sys.stderr, flush=True)
    destroy_start = time.monotonic()
    try:
        dist.destroy_process_group()
        report["destroy_error"] = None
    except Exception as e:  # noqa: BLE001
        report["destroy_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
    report["destroy_s"] = time.monotonic() - destroy_start
    group = None  # a subgroup's object holds its store (and rank 0's store server thread)
    gc.collect()
    # Threads that started after the baseline and outlived the group: one blocked on an
    # unreachable store or peer would be here (name and state: S is asleep, D in the kernel).
    report["threads_left"] = [name for tid, name in _threads().items()
                              if tid not in threads_before]
    print(json.dumps(report), flush=True)
    sys.stdout.flush()


def _go_on_without(excluded, args, report):
    """The survivors' way on: the group shrunk without `excluded` (the dead, stuck or cut-off
    ranks), then allreduces on it whose sums say every survivor took part, and nobody else."""
    started = time.monotonic()
    try:
        group = ringx.shrink_group(excluded)
    except Exception as e:  # noqa: BLE001  the test reads it
        report["shrink_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        return
    report["shrink_s"] = time.monotonic() - started
    report["shrunk_rank"] = group.rank()
    report["shrunk_size"] = group.size()
    survivors = [r for r in range(args.world) if r not in excluded]
    expected = float(sum(r + 1 for r in survivors))
    correct = True
    for i in range(args.after):
        t = torch.full((args.elements,), float(args.rank + 1))
        dist.all_reduce(t)
        correct &= bool((t == expected).all())
    report["after_correct"] = correct
    report["after_done"] = args.after


def _threads():
    """This process's threads: id -> "name (state)", from /proc/self/task."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as comm, \
                    open(f"/proc/self/task/{tid}/stat") as stat:
                out[tid] = f"{comm.read().strip()} ({stat.read().rsplit(')', 1)[1].split()[0]})"
        except OSError:
            continue  # ended meanwhile
    return out


def _write_garbage(delay, store_port, report):
    """Writes 256 bytes that are no ringx frame into every TCP connection of this process
    to another rank (not the store's), from outside ringx, as a broken peer would."""
    time.sleep(delay)
    report["garbage_at"] = time.monotonic()
    written = full = 0
    for sock in ringx.wire.tcp_sockets():
        try:
            local, remote = sock.getsockname(), sock.getpeername()
        except OSError:
            continue  # a listening socket has no peer
        if store_port in (local[1], remote[1]):
            continue
        outcome = _send_all_within(sock, bytes(range(256)), 2.0)
        written += outcome == "written"
        full += outcome == "full"  # closed: the peer already saw garbage elsewhere and left
    report["garbage_connections"] = written
    report["garbage_full"] = full


def _send_all_within(sock, data, seconds):
    """Sends all of `data` on ringx's non-blocking descriptor, waiting for room: mid-transfer a
    collective connection's send buffer is often full, and skipping it would leave the job
    running untouched (the garbage then sits unread on an idle point-to-point connection).
    Returns "written", "full" (no room within `seconds`) or "closed"."""
    deadline = time.monotonic() + seconds
    sent = 0
    while sent < len(data):
        left = deadline - time.monotonic()
        if left <= 0:
            return "full"
        if not select.select([], [sock], [], left)[1]:
            continue
        try:
            sent += sock.send(data[sent:], socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue  # ringx's own send took the room first
        except OSError:
            return "closed"
    return "written"


if __name__ == "__main__":
    main()
