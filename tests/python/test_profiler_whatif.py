"""What-if and advice from torch.profiler traces alone, as a user reaches them: `ringx-trace
whatif|advise|summary` on a job's profiler files or their folder, and ringx.analysis.whatif()
and advise() on them. The job is a real one nobody here ran: Megatron tensor-parallel on 8 A100s
over NCCL (../shared/traces/nccl/astrasim_megatron_tp8, one profiler file per rank). The replay's
own checks (hand-made traces with known answers, every real set within 3%) are the C++ tests'
(tests/cpp/analysis/profiler_program_test.cc)."""

import os
import subprocess

import ringx.analysis
from harness import RINGX_TRACE

MEGATRON = os.path.join(os.environ.get("RINGX_SHARED_TRACES") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "traces"),
    "nccl", "astrasim_megatron_tp8")


def megatron_files():
    files = sorted(os.path.join(MEGATRON, f) for f in os.listdir(MEGATRON) if ".json" in f)
    assert len(files) == 8, MEGATRON
    return files


def ringx_trace(*args):
    done = subprocess.run([RINGX_TRACE, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_whatif_replays_the_profiler_files_of_every_rank():
    report = ringx.analysis.whatif(megatron_files())
    assert report["engine"] == "profiler"
    assert report["ranks"] == 8 and report["collectives"] == 84, report
    assert abs(report["baseline_error"]) < 0.03, report
    labels = [row["change"] for row in report["rows"]]
    assert labels == ["communication free", "compute free"], labels
    # A bound never lengthens the step.
    for row in report["rows"]:
        assert row["error"] is None and row["change_share"] <= 0.001, row


def test_the_folder_answers_as_its_files_do():
    text = ringx_trace("whatif", MEGATRON, "--link", "100:2")
    assert "profiler trace, 8 ranks, 1 step" in text and "link 2.0 us/step" in text, text
    assert "critical path of the replayed step" in text, text
    summary = ringx_trace("summary", MEGATRON)
    assert "not a ringx trace directory" not in summary and "allreduce" in summary, summary


def test_advise_says_the_host_sets_the_megatron_step():
    advice = ringx.analysis.advise(MEGATRON)
    assert advice["engine"] == "profiler", advice
    kinds = [f["kind"] for f in advice["findings"]]
    assert "launch-bound" in kinds, advice["findings"]
    assert [c["change"] for c in advice["changes"]][:1] == ["compute free"], advice["changes"]


def test_engine_questions_of_profiler_files_are_refused_saying_what_to_ask():
    done = subprocess.run([RINGX_TRACE, "whatif", *megatron_files(), "--bucket-cap-mb", "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "ask --link, --world-size or the bounds" in done.stderr, done.stderr
