"""ringx's reported figures, each defined once (analysis/figures.h in the C++ sources) and
shared by `ringx-trace summary`, ringx-viewer, the engines and the benchmarks:

    bus_bandwidth_factor(op, group_size)      nccl-tests' factor: 2(n-1)/n for allreduce, ...
    bus_bandwidth_gbps(op, bytes, duration_ns, group_size)
    hidden_share([(wire_ns, exposed_ns), ...]) 1 - sum(min(exposed, wire)) / sum(wire)

ringx.ddp's last_iteration() carries its iteration's "hidden_share" computed the same way.

And what a recorded ringx.ddp job would do with one thing changed (`ringx-trace whatif`'s report,
as a dict):

    whatif(trace_dir, bucket_cap_mb=[4, 8, 16], gradient_as_bucket_view=True, world_size=[8],
           link=["1.8:25"], bounds=True)
        -> {"recorded_step_ns", "replayed_step_ns", "baseline_error", "wire", "rows": [
              {"change", "predicted_step_ns", "predicted_low_ns", "predicted_high_ns",
               "within_noise", "change_share", "exposed_comm_ns", "buckets", "critical_path",
               "error"}, ...], "best_plan"}

A recorded trace as pandas DataFrames (`ringx-trace export --format csv`; ringx.trace.load is
the same), every rank on rank 0's clock in ns:

    load(path, ...)  -> Tables(events, collectives, counters)
        events       a row per span or instant: rank, track, kind, category, name, begin_ns,
                     end_ns, duration_ns, failed, and a column per argument key
        collectives  the collectives matched across ranks, a row per rank's part: group, seq,
                     op, bytes, group_size, rank, group_rank, begin_ns, end_ns, duration_ns,
                     busbw_gbps, failed, arrival_skew_ns, last_arrival_rank, slowest_rank,
                     mismatch, missing_ranks
        counters     a row per sample: rank, counter, time_ns, value

And what to change (`ringx-trace advise`'s report, as a dict):

    advise(trace_dir) -> {"engine", "recorded_step_ns", "model_error", "what_if_error",
                          "changes": [{"change", "predicted_step_ns", "predicted_low_ns",
                                       "predicted_high_ns", "change_share", "within_noise"}],
                          "findings": [{"kind", "what", "evidence", "change"}]}
"""

import collections
import json
import os
import shutil
import subprocess
import tempfile

from ._C.analysis import bus_bandwidth_factor, bus_bandwidth_gbps, hidden_share

__all__ = ["advise", "bus_bandwidth_factor", "bus_bandwidth_gbps", "hidden_share", "load",
           "whatif"]

Tables = collections.namedtuple("Tables", ["events", "collectives", "counters"])


def _ringx_trace():
    """The ringx-trace program: $RINGX_TRACE_BIN, else on PATH, else beside this package in a
    `make` build (build/python/ringx -> build/bin)."""
    explicit = os.environ.get("RINGX_TRACE_BIN")
    if explicit:
        return explicit
    found = shutil.which("ringx-trace")
    if found:
        return found
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin",
                          "ringx-trace")
    if os.path.exists(beside):
        return os.path.normpath(beside)
    raise RuntimeError("ringx.analysis.whatif needs the ringx-trace program, which `make` builds "
                       "(build/bin/ringx-trace); put it on PATH or set RINGX_TRACE_BIN")


def _listed(values):
    if values is None:
        return None
    if isinstance(values, (int, float)):
        values = [values]
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def whatif(trace_dir, bucket_cap_mb=None, first_bucket_mb=None, gradient_as_bucket_view=None,
           world_size=None, link=None, bounds=True, sharding_strategy=None, backward_prefetch=None,
           forward_prefetch=None, limit_all_gathers=None, merge_units=None, host_cores=None):
    """Replays the DDP or FSDP step recorded in `trace_dir` unchanged and with each change asked,
    as `ringx-trace whatif TRACE --json`. DDP: bucket_cap_mb, first_bucket_mb (a number or a
    list), gradient_as_bucket_view; with nothing asked, bucket caps from a quarter to four times
    the recorded one and 25 MB, and the other gradient_as_bucket_view. FSDP: sharding_strategy and
    backward_prefetch (a name or a list of PyTorch's names; None is "NONE" in a list),
    forward_prefetch and limit_all_gathers (True/False), merge_units (k: every k consecutive
    units as one; a number or a list); with nothing asked, every other choice of each. Both:
    world_size (a number or a list), link ("GBPS[:US_PER_STEP]" strings) and the bounds.
    `trace_dir` may also be a job's torch.profiler traces: their folder, or a list of every
    rank's .json / .json.gz files (a GPU job's, engine "profiler": world_size, link and the
    bounds, and where torch DDP's buckets are recovered, "ddp" in the result, bucket_cap_mb and
    first_bucket_mb re-planned in the replayed program; a CPU job's torch DDP or FSDP2, engine
    "ddp" or "fsdp" with the plan recovered, and host_cores: each host's cores, which the
    profiler does not record).
    Raises RuntimeError with ringx-trace's message when the trace cannot answer."""
    command = [_ringx_trace(), "whatif", *_paths(trace_dir), "--json"]
    for flag, values in (("--bucket-cap-mb", bucket_cap_mb), ("--first-bucket-mb", first_bucket_mb),
                         ("--world-size", world_size), ("--merge-units", merge_units),
                         ("--host-cores", host_cores)):
        text = _listed(values)
        if text:
            command += [flag, text]
    for flag, names in (("--sharding-strategy", sharding_strategy),
                        ("--backward-prefetch", backward_prefetch)):
        if names is None:
            continue
        names = [names] if isinstance(names, str) else names
        command += [flag, ",".join("NONE" if n is None else getattr(n, "name", n) for n in names)]
    for flag, value in (("--gradient-as-bucket-view", gradient_as_bucket_view),
                        ("--forward-prefetch", forward_prefetch),
                        ("--limit-all-gathers", limit_all_gathers)):
        if value is not None:
            command += [flag, "on" if value else "off"]
    for wire in ([link] if isinstance(link, str) else (link or [])):
        command += ["--link", wire]
    if not bounds:
        command.append("--no-bounds")
    return _run(command)


def advise(trace_dir):
    """What slows the step recorded in `trace_dir` and what to change, as `ringx-trace advise
    TRACE --json`: findings with their evidence, and every change the engine allows, fastest
    predicted first. `trace_dir` may be a job's torch.profiler traces (their folder or a list of
    files), as for whatif(). Raises RuntimeError with ringx-trace's message when the trace
    cannot be read."""
    return _run([_ringx_trace(), "advise", *_paths(trace_dir), "--json"])


def _paths(trace):
    """A path, or a list of them (a job's profiler files), as command-line arguments."""
    if isinstance(trace, (list, tuple)):
        if not trace:
            raise ValueError("no trace given: pass a trace directory or a list of profiler files")
        return [os.fspath(t) for t in trace]
    return [os.fspath(trace)]


def _run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or
                           f"ringx-trace {command[1]} failed ({done.returncode})")
    return json.loads(done.stdout)


def load(*paths):
    """The traces at `paths` (a ringx trace directory or rank files, Chrome or profiler JSON;
    several merge onto one clock, as `ringx-trace summary` merges them) as Tables of pandas
    DataFrames. Needs pandas; raises RuntimeError with ringx-trace's message when a trace
    cannot be read."""
    if not paths:
        raise TypeError("ringx.trace.load needs at least one trace path")
    try:
        import pandas
    except ImportError as e:
        raise ImportError("ringx.trace.load returns pandas DataFrames: pip install pandas") from e
    with tempfile.TemporaryDirectory(prefix="ringx-tables-") as out:
        command = [_ringx_trace(), "export", *map(os.fspath, paths), "--format", "csv", "-o", out]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip() or f"ringx-trace export failed ({done.returncode})")
        text = {"group": str, "op": str, "missing_ranks": str, "track": str, "name": str,
                "category": str, "kind": str, "counter": str}

        def read(name):
            path = os.path.join(out, name)
            header = pandas.read_csv(path, nrows=0).columns
            return pandas.read_csv(path, dtype={c: t for c, t in text.items() if c in header},
                                   keep_default_na=False, na_values=[""])

        return Tables(read("events.csv"), read("collectives.csv"), read("counters.csv"))
