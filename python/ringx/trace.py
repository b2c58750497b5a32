"""Tracing: every collective (and, from the engines, every DDP bucket and FSDP unit) as
an event on each rank's timeline, recorded to files and/or served live.

Turn it on for a whole job from the environment, before init_process_group:

    RINGX_TRACE_DIR=DIR         every rank writes DIR/rank-N.ringx, rank 0 DIR/manifest.json
    RINGX_TRACE_LISTEN=H:P      live server: rank 0 on port P lists every rank's address
    RINGX_TRACE_TOKEN=SECRET    required when H is not a loopback address

or from code, on every rank, once the default ringx group exists:

    ringx.trace.start("traces/run1")
    ...
    ringx.trace.stop()

Add your own events:

    with ringx.trace.span("forward", batch=i):
        loss = model(x)
    ringx.trace.counter("activations_bytes", n, category="memory")
    ringx.trace.mark_step(i)

Then `build/bin/ringx-trace summary DIR`, `ringx-trace export DIR -o out.json` (Perfetto),
or `ringx-viewer DIR`; or read it as pandas DataFrames:

    t = ringx.trace.load("traces/run1")   # also profiler JSON files, several merged
    t.events, t.collectives, t.counters   # aligned ns; see ringx.analysis.load

 Recording costs a few stores per event on the recording thread;
a background thread writes. Times are each rank's steady clock; every rank measures its
offset to rank 0 so readers can align them.
"""

import atexit
import functools
import os
import warnings

import torch.distributed as dist

from . import _C

_t = _C.trace

__all__ = ["start", "stop", "enabled", "span", "instant", "counter", "mark_step", "now",
           "flush", "live_address", "calibrate", "load"]

CATEGORIES = ("collective", "ddp", "fsdp", "memory", "step", "user")


def enabled():
    """Whether this process is recording."""
    return _t.enabled()


def now():
    """Nanoseconds of the trace clock (this rank's steady clock)."""
    return _t.now()


def start(dir=None, listen=None, token=None, group=None, rss_interval_ms=10,
          clock_sync_interval_ms=10000, calibrate=False):
    """Start recording on this rank. Call it on every rank of `group` (default: the
    default group): ranks exchange their hosts, live addresses and clock connections.

    dir: directory for rank-N.ringx files and manifest.json (created if missing).
    listen: "HOST:PORT" for the live server (see module docs); token: its secret.
    calibrate: then run calibrate(group) (a second or so), so that `ringx-trace whatif` prices
    collectives of sizes the job did not run from measurements.
    """
    _start(dir, listen, token, group, rss_interval_ms, clock_sync_interval_ms)
    _record_host()
    if calibrate:
        _calibrate_now(group)


def _start(dir, listen, token, group, rss_interval_ms, clock_sync_interval_ms):
    if not dir and not listen:
        raise ValueError("ringx.trace.start needs dir=... (files) and/or listen='HOST:PORT' "
                         "(live server)")
    token = token if token is not None else os.environ.get("RINGX_TRACE_TOKEN", "")
    from . import _ringx_group  # late: __init__ imports this module
    pg = _ringx_group(group) if dist.is_initialized() else None
    if pg is not None:
        pg._start_tracing(dir or "", listen or "", token, rss_interval_ms,
                          clock_sync_interval_ms)
        return
    if listen:
        raise ValueError("ringx.trace.start(listen=...) needs a ringx process group "
                         "(init_process_group(backend='ringx')) to publish every rank's address")
    rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))
    size = dist.get_world_size() if dist.is_initialized() else int(os.environ.get("WORLD_SIZE", "1"))
    os.makedirs(dir, exist_ok=True)
    _t.start_local(dir, rank, size, rss_interval_ms)


def _record_host():
    """The cores this rank may run on and torch's compute threads, as a "host" instant: what
    `ringx-trace whatif --world-size` shares out among more or fewer ranks on the same hosts.
    Where a cgroup's CPU quota allows less than those cores (a container's --cpus, a pod's CPU
    limit), the quota too, in cores (cpu_quota): the share the host's threads split."""
    import torch
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = cpu_quota()
    extra = {"cpu_quota": quota} if quota is not None and quota < (cores or 0) else {}
    instant("host", track="host", category="user", cores=int(cores or 0),
            compute_threads=int(torch.get_num_threads()), **extra)


def _cgroup_mounts(mountinfo):
    """[(mount root, mount point, version)] of the cgroup hierarchies holding the cpu controller
    in /proc/self/mountinfo's text."""
    out = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3:
            continue
        if rest[0] == "cgroup2":
            out.append((fields[3], fields[4], 2))
        elif rest[0] == "cgroup" and "cpu" in rest[2].split(","):
            out.append((fields[3], fields[4], 1))
    return out


def cpu_quota(proc_cgroup="/proc/self/cgroup", mountinfo="/proc/self/mountinfo"):
    """The cores' worth of CPU time this process's cgroups allow (CFS quota / period, the
    smallest on the way up to the hierarchy's root: cgroup v2's cpu.max, v1's
    cpu.cfs_quota_us), or None where none is set or none can be read."""
    try:
        with open(proc_cgroup) as f:
            groups = f.read().splitlines()
        with open(mountinfo) as f:
            mounts = _cgroup_mounts(f.read())
    except OSError:
        return None
    best = None
    for line in groups:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        version = 2 if parts[0] == "0" and not parts[1] else 1
        if version == 1 and "cpu" not in parts[1].split(","):
            continue
        for root, point, v in mounts:
            if v != version or not (parts[2] + "/").startswith(root.rstrip("/") + "/"):
                continue
            path = os.path.join(point, parts[2][len(root.rstrip("/")):].lstrip("/"))
            while True:
                limit = _quota_at(path, version)
                if limit is not None:
                    best = limit if best is None else min(best, limit)
                if os.path.normpath(path) == os.path.normpath(point):
                    break
                path = os.path.dirname(path)
            break
    return best


def _quota_at(path, version):
    """The quota in cores set on the cgroup at `path`, or None (unlimited or unreadable)."""
    try:
        if version == 2:
            with open(os.path.join(path, "cpu.max")) as f:
                quota, period = (f.read().split() + ["100000"])[:2]
        else:
            with open(os.path.join(path, "cpu.cfs_quota_us")) as f:
                quota = f.read().strip()
            with open(os.path.join(path, "cpu.cfs_period_us")) as f:
                period = f.read().strip()
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):
        return None


# The calibration's ladder: 4 KiB to 16 MiB, a factor of 8 apart.
CALIBRATION_SIZES = tuple(4096 * 8 ** i for i in range(5))
CALIBRATION_OPS = ("allreduce", "all_gather", "reduce_scatter")


def calibrate(group=None, sizes=CALIBRATION_SIZES, ops=CALIBRATION_OPS, reps=3, device=None):
    """Times each collective of `ops` alone at each of `sizes` (bytes, as nccl-tests counts
    them: all_gather's output, reduce_scatter's input) on `group` (default: the default group)
    and records the results into the trace as "calibration" instants (op, bytes, ns,
    group_size), which `ringx-trace whatif` fits the wire's cost to. Each is the median of
    `reps` runs after a warm-up, and of the ranks the shortest (the last to arrive waited for
    no one). `device`: the tensors' (default: the current CUDA device for NCCL, else the CPU).
    Call it on every rank of the group while tracing, when no other work runs. Returns the
    [(op, bytes, ns)] it recorded."""
    import torch
    if not enabled():
        raise RuntimeError("ringx.trace.calibrate records into the trace: call "
                           "ringx.trace.start first")
    if not dist.is_initialized():
        raise RuntimeError("ringx.trace.calibrate times collectives: initialise a process "
                           "group first (torch.distributed.init_process_group)")
    unknown = [op for op in ops if op not in CALIBRATION_OPS]
    if unknown:
        raise ValueError(f"ringx.trace.calibrate: unknown ops {unknown}; use any of "
                         f"{', '.join(CALIBRATION_OPS)}")
    n = dist.get_world_size(group)
    if device is None:
        device = (torch.device("cuda", torch.cuda.current_device())
                  if dist.get_backend(group) == "nccl" else torch.device("cpu"))
    device = torch.device(device)
    results = []
    for op in ops:
        for size in sizes:
            elements = max(n, size // 4 // n * n)  # a multiple of the ranks, float32
            full = torch.ones(elements, device=device)
            part = torch.ones(elements // n, device=device)

            def run():
                if op == "allreduce":
                    dist.all_reduce(full, group=group)
                elif op == "all_gather":
                    dist.all_gather_into_tensor(full, part, group=group)
                else:
                    dist.reduce_scatter_tensor(part, full, group=group)
                if device.type == "cuda":
                    torch.cuda.synchronize()

            with warnings.catch_warnings():  # torch 2.13 renames the *_tensor calls
                warnings.simplefilter("ignore", FutureWarning)
                run()  # warm-up: connections, buffers
                times = []
                for _ in range(reps):
                    dist.barrier(group=group)
                    begin = now()
                    run()
                    times.append(now() - begin)
            results.append((op, elements * 4, sorted(times)[len(times) // 2]))
    # Of the ranks the shortest: the last to arrive waited for no one.
    shortest = torch.tensor([ns for _, _, ns in results], dtype=torch.int64)
    dist.all_reduce(shortest, op=dist.ReduceOp.MIN, group=group)
    for (op, nbytes, _), ns in zip(results, shortest.tolist()):
        instant("calibration", track="calibration", category="user", op=op, bytes=nbytes,
                ns=int(ns), group_size=n, reps=reps)
    return [(op, nbytes, int(ns)) for (op, nbytes, _), ns in zip(results, shortest.tolist())]


def _calibrate_now(group):
    calibrate(group)  # start()'s argument of the same name hides the function there


def stop():
    """Write out everything recorded and close trace files and the live server."""
    _t.stop()


def flush():
    """Block until everything recorded so far has reached the files and live clients."""
    _t.flush()


def live_address():
    """This rank's live server address ("" without one)."""
    return _t.live_address()


def _check_category(category):
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; use one of {', '.join(CATEGORIES)}")


class span:
    """A span from entering to leaving the block (or the decorated function):

        with ringx.trace.span("forward", batch=i): ...

        @ringx.trace.span("data_loading")
        def load(): ...

    Keyword arguments become the event's arguments (int, float, str; others as str).
    `track` is the lane it is drawn in (default "user"), `category` its kind.
    """

    def __init__(self, name, track="user", category="user", **args):
        _check_category(category)
        self.name, self.track, self.category, self.args = str(name), str(track), category, args
        self._begin = []

    def __enter__(self):
        self._begin.append(_t.now())
        return self

    def __exit__(self, *exc):
        begin = self._begin.pop()
        _t.span(self.name, self.track, self.category, begin, _t.now(), self.args)
        return False

    def __call__(self, function):
        @functools.wraps(function)
        def wrapped(*a, **kw):
            with self:
                return function(*a, **kw)
        return wrapped


def instant(name, track="user", category="user", **args):
    """A point in time on `track`."""
    _check_category(category)
    _t.instant(str(name), str(track), category, args)


def counter(name, value, category="user", track=None):
    """A sample of a counter (drawn as a chart); category "memory" for byte counts."""
    _check_category(category)
    if track is None:
        track = "memory" if category == "memory" else "user"
    _t.counter(str(name), float(value), category, str(track))


def mark_step(step):
    """Marks the start of training step `step` on the "steps" track."""
    _t.mark_step(int(step))


# Python exits before C++'s own exit handlers run: write everything out while the
# interpreter is still whole.
atexit.register(stop)


def load(*paths):
    """A recorded trace as pandas DataFrames (ringx.analysis.load: `events`, `collectives`,
    `counters`)."""
    from .analysis import load as load_tables
    return load_tables(*paths)
