"""ringx.ddp (the C++ DDP engine) from Python: numerics against single-process training
and torch's DDP, unused parameters, no_sync, hooks, errors, rebuilt buckets, trace events,
and the C++ sample."""

import functools
import json
import os
import re
import subprocess

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import ringx
from ringx.ddp import DistributedDataParallel as RingxDDP

from harness import BIN, run_ranks

BATCH = 4  # per rank


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def data(world, step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(world * BATCH, 8, generator=g), torch.randn(world * BATCH, 4, generator=g)


def relative_error(a, b):
    a, b = a.double(), b.double()  # buffers include integer counters
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


def assert_close(model_params, reference_params, tolerance=1e-5):
    for a, b in zip(model_params, reference_params):
        error = relative_error(a.detach(), b.detach())
        assert error <= tolerance, error


def _matches_single_process_and_torch_ddp(rank, world, bucket_view, group_backend):
    group = None if group_backend == "ringx" else dist.new_group(backend=group_backend)
    reference = make_model(0)
    model = make_model(rank)  # different start on every rank: the engine broadcasts rank 0's
    ddp = RingxDDP(model, process_group=group, bucket_cap_mb=0.002,  # several buckets
                   gradient_as_bucket_view=bucket_view)
    assert len(ddp.bucket_assignment()) >= 3, ddp.bucket_assignment()
    assert_close(model.parameters(), reference.parameters(), tolerance=0)
    torch_model = make_model(0)
    torch_ddp = nn.parallel.DistributedDataParallel(torch_model, process_group=group,
                                                    bucket_cap_mb=0.002)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
            for m in (reference, model, torch_model)]
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    for step in range(6):
        x, y = data(world, step)
        for opt in opts:
            opt.zero_grad()
        nn.functional.mse_loss(reference(x), y).backward()
        nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
        nn.functional.mse_loss(torch_ddp(x[mine]), y[mine]).backward()
        # With gradient_as_bucket_view the gradients live in the flat buckets.
        storages = {p.grad.storage().data_ptr() for p in model.parameters()}
        expected = len(ddp.bucket_assignment()) if bucket_view else len(list(model.parameters()))
        assert len(storages) == expected, (len(storages), expected)
        for opt in opts:
            opt.step()
    assert_close(model.parameters(), reference.parameters())
    assert_close(model.parameters(), torch_model.parameters())
    assert ddp.buckets_rebuilt
    timing = ddp.last_iteration()
    assert timing["iteration"] == 5 and len(timing["buckets"]) == len(ddp.bucket_assignment())
    for b in timing["buckets"]:
        assert 0 < b["first_grad_ns"] <= b["ready_ns"] <= b["launch_ns"] <= b["done_ns"]
        assert b["launch_ns"] <= b["copy_back_begin_ns"] <= b["copy_back_end_ns"]
        if group_backend == "ringx":
            assert b["seq"] >= 0 and b["launch_ns"] <= b["wire_start_ns"] <= b["wire_end_ns"]
    return [names for names in ddp.bucket_assignment()]


@pytest.mark.parametrize("world,bucket_view,backend", [
    (2, False, "ringx"), (2, True, "ringx"), (3, False, "ringx"), (3, True, "ringx"),
    (2, False, "gloo")])
def test_matches_single_process_training_and_torch_ddp(world, bucket_view, backend):
    fn = functools.partial(_matches_single_process_and_torch_ddp, bucket_view=bucket_view,
                           group_backend=backend)
    assignments = run_ranks(fn, world)
    # Rebuilt from rank 0's gradient order: the same buckets everywhere.
    assert all(a == assignments[0] for a in assignments)


class TwoHeads(nn.Module):
    """Rank 0 uses head a, other ranks head b; `never` is used by nobody."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.a = nn.Linear(16, 4)
        self.b = nn.Linear(16, 4)
        self.never = nn.Linear(16, 4)

    def forward(self, x, head):
        h = torch.tanh(self.body(x))
        return self.a(h) if head == 0 else self.b(h)


def _find_unused_parameters(rank, world, static_graph):
    torch.manual_seed(0)
    reference = TwoHeads()
    torch.manual_seed(rank)
    model = TwoHeads()
    ddp = RingxDDP(model, bucket_cap_mb=0.0005, find_unused_parameters=not static_graph,
                   static_graph=static_graph)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (reference, model)]
    for step in range(4):
        x, y = data(world, step)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        # The reference sees every rank's shard through that rank's head.
        loss = sum(nn.functional.mse_loss(reference(x[r * BATCH:(r + 1) * BATCH], min(r, 1)),
                                          y[r * BATCH:(r + 1) * BATCH]) for r in range(world))
        (loss / world).backward()
        mine = slice(rank * BATCH, (rank + 1) * BATCH)
        nn.functional.mse_loss(ddp(x[mine], min(rank, 1)), y[mine]).backward()
        assert model.never.weight.grad is None  # used by no rank: left alone
        assert model.a.weight.grad is not None and model.b.weight.grad is not None, (step, {n: p.grad is None for n, p in model.named_parameters()})
        for opt in opts:
            opt.step()
    assert_close(model.parameters(), reference.parameters())
    return sorted(ddp.globally_unused_parameters())


@pytest.mark.parametrize("static_graph", [False, True])
def test_find_unused_parameters_and_static_graph(static_graph):
    results = run_ranks(functools.partial(_find_unused_parameters, static_graph=static_graph), 3)
    assert all(r == ["never.bias", "never.weight"] for r in results), results


def _no_sync_and_hooks(rank, world, hook):
    reference = make_model(0)
    model = make_model(rank)
    ddp = RingxDDP(model, bucket_cap_mb=0.002)
    if hook == "torch_allreduce":
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    elif hook == "fp16":
        ddp.register_comm_hook(None, ringx.ddp.fp16_compress_hook)
    elif hook == "bf16":
        ddp.register_comm_hook(None, ringx.ddp.bf16_compress_hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (reference, model)]
    for step in range(4):
        x1, y1 = data(world, step)
        x2, y2 = data(world, 100 + step)
        for opt in opts:
            opt.zero_grad()
        # Reference: both micro-batches of every rank, averaged over ranks.
        ref_loss = sum(nn.functional.mse_loss(reference(x[r * BATCH:(r + 1) * BATCH]),
                                              y[r * BATCH:(r + 1) * BATCH])
                       for r in range(world) for x, y in ((x1, y1), (x2, y2)))
        (ref_loss / world).backward()
        mine = slice(rank * BATCH, (rank + 1) * BATCH)
        with ddp.no_sync():
            nn.functional.mse_loss(ddp(x1[mine]), y1[mine]).backward()
        local = [p.grad.clone() for p in model.parameters()]
        nn.functional.mse_loss(ddp(x2[mine]), y2[mine]).backward()
        assert any(not torch.equal(a, p.grad) for a, p in zip(local, model.parameters()))
        for opt in opts:
            opt.step()
    tolerance = {"fp16": 2e-3, "bf16": 2e-2}.get(hook, 1e-5)
    assert_close(model.parameters(), reference.parameters(), tolerance)
    everyone = [None] * world
    dist.all_gather_object(everyone, [p.detach() for p in model.parameters()])
    assert all(torch.equal(a, b) for other in everyone for a, b in zip(other, everyone[0]))
    return True


@pytest.mark.parametrize("hook", [None, "torch_allreduce", "fp16", "bf16"])
def test_no_sync_accumulation_and_comm_hooks(hook):
    run_ranks(functools.partial(_no_sync_and_hooks, hook=hook), 2)


def _mismatched_models(rank, world):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4 + rank))
    RingxDDP(model)


def test_mismatched_models_fail_on_every_rank_naming_the_parameter():
    results = run_ranks(_mismatched_models, 2, allow_errors=True)
    for status, text in results:
        assert status == "error"
        assert "parameter '1.weight'" in text and "on rank" in text, text


def _unused_without_find_unused(rank, world):
    model = TwoHeads()
    ddp = RingxDDP(model, bucket_cap_mb=0.0005)
    x = torch.randn(4, 8)
    ddp(x, 0).sum().backward()
    ddp(x, 0)  # the next forward reports what the last backward could not reduce


def test_unused_parameter_without_find_unused_is_a_clear_error_not_a_hang():
    results = run_ranks(_unused_without_find_unused, 2, allow_errors=True, timeout=60)
    for status, text in results:
        assert status == "error"
        assert "got no gradient" in text and "b.weight" in text, text
        assert "find_unused_parameters=True" in text, text


def _traced_training(rank, world, trace_dir):
    ringx.trace.start(trace_dir)
    model = make_model(rank)
    ddp = RingxDDP(model, bucket_cap_mb=0.002)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    transfers = []  # (wire_ns, exposed_ns) of every bucket of every iteration
    for step in range(4):
        x, y = data(world, step)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x[:BATCH]), y[:BATCH]).backward()
        opt.step()
        it = ddp.last_iteration()
        mine = [(b["wire_end_ns"] - b["wire_start_ns"], b["exposed_ns"]) for b in it["buckets"]]
        # The engine's per-iteration figure is the shared definition applied to its buckets.
        assert it["hidden_share"] == ringx.analysis.hidden_share(mine), (it, mine)
        transfers += mine
    ringx.trace.stop()
    return len(ddp.bucket_assignment()), transfers


def test_trace_has_bucket_and_phase_events(tmp_path):
    trace_dir = str(tmp_path / "trace")
    results = run_ranks(functools.partial(_traced_training, trace_dir=trace_dir), 2)
    buckets = results[0][0]
    out = tmp_path / "trace.json"
    subprocess.run([os.path.join(BIN, "ringx-trace"), "export", trace_dir, "-o", str(out)],
                   check=True, timeout=60)
    events = json.load(open(out))
    events = events["traceEvents"] if isinstance(events, dict) else events
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    ddp_events = [e for e in events if e.get("cat") == "ddp" and e.get("ph") == "X"]
    bucket_events = [e for e in ddp_events if e["name"] == "bucket"]
    for rank in range(2):
        mine = [e for e in bucket_events if e["pid"] == rank + 1]
        # One event per bucket and iteration (4 iterations), each on its own lane.
        assert len(mine) == 4 * buckets, len(mine)
        assert {threads[(e["pid"], e["tid"])] for e in mine} == {
            f"ddp:bucket{i}" for i in range(buckets)}
        for e in mine:
            a = e["args"]
            assert a["first_grad_ns"] <= a["ready_ns"] <= a["launch_ns"] <= a["wire_start_ns"]
            assert a["wire_start_ns"] <= a["wire_end_ns"] and a["exposed_ns"] >= 0
            assert a["bytes"] > 0 and a["params"] >= 1 and a["seq"] >= 0
        phases = {e["name"] for e in ddp_events if e["pid"] == rank + 1}
        assert {"forward", "backward", "optimizer", "bucket_rebuild"} <= phases, phases
    counters = [e for e in events if e.get("ph") == "C" and e["name"] == "ddp.bucket_bytes"]
    assert counters and all(list(e["args"].values())[0] > 0 for e in counters)

    # ringx-trace summary's "hidden" is the same figure as the engine's, over every bucket
    # of every rank's iterations (one definition: analysis/figures.h).
    summary = subprocess.run([os.path.join(BIN, "ringx-trace"), "summary", trace_dir],
                             check=True, timeout=60, capture_output=True, text=True).stdout
    match = re.search(r"communication hidden behind backward: (\d+)%", summary)
    assert match, summary
    expected = ringx.analysis.hidden_share(results[0][1] + results[1][1])
    assert abs(int(match.group(1)) - 100 * expected) <= 0.5 + 1e-6, (summary, expected)


def test_cpp_sample_trains_on_two_ranks(tmp_path):
    result = subprocess.run([os.path.join(BIN, "train_ddp_cpp"), "--world-size", "2",
                             "--steps", "12", "--trace", str(tmp_path / "trace")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("parameters identical to rank 0's") == 2, result.stdout
    assert "buckets rebuilt" in result.stdout
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines()
              if line.startswith("step")]
    assert losses[-1] < losses[0], result.stdout
    assert sorted(os.listdir(tmp_path / "trace")) == ["manifest.json", "rank-0.ringx",
                                                      "rank-1.ringx"]


@pytest.mark.parametrize("sample", ["train_ddp_cpp", "train_fsdp_cpp"])
def test_cpp_sample_command_line(sample):
    """The C++ samples parse with CLI11 like ringx-trace and ringx-viewer: --help lists every
    user-facing option (not the launcher's internal ones); a bad value names itself, exit 2."""
    program = os.path.join(BIN, sample)
    usage = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0, usage.stderr
    for option in ("--world-size", "--steps", "--trace", "--help"):
        assert option in usage.stdout, usage.stdout
    assert "--rank" not in usage.stdout and "--store" not in usage.stdout, usage.stdout
    bad = subprocess.run([program, "--world-size", "zero"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "--world-size" in bad.stderr, bad.stderr
    unknown = subprocess.run([program, "--step", "3"], capture_output=True, text=True,
                             timeout=30)
    assert unknown.returncode == 2 and "--step" in unknown.stderr, unknown.stderr


def _buffers_follow_rank_zero(rank, world):
    def make(seed):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 4))
    model, torch_model = make(rank), make(0)
    ddp = RingxDDP(model, bucket_cap_mb=0.001)
    torch_ddp = nn.parallel.DistributedDataParallel(torch_model, bucket_cap_mb=0.001)
    assert_close(model.buffers(), torch_model.buffers(), tolerance=0)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, torch_model)]
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    for step in range(4):
        x, y = data(world, step)
        for m, opt in ((ddp, opts[0]), (torch_ddp, opts[1])):
            opt.zero_grad()
            nn.functional.mse_loss(m(x[mine]), y[mine]).backward()
            opt.step()
    # Running statistics are re-broadcast from rank 0 before every forward, as in torch.
    assert_close(model.buffers(), torch_model.buffers())
    assert_close(model.parameters(), torch_model.parameters())
    return True


def test_broadcast_buffers_matches_torch_ddp():
    run_ranks(_buffers_follow_rank_zero, 2)


def _peer_dies_mid_training(rank, world):
    model = make_model(rank)
    ddp = RingxDDP(model, bucket_cap_mb=0.002)
    for step in range(3):
        if step == 2 and rank == 1:
            os._exit(3)  # a crashed rank
        x, y = data(world, step)
        nn.functional.mse_loss(ddp(x[:BATCH]), y[:BATCH]).backward()


def test_a_dead_peer_fails_backward_naming_the_bucket_and_the_rank():
    results = run_ranks(_peer_dies_mid_training, 2, allow_errors=True, timeout=90,
                        group_timeout_s=30)
    status, text = results[0]
    assert status == "error", results
    assert "ringx.ddp: reducing bucket" in text and "rank 1" in text, text
