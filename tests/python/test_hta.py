"""ringx-trace's overlap and idle figures against an outside tool's on the same run: Holistic
Trace Analysis (HTA, `holistictraceanalysis` on PyPI, pinned in scripts/requirements.txt), on a
2-rank ringx.ddp job that records a ringx trace and torch.profiler's CPU trace at once
(docs/tracing.md, "Cross-check with HTA", says what each tool counts and why they differ).

HTA counts GPU kernels only (events with a CUDA stream). On the job's own torch.profiler files,
which a CPU job fills with operators and no kernels, it has nothing to measure: its overlap is
NaN and its idle analyses find no kernel (first test). So the job's ringx trace is written in the
Kineto layout HTA reads (`kineto_layout`): per rank, ringx.ddp's forward, backward up to
compute_end_ns (autograd done) and optimizer spans as compute kernels on stream 7, and each
bucket's allreduce (wire_start_ns to wire_end_ns) as an NCCL-named kernel on stream 20; then
per rank:

  overlap  HTA's comp_comm_overlap_pctg: the bucket allreduces' time under a compute kernel over
           their time. ringx's hidden share: 1 - sum(min(exposed_ns, wire)) / sum(wire), where a
           bucket's exposed_ns runs from backward's compute end to its future's completion,
           which comes after wire_end_ns. So HTA's figure is never the smaller, and larger
           by at most that completion latency's share of the wire time.
  idle     HTA's idle time of the compute stream (the gaps between compute kernels) against
           ringx's exposed communication (per iteration: compute end to the last bucket's
           completion). HTA's is the larger by the user's code between forward and backward
           (no engine span covers it) and finalize's work after the last bucket completed
           (copy-back), both measured here from the same trace.

Only the iterations followed by an optimizer span are written (every one but the last), as HTA
leaves out the last profiler step. Nothing here depends on how fast the machine is: both tools
read the same recorded events."""

import functools
import json
import math
import os
import re
import subprocess
import sys

import pytest

from harness import RINGX_TRACE, run_ranks

pytest.importorskip("hta", reason="HTA (holistictraceanalysis) is installed by scripts/setup.sh")

import ringx  # noqa: E402
from ringx.analysis import hidden_share  # noqa: E402
STEPS = 8
COMPUTE_STREAM, COMM_STREAM = 7, 20
# HTA prints its overlap rounded to 0.01 percentage points.
PCTG_ROUNDING = 0.005 + 1e-9
# Float microseconds with nanosecond decimals, summed over some tens of events.
US_EPSILON = 1e-6
# HTA prints its per-stream idle time rounded to 0.01 us.
IDLE_ROUNDING = 0.005 + US_EPSILON


def _train(out_dir, rank, world):
    """ringx.ddp on a 4-layer MLP with small buckets (several per backward), every step under
    torch.profiler (CPU); the ringx trace is on through RINGX_TRACE_DIR."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model = ringx.ddp.DistributedDataParallel(torch.nn.Sequential(*layers), bucket_cap_mb=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(STEPS):
            loss = model(torch.randn(128, 256, generator=generator)).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    prof.export_chrome_trace(os.path.join(out_dir, f"rank{rank}.pt.trace.json"))
    return True


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("hta")
    profiler_dir = out / "profiler"
    profiler_dir.mkdir()
    trace_dir = out / "ringx-trace"
    # One clock-offset sample per rank (the first): the export's offsets then hold for the
    # whole run, which kineto_layout relies on.
    env = {"RINGX_TRACE_DIR": str(trace_dir), "RINGX_TRACE_CLOCK_SYNC_MS": "3600000"}
    assert run_ranks(functools.partial(_train, str(profiler_dir)), 2, timeout=180,
                     env=env) == [True, True]
    export = out / "export.json"
    run = subprocess.run([RINGX_TRACE, "export", str(trace_dir), "-o", str(export)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    with open(export) as f:
        steps = read_ddp_steps(json.load(f))
    kineto_dir = out / "kineto"
    kineto_layout(steps, str(kineto_dir))
    return {"trace_dir": trace_dir, "profiler_dir": profiler_dir, "steps": steps,
            "hta": hta_figures(str(kineto_dir))}


# ---- the ringx trace, read from `ringx-trace export`'s Chrome JSON ----------------------

def read_ddp_steps(export):
    """{rank: {step: {...}}} of ringx.ddp's events, every time in integer nanoseconds on rank
    0's clock: spans' ts from the export (microseconds with nanosecond decimals), the engine's
    *_ns arguments (the rank's own steady clock) moved by the rank's clock offset."""
    other = export["otherData"]
    origin = other["time_origin_ns"]
    offsets = {}
    for r in other["ranks"]:
        assert r["clock_offset_ns"] == r["clock_offset_end_ns"], (
            f"rank {r['rank']}'s clock offset changed during the run: {r}")
        offsets[r["rank"]] = r["clock_offset_ns"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in export["traceEvents"]
              if e.get("ph") == "M" and e.get("name") == "thread_name"}
    steps = {}
    for e in export["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") != "ddp":
            continue
        rank = e["pid"] - 1  # ringx-trace exports rank r as pid r + 1
        track = tracks[(e["pid"], e["tid"])]
        args = e["args"]
        step = steps.setdefault(rank, {}).setdefault(args["step"], {"buckets": []})
        begin = round(e["ts"] * 1000)
        end = begin + round(e["dur"] * 1000)

        def aligned(name):
            return args[name] + offsets[rank] - origin

        if track == "ddp" and e["name"] in ("forward", "optimizer"):
            step[e["name"]] = (begin, end)
        elif track == "ddp" and e["name"] == "backward":
            step["backward"] = (begin, end)
            step["compute_end"] = aligned("compute_end_ns")
        elif e["name"] == "bucket":
            step["buckets"].append({
                "bucket": args["bucket"],
                "wire": (aligned("wire_start_ns"), aligned("wire_end_ns")),
                "exposed": args["exposed_ns"]})
    return steps


def complete(rank_steps):
    """The steps that have a forward, a backward with its compute end and an optimizer span
    after them: every step but the last (its optimizer span is recorded with the next step)."""
    keys = ("forward", "backward", "compute_end", "optimizer")
    return {s: v for s, v in sorted(rank_steps.items()) if all(k in v for k in keys)}


def kineto_layout(steps, out_dir):
    """Writes each rank's complete steps as a Kineto trace HTA reads (out_dir/rank<N>.json):
    compute "kernels" on stream COMPUTE_STREAM, each bucket's allreduce on COMM_STREAM named
    as HTA recognises communication (its rule: a name matching ^nccl.*Kernel)."""
    os.makedirs(out_dir, exist_ok=True)
    for rank, rank_steps in steps.items():
        kernels = []
        for s, step in complete(rank_steps).items():
            kernels.append(("forward", COMPUTE_STREAM, step["forward"]))
            kernels.append(("backward", COMPUTE_STREAM,
                            (step["backward"][0], step["compute_end"])))
            kernels.append(("optimizer", COMPUTE_STREAM, step["optimizer"]))
            for b in step["buckets"]:
                kernels.append((f"ncclKernel_AllReduce (ringx.ddp bucket {b['bucket']}, "
                                f"step {s})", COMM_STREAM, b["wire"]))
        events = []
        for i, (name, stream, (begin, end)) in enumerate(sorted(kernels, key=lambda k: k[2])):
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
                           "ts": begin / 1000, "dur": (end - begin) / 1000,
                           "args": {"device": 0, "stream": stream, "correlation": i + 1}})
        trace = {"distributedInfo": {"backend": "ringx", "rank": rank,
                                     "world_size": len(steps)},
                 "schemaVersion": 1, "deviceProperties": [], "traceEvents": events}
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(trace, f)


# ---- HTA, in a process of its own (it parses ranks with multiprocessing) ------------------

HTA_SCRIPT = r"""
import json, sys
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
out = {}
for rank, df in analysis.t.traces.items():
    out[rank] = {"kernels": int(df["stream"].ne(-1).sum())}
for _, row in analysis.get_comm_comp_overlap(visualize=False).iterrows():
    out[int(row["rank"])]["overlap_pctg"] = float(row["comp_comm_overlap_pctg"])
def temporal():
    df = analysis.get_temporal_breakdown(visualize=False)
    return {int(r["rank"]): {k: float(r[k + "(us)"]) for k in
            ("idle_time", "compute_time", "non_compute_time", "kernel_time")}
            for _, r in df.iterrows()}
try:
    for rank, figures in temporal().items():
        out[rank]["temporal"] = figures
except Exception as e:
    for rank in out:
        out[rank]["temporal_error"] = f"{type(e).__name__}: {e}"
try:
    df = analysis.get_idle_time_breakdown(ranks=sorted(out), visualize=False)[0]
    for (rank, stream), t in df.groupby(["rank", "stream"])["idle_time"].sum().items():
        out[int(rank)].setdefault("stream_idle", {})[str(stream)] = float(t)
except Exception as e:
    for rank in out:
        out[rank]["stream_idle_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def hta_figures(trace_dir):
    """{rank: HTA's figures} for the Kineto files in trace_dir. HTA's rounding of nanosecond
    timestamps to whole microseconds (a workaround for profiler files whose ns events overlap)
    is turned off: these events are exact to the nanosecond."""
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1")
    run = subprocess.run([sys.executable, "-c", HTA_SCRIPT, trace_dir], capture_output=True,
                         text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    return {int(rank): figures
            for rank, figures in json.loads(run.stdout.strip().splitlines()[-1]).items()}


# ---- ringx's figures and the definition differences --------------------------------------

def clamp(value, low, high):
    return max(low, min(value, high))


def overlap_figures(rank_steps):
    """ringx's hidden share of the complete steps' buckets, and what HTA's definition gives on
    the same intervals, with the bound the definitions put on their difference."""
    wire = geometric_hidden = latency = 0
    samples = []
    for s, step in complete(rank_steps).items():
        ce = step["compute_end"]
        for b in step["buckets"]:
            start, end = b["wire"]
            w = end - start
            samples.append((w, b["exposed"]))
            wire += w
            geometric_hidden += clamp(ce - start, 0, w)
            if b["exposed"] > 0:
                # exposed_ns = the future's completion - compute end: completion comes after
                # the collective's end (the future completes once the backend is done).
                done = ce + b["exposed"]
                assert done >= end, (
                    f"step {s} bucket {b['bucket']}: its future completed {end - done} ns "
                    "before its collective ended: the engine took it as done too early")
                latency += min(done - end, w)
            else:
                assert end <= ce, (
                    f"step {s} bucket {b['bucket']}: exposed_ns is 0, but its collective ended "
                    f"{end - ce} ns after backward's compute")
    return {"ringx": hidden_share(samples), "geometric": geometric_hidden / wire,
            "latency_share": latency / wire, "wire_ns": wire}


def idle_figures(rank_steps):
    """ringx's exposed communication over the complete steps, and the two gaps that HTA's
    compute-stream idle time has beside it."""
    exposed = between = after_last = 0
    for s, step in complete(rank_steps).items():
        ce = step["compute_end"]
        # An iteration's exposed time is its most exposed bucket's (analysis/figures.h).
        e = max([b["exposed"] for b in step["buckets"]] + [0])
        exposed += e
        gap = step["backward"][0] - step["forward"][1]
        tail = step["optimizer"][0] - (ce + e)
        assert gap >= 0 and tail >= 0, (s, gap, tail)
        between += gap
        after_last += tail
    return {"exposed_ns": exposed, "between_ns": between, "after_last_ns": after_last}


def summary_of(rank_file):
    """`ringx-trace summary` of one rank's file: its DDP hidden share (%), and its exposed time
    per iteration in ns with half the last printed digit (the printing's rounding)."""
    run = subprocess.run([RINGX_TRACE, "summary", str(rank_file)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    m = re.search(r"communication hidden behind backward: (\d+)%; exposed after backward's "
                  r"compute: ([\d.]+) (ns|us|ms|s) per iteration", run.stdout)
    assert m, run.stdout
    unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(3)]
    digits = len(m.group(2).partition(".")[2])
    return int(m.group(1)), float(m.group(2)) * unit, 0.5 * unit * 10.0 ** -digits


# ---- the tests -----------------------------------------------------------------------------

def test_hta_finds_no_kernel_in_a_cpu_profiler_trace(job):
    """HTA on the job's own torch.profiler files: it reads both ranks, finds no event with a
    stream (a CPU job has operators, no kernels), and so has no overlap (NaN) and no idle
    breakdown. This is why the comparison below goes through the ringx trace."""
    figures = hta_figures(str(job["profiler_dir"]))
    assert sorted(figures) == [0, 1]
    for rank, f in figures.items():
        assert f["kernels"] == 0, (rank, f)
        assert math.isnan(f["overlap_pctg"]), (rank, f)
        assert "temporal" not in f and "stream_idle" not in f, (rank, f)


def test_ringx_trace_reads_as_hta_kernels(job):
    """Every complete step's compute spans and bucket allreduces reach HTA as kernels."""
    for rank, rank_steps in job["steps"].items():
        steps = complete(rank_steps)
        assert len(steps) == STEPS - 1, (rank, sorted(rank_steps))
        buckets = sum(len(s["buckets"]) for s in steps.values())
        assert max(len(s["buckets"]) for s in steps.values()) >= 2, "one bucket a step"
        assert job["hta"][rank]["kernels"] == 3 * len(steps) + buckets


def test_comm_compute_overlap_hta_against_ringx(job):
    """HTA's overlap is the geometric one on the same intervals (to its 0.01-point rounding);
    ringx's hidden share is below it by the buckets' completion latency, and by no more."""
    for rank, rank_steps in job["steps"].items():
        ours = overlap_figures(rank_steps)
        theirs = job["hta"][rank]["overlap_pctg"]
        assert abs(theirs - 100 * ours["geometric"]) <= PCTG_ROUNDING, (rank, theirs, ours)
        gap = theirs - 100 * ours["ringx"]
        assert -PCTG_ROUNDING <= gap <= 100 * ours["latency_share"] + PCTG_ROUNDING, (
            rank, theirs, ours)


def test_idle_time_hta_against_ringx(job):
    """HTA's idle time of the compute stream = ringx's exposed communication + the user's code
    between forward and backward + finalize's work after the last bucket completed; and HTA's
    idle time (neither stream busy) is that less the communication no compute hid."""
    for rank, rank_steps in job["steps"].items():
        ours = idle_figures(rank_steps)
        hta = job["hta"][rank]
        assert "stream_idle" in hta and "temporal" in hta, (rank, hta)
        stream_idle = hta["stream_idle"][str(COMPUTE_STREAM)]
        expected = (ours["exposed_ns"] + ours["between_ns"] + ours["after_last_ns"]) / 1000
        assert abs(stream_idle - expected) <= IDLE_ROUNDING, (rank, stream_idle, ours)
        t = hta["temporal"]
        assert abs(t["idle_time"] + t["non_compute_time"] - stream_idle) <= IDLE_ROUNDING, (
            rank, t, stream_idle)


def test_ringx_trace_summary_prints_the_figures_compared(job):
    """`ringx-trace summary` of each rank's file prints the hidden share and exposed time that
    the comparison computed from the trace's arguments (over every step, as printed)."""
    for rank, rank_steps in job["steps"].items():
        hidden_pct, exposed_ns, rounding = summary_of(job["trace_dir"] / f"rank-{rank}.ringx")
        buckets = [b for step in rank_steps.values() for b in step["buckets"]]
        wire = [(b["wire"][1] - b["wire"][0], b["exposed"]) for b in buckets]
        assert hidden_pct == round(100 * hidden_share(wire)), (rank, hidden_pct)
        iterations = [s for s in rank_steps.values() if "backward" in s]
        mean = sum(max([b["exposed"] for b in s["buckets"]] + [0]) for s in iterations) / len(
            iterations)
        # + 1 ns: the summary's mean is an integer division
        assert abs(mean - exposed_ns) <= rounding + 1, (rank, mean, exposed_ns)


# ---- the same trace as DataFrames: an HTA-style analysis gives ringx-trace's figures ------

_UNITS_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def _duration_ns(text):
    """"1.39 s", "17.71 ms" as ringx-trace prints them: (ns, half the last printed digit)."""
    number, unit = text.split()
    decimals = len(number.split(".")[1]) if "." in number else 0
    return float(number) * _UNITS_NS[unit], 0.5 * 10 ** -decimals * _UNITS_NS[unit]


def test_the_trace_as_dataframes_gives_the_summary_figures(job):
    """ringx.trace.load reads the job's trace as pandas DataFrames; the per-rank and
    per-collective group-bys one would write over them (as HTA's analyses are written) give
    `ringx-trace summary`'s collective count and time in collectives per rank, the number of
    collectives matched across ranks and the largest arrival skew, with its collective and the
    rank last to it."""
    tables = ringx.trace.load(job["trace_dir"])
    events = tables.events
    spans = events[(events["category"] == "collective") & (events["kind"] == "span")]
    summary = subprocess.run([RINGX_TRACE, "summary", str(job["trace_dir"])], capture_output=True,
                             text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    rows = re.findall(r"^\s+(\d+)\s+\S+\s+(\d+)\s+([\d.]+ [mun]?s)\s+[\d.]+ [mun]?s\s+[\d.]+%",
                      summary.stdout, re.M)
    assert sorted(int(r[0]) for r in rows) == [0, 1], summary.stdout
    for rank, count, comm in rows:
        mine = spans[spans["rank"] == int(rank)].sort_values("begin_ns")
        assert len(mine) == int(count), (rank, len(mine), count)
        # Time inside at least one collective: the spans' union.
        union, end = 0, None
        for begin, finish in zip(mine["begin_ns"], mine["end_ns"]):
            if end is None or begin > end:
                union += finish - begin
                end = finish
            elif finish > end:
                union += finish - end
                end = finish
        printed, rounding = _duration_ns(comm)
        assert abs(union - printed) <= rounding, (rank, union, comm)

    matched = tables.collectives.groupby(["group", "seq"]).filter(lambda c: len(c) >= 2)
    per_collective = matched.groupby(["group", "seq"]).first()
    skew = re.search(r"(\d+) collectives matched; .* max ([\d.]+ [mun]?s) \((\S+) seq (\d+) in "
                     r"group (\S+), rank (\d+) last\)", summary.stdout)
    assert skew, summary.stdout
    assert len(per_collective) == int(skew.group(1))
    worst = per_collective["arrival_skew_ns"].idxmax()
    printed, rounding = _duration_ns(skew.group(2))
    assert abs(per_collective.loc[worst, "arrival_skew_ns"] - printed) <= rounding
    assert (per_collective.loc[worst, "op"], worst[1], worst[0]) == (
        skew.group(3), int(skew.group(4)), skew.group(5))
    assert per_collective.loc[worst, "last_arrival_rank"] == int(skew.group(6))


def test_the_parquet_export_holds_what_the_csv_export_holds(job, tmp_path):
    """`ringx-trace export --format parquet` writes the same three tables as --format csv, read
    back with pyarrow (pandas.read_parquet's engine): the same columns, rows and values, numbers
    as numbers and missing cells missing."""
    import pandas
    import pyarrow.parquet

    csv = ringx.trace.load(job["trace_dir"])
    out = tmp_path / "parquet"
    # Small row groups: a table of many, as a big trace's is.
    run = subprocess.run([RINGX_TRACE, "export", str(job["trace_dir"]), "--format", "parquet",
                          "--row-group", "100", "-o", str(out)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    for name, frame in (("events", csv.events), ("collectives", csv.collectives),
                        ("counters", csv.counters)):
        table = pyarrow.parquet.read_table(out / f"{name}.parquet")
        groups = pyarrow.parquet.ParquetFile(out / f"{name}.parquet").num_row_groups
        assert groups == (len(frame) + 99) // 100, (name, groups)
        parquet = table.to_pandas()
        assert list(parquet.columns) == list(frame.columns), name
        assert len(parquet) == len(frame) > 0, name
        def text(value):  # a cell as the CSV wrote it
            if value is None or (isinstance(value, float) and value != value):
                return ""
            if isinstance(value, float) and value.is_integer():
                return str(int(value))
            return str(value)

        for column in frame.columns:
            a, b = parquet[column], frame[column]
            if pandas.api.types.is_numeric_dtype(a):
                # Numbers stay numbers (the CSV reader infers them too).
                assert pandas.api.types.is_numeric_dtype(b), (name, column, b.dtype)
                assert ((a.isna() & b.isna()) | (a == b)).all(), (name, column)
            else:
                # Text (an argument some event gave as text: "peers": "1,2") stays text, where
                # the CSV reader may have taken the column for numbers.
                assert [text(v) for v in a] == [text(v) for v in b], (name, column)
    # Integer columns stay integers where nothing is missing.
    events = pyarrow.parquet.read_table(out / "events.parquet")
    assert str(events.schema.field("begin_ns").type) == "int64"
    assert str(events.schema.field("name").type) == "string"


# ---- a real NCCL job's profiler traces: ringx-trace's GPU figures beside HTA's ----------------

DLRM_TRACES = os.path.join(os.environ.get("RINGX_SHARED_TRACES") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "traces"),
    "nccl", "param_dlrm_8rank")


def test_gpu_kernels_of_an_nccl_job_hta_against_ringx(tmp_path):
    """On the 8 ranks' torch.profiler files of a real NCCL job (DLRM on 8 V100s, from
    facebookresearch/param; ../shared/traces/nccl/), `ringx-trace summary` prints per rank the
    GPU's idle, compute and non-compute shares and the communication kernels' overlap with
    compute that HTA's temporal breakdown and comm/compute overlap give for the same files (HTA
    rounds to 0.01 percentage points; the files' times are whole microseconds, so both count the
    same nanoseconds)."""
    files = sorted(f for f in os.listdir(DLRM_TRACES) if ".json" in f)
    assert len(files) == 8, DLRM_TRACES
    for f in files:  # HTA reads a directory; the shared one is left as it is
        os.symlink(os.path.join(DLRM_TRACES, f), tmp_path / f)
    script = r"""
import json, logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
overlap = t.get_comm_comp_overlap(visualize=False)
temporal = t.get_temporal_breakdown(visualize=False)
print(json.dumps({"overlap": dict(zip(overlap["rank"], overlap["comp_comm_overlap_pctg"])),
                  "temporal": temporal.to_dict("records")}, default=float))
"""
    hta = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                         text=True, timeout=300)
    assert hta.returncode == 0, hta.stderr[-2000:]
    figures = json.loads(hta.stdout.strip().splitlines()[-1])
    summary = subprocess.run([RINGX_TRACE, "summary", *[os.path.join(DLRM_TRACES, f) for f in files]],
                             capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    rows = {int(m[0]): m[1:] for m in re.findall(
        r"^\s+(\d+)\s+([\d.]+ [mun]?s)\s+([\d.]+)%\s+([\d.]+)%\s+([\d.]+)%\s+[\d.]+ [mun]?s\s+([\d.]+)%$",
        summary.stdout, re.M)}
    assert sorted(rows) == list(range(8)), summary.stdout
    for record in figures["temporal"]:
        rank = int(record["rank"])
        span, idle, compute, non_compute, overlap = rows[rank]
        printed, rounding = _duration_ns(span)
        assert abs(record["kernel_time(us)"] * 1000 - printed) <= rounding, (rank, span, record)
        assert abs(float(idle) - record["idle_time_pctg"]) <= 0.01 + 1e-9, (rank, idle, record)
        assert abs(float(compute) - record["compute_time_pctg"]) <= 0.01 + 1e-9, (rank, record)
        assert abs(float(non_compute) - record["non_compute_time_pctg"]) <= 0.01 + 1e-9, (
            rank, non_compute, record)
        assert abs(float(overlap) - figures["overlap"][str(rank)]) <= 0.01 + 1e-9, (
            rank, overlap, figures["overlap"])
