#!/usr/bin/env python3
"""What a call through torch adds to ringx's collective: ringx through torch beside the same
algorithms from C++ ranks (bench_ringx_ranks), plain and with the CPU of one torch call spent
before every call, alternated round by round so that the machine's speed is the same for all.

    PYTHONPATH=build/python .venv/bin/python bench/call_cost.py [--world-sizes 2 3]
        [--rounds 3] [--quick]

The per-call cost comes two ways:
- "call": a 4 KiB dist.all_reduce on a ringx group of one rank (bench/vs_libraries.py's
  floor_worker), torch's dispatch plus ringx's own per-call work with nothing to send, on a
  core the rank has to itself;
- "call in the job": the CPU that torch and Python spend per call in the torch side's own
  job, run again under perf in every round (call stacks; a sample is torch's when no frame
  of ringx's code is on its stack; the timed part's samples over its calls). It is more than
  the one-rank call and changes from run to run on this machine (6-9 us at 2 ranks). With
  more ranks than cores, ranks swap on a core at every collective, and a call then runs with
  cold caches (10-15 us at 3 ranks on 2 cores). The first table gives it beside ringx's own
  CPU per call.
`bench_ringx_ranks --call-cost-us` spends that much CPU before each C++ call, barriers too.
Where "through torch" matches "C++ + call", the call's way through torch costs that and no
more. Every side times a case as bench/latency_method.py does (a barrier, one operation, the
median over many, the slowest rank's); each cell is the median over the rounds, each ratio
the median of the rounds' ratios (this machine changes speed for seconds at a time, and the
sides of one round run next to each other).
"""

import argparse
import datetime
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist

from bench_ranks import run_ranks, slowest
from latency_method import case_arguments, human, median_single_op_seconds, \
    operations, settle, settle_barriers
from vs_libraries import floor_worker, ringx_core_run, ringx_ranks_binary, torch_op

CASES = [("allreduce", 4 << 10), ("allreduce", 64 << 10), ("allreduce", 1 << 20),
         ("broadcast", 4 << 10), ("barrier", 0)]
QUICK_CASES = [("allreduce", 4 << 10), ("barrier", 0)]

# perf's sampling: cpu-clock (no hardware counters on a virtual machine) at this rate per CPU,
# with call stacks from DWARF (Python and torch are built without frame pointers).
PERF_HZ = 1000
# How long the job under perf repeats its cases.
PERF_SECONDS = 2.0
# Frames of ringx's code, and among them those of a rank waiting for its peers (which move
# the data too: a shared-memory pair copies while it is progressed).
RINGX_CODE = "ringx::"
WAITING_FRAMES = ("ringx::transport::Context::wait", "ringx::transport::Context::sleepUntilReady",
                  "ringx::transport::Context::progressAll")


def torch_worker(rank, world, init, chosen, quick, perf_dir, results):
    """ringx through torch, the default group, every case of `chosen`. Under perf (perf_dir
    given), each rank writes its pid to perf_dir/rank after the settling barriers and waits
    for perf_dir/go, the cases run again and again for PERF_SECONDS (for enough samples), and
    rank 0 also gives the timed part's span (CLOCK_MONOTONIC, as perf stamps its samples) and
    each rank's calls in it."""
    import ringx  # noqa: F401  registers the backend

    dist.init_process_group("ringx", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    settle(dist.barrier, settle_barriers(quick))
    if perf_dir:
        with open(os.path.join(perf_dir, str(rank)), "w") as f:
            f.write(str(os.getpid()))
        while not os.path.exists(os.path.join(perf_dir, "go")):
            time.sleep(0.01)
        dist.barrier()
    start, calls, out = time.monotonic(), 0, {}
    while True:
        for collective, size in chosen:
            count = operations(size, quick)
            seconds = median_single_op_seconds(torch_op(collective, size, None), dist.barrier,
                                               count)
            out[f"{collective} {size}"] = slowest(seconds, None)
            calls += 2 + 2 * count  # a first op, count barriers and ops, slowest()'s all_reduce
        if not perf_dir:
            break
        again = torch.tensor([time.monotonic() - start < PERF_SECONDS])
        dist.broadcast(again, 0)  # rank 0's clock decides for all
        calls += 1
        if not again:
            break
    if perf_dir:
        out |= {"span": (start, time.monotonic()), "calls": calls}
    if rank == 0:
        results[0] = out
    dist.destroy_process_group()


def perf_tool():
    """The perf command, or exit saying how to get it."""
    perf = shutil.which("perf")
    if perf is None or subprocess.run([perf, "--version"], capture_output=True).returncode:
        raise SystemExit("bench/call_cost.py needs perf: apt-get install linux-perf (make setup "
                         "does)")
    return perf


def classify(stack):
    """Who a sampled call stack (perf script's frames, innermost first) spends CPU for: torch
    and Python where no frame is ringx's (its threads' stacks hold no backend frame, but are
    ringx's too)."""
    if any(name in frame for frame in stack for name in WAITING_FRAMES):
        return "waiting"
    if any(RINGX_CODE in frame for frame in stack):
        return "ringx"
    return "torch"


def samples_of(script_text):
    """(pid, seconds, stack) of each sample in `perf script -F pid,time,ip,sym` output: samples
    are separated by blank lines, each a header "pid seconds:" and one frame per line."""
    out = []
    for sample in script_text.split("\n\n"):
        lines = sample.strip().splitlines()
        header = lines[0].split() if lines else []
        if len(header) == 2 and header[0].isdigit() and header[1].endswith(":"):
            out.append((int(header[0]), float(header[1][:-1]), [x.strip() for x in lines[1:]]))
    return out


def torch_under_perf(world, chosen, quick):
    """The torch side's job again, under perf: {"torch": torch's and Python's CPU per call,
    "ringx": ringx's own work, "waiting": ringx waiting for and moving data} in us, from the
    samples of its ranks during the timed part."""
    perf = perf_tool()
    with tempfile.TemporaryDirectory() as tmp:
        signals, data = os.path.join(tmp, "signals"), os.path.join(tmp, "perf.data")
        os.mkdir(signals)
        recorder = {}

        def record():
            while len(os.listdir(signals)) < world:
                time.sleep(0.05)
            recorder["pids"] = set()
            for name in os.listdir(signals):
                with open(os.path.join(signals, name)) as f:
                    recorder["pids"].add(int(f.read()))
            recorder["perf"] = subprocess.Popen(
                [perf, "record", "-a", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F",
                 str(PERF_HZ), "--call-graph", "dwarf,8192", "-o", data],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)  # perf is sampling well before the ranks go
            open(os.path.join(signals, "go"), "w").close()

        # A daemon: when a rank fails, run_ranks exits while this one still waits for its pid.
        thread = threading.Thread(target=record, daemon=True)
        thread.start()
        job = run_ranks(torch_worker, world, chosen, quick, signals,
                        name=f"bench/call_cost.py, {world} ranks under perf")
        thread.join()
        recorder["perf"].send_signal(signal.SIGINT)
        _, err = recorder["perf"].communicate()
        # Without a command to run, perf record ends by the signal, its data written.
        if recorder["perf"].returncode not in (0, -signal.SIGINT):
            raise SystemExit(f"bench/call_cost.py: perf record failed:\n{err}")
        script = subprocess.run([perf, "script", "-i", data, "-F", "pid,time,ip,sym",
                                 "--no-inline"], capture_output=True, text=True)
    first, last = job["span"]
    cpu = {"torch": 0, "ringx": 0, "waiting": 0}
    for pid, seconds, stack in samples_of(script.stdout):
        if pid in recorder["pids"] and first <= seconds <= last:
            cpu[classify(stack)] += 1
    calls = job["calls"] * world
    return {who: n / PERF_HZ / calls * 1e6 for who, n in cpu.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of every side")
    parser.add_argument("--quick", action="store_true", help="two cases, short (smoke test)")
    args = parser.parse_args()
    chosen = QUICK_CASES if args.quick else CASES
    rounds = 1 if args.quick else args.rounds
    binary = ringx_ranks_binary()
    calls = run_ranks(floor_worker, 1, name="bench/call_cost.py, per-call cost")
    cost_us = calls["ringx call"] * 1e6
    print(f"# per call through torch (a 4 KiB all_reduce on a one-rank ringx group): "
          f"{cost_us:.1f} us, of which torch's floor {calls['floor'] * 1e6:.1f} us; "
          f"{os.cpu_count()} cores; median of {rounds} alternated round(s)\n")
    case_text = case_arguments(args.quick, chosen)
    rows, in_job = [], {}
    for world in args.world_sizes:
        samples, cpu = {}, []

        def job_call():
            # the call's CPU in a job of this world size, measured now, then spent by C++ ranks
            cpu.append(torch_under_perf(world, chosen, args.quick))
            return ringx_core_run(world, case_text, binary, cpu[-1]["torch"], args.quick)

        sides = [("torch", lambda: run_ranks(torch_worker, world, chosen, args.quick, None,
                                             name=f"bench/call_cost.py, {world} ranks")),
                 ("C++", lambda: ringx_core_run(world, case_text, binary, quick=args.quick)),
                 ("C++ + call", lambda: ringx_core_run(world, case_text, binary, cost_us,
                                                        args.quick)),
                 ("C++ + call in the job", job_call)]
        for r in range(rounds):
            for side, run in sides if r % 2 == 0 else reversed(sides):
                for key, seconds in run().items():
                    key = key.removeprefix("ringx, no torch ")
                    samples.setdefault((side, key), []).append(seconds * 1e6)
        in_job[world] = {who: statistics.median(c[who] for c in cpu) for who in cpu[0]}
        for collective, size in chosen:
            key = f"{collective} {size}"
            t = {side: statistics.median(samples[(side, key)]) for side, _ in sides}
            ratio = {side: statistics.median(a / b for a, b in zip(samples[("torch", key)],
                                                                   samples[(side, key)]))
                     for side in ("C++ + call", "C++ + call in the job")}
            rows.append(f"| {world} | {collective} | {human(size)} | {t['torch']:.1f} "
                        f"| {t['C++']:.1f} | {t['C++ + call']:.1f} | {ratio['C++ + call']:.2f} "
                        f"| {t['C++ + call in the job']:.1f} "
                        f"| {ratio['C++ + call in the job']:.2f} |")
    print("CPU per call in the torch side's job, run again under perf (the timed part: "
          f"{PERF_HZ} samples/s per core with call stacks; median over the rounds):\n")
    print("| world size | torch and Python (us) | ringx's own work (us) "
          "| ringx waiting for and moving data (us) |")
    print("|---:|---:|---:|---:|")
    for world, cpu in in_job.items():
        print(f"| {world} | {cpu['torch']:.1f} | {cpu['ringx']:.1f} | {cpu['waiting']:.1f} |")
    print("\n| world size | collective | size | through torch (us) | C++ ranks (us) "
          "| C++ + call (us) | torch / (C++ + call) | C++ + call in the job (us) "
          "| torch / (C++ + call in the job) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))

if __name__ == "__main__":
    main()
