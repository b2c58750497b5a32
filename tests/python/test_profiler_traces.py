"""Traces written by other producers open in ringx-viewer as Perfetto opens them: a corpus
recorded here by torch.profiler in a 2-rank CPU job (torch DDP over ringx), with and without
record_shapes / profile_memory / with_stack, exported with export_chrome_trace and written
gzip-compressed by tensorboard_trace_handler(use_gzip=True). Every event of a kind the
Chrome format draws must be in the viewer: none skipped, none left out, each file on its
rank (Kineto's distributedInfo), and beside the job's own ringx trace."""

import functools
import gzip
import json
import os
import re

import pytest

from harness import run_ranks
from test_viewer import STATS, viewer

SPAN = re.compile(r"^span_ms=([\d.]+) flows=(\d+) ", re.M)

VARIANTS = {
    "plain": {},
    "shapes": {"record_shapes": True},
    "memory": {"profile_memory": True},
    "stack": {"with_stack": True},
}


def _profile_rank(out_dir, rank, world):
    """Trains a small DDP model under the profiler, once per variant, on each rank."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        model(torch.randn(16, 32)).sum().backward()
        opt.step()
        dist.all_reduce(torch.ones(4))

    for name, options in VARIANTS.items():
        with profile(activities=[ProfilerActivity.CPU], **options) as prof:
            for _ in range(2):
                step()
        prof.export_chrome_trace(os.path.join(out_dir, f"{name}-rank{rank}.pt.trace.json"))
    handler = tensorboard_trace_handler(os.path.join(out_dir, "gz"), worker_name=f"rank{rank}",
                                        use_gzip=True)
    with profile(activities=[ProfilerActivity.CPU], on_trace_ready=handler,
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(3):
            step()
            prof.step()
    return True


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("profiler")
    trace_dir = out / "ringx-trace"
    run_ranks(functools.partial(_profile_rank, str(out)), 2, timeout=300,
              env={"RINGX_TRACE_DIR": str(trace_dir)})
    return out


def drawable_events(path):
    """Events of a file that a Chrome-format viewer draws: complete spans and instants, B/E
    and b/e pairs (one each), async instants."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    phases = [e.get("ph") for e in events if isinstance(e, dict)]
    return sum(phases.count(ph) for ph in ("X", "i", "I", "n", "B", "b"))


def files_of(corpus, variant):
    if variant == "gz":
        files = sorted(str(p) for p in (corpus / "gz").iterdir())
    else:
        files = [str(corpus / f"{variant}-rank{r}.pt.trace.json") for r in range(2)]
    assert len(files) == 2, files
    return files


@pytest.mark.parametrize("variant", list(VARIANTS) + ["gz"])
def test_every_profiler_event_opens_on_its_rank(corpus, variant):
    files = files_of(corpus, variant)
    if variant == "gz":
        assert all(f.endswith(".json.gz") for f in files), files
    with (gzip.open if variant == "gz" else open)(files[1], "rt") as f:
        assert json.load(f)["distributedInfo"]["rank"] == 1
    expected = sum(drawable_events(f) for f in files)
    assert expected > 100
    result = viewer(*files, "--frames", "1", "--print-stats")
    assert result.returncode == 0, result.stderr
    stats = STATS.search(result.stdout)
    assert stats, result.stdout
    assert int(stats.group(1)) == 2  # one rank per file, from distributedInfo
    assert int(stats.group(2)) == expected, result.stderr
    for complaint in ("skipped", "left out", "no other end", "no matching end"):
        assert complaint not in result.stderr, result.stderr


def test_the_profiler_and_ringx_traces_of_one_job_open_together(corpus):
    files = files_of(corpus, "plain")
    alone = STATS.search(viewer(str(corpus / "ringx-trace"), "--frames", "1",
                                "--print-stats").stdout)
    result = viewer(str(corpus / "ringx-trace"), *files, "--frames", "1", "--print-stats")
    assert result.returncode == 0, result.stderr
    both = STATS.search(result.stdout)
    assert both, result.stdout
    # The profiler's files land on the ringx ranks, not on ranks of their own.
    assert both.group(1) == alone.group(1) == "2"
    assert int(both.group(2)) == int(alone.group(2)) + sum(drawable_events(f) for f in files)
    # ... and on their clock: the profiler counts epoch microseconds, ringx its steady clock;
    # unaligned, the two sit days apart. Aligned, the whole job spans seconds. (The exact
    # arithmetic is gtest ChromeIngest.AProfilerFileAlignsToItsRanksRingxClockReference.)
    span_ms = float(SPAN.search(result.stdout).group(1))
    assert span_ms < 60_000, result.stdout
    reversed_order = SPAN.search(viewer(*files, str(corpus / "ringx-trace"), "--frames", "1",
                                   "--print-stats").stdout)
    assert float(reversed_order.group(1)) == span_ms  # the order given does not matter
