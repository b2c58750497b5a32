"""torch's own DDP (and FSDP2), watched while tracing: the trace of a job that changes nothing
but its backend has the engines' events, checked against what torch itself reports (its DDP
logging data: the bucket layout after the rebuild), over ringx and over gloo."""

import collections
import functools
import json
import os
import struct
import subprocess
import sys
import zlib

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import ringx

from harness import BIN, PYTHONPATH, run_ranks, viewer


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def export(trace_dir, tmp_path):
    out = tmp_path / "trace.json"
    subprocess.run([os.path.join(BIN, "ringx-trace"), "export", trace_dir, "-o", str(out)],
                   check=True, timeout=60)
    events = json.load(open(out))
    events = events["traceEvents"] if isinstance(events, dict) else events
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return events, lanes


def summary(trace_dir, command="summary"):
    return subprocess.run([os.path.join(BIN, "ringx-trace"), command, trace_dir], check=True,
                          timeout=60, capture_output=True, text=True).stdout


def png_rows(path):
    """A PNG's rows of (r, g, b) pixels (8-bit RGB or RGBA, as ringx-viewer writes them)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, width, height, channels = 8, b"", 0, 0, 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytes(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # PNG's five row filters
            a = line[i - channels] if i >= channels else 0
            b, c = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        previous = bytes(line)
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
    return rows


def content_pixels(rows, top, bottom):
    """Pixels of rows[top:bottom] that differ from the region's most common colour."""
    region = [p for row in rows[top:bottom] for p in row]
    background = collections.Counter(region).most_common(1)[0][0]
    return sum(1 for p in region if p != background)


def _torch_ddp(rank, world, trace_dir, hook, steps, accumulate, device="cpu"):
    ringx.trace.start(trace_dir)
    ddp = nn.parallel.DistributedDataParallel(make_model(rank).to(device), bucket_cap_mb=0.002)
    if hook == "fp16":
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        opt.zero_grad()
        for micro in range(accumulate):
            x, y = torch.randn(4, 8, generator=g).to(device), torch.randn(4, 4, generator=g).to(device)
            if micro < accumulate - 1:
                with ddp.no_sync():
                    nn.functional.mse_loss(ddp(x), y).backward()
            else:
                nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    ringx.trace.stop()
    data = ddp._get_ddp_logging_data()
    if "rebuilt_bucket_sizes" not in data:  # torch logs the layout from a later step on
        return None
    return ([int(s) for s in data["rebuilt_bucket_sizes"].split(",")],
            [[int(i) for i in b.split()] for b in data["rebuilt_per_bucket_param_indices"].split(",")])


def check_ddp_trace(trace_dir, tmp_path, results, world, steps, ringx_wire):
    events, lanes = export(trace_dir, tmp_path)
    sizes, indices = results[0]
    assert len(sizes) >= 2, sizes  # the cap makes several buckets
    for rank in range(world):
        assert results[rank] == results[0]  # every rank's Reducer rebuilt the same buckets
        mine = [e for e in events if e.get("pid") == rank + 1 and e.get("cat") == "ddp"]
        phases = [e["name"] for e in mine if lanes[(e["pid"], e["tid"])] == "ddp"]
        # Only the forwards that sync gradients are iterations (no_sync ones are not).
        assert phases.count("forward") == steps and phases.count("backward") == steps, phases
        assert "bucket_rebuild" in phases and "bucket_plan" in phases, phases
        plans = [e["args"] for e in mine if e["name"] == "bucket_plan"]
        assert all(a["engine"] == "torch.ddp" for a in plans), plans
        buckets = [e for e in mine if e["name"] == "bucket" and e["args"]["step"] >= 1]
        assert len(buckets) == (steps - 1) * len(sizes), len(buckets)
        for e in buckets:
            a = e["args"]
            k = a["bucket"]
            assert lanes[(e["pid"], e["tid"])] == f"ddp:bucket{k}"
            # The layout torch reports after its rebuild, bucket by bucket.
            assert a["bytes"] == sizes[k] and a["params"] == len(indices[k]), (a, sizes, indices)
            assert a["first_grad_ns"] <= a["ready_ns"] <= a["launch_ns"] <= a["wire_start_ns"]
            assert a["wire_start_ns"] <= a["wire_end_ns"] and a["exposed_ns"] >= 0, a
            assert (a["seq"] >= 0) == ringx_wire, a  # ringx's Works say which collective
        # Gradient readiness (sampled steps): each parameter on its bucket's lane.
        for e in mine:
            if e["name"] == "grad" and e["args"]["step"] >= 1:
                k = int(lanes[(e["pid"], e["tid"])][len("ddp:bucket"):])
                assert e["args"]["param"] in indices[k], (e, indices)
    text = summary(trace_dir)
    assert "DDP engine" in text, text
    rows = text[text.index("DDP engine"):].splitlines()
    assert sum(1 for line in rows if line.split() and line.split()[0].isdigit()) == len(sizes)
    return events


def test_torch_ddp_over_ringx_per_bucket(tmp_path):
    trace_dir = str(tmp_path / "trace")
    steps = 5
    results = run_ranks(functools.partial(_torch_ddp, trace_dir=trace_dir, hook=None,
                                          steps=steps, accumulate=1), 2)
    events = check_ddp_trace(trace_dir, tmp_path, results, 2, steps, ringx_wire=True)
    # A bucket's seq names its allreduce on the comm lane, of the same size.
    allreduces = {(e["pid"], e["args"]["seq"]): e["args"]["bytes"] for e in events
                  if e.get("cat") == "collective" and e["name"] == "allreduce"}
    for e in events:
        if e.get("name") == "bucket" and e.get("cat") == "ddp":
            assert allreduces[(e["pid"], e["args"]["seq"])] == e["args"]["bytes"], e
    whatif = summary(trace_dir, "whatif")
    assert "bucket_cap_mb=" in whatif and "as recorded" in whatif, whatif


def test_torch_ddp_over_gloo_with_a_hook_and_no_sync(tmp_path):
    trace_dir = str(tmp_path / "trace")
    steps = 4
    results = run_ranks(functools.partial(_torch_ddp, trace_dir=trace_dir, hook="fp16",
                                          steps=steps, accumulate=2), 3, backend="gloo")
    check_ddp_trace(trace_dir, tmp_path, results, 3, steps, ringx_wire=False)


def test_the_callbacks_come_with_a_torch_engine_and_go_with_the_recording(tmp_path):
    ringx._C._register_engines(ringx._C)
    assert not ringx.trace.enabled() and not ringx._C.ddp.observing()
    assert nn.parallel.DistributedDataParallel.forward.__wrapped__ is not None
    assert not ringx._C.trace.watch_torch_engines()  # tracing off: nothing to install
    ringx.trace.start(str(tmp_path))  # no process group: this rank's own file
    try:
        # Tracing alone (a job on ringx's own engines) installs nothing; torch's DDP forward
        # and FSDP2's root pre-forward ask for the callbacks.
        assert not ringx._C.ddp.observing()
        assert ringx._C.trace.watch_torch_engines() and ringx._C.ddp.observing()
    finally:
        ringx.trace.stop()
    assert not ringx._C.ddp.observing()


# ---- FSDP2 ----------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.up = nn.Linear(dim, 3 * dim)  # 3 * dim rows: padded when sharded 2 or 3 ways? no:
        self.down = nn.Linear(3 * dim, dim)  # 48 rows split evenly; down's 16 rows pad on 3

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(x)))


def _fsdp2(rank, world, trace_dir, reshard, prefetch, param_dtype, steps=3, device="cpu"):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    ringx.trace.start(trace_dir)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), Block(), Block(), Block(), nn.Linear(16, 1)).to(device)
    # The engine's truth, read before sharding: each unit's own parameters.
    def own(module, exclude):
        skip = {id(p) for m in exclude for p in m.parameters()}
        return [p for p in module.parameters() if id(p) not in skip]
    blocks = [model[1], model[2], model[3]]
    truth = {str(i): own(b, []) for i, b in zip((1, 2, 3), blocks)}
    truth[""] = own(model, blocks)
    size = torch.empty((), dtype=param_dtype).element_size()
    unsharded = {u: sum(p.numel() for p in ps) * size for u, ps in truth.items()}
    # FSDP2 pads dim 0 to a multiple of the world size: each rank's shard.
    sharded = sum(-(-p.shape[0] // world) * (p.numel() // p.shape[0]) * 4
                  for ps in truth.values() for p in ps)
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for b in blocks:
        fully_shard(b, reshard_after_forward=reshard, mp_policy=mp)
    fully_shard(model, reshard_after_forward=reshard, mp_policy=mp)
    if prefetch:
        for i, b in enumerate(blocks):
            b.set_modules_to_forward_prefetch(blocks[i + 1:i + 2])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        loss = model(torch.randn(4, 8, generator=g).to(device)).float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    ringx.trace.stop()
    return unsharded, sharded


def check_fsdp_trace(trace_dir, tmp_path, results, world, steps, reshard, prefetch,
                     blocking=True):
    events, lanes = export(trace_dir, tmp_path)
    unsharded, sharded = results[0]
    for rank in range(world):
        mine = [e for e in events if e.get("pid") == rank + 1]
        unit_events = [(lanes[(e["pid"], e["tid"])][len("fsdp:"):], e) for e in mine
                       if e.get("cat") == "fsdp" and e.get("ph") == "X"
                       and lanes[(e["pid"], e["tid"])].startswith("fsdp:")]
        # The units are the modules fully_shard was applied to.
        assert {u for u, _ in unit_events} == {"(root)", "1", "2", "3"}, unit_events[:3]
        for unit, truth in unsharded.items():
            name = unit or "(root)"
            gathers = [e for u, e in unit_events if u == name and e["name"] == "all_gather"]
            scatters = [e for u, e in unit_events if u == name and e["name"] == "reduce_scatter"]
            # Per step: a forward gather, a backward one when resharded after forward (FSDP2
            # keeps the root gathered when it is the last to run forward... it reshards it too
            # when asked), and one reduce-scatter.
            forward = [e for e in gathers if e["args"]["phase"] == "forward"]
            backward = [e for e in gathers if e["args"]["phase"] == "backward"]
            assert len(forward) == steps, (name, len(forward))
            assert len(backward) == (steps if reshard else 0), (name, len(backward))
            assert len(scatters) == steps, (name, len(scatters))
            for e in gathers:
                assert e["args"]["bytes"] == truth, (name, e["args"], truth)
                assert e["args"]["issue_ns"] <= e["args"]["wire_start_ns"] <= e["args"]["wire_end_ns"]
            if prefetch and name in ("2", "3"):
                assert all(e["args"]["prefetched"] == 1 for e in forward), forward
        counters = {}
        for e in mine:
            if e.get("ph") == "C" and e["name"].startswith("fsdp."):
                counters.setdefault(e["name"], []).append(list(e["args"].values())[0])
        assert set(counters[  "fsdp.sharded_bytes"]) == {sharded}, counters["fsdp.sharded_bytes"]
        held = counters["fsdp.unsharded_bytes"]
        # Never more than every unit gathered at once; at some point at least the largest.
        assert max(unsharded.values()) <= max(held) <= sum(unsharded.values()), held
        assert held[-1] == (0 if reshard else held[-1]), held
        assert max(counters["fsdp.peak_bytes"]) >= sharded + max(held)
    text = summary(trace_dir)
    assert "FSDP engine" in text, text
    configs = [e["args"] for e in events if e.get("name") == "fsdp_config"]
    assert configs and all(a["engine"] == "torch.fsdp2" and a["blocking"] == blocking
                           for a in configs), configs
    # What-if speaks fully_shard's terms; on CPU FSDP2's collectives block (no streams), on a
    # GPU they run on FSDP2's own streams.
    whatif = summary(trace_dir, "whatif")
    assert "FSDP2 (torch's fully_shard)" in whatif, whatif
    assert ("blocks the thread" in whatif) == blocking, whatif
    assert f"reshard_after_forward={not reshard}" in whatif and "units merged" in whatif, whatif
    assert "limit_all_gathers" not in whatif and "NO_SHARD" not in whatif, whatif


@pytest.mark.parametrize("ringx_first", [True, False])
def test_fsdp2_is_wrapped_whichever_comes_first_and_import_ringx_leaves_it_unloaded(ringx_first):
    # `import ringx` wraps FSDP2's root pre-forward when FSDP2 is imported (python/ringx/
    # _watch.py), so that a rank that never uses FSDP2 does not load it; the FSDP2 tests here
    # import it after ringx, in the rank.
    state = "torch.distributed.fsdp._fully_shard._fsdp_state"
    imports = ["import ringx", "from torch.distributed.fsdp import fully_shard"]
    code = "\n".join(["import sys, torch", imports[0 if ringx_first else 1],
                      f"print({state!r} in sys.modules)", imports[1 if ringx_first else 0],
                      "from ringx import _watch",
                      f"print(sys.modules[{state!r}].FSDPState._root_pre_forward is "
                      "_watch._root_pre_forward)"])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False" if ringx_first else "True", "True"], result.stdout


def test_fsdp2_over_ringx_per_unit_and_its_fsdp_panel(tmp_path):
    trace_dir = str(tmp_path / "trace")
    results = run_ranks(functools.partial(_fsdp2, trace_dir=trace_dir, reshard=True,
                                          prefetch=True, param_dtype=torch.float32), 3)
    check_fsdp_trace(trace_dir, tmp_path, results, 3, 3, reshard=True, prefetch=True)
    # The viewer's FSDP panel draws a row per unit (text, wait bars) below the timeline; on a
    # trace without FSDP events it shows one line of hint.
    shots = {}
    for name, trace in (("fsdp2", trace_dir), ("none", str(tmp_path / "empty"))):
        if name == "none":
            run_ranks(functools.partial(_torch_ddp, trace_dir=trace, hook=None, steps=2,
                                        accumulate=1), 2)
        shot = tmp_path / f"{name}.png"
        result = viewer(trace, "--panel", "fsdp", "--frames", "5", "--size", "1280x720",
                        "--screenshot", shot)
        assert result.returncode == 0, result.stderr
        rows = png_rows(shot)
        shots[name] = content_pixels(rows, int(len(rows) * 0.66), len(rows))
    assert shots["fsdp2"] > 3 * shots["none"] + 2000, shots


def test_fsdp2_over_gloo_mixed_precision_no_reshard(tmp_path):
    trace_dir = str(tmp_path / "trace")
    results = run_ranks(functools.partial(_fsdp2, trace_dir=trace_dir, reshard=False,
                                          prefetch=False, param_dtype=torch.bfloat16), 2,
                        backend="gloo")
    check_fsdp_trace(trace_dir, tmp_path, results, 2, 3, reshard=False, prefetch=False)


def _hsdp(rank, world, trace_dir, steps=3):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    ringx.trace.start(trace_dir)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), Block(), Block(), nn.Linear(16, 1))
    block_bytes = sum(p.numel() * 4 for p in model[1].parameters())
    for b in (model[1], model[2]):
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        loss = model(torch.randn(4, 8, generator=g)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    ringx.trace.stop()
    return block_bytes


def test_hsdp_on_a_2d_mesh_reduces_across_replicas(tmp_path):
    trace_dir = str(tmp_path / "trace")
    block_bytes = run_ranks(functools.partial(_hsdp, trace_dir=trace_dir), 4)[0]
    events, lanes = export(trace_dir, tmp_path)
    for rank in range(4):
        mine = [(lanes[(e["pid"], e["tid"])], e) for e in events
                if e.get("pid") == rank + 1 and e.get("cat") == "fsdp"]
        for unit in ("fsdp:1", "fsdp:2"):
            ops = [e["name"] for lane, e in mine if lane == unit]
            # Every step: reduce-scatter within the shard group, allreduce across replicas.
            assert ops.count("reduce_scatter") == 3 and ops.count("allreduce") == 3, ops
            gathers = [e for lane, e in mine if lane == unit and e["name"] == "all_gather"]
            assert gathers and all(e["args"]["bytes"] == block_bytes for e in gathers)
        config = [e for lane, e in mine if e["name"] == "fsdp_config"]
        assert config and all(e["args"]["sharding_strategy"] == "HYBRID_SHARD"
                              and e["args"]["group_size"] == 2 for e in config), config


def test_fsdp2_resharding_to_a_smaller_group_keeps_half_until_backward(tmp_path):
    # reshard_after_forward=2 on 4 ranks: after forward every unit keeps a 1/2 slice of its
    # gathered (padded) parameters, FSDP2's own sizes, until backward gathers it again.
    trace_dir = str(tmp_path / "trace")
    results = run_ranks(functools.partial(_fsdp2, trace_dir=trace_dir, reshard=2, prefetch=False,
                                          param_dtype=torch.float32), 4)
    check_fsdp_trace(trace_dir, tmp_path, results, 4, 3, reshard=True, prefetch=False)
    events, lanes = export(trace_dir, tmp_path)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), Block(), Block(), Block(), nn.Linear(16, 1))
    padded = sum(-(-p.shape[0] // 4) * 4 * (p.numel() // p.shape[0]) * 4 for p in model.parameters())
    for rank in range(4):
        mine = [e for e in events if e.get("pid") == rank + 1]
        backward = [e["ts"] for e in mine if e.get("name") == "backward"
                    and lanes[(e["pid"], e["tid"])] == "fsdp"]
        held = [(e["ts"], list(e["args"].values())[0]) for e in mine
                if e.get("ph") == "C" and e["name"] == "fsdp.unsharded_bytes"]
        for begin in backward:
            before = [v for ts, v in held if ts <= begin]
            assert before and before[-1] == padded // 2, (before[-3:], padded)
