"""ringx.fsdp (the C++ FSDP engine) from Python: every sharding strategy against
single-process training on the concatenated batch (checked through state_dict()), nested and
auto-wrapped units, mixed precision, no_sync, state dicts, memory accounting, errors, trace
events, and the C++ sample."""

import functools
import json
import os
import subprocess

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import ringx
from ringx.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision

from harness import BIN, run_ranks

BATCH = 3  # per rank
DIM = 12


class Block(nn.Module):
    """A transformer-like block without attention: norm, MLP, residual."""

    def __init__(self, dim=DIM):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, blocks=3):
        super().__init__()
        self.embed = nn.Linear(5, DIM)
        self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
        self.head = nn.Linear(DIM, 2)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


def make_net(seed, blocks=3):
    torch.manual_seed(seed)
    return Net(blocks)


def data(world, step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(world * BATCH, 5, generator=g), torch.randn(world * BATCH, 2, generator=g)


def relative_error(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


def train(model, opt, rank, world, steps, local=True):
    for step in range(steps):
        x, y = data(world, step)
        if local:
            x, y = x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH]
        opt.zero_grad(set_to_none=True)
        # .float(): with mixed precision the output is in param_dtype, as in torch's FSDP
        nn.functional.mse_loss(model(x).float(), y).backward()
        opt.step()


def reference_state(world, steps, blocks=3):
    """Single-process training on the concatenated batch."""
    model = make_net(0, blocks)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, 0, world, steps, local=False)
    return model.state_dict()


def wrap(model, strategy, nesting, **kwargs):
    if nesting == "auto":
        return FSDP(model, sharding_strategy=strategy, auto_wrap_policy={Block}, **kwargs)
    if nesting == "explicit":
        for i in range(len(model.blocks)):
            model.blocks[i] = FSDP(model.blocks[i], sharding_strategy=strategy, **kwargs)
        model.head = FSDP(model.head, sharding_strategy=strategy, **kwargs)
        return FSDP(model, sharding_strategy=strategy, **kwargs)
    return FSDP(model, sharding_strategy=strategy, **kwargs)


def _matches_single_process(rank, world, strategy, nesting, steps, extra):
    kwargs = dict(extra)
    if strategy == "HYBRID_SHARD":
        kwargs["shard_group_size"] = 2
    model = wrap(make_net(0), strategy, nesting, **kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, rank, world, steps)
    state = model.state_dict()
    expected = reference_state(world, steps)
    assert list(state.keys()) == list(expected.keys())
    errors = {k: relative_error(state[k], expected[k]) for k in expected}
    shards = sum(p.numel() for p in model.parameters())
    full = sum(v.numel() for v in expected.values())
    return max(errors.values()), shards, full, len(model.units())


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"])
@pytest.mark.parametrize("world", [2, 3])
def test_strategies_match_single_process_training(strategy, world):
    results = run_ranks(functools.partial(_matches_single_process, strategy=strategy,
                                          nesting="auto", steps=4, extra={}), world)
    for error, shards, full, units in results:
        assert error < 1e-5
        assert units == 4  # the root and three blocks
        if strategy == "NO_SHARD":
            assert shards >= full
        else:
            assert shards <= full // world + units * world  # 1/S each, plus padding


@pytest.mark.parametrize("nesting", ["explicit", "none"])
def test_nested_and_single_units_match_single_process_training(nesting):
    results = run_ranks(functools.partial(_matches_single_process, strategy="FULL_SHARD",
                                          nesting=nesting, steps=3, extra={}), 2)
    for error, _, _, units in results:
        assert error < 1e-5
        assert units == (5 if nesting == "explicit" else 1)


def test_hybrid_shard_on_four_ranks_as_two_by_two():
    results = run_ranks(functools.partial(_matches_single_process, strategy="HYBRID_SHARD",
                                          nesting="auto", steps=3, extra={}), 4, timeout=240)
    for error, shards, full, _ in results:
        assert error < 1e-5
        assert full // 2 <= shards <= full // 2 + 16  # sharded over 2, replicated twice


@pytest.mark.parametrize("extra", [
    {"backward_prefetch": "BACKWARD_POST"},
    {"backward_prefetch": None, "limit_all_gathers": False},
    {"forward_prefetch": True},
], ids=["backward_post", "no_prefetch_no_limit", "forward_prefetch"])
def test_prefetch_options_keep_numerics(extra):
    results = run_ranks(functools.partial(_matches_single_process, strategy="FULL_SHARD",
                                          nesting="auto", steps=3, extra=extra), 2)
    for error, _, _, _ in results:
        assert error < 1e-5


def _mixed_precision(rank, world):
    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = wrap(make_net(0), "FULL_SHARD", "auto", mixed_precision=mp)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # fp32 master shards
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    seen = []
    model.module.blocks[0].module.up.register_forward_hook(
        lambda m, i, o: seen.append((m.weight.dtype, o.dtype)))
    train(model, opt, rank, world, 3)
    state = model.state_dict()
    expected = reference_state(world, 3)
    error = max(relative_error(state[k], expected[k]) for k in expected)
    return error, seen[0], state["embed.weight"].dtype


def test_mixed_precision_computes_in_bf16_and_keeps_fp32_masters():
    for error, dtypes, state_dtype in run_ranks(_mixed_precision, 2):
        assert dtypes == (torch.bfloat16, torch.bfloat16)
        assert state_dtype == torch.float32
        assert 0 < error < 0.05  # bf16 has 8 bits of mantissa


def _no_sync(rank, world):
    model = wrap(make_net(0), "FULL_SHARD", "auto")
    reference = make_net(0)
    x, y = data(world, 0)
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    half = BATCH // 2 + 1
    # Two micro-batches: the first under no_sync, the second reduces both.
    with model.no_sync():
        nn.functional.mse_loss(model(x[mine][:half]), y[mine][:half]).backward()
    assert all(p.grad is None for p in model.parameters())  # nothing reduced yet
    nn.functional.mse_loss(model(x[mine][half:]), y[mine][half:]).backward()
    for start in range(world):
        rows = slice(start * BATCH, (start + 1) * BATCH)
        xs, ys = x[rows], y[rows]
        (nn.functional.mse_loss(reference(xs[:half]), ys[:half]) / world).backward()
        (nn.functional.mse_loss(reference(xs[half:]), ys[half:]) / world).backward()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=1.0)
    opt.step()
    ref_opt.step()
    state = model.state_dict()
    return max(relative_error(state[k], v) for k, v in reference.state_dict().items())


def test_no_sync_accumulates_unsharded_gradients_then_reduces_them_all():
    for error in run_ranks(_no_sync, 2):
        assert error < 1e-5


def _accumulate_with_communication(rank, world):
    model = wrap(make_net(0), "FULL_SHARD", "auto")
    reference = make_net(0)
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    for step in range(2):  # two synchronised backwards, no zero_grad in between
        x, y = data(world, step)
        nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
        for r in range(world):
            rows = slice(r * BATCH, (r + 1) * BATCH)
            (nn.functional.mse_loss(reference(x[rows]), y[rows]) / world).backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    torch.optim.SGD(reference.parameters(), lr=1.0).step()
    state = model.state_dict()
    return max(relative_error(state[k], v) for k, v in reference.state_dict().items())


def test_sharded_gradients_accumulate_across_synchronised_backwards():
    for error in run_ranks(_accumulate_with_communication, 3):
        assert error < 1e-5


def _state_dicts(rank, world):
    model = wrap(make_net(rank), "FULL_SHARD", "auto")  # every rank starts differently
    full = make_net(7).state_dict()
    model.load_state_dict(full)
    loaded = model.state_dict()
    same_after_load = max(relative_error(loaded[k], full[k]) for k in full)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, opt, rank, world, 2)
    sharded = model.sharded_state_dict()
    before = model.state_dict()
    train(model, opt, rank, world, 1)
    model.load_sharded_state_dict(sharded)
    after = model.state_dict()
    restored = max(relative_error(after[k], before[k]) for k in before)
    shard_names = sorted(sharded)
    with model.summon_full_params():
        summoned = model.module.embed.weight.clone()
    direct_call_error = None
    try:
        model.module.embed(torch.zeros(1, 5))
    except RuntimeError as e:
        direct_call_error = str(e)
    return (same_after_load, restored, shard_names, relative_error(summoned, after["embed.weight"]),
            direct_call_error)


def test_full_and_sharded_state_dicts_round_trip_and_direct_calls_are_refused():
    for same, restored, names, summoned, error in run_ranks(_state_dicts, 2):
        assert same == 0 and restored == 0 and summoned == 0
        assert names[:2] == ["blocks.0.flat_param", "blocks.1.flat_param"]
        assert "flat_param" in names and "blocks.0.norm.weight" not in names
        assert "'embed' was called directly" in error and "summon_full_params" in error


def _memory(rank, world):
    model = wrap(make_net(0, blocks=8), "FULL_SHARD", "auto")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    idle = model.memory_stats()
    train(model, opt, rank, world, 2)
    after = model.memory_stats()
    units = {name: numel for name, _, _, numel in model.units()}
    return idle, after, units, sum(p.numel() for p in model.parameters())


def test_memory_counters_account_shards_gathers_and_gradients_exactly():
    for idle, after, units, shard_numel in run_ranks(_memory, 2):
        assert idle["sharded_bytes"] == 4 * shard_numel
        assert idle["unsharded_bytes"] == 0 and idle["grad_bytes"] == 0
        assert after["unsharded_bytes"] == 0                # everything freed after backward
        assert after["grad_bytes"] == 4 * shard_numel       # sharded gradients only
        # The peak, exactly (bench/fsdp.py derives it term by term), when block 1's
        # backward starts: the shards, the root's parameters and gradient, two blocks
        # gathered (block 1 and block 0, prefetched), block 1's gradient and block 2's in its
        # reduce-scatter (the limiter keeps exactly one in flight, however fast the wire),
        # and the sharded gradients of blocks 2..7. Units are padded to equal shards.
        world, blocks = 2, 8
        pad = lambda n: -(-n // world) * world  # noqa: E731
        block, root = pad(units["blocks.0"]), pad(units[""])
        assert 4 * shard_numel == idle["sharded_bytes"]
        expected = shard_numel + 2 * root + 4 * block + (blocks - 2) * (block // world)
        assert after["peak_bytes"] == 4 * expected, (after["peak_bytes"], 4 * expected)


def _errors(rank, world, case):
    try:
        if case == "shared":
            model = make_net(0)
            model.head.weight = model.blocks[0].up.weight if False else model.head.weight
            model.blocks[1].down.weight = model.blocks[0].down.weight  # tied across two blocks
            FSDP(model, auto_wrap_policy={Block})
        elif case == "uneven":
            FSDP(make_net(0, blocks=2 + rank))
        elif case == "nested_call":
            model = FSDP(make_net(0), auto_wrap_policy={Block})
            model.module.blocks[0](torch.zeros(1, DIM))
        elif case == "strategy":
            FSDP(make_net(0), sharding_strategy="SHARD_EVERYTHING")
    except (RuntimeError, ValueError) as e:
        return str(e)
    return None


@pytest.mark.parametrize("case, expected", [
    ("shared", "already managed by unit"),
    ("uneven", "every rank must construct the same model"),
    ("nested_call", "nested inside another one; call the outermost wrapper"),
    ("strategy", "is not one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD"),
])
def test_errors_say_what_is_wrong(case, expected):
    for message in run_ranks(functools.partial(_errors, case=case), 2):
        assert message is not None and expected in message, message


def _over_gloo(rank, world):
    group = dist.new_group(backend="gloo")
    model = FSDP(make_net(0), process_group=group, auto_wrap_policy={Block})
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, rank, world, 3)
    state = model.state_dict()
    expected = reference_state(world, 3)
    return max(relative_error(state[k], expected[k]) for k in expected)


def test_works_over_a_gloo_group():
    for error in run_ranks(_over_gloo, 2):
        assert error < 1e-5


def _traced_training(rank, world, trace_dir):
    ringx.trace.start(trace_dir)
    model = wrap(make_net(0), "FULL_SHARD", "auto")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train(model, opt, rank, world, 3)
    ringx.trace.stop()
    return [name for name, _, _, _ in model.units()]


def test_trace_has_unit_events_and_memory_counters(tmp_path):
    trace_dir = str(tmp_path / "trace")
    units = run_ranks(functools.partial(_traced_training, trace_dir=trace_dir), 2)[0]
    out = tmp_path / "trace.json"
    subprocess.run([os.path.join(BIN, "ringx-trace"), "export", trace_dir, "-o", str(out)],
                   check=True, timeout=60)
    events = json.load(open(out))
    events = events["traceEvents"] if isinstance(events, dict) else events
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    fsdp = [e for e in events if e.get("cat") == "fsdp" and e.get("ph") == "X"]
    for rank in range(2):
        mine = [e for e in fsdp if e["pid"] == rank + 1]
        by_track = {}
        for e in mine:
            by_track.setdefault(threads[(e["pid"], e["tid"])], []).append(e)
        assert {f"fsdp:{u or '(root)'}" for u in units} <= set(by_track), sorted(by_track)
        for unit in units[1:]:  # the blocks: gathered twice per step, reduced once
            track = by_track[f"fsdp:{unit}"]
            gathers = [e for e in track if e["name"] == "all_gather"]
            assert len(gathers) == 2 * 3, [e["name"] for e in track]
            assert {e["args"]["phase"] for e in gathers} == {"forward", "backward"}
            for e in gathers:
                a = e["args"]
                assert a["issue_ns"] <= a["wire_start_ns"] <= a["wire_end_ns"]
                assert a["exposed_ns"] >= 0 and a["bytes"] > 0 and a["prefetched"] in (0, 1)
            # backward gathers after the first unit are prefetched (BACKWARD_PRE)
            assert len([e for e in track if e["name"] == "reduce_scatter"]) == 3
            assert len([e for e in track if e["name"] == "forward"]) == 3
            assert len([e for e in track if e["name"] == "backward"]) == 3
            assert len([e for e in track if e["name"] == "reshard"]) >= 3
        prefetched = [e for e in mine if e["name"] == "all_gather" and e["args"]["prefetched"]]
        assert prefetched, "BACKWARD_PRE issued no prefetch"
        phases = {e["name"] for e in by_track["fsdp"]}
        assert {"forward", "backward", "optimizer"} <= phases, phases
    counters = {e["name"] for e in events if e.get("ph") == "C"}
    assert {"fsdp.sharded_bytes", "fsdp.unsharded_bytes", "fsdp.grad_bytes",
            "fsdp.peak_bytes"} <= counters, counters


def test_cpp_sample_matches_single_process_training(tmp_path):
    result = subprocess.run([os.path.join(BIN, "train_fsdp_cpp"), "--world-size", "2",
                             "--steps", "8", "--trace", str(tmp_path / "trace")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 units" in result.stdout and ": match" in result.stdout, result.stdout
    assert result.stdout.count("peak held") == 2
    assert sorted(os.listdir(tmp_path / "trace")) == ["manifest.json", "rank-0.ringx",
                                                      "rank-1.ringx"]
