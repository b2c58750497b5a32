#!/usr/bin/env python3
"""Small and large collectives: ringx beside oneCCL, OpenMPI and gloo, timed as a user would.

    PYTHONPATH=build/python .venv/bin/python bench/vs_libraries.py [--world-sizes 2 3]
        [--runs 3] [--quick] [--docs]

Per world size, whole runs of each side alternate (`--runs` of each, the order flipping every
run): a torch job whose ranks hold a gloo and a ringx group over the same processes and take
turns case by case; an OpenMPI job (`mpirun -np N`, Debian's openmpi-bin and python3-mpi4py,
numpy buffers; bench/openmpi_ranks.py); and a oneCCL job in each of its settings
(ONECCL_SETTINGS; bench/oneccl_ranks.cc). Every side times a case the same way
(bench/latency_method.py: a barrier, one operation, the median over many, the slowest rank's),
and the table holds each side's median across its runs; oneCCL's cell is its best setting's,
named beside it. The libraries cannot share processes.

oneCCL (Intel's, from PyPI) is set up on first use by scripts/oneccl_setup.sh into
build/oneccl (RINGX_ONECCL_PREFIX): about 210 MB of wheels, unpacked in part, and the rank
program compiled; nothing is installed into any Python environment.

torch's dispatch floor is the same dist.all_reduce through torch's "fake" backend, which
returns at once without communicating: what any backend pays before it does anything.
Beside ringx through torch, "ringx, no torch" runs the same algorithms from C++ ranks
(bench/ringx_ranks.cc, build/bin/bench_ringx_ranks) timed the same way: what ringx's own
collective takes, so that the difference is what a call costs on its way through torch.
3 ranks on a 2-core machine are oversubscribed, for every side alike.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import docs_table
from bench_ranks import run_ranks, slowest
from latency_method import (case_arguments, cases, element_count, human,
                            median_single_op_seconds, operations, settle,
                            settle_barriers)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# torch 2.13 renamed the tensor forms (the old names warn).
ALL_GATHER_INTO_TENSOR = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER_TENSOR = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
# Debian's interpreter: python3-mpi4py and python3-numpy are installed for it.
MPI_PYTHON = "/usr/bin/python3"
ONECCL_PREFIX = os.environ.get("RINGX_ONECCL_PREFIX", os.path.join(ROOT, "build", "oneccl"))
# oneCCL's settings, each a whole job, and the best of them is its figure for a case:
# (launcher, environment). "mpirun": Intel MPI's own (oneCCL's MPI transport needs Intel MPI),
# its shared-memory fabric, ranks pinned to cores as it does by default; "kvs": the ranks
# started here, meeting through oneCCL's key-value store, and its OFI transport over
# libfabric's shm provider. "+worker": oneCCL's worker thread progresses the operations (its
# default), otherwise the calling thread does (CCL_WORKER_OFFLOAD=0; with Intel MPI's pinning
# oneCCL turns its worker off by itself, so the "mpi+worker" setting unpins the ranks).
ONECCL_SETTINGS = {
    "mpi": ("mpirun", {"CCL_ATL_TRANSPORT": "mpi", "I_MPI_FABRICS": "shm",
                       "CCL_WORKER_OFFLOAD": "0"}),
    "mpi+worker": ("mpirun", {"CCL_ATL_TRANSPORT": "mpi", "I_MPI_FABRICS": "shm",
                              "I_MPI_PIN": "0", "CCL_WORKER_OFFLOAD": "1"}),
    "ofi": ("kvs", {"CCL_ATL_TRANSPORT": "ofi", "CCL_ATL_SHM": "1", "FI_PROVIDER": "shm",
                    "CCL_WORKER_OFFLOAD": "0"}),
    "ofi+worker": ("kvs", {"CCL_ATL_TRANSPORT": "ofi", "CCL_ATL_SHM": "1", "FI_PROVIDER": "shm",
                           "CCL_WORKER_OFFLOAD": "1"}),
}
# With more ranks than cores, the settings without a worker thread are not run: their calling
# thread polls without yielding the core, so most operations wait out a scheduler tick (4 ms on
# the 2-core machine at 3 ranks, against 0.05-0.5 ms with the worker).
CALLER_POLLS = ("mpi", "ofi")
# In every setting: one worker thread that polls and yields the core between polls (by default
# it pauses in place and then sleeps: 8-40 ms per operation with ranks sharing 2 cores).
ONECCL_WORKER = {"CCL_WORKER_COUNT": "1", "CCL_YIELD": "sched_yield", "CCL_WORKER_WAIT": "0"}


def torch_op(collective, size, group):
    world = dist.get_world_size(group)
    n = element_count(collective, size, world)
    if collective == "allreduce":
        t = torch.ones(n)
        return lambda: dist.all_reduce(t, group=group)
    if collective == "broadcast":
        t = torch.ones(n)
        return lambda: dist.broadcast(t, src=0, group=group)
    if collective == "all_gather":
        inp, out = torch.ones(n), torch.empty(n * world)
        return lambda: ALL_GATHER_INTO_TENSOR(out, inp, group=group)
    if collective == "reduce_scatter":
        inp, out = torch.ones(n), torch.empty(n // world)
        return lambda: REDUCE_SCATTER_TENSOR(out, inp, group=group)
    if collective == "barrier":
        return lambda: dist.barrier(group=group)
    raise ValueError(collective)


def torch_worker(rank, world, init, quick, results):
    import ringx  # noqa: F401  registers the backend

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    groups = {"gloo": dist.group.WORLD, "ringx": dist.new_group(backend="ringx")}
    for group in groups.values():
        settle(lambda g=group: dist.barrier(group=g), settle_barriers(quick))
    out = {}
    for index, (collective, size) in enumerate(cases(quick)):
        order = list(groups) if index % 2 == 0 else list(reversed(groups))
        for name in order:
            group = groups[name]
            seconds = median_single_op_seconds(torch_op(collective, size, group),
                                               lambda g=group: dist.barrier(group=g),
                                               operations(size, quick))
            out[f"{name} {collective} {size}"] = slowest(seconds, groups["gloo"])
    if rank == 0:
        results[0] = out
    dist.destroy_process_group()


def floor_worker(rank, world, init, results):
    """dist.all_reduce of 4 KiB through torch's fake backend (no communication at all), and
    through a ringx group of one rank (torch's dispatch and ringx's own per-call work, with
    nothing to communicate), in turns."""
    import ringx  # noqa: F401  registers the backend
    from torch.testing._internal.distributed.fake_pg import FakeStore

    t = torch.ones(1024)
    times = {"floor": [], "ringx call": []}
    for turn in range(6):
        for name in times if turn % 2 == 0 else reversed(list(times)):
            if name == "floor":
                dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
            else:
                dist.init_process_group("ringx", init_method=init, rank=0, world_size=1)
            times[name].append(median_single_op_seconds(lambda: dist.all_reduce(t), lambda: None,
                                                        2000))
            dist.destroy_process_group()
    results[0] = {name: statistics.median(values) for name, values in times.items()}


def openmpi_run(world, quick):
    mpirun = shutil.which("mpirun")
    if mpirun is None or subprocess.run([MPI_PYTHON, "-c", "import mpi4py, numpy"],
                                        capture_output=True).returncode != 0:
        raise SystemExit("bench/vs_libraries.py needs OpenMPI and mpi4py: apt-get install "
                         "openmpi-bin python3-mpi4py python3-numpy (make setup does)")
    argv = [mpirun, "--oversubscribe", "-np", str(world)]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += [MPI_PYTHON, os.path.join(HERE, "openmpi_ranks.py")] + (["--quick"] if quick else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"bench/vs_libraries.py: mpirun -np {world} failed:\n{done.stdout}\n"
                         f"{done.stderr}")
    return {f"OpenMPI {key}": value for key, value in json.loads(lines[-1]).items()}


def ringx_ranks_binary():
    """bench_ringx_ranks of the build whose ringx package is imported (build/python/ringx ->
    build/bin)."""
    import ringx

    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ringx.__file__))))
    binary = os.path.join(build, "bin", "bench_ringx_ranks")
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"bench/vs_libraries.py: no {binary}: build it (make build, or cmake "
                         f"--build {build} --target bench_ringx_ranks)")
    return binary


def run_jobs(jobs, env=None, cwd=None, timeout=1800):
    """Runs the rank programs `jobs` (argument lists) at once and returns each one's
    (exit status, output). Output goes into files (no pipe to drain); a job that fails ends the
    others, which would otherwise wait for it, and so does the timeout."""
    with tempfile.TemporaryDirectory() as logs_dir:
        logs = [open(os.path.join(logs_dir, f"job{i}.log"), "w+") for i in range(len(jobs))]
        procs = [subprocess.Popen(job, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
                 for job, log in zip(jobs, logs)]
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in procs):
            if any(p.returncode for p in procs) or time.monotonic() > deadline:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            time.sleep(0.05)
        outputs = []
        for log in logs:
            log.seek(0)
            outputs.append(log.read())
            log.close()
    return [(p.returncode, out) for p, out in zip(procs, outputs)]


def json_line(done, what):
    """The one JSON line that rank 0 of a job printed, or exit naming `what` with every rank's
    output."""
    lines = [line for _, out in done for line in out.splitlines() if line.startswith("{")]
    if any(rc != 0 for rc, _ in done) or len(lines) != 1:
        raise SystemExit(f"bench/vs_libraries.py: {what} failed:\n"
                         + "\n".join(out for _, out in done))
    return json.loads(lines[0])


def ringx_core_run(world, case_text, binary, call_cost_us=0.0, quick=False):
    """{"ringx, no torch collective size": seconds} of one job of bench_ringx_ranks over the
    cases of `case_text` (case_arguments()), each call after `call_cost_us` of CPU; `quick`:
    the --quick settling (settle_barriers)."""
    with tempfile.TemporaryDirectory() as store:
        argv = [binary, "--store", store, "--world", str(world), "--cases", case_text,
                "--settle", str(settle_barriers(quick)), "--call-cost-us", str(call_cost_us)]
        done = run_jobs([argv + ["--rank", str(rank)] for rank in range(world)])
    result = json_line(done, f"bench_ringx_ranks ({world} ranks)")
    return {f"ringx, no torch {key}": value for key, value in result.items()}


def oneccl_setup():
    """scripts/oneccl_setup.sh (quiet when oneCCL is already set up); the libfabric it uses."""
    done = subprocess.run([os.path.join(ROOT, "scripts", "oneccl_setup.sh")],
                          env=dict(os.environ, RINGX_ONECCL_PREFIX=ONECCL_PREFIX),
                          stdout=sys.stderr.fileno())  # stdout is the table's
    if done.returncode != 0:
        raise SystemExit("bench/vs_libraries.py: oneCCL is not set up (scripts/oneccl_setup.sh "
                         "said why, above); fix that and run again")
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"  # (not on a user's PATH)
    cache = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    found = [line.split("=>")[-1].strip() for line in cache.splitlines()
             if line.strip().startswith("libfabric.so.1 ") and "x86-64" in line]
    return found[0] if found else "libfabric.so.1"


def oneccl_run(world, quick, setting, libfabric):
    """{"oneCCL setting collective size": seconds} of one job in ONECCL_SETTINGS[setting]."""
    launcher, settings = ONECCL_SETTINGS[setting]
    binary = os.path.join(ONECCL_PREFIX, "bin", "oneccl_ranks")
    impi = os.path.join(ONECCL_PREFIX, "impi")
    env = dict(os.environ, **ONECCL_WORKER, **settings, CCL_LOG_LEVEL="error",
               CCL_OFI_LIBRARY_PATH=libfabric,
               CCL_MPI_LIBRARY_PATH=os.path.join(impi, "lib", "libmpi.so.12"))
    with tempfile.TemporaryDirectory() as tmp:
        argv = [binary, "--kvs", os.path.join(tmp, "kvs-address"), "--cases",
                case_arguments(quick), "--settle", str(settle_barriers(quick))]
        if launcher == "mpirun":
            env.update(I_MPI_ROOT=impi, PATH=os.path.join(impi, "bin") + os.pathsep + env["PATH"])
            jobs = [[os.path.join(impi, "bin", "mpiexec.hydra"), "-n", str(world)] + argv]
        else:
            env.update(CCL_PROCESS_LAUNCHER="none")
            jobs = [argv + ["--rank", str(rank), "--world", str(world)] for rank in range(world)]
        # In tmp: where oneCCL writes a backtrace file when it aborts.
        done = run_jobs(jobs, env=env, cwd=tmp)
    result = json_line(done, f"oneCCL ({setting}, {world} ranks)")
    return {f"oneCCL {setting} {key}": value for key, value in result.items()}


def oneccl_settings(world):
    """The oneCCL settings run at `world` ranks (CALLER_POLLS only when no core is shared)."""
    cores = len(os.sched_getaffinity(0))
    return [s for s in ONECCL_SETTINGS if world <= cores or s not in CALLER_POLLS]


def measure(world, runs, quick, libfabric):
    """{"side collective size": [seconds of each run]} for OpenMPI, gloo, ringx, ringx without
    torch and every oneCCL setting run ("oneCCL setting" as the side)."""
    samples = {}
    binary = ringx_ranks_binary()
    for run in range(runs):
        settings = oneccl_settings(world)
        settings = settings if run % 2 == 0 else settings[::-1]
        sides = [lambda: run_ranks(torch_worker, world, quick,
                                   name=f"bench/vs_libraries.py, world size {world}"),
                 lambda: ringx_core_run(world, case_arguments(quick), binary, quick=quick),
                 lambda: openmpi_run(world, quick),
                 lambda: {key: value for setting in settings
                          for key, value in oneccl_run(world, quick, setting, libfabric).items()}]
        for side in (sides if run % 2 == 0 else reversed(sides)):
            for key, value in side().items():
                samples.setdefault(key, []).append(value)
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--runs", type=int, default=3, help="whole runs of each side")
    parser.add_argument("--quick", action="store_true", help="two sizes, short (smoke test)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    if args.docs:
        docs_table.require("vs_libraries")
    libfabric = oneccl_setup()
    # The markdown table (the lines about the floor and the goal are prose's).
    as_docs = lambda text: "\n".join(line for line in text.splitlines() if line.startswith("|"))
    with docs_table.table(args.docs, "vs_libraries", as_docs):
        table(args, runs, libfabric)


def table(args, runs, libfabric):
    calls = run_ranks(floor_worker, 1, name="bench/vs_libraries.py, dispatch floor")
    floor = calls["floor"]
    print(f"# ringx beside oneCCL, OpenMPI and gloo on {os.cpu_count()} cores, torch "
          f"{torch.__version__}: time per operation (us), median of {runs} whole run(s) of "
          f"each side, oneCCL's best setting;\n# torch's dispatch floor (4 KiB dist.all_reduce "
          f"through the fake backend): {floor * 1e6:.1f} us; the same call on a ringx group of "
          f"one rank (nothing to send): {calls['ringx call'] * 1e6:.1f} us, ringx's own part "
          f"{(calls['ringx call'] - floor) * 1e6:.1f} us;\n# ringx / anchor: ringx's time over "
          f"the faster of oneCCL and OpenMPI (1.00 or less: as fast or faster); no torch: the "
          f"same collectives from C++ ranks (bench_ringx_ranks)\n")
    print("| world size | collective | size | oneCCL (us) | oneCCL setting | OpenMPI (us) "
          "| gloo (us) | ringx (us) | ringx / anchor | ringx, no torch (us) | no torch / anchor |")
    print("|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    goal, skipped = None, []
    for world in args.world_sizes:
        samples = measure(world, runs, args.quick, libfabric)
        settings = oneccl_settings(world)
        if len(settings) < len(ONECCL_SETTINGS):
            skipped.append(world)
        for collective, size in cases(args.quick):
            t = {side: statistics.median(samples[f"{side} {collective} {size}"]) * 1e6
                 for side in ["OpenMPI", "gloo", "ringx", "ringx, no torch"] +
                 [f"oneCCL {setting}" for setting in settings]}
            setting = min(settings, key=lambda s: t[f"oneCCL {s}"])
            oneccl = t[f"oneCCL {setting}"]
            anchor = min(oneccl, t["OpenMPI"])
            print(f"| {world} | {collective} | {human(size)} | {oneccl:.1f} | {setting} "
                  f"| {t['OpenMPI']:.1f} | {t['gloo']:.1f} | {t['ringx']:.1f} "
                  f"| {t['ringx'] / anchor:.2f} | {t['ringx, no torch']:.1f} "
                  f"| {t['ringx, no torch'] / anchor:.2f} |")
            if (world, collective, size) == (2, "allreduce", 4096):
                name = "oneCCL" if oneccl < t["OpenMPI"] else "OpenMPI"
                goal = (t["ringx"], floor * 1e6 + anchor, name, anchor)
        sys.stdout.flush()
    if skipped:
        print(f"\noneCCL at {', '.join(map(str, skipped))} ranks (more than the "
              f"{len(os.sched_getaffinity(0))} cores): only its settings with a worker thread; "
              f"in {' and '.join(CALLER_POLLS)} the calling thread polls without yielding and "
              f"most operations wait out a scheduler tick")
    if goal:
        ringx, target, name, anchor = goal
        print(f"\n4 KiB allreduce, 2 ranks: ringx {ringx:.1f} us; torch's floor + the faster "
              f"anchor ({name}, {anchor:.1f} us) {target:.1f} us: ratio {ringx / target:.2f} "
              f"(goal: within 1.2x)")


if __name__ == "__main__":
    main()
