"""torch FSDP2 recovered from torch.profiler traces alone (analysis/profiler_fsdp.h), as a user
reaches it: a real 2-rank CPU job over gloo and over ringx, profiled with torch.profiler and
nothing else in the training, then `ringx.analysis.whatif(folder)` and `ringx-trace whatif`.
The units recovered must be FSDP2's own (their module paths, their unsharded parameters' bytes
read from the job), the schedule the one the job ran, and the model the same as the one a ringx
trace of the same steps gives. The hand-made traces with known answers are the C++ tests'
(tests/cpp/analysis/profiler_fsdp_test.cc)."""

import functools
import os
import subprocess

import pytest

import ringx.analysis
from harness import RINGX_TRACE, run_ranks


def _profiled_fsdp2_job(out_dir, trace_dir, reshard, shapes, rank, world):
    """Six steps of an FSDP2 MLP (four Linear(96, 96): the first three units of their own, the
    last the root's), the last four profiled into out_dir as tensorboard_trace_handler writes
    it while ringx traces the same steps into trace_dir; returns each unit's unsharded bytes
    by the unit's module path ("(root)" for the root)."""
    import torch
    import torch.nn as nn
    import ringx
    from torch.distributed.fsdp import fully_shard
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(96, 96) for _ in range(4)])
    for layer in list(model)[:3]:
        fully_shard(layer, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 96), torch.randn(16, 96)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes,
                 schedule=schedule(wait=1, warmup=1, active=4),
                 on_trace_ready=tensorboard_trace_handler(out_dir, worker_name=f"rank{rank}")) as p:
        for step in range(6):
            if step == 2:
                ringx.trace.start(dir=trace_dir)  # the four steps the profiler records
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            p.step()
    ringx.trace.stop()
    # A DTensor's numel is the whole parameter's.
    units = [(str(i), model[i]) for i in range(3)] + [("(root)", model[3])]
    return {name: sum(q.numel() * q.element_size() for q in layer.parameters())
            for name, layer in units}


@pytest.mark.parametrize("backend,reshard", [("gloo", True), ("ringx", False)])
def test_the_units_recovered_are_fsdp2s_and_the_model_is_the_ringx_traces(
        tmp_path, backend, reshard):
    folder, traced = str(tmp_path / "prof"), str(tmp_path / "trace")
    sizes = run_ranks(functools.partial(_profiled_fsdp2_job, folder, traced, reshard, True),
                      2, timeout=240, backend=backend)[0]
    assert len(os.listdir(folder)) == 2, os.listdir(folder)
    report = ringx.analysis.whatif(folder, host_cores=2)
    assert report["engine"] == "fsdp2" and report["source"] == "profiler", report
    assert report["ranks"] == 2 and report["world_size"] == 2 and report["units"] == 4, report
    assert report["sharding_strategy"] == ("FULL_SHARD" if reshard else "SHARD_GRAD_OP"), report
    assert report["blocking"] is True and report["forward_prefetch"] is False, report
    # The gathers' bytes are the unsharded parameters (the all-gather's output), the
    # reductions' the whole gradient, unit by unit.
    recovered = {u["unit"]: (u["param_bytes"], u["grad_bytes"]) for u in report["unit_sizes"]}
    assert recovered == {name: (b, b) for name, b in sizes.items()}, (recovered, sizes)
    rows = {row["change"]: row for row in report["rows"]}
    flipped = "reshard_after_forward=" + ("False" if reshard else "True")
    assert set(rows) >= {flipped, "units merged by 2", "forward prefetch of the next unit",
                         "communication free", "compute free"}, list(rows)
    for row in rows.values():
        assert row["error"] is None and row["predicted_step_ns"] > 0, row
    # FULL_SHARD gathers the three layers again in backward; SHARD_GRAD_OP does not.
    assert report["baseline"]["gathers"] == (7 if reshard else 4), report["baseline"]
    assert rows[flipped]["gathers"] == (4 if reshard else 7), rows[flipped]

    # ringx's own trace of the same four steps gives the same model.
    own = ringx.analysis.whatif(traced)
    assert own["source"] == "ringx", own
    for key in ("engine", "ranks", "world_size", "units", "sharding_strategy", "blocking"):
        assert own[key] == report[key], (key, own[key], report[key])
    assert {u["unit"]: (u["param_bytes"], u["grad_bytes"]) for u in own["unit_sizes"]} == \
        recovered
    assert own["baseline"]["gathers"] == report["baseline"]["gathers"]

    text = subprocess.run([RINGX_TRACE, "whatif", folder], capture_output=True, text=True,
                          timeout=120)
    assert text.returncode == 0, text.stderr
    assert "torch FSDP2 recovered from torch.profiler traces" in text.stdout, text.stdout
    assert f"the wire from {backend}'s scopes" in text.stdout, text.stdout

    # The summary's FSDP section: the same units, gathers and prefetches as ringx's trace's.
    def fsdp_units(path):
        done = subprocess.run([RINGX_TRACE, "summary", path], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        section = done.stdout.split("FSDP engine (", 1)
        assert len(section) == 2, done.stdout
        table = section[1].split("\n\n", 1)[0].splitlines()[4:]  # its unit rows
        rows = [line.split() for line in table]
        return section[1].split(" ", 1)[0], [(r[0], r[1], r[3], r[8]) for r in rows]
    assert fsdp_units(folder) == fsdp_units(traced)
    assert fsdp_units(folder)[0] == "8"  # four steps of two ranks


def test_without_record_shapes_the_report_says_to_turn_it_on(tmp_path):
    folder = str(tmp_path / "prof")
    run_ranks(functools.partial(_profiled_fsdp2_job, folder, str(tmp_path / "trace"), True,
                                False), 2, timeout=240, backend="gloo")
    done = subprocess.run([RINGX_TRACE, "whatif", folder], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "record_shapes=True" in done.stderr and "FSDP2" in done.stderr, done.stderr
    # The summary reads the rest of the job and says why it has no FSDP section.
    summary = subprocess.run([RINGX_TRACE, "summary", folder], capture_output=True, text=True,
                             timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert "FSDP engine (" not in summary.stdout, summary.stdout
    assert "FSDP2's units not recovered" in summary.stdout, summary.stdout
