#!/usr/bin/env python3
"""TCP at line rate: ringx and gloo allreduce between two hosts, beside what iperf3 measures on
the same link, so that a regression of ringx's TCP path shows.

    sudo PYTHONPATH=build/python .venv/bin/python bench/tcp_line_rate.py [--runs 3]
        [--sizes 1M 4M 16M 64M 256M] [--quick] [--docs]

The two hosts are network namespaces, each linked to one switch (tests/python/netns_hosts.py, as
in bench/faults.py), with their own hostnames, so ringx sees two hosts and talks TCP between
them (checked: each run's ringx ranks report "tcp" to each other, ringx.transports()). On
that link, whole runs alternate, the order flipping every run (--runs of each):

  iperf3    `iperf3 --bidir` (one TCP stream each way at once), the server on one host and
            the client on the other, --iperf-seconds long; its JSON (-J) gives the bytes each
            receiver got in each direction;
  gloo      a torch job of two ranks, one per host, backend "gloo";
  ringx     the same job on backend "ringx".

Each job allreduces float32 tensors of every size, timed as bench/latency_method.py does (a
barrier, one allreduce timed alone, the median over many, the slowest rank's median); the
table holds the median over the runs of each figure.

What is compared. algbw = buffer bytes / time of one allreduce (decimal GB/s), the buffer being
the tensor each rank holds. A ring allreduce over n ranks sends each rank's 1/n pieces n-1
times in its reduce-scatter and n-1 times in its all-gather: every rank sends 2(n-1)/n of the
buffer to its right neighbour and receives as much from its left one, both at once. At n = 2
that is exactly 1x the buffer each way, and both neighbours are the other host: each rank
sends the whole buffer's bytes to the other while receiving as many from it. So at two ranks
algbw is the rate the allreduce moves bytes in each direction of the link while the other
direction is equally busy (the busbw of bench/allreduce.py, 2(n-1)/n x algbw, is the same
figure here), and the line rate to hold it against is what the link carries in each direction
when both are loaded at once: iperf3 --bidir's per-direction figure, not its one-way one (on
a veth both directions are the kernel copying on the same two cores). "iperf3 per direction"
is the mean of its two directions' received rates, and "ringx / iperf3" is ringx's algbw
divided by it. Goal (issue 34): at least 0.90 from 16 MiB up. The reduction itself (ringx adds
each received piece before sending it on) and torch's dispatch are inside the allreduce's time
and not in iperf3's, so the ratio counts them against ringx.

Needs root (ip netns) and iperf3 (make setup installs it); prints why and exits 0 otherwise.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import netns_hosts  # noqa: E402  (tests/python is not a package)

import docs_table  # noqa: E402  (beside this file)
from latency_method import MIB, human, median_single_op_seconds, operations, parse_sizes, \
    settle  # noqa: E402

SIZES = [1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB]
QUICK_SIZES = [1 * MIB]
BACKENDS = ["gloo", "ringx"]
GOAL, GOAL_FROM = 0.90, 16 * MIB  # ringx's algbw / iperf3's per-direction rate, from this size
JOB_TIMEOUT_S = 300


def why_unavailable():
    reason = netns_hosts.why_unavailable()
    if reason is None and shutil.which("iperf3") is None:
        reason = "needs iperf3 (apt-get install iperf3; make setup installs it)"
    return reason


# --- one rank, in its namespace host ------------------------------------------------------


def rank_main(args):
    import torch
    import torch.distributed as dist

    import ringx
    from bench_ranks import slowest

    torch.set_num_threads(1)
    dist.init_process_group(args.backend, init_method=args.init, rank=args.rank, world_size=2,
                            timeout=datetime.timedelta(seconds=JOB_TIMEOUT_S))
    settle(dist.barrier, 200 if args.quick else 1000)
    seconds = {}
    for size in parse_sizes(args.sizes):
        t = torch.ones(size // 4)
        dist.all_reduce(t)
        if not bool((t == 2).all()):
            raise SystemExit(f"rank {args.rank}: {args.backend} allreduce of {human(size)} wrong")
        seconds[size] = slowest(median_single_op_seconds(lambda: dist.all_reduce(t),
                                                         dist.barrier,
                                                         operations(size, args.quick)), None)
    report = {"rank": args.rank, "seconds": seconds,
              "transports": ringx.transports() if args.backend == "ringx" else None}
    dist.destroy_process_group()
    print(json.dumps(report), flush=True)


# --- the runs, from the root namespace -----------------------------------------------------


def allreduce_job(hosts, backend, sizes, quick, port):
    """{size: seconds}, the slowest rank's median per size (as every rank reports it), of one
    job of one rank per host."""
    init = f"tcp://{hosts.address[hosts.names[0]]}:{port}"
    procs = []
    for rank, host in enumerate(hosts.names):
        argv = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), "--backend",
                backend, "--init", init, "--sizes", *[f"{s // 1024}K" for s in sizes]]
        # gloo binds to the hostname's address unless told an interface (no DNS here).
        env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME=hosts.device[host])
        procs.append(hosts.start(host, argv + (["--quick"] if quick else []), env))
    reports = []
    for rank, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"tcp_line_rate: {backend} rank {rank} still running after "
                             f"{JOB_TIMEOUT_S} s")
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if p.returncode != 0 or not lines:
            raise SystemExit(f"tcp_line_rate: {backend} rank {rank} exited {p.returncode}:\n"
                             f"{out}\n{err}")
        reports.append(json.loads(lines[-1]))
    if backend == "ringx":
        expected = [["self", "tcp"], ["tcp", "self"]]
        got = [report["transports"] for report in reports]
        if got != expected:
            raise SystemExit(f"tcp_line_rate: ringx's transports were {got}, not TCP between "
                             f"the hosts ({expected})")
    return {size: reports[0]["seconds"][str(size)] for size in sizes}


def iperf3_bidir(hosts, seconds):
    """{direction: GB/s} of one `iperf3 --bidir` run: the bytes each receiver got, per second."""
    server_host, client_host = hosts.names
    address = hosts.address[server_host]
    env = dict(os.environ)
    server = hosts.start(server_host, ["iperf3", "--server", "--one-off", "--bind", address], env)
    deadline = time.monotonic() + 10
    while True:  # until the server listens (a refused connection does not end its one test)
        client = hosts.start(client_host, ["iperf3", "--client", address, "--bidir", "--json",
                                           "--time", str(seconds)], env)
        out, err = client.communicate(timeout=seconds + 60)
        try:
            result = json.loads(out)
        except json.JSONDecodeError:
            raise SystemExit(f"tcp_line_rate: iperf3 printed no JSON:\n{out}\n{err}")
        if "error" not in result:
            break
        if "connect" not in result["error"] or time.monotonic() > deadline:
            raise SystemExit(f"tcp_line_rate: iperf3: {result['error']}")
        time.sleep(0.1)
    server.communicate(timeout=30)
    end = result["end"]
    # sum_received: what the server got from the client; ..._bidir_reverse: the other way.
    received = {f"{client_host}->{server_host}": end["sum_received"],
                f"{server_host}->{client_host}": end["sum_received_bidir_reverse"]}
    return {direction: s["bytes"] / s["seconds"] / 1e9 for direction, s in received.items()}


def measure(runs, sizes, quick, iperf_seconds):
    """Each side's figures of every run: {"iperf3": [{direction: GB/s}], backend: [{size: s}]}."""
    samples = {side: [] for side in ["iperf3"] + BACKENDS}
    port = 29500
    with netns_hosts.Hosts(["a", "b"]) as hosts:
        sides = {"ringx": lambda port: allreduce_job(hosts, "ringx", sizes, quick, port),
                 "gloo": lambda port: allreduce_job(hosts, "gloo", sizes, quick, port),
                 "iperf3": lambda port: iperf3_bidir(hosts, iperf_seconds)}
        order = list(sides)
        for run in range(runs):
            for side in (order if run % 2 == 0 else list(reversed(order))):
                samples[side].append(sides[side](port))
                port += 1  # a fresh store port each job (the last one's may linger)
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="whole runs of each side")
    parser.add_argument("--sizes", nargs="+", help="allreduce sizes, e.g. 1M 16M 64M")
    parser.add_argument("--iperf-seconds", type=int, default=5, help="iperf3's --time")
    parser.add_argument("--quick", action="store_true",
                        help="one run, 1 MiB, a 1 s iperf3 (smoke test)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    # A rank of a job (this file again, started in a namespace host by allreduce_job).
    for flag in ("--rank", "--backend", "--init"):
        parser.add_argument(flag, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        args.rank = int(args.rank)
        return rank_main(args)
    if netns_hosts.bench_skipped("tcp_line_rate", args.docs, why_unavailable):
        return
    if args.docs:
        docs_table.require("tcp_line_rate")
    # Killed (timeout, make's SIGTERM): unwind, so that the namespaces and their processes go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("tcp_line_rate: terminated"))
    with docs_table.table(args.docs, "tcp_line_rate", as_docs):
        table(args)


def as_docs(text):
    """What was printed, in markdown: each line a paragraph of its own, the table one block."""
    blocks = []
    for line in text.strip("\n").splitlines():
        if line.startswith("|") and blocks and blocks[-1].startswith("|"):
            blocks[-1] += "\n" + line
        elif line:
            blocks.append(line)
    return "\n\n".join(blocks)


def table(args):
    runs = 1 if args.quick else args.runs
    sizes = parse_sizes(args.sizes) if args.sizes else QUICK_SIZES if args.quick else SIZES
    iperf_seconds = 1 if args.quick else args.iperf_seconds
    samples = measure(runs, sizes, args.quick, iperf_seconds)

    directions = list(samples["iperf3"][0])
    per_run = [statistics.mean(run.values()) for run in samples["iperf3"]]
    line_rate = statistics.median(per_run)
    each_way = ", ".join(f"{d} {statistics.median(run[d] for run in samples['iperf3']):.2f} GB/s"
                         for d in directions)
    print(f"two network-namespace hosts on one veth, {os.cpu_count()} cores; median of {runs} "
          f"whole run(s) of each side; ringx's transport between the hosts: tcp")
    print(f"iperf3 --bidir ({iperf_seconds} s, one stream each way): {each_way}; per direction "
          f"{line_rate:.2f} GB/s (runs: {', '.join(f'{x:.2f}' for x in per_run)})")
    print("| size | iperf3 per direction (GB/s) | gloo algbw (GB/s) | ringx algbw (GB/s) "
          "| ringx / iperf3 |")
    print("|---|---|---|---|---|")
    missed = []
    for size in sizes:
        algbw = {backend: size / statistics.median(run[size] for run in samples[backend]) / 1e9
                 for backend in BACKENDS}
        ratio = algbw["ringx"] / line_rate
        if size >= GOAL_FROM and ratio < GOAL:
            missed.append(human(size))
        print(f"| {human(size)} | {line_rate:.2f} | {algbw['gloo']:.2f} | {algbw['ringx']:.2f} "
              f"| {ratio:.2f} |", flush=True)
    if any(size >= GOAL_FROM for size in sizes):
        verdict = f"missed at {', '.join(missed)}" if missed else "met"
        print(f"goal (issue 34): ringx / iperf3 >= {GOAL:.2f} from {human(GOAL_FROM)} up: "
              f"{verdict}")


if __name__ == "__main__":
    main()
