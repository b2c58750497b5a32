"""torch DDP recovered from torch.profiler traces alone (analysis/profiler_ddp.h), as a user
reaches it: a real 2-rank CPU job over gloo and over ringx, profiled with record_shapes=True and
nothing of ringx in the training, then `ringx.analysis.whatif(folder)` and `advise(folder)`. The
buckets recovered must be the Reducer's own (its rebuilt buckets' sizes, read from the job),
the plan's limits must give them, and the what-if must answer DDP's questions. The hand-made
traces with known answers are the C++ tests' (tests/cpp/analysis/profiler_ddp_test.cc)."""

import functools
import os
import subprocess

import pytest

import ringx.analysis
from harness import RINGX_TRACE, run_ranks


def _profiled_job(out_dir, cap_mb, view, shapes, rank, world):
    """Six steps of a torch DDP MLP (6 layers of 128: 66 KiB of gradients a layer), the last four
    profiled into out_dir as tensorboard_trace_handler writes it; returns the Reducer's bucket
    sizes in launch order (its buckets after the first step's rebuild)."""
    import torch
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(128, 128) for _ in range(6)])
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_mb,
                                              gradient_as_bucket_view=view)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x, y = torch.randn(16, 128), torch.randn(16, 128)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes,
                 schedule=schedule(wait=1, warmup=1, active=4),
                 on_trace_ready=tensorboard_trace_handler(out_dir, worker_name=f"rank{rank}")) as p:
        for _ in range(6):
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
            p.step()
    return [b.buffer().numel() * b.buffer().element_size()
            for b in ddp.reducer._get_zeros_like_grad_buckets()]


def profile_job(tmp_path, backend, cap_mb=0.1, view=False, shapes=True):
    out = tmp_path / f"{backend}-prof"
    buckets = run_ranks(functools.partial(_profiled_job, str(out), cap_mb, view, shapes), 2,
                        timeout=240, backend=backend)
    assert len(os.listdir(out)) == 2, os.listdir(out)
    return str(out), buckets[0]


@pytest.mark.parametrize("backend", ["gloo", "ringx"])
def test_the_buckets_recovered_are_the_reducers_and_the_whatif_answers_ddps_questions(
        tmp_path, backend):
    folder, reducer_buckets = profile_job(tmp_path, backend)
    assert len(reducer_buckets) > 2, reducer_buckets  # a cap that splits the model
    report = ringx.analysis.whatif(folder, bucket_cap_mb=[0.5, 25], first_bucket_mb=0.05,
                                   host_cores=2)
    assert report["engine"] == "ddp" and report["source"] == "profiler", report
    assert report["ranks"] == 2 and report["world_size"] == 2 and report["parameters"] == 12
    assert report["baseline"]["bucket_bytes"] == reducer_buckets, report["baseline"]
    assert report["gradient_as_bucket_view"] is False
    # The inferred limits give the Reducer's plan; the job's cap need not be the one named.
    assert report["bucket_cap_bytes"] > 0
    rows = {row["change"]: row for row in report["rows"]}
    assert set(rows) >= {"bucket_cap_mb=0.5", "bucket_cap_mb=25", "first_bucket_mb=0.05",
                         "communication free", "compute free"}, list(rows)
    for row in rows.values():
        assert row["error"] is None and row["predicted_step_ns"] > 0, row
    # torch DDP given bucket_cap_mb=25 holds the whole model in one bucket (its first bucket
    # is the cap too).
    assert rows["bucket_cap_mb=25"]["buckets"] == 1, rows["bucket_cap_mb=25"]
    assert rows["communication free"]["predicted_step_ns"] <= report["recorded_step_ns"] * 1.001
    advice = ringx.analysis.advise(folder)
    assert advice["engine"] == "ddp", advice
    assert any(c["change"].startswith("bucket_cap_mb=") for c in advice["changes"]), advice


def test_gradient_as_bucket_view_is_read_off_the_missing_copies(tmp_path):
    folder, reducer_buckets = profile_job(tmp_path, "gloo", view=True)
    report = ringx.analysis.whatif(folder, gradient_as_bucket_view=False, bounds=False)
    assert report["gradient_as_bucket_view"] is True, report
    assert report["baseline"]["bucket_bytes"] == reducer_buckets
    text = subprocess.run([RINGX_TRACE, "whatif", folder], capture_output=True, text=True,
                          timeout=120)
    assert text.returncode == 0, text.stderr
    assert "torch DDP recovered from torch.profiler traces" in text.stdout, text.stdout
    assert "the wire from gloo's scopes" in text.stdout, text.stdout
    # The summary's collectives are gloo's scopes, matched across the two ranks: every bucket
    # of the four profiled steps.
    summary = subprocess.run([RINGX_TRACE, "summary", folder], capture_output=True, text=True,
                             timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert "none recorded" not in summary.stdout and "allreduce" in summary.stdout, summary.stdout
    # Its DDP section: the Reducer's buckets, each in every profiled iteration of both ranks.
    section = summary.stdout.split("DDP engine (", 1)
    assert len(section) == 2, summary.stdout
    assert section[1].startswith("8 iterations"), section[1]
    rows = [line.split() for line in section[1].split("\n\n", 1)[0].splitlines()[4:]]
    assert [int(r[1]) for r in rows] == reducer_buckets, section[1]


def test_without_record_shapes_the_report_says_to_turn_it_on(tmp_path):
    folder, _ = profile_job(tmp_path, "gloo", shapes=False)
    done = subprocess.run([RINGX_TRACE, "whatif", folder], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "record_shapes=True" in done.stderr, done.stderr
