"""The Python samples run as a user runs them (they start their own ranks)."""

import json
import os
import subprocess
import sys

from harness import PYTHONPATH

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def run_sample(name, *args):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    env.pop("RANK", None)
    return subprocess.run([sys.executable, os.path.join(ROOT, "samples", name), *args],
                          capture_output=True, text=True, timeout=180, env=env)


def test_train_ddp_sample_agrees_across_ranks(tmp_path):
    result = run_sample("train_ddp.py", "--world-size", "2", "--steps", "5",
                        "--trace", str(tmp_path / "trace"), "--profile")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "weights identical on all ranks: True" in result.stdout, result.stdout
    assert (tmp_path / "trace" / "rank-1.ringx").exists()
    # --profile: each rank's torch.profiler steps beside its ringx trace, which the viewer
    # and ringx-trace summary merge (tests/python/test_profiler_traces.py checks the merge).
    for rank in range(2):
        profile = json.loads((tmp_path / "trace" / f"rank{rank}.pt.trace.json").read_text())
        assert any(e.get("name", "").startswith("ProfilerStep#")
                   for e in profile["traceEvents"]), rank
    summary = subprocess.run([os.path.join(PYTHONPATH, "..", "bin", "ringx-trace"), "summary",
                              str(tmp_path / "trace"), str(tmp_path / "trace" / "rank0.pt.trace.json"),
                              str(tmp_path / "trace" / "rank1.pt.trace.json")],
                             capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0 and "2 of 2 ranks" in summary.stdout, summary.stderr


def test_samples_run_under_torchrun_as_the_docs_write(tmp_path):
    # docs/usage.md: PYTHONPATH=build/python .venv/bin/torchrun --standalone --nproc-per-node 2 samples/...
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(var, None)
    for sample, args, ok in (
            ("train_ddp.py", ["--steps", "5"], "weights identical on all ranks: True"),
            ("train_fsdp.py", ["--steps", "4", "--blocks", "2"],
             "full state dict identical on all ranks: True"),
            # torch's own FSDP2, traced: ringx watches its units (issue 49).
            ("train_fsdp2.py", ["--steps", "3", "--blocks", "2", "--prefetch", "1",
                                "--trace", str(tmp_path / "fsdp2")],
             "parameters identical on all ranks: True")):
        result = subprocess.run(
            [torchrun, "--standalone", "--nproc-per-node", "2",
             os.path.join(ROOT, "samples", sample), *args],
            capture_output=True, text=True, timeout=180, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert ok in result.stdout, result.stdout
    summary = subprocess.run([os.path.join(PYTHONPATH, "..", "bin", "ringx-trace"), "summary",
                              str(tmp_path / "fsdp2")], capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0, summary.stderr
    assert "FSDP engine" in summary.stdout, summary.stdout
    assert "\n  1 " in summary.stdout and "\n  2 " in summary.stdout, summary.stdout  # the blocks


def test_train_fsdp_sample_agrees_across_ranks_and_reports_memory(tmp_path):
    result = run_sample("train_fsdp.py", "--world-size", "2", "--steps", "4", "--blocks", "3",
                        "--trace", str(tmp_path / "trace"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "full state dict identical on all ranks: True" in result.stdout, result.stdout
    assert "4 units (FULL_SHARD)" in result.stdout and "peak held" in result.stdout
    summary = subprocess.run([os.path.join(PYTHONPATH, "..", "bin", "ringx-trace"), "summary",
                              str(tmp_path / "trace")], capture_output=True, text=True,
                             timeout=60)
    assert summary.returncode == 0, summary.stderr
    assert "FSDP engine" in summary.stdout and "peak held" in summary.stdout, summary.stdout
