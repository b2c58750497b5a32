"""torch's own parallelism over ringx, checked against single-process training (not against
gloo, which has had averaging bugs under FSDP2): FSDP (FullyShardedDataParallel on the CPU),
FSDP2 (fully_shard on a CPU device mesh: plain, HSDP on a 2x2 mesh, mixed precision) and
DTensor redistribution between Shard, Replicate and Partial."""

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from harness import run_ranks

STEPS = 3
LR = 0.1


def _model():
    torch.manual_seed(0)  # the same start on every rank and in the reference
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def _batch(step, world):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(4 * world, 16, generator=g), torch.randn(4 * world, 4, generator=g)


def _reference(world):
    """The model after STEPS SGD steps on the whole batch in one process, as numpy arrays."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = _batch(step, world)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().numpy() for p in model.parameters()]


def _train(model, rank, world, data_rank, data_world):
    """STEPS SGD steps on this rank's share of the batch (rows data_rank of data_world)."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = _batch(step, world)
        rows = slice(data_rank * 4 * world // data_world, (data_rank + 1) * 4 * world // data_world)
        opt.zero_grad()
        nn.functional.mse_loss(model(x[rows]), y[rows]).backward()
        opt.step()


def _assert_every_rank_matches(results, expected, rtol=1e-5, atol=1e-6):
    for params in results:
        for got, want in zip(params, expected):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _full_parameters(model):
    from torch.distributed.tensor import DTensor

    return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().float().numpy()
            for p in model.parameters()]


def _fsdp1(rank, world):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(_model(), device_id=torch.device("cpu"), use_orig_params=True)
    _train(model, rank, world, rank, world)
    with FSDP.summon_full_params(model):
        return [p.detach().clone().numpy() for p in model.parameters()]


def test_torch_fsdp_over_ringx_matches_single_process_training():
    _assert_every_rank_matches(run_ranks(_fsdp1, 2), _reference(2))


def _fsdp2(rank, world, mesh_shape=None, mixed=False):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if mesh_shape is None:
        mesh = init_device_mesh("cpu", (world,))
    else:  # HSDP: replicate over dim 0, shard over dim 1; the gradient averages over all ranks
        mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=("replicate", "shard"))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if mixed else MixedPrecisionPolicy()
    model = _model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    _train(model, rank, world, rank, world)
    return _full_parameters(model)


def _fsdp2_plain(rank, world):
    return _fsdp2(rank, world)


def _fsdp2_hsdp(rank, world):
    return _fsdp2(rank, world, mesh_shape=(2, 2))


def _fsdp2_mixed(rank, world):
    return _fsdp2(rank, world, mixed=True)


def test_fsdp2_fully_shard_over_ringx_matches_single_process_training():
    _assert_every_rank_matches(run_ranks(_fsdp2_plain, 2), _reference(2))


def test_fsdp2_hsdp_on_a_2x2_mesh_matches_single_process_training():
    _assert_every_rank_matches(run_ranks(_fsdp2_hsdp, 4, timeout=240), _reference(4))


# torch 2.9's FSDP2 cannot run this policy on the CPU, over any backend: its backward fails with
# this error (seen with gloo and ringx alike; torch 2.11 and newer run it).
TORCH_MIXED_PRECISION_BUG = "Found dtype Float but expected BFloat16"


def test_fsdp2_mixed_precision_stays_close_to_single_process_training():
    outcomes = run_ranks(_fsdp2_mixed, 2, allow_errors=True)  # [(status, value), ...]
    if any(status == "error" and TORCH_MIXED_PRECISION_BUG in value for status, value in outcomes):
        # Torch's own failure, not ringx's, only if gloo fails the same way on this torch.
        gloo = run_ranks(_fsdp2_mixed, 2, allow_errors=True, backend="gloo")
        assert all(status == "error" and TORCH_MIXED_PRECISION_BUG in value
                   for status, value in gloo), gloo
        return
    assert all(status == "ok" for status, _ in outcomes), outcomes
    results = [value for _, value in outcomes]
    _assert_every_rank_matches(results, _reference(2), rtol=0.05, atol=0.02)  # bf16: close
    # ...and every rank holds the same model
    for a, b in zip(results[0], results[1]):
        np.testing.assert_array_equal(a, b)


def _dtensor_redistribute(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    full = torch.arange(4 * world * 3, dtype=torch.float32).reshape(4 * world, 3)
    out = {}
    sharded = distribute_tensor(full, mesh, [Shard(0)])
    out["shard_local"] = sharded.to_local().numpy()
    out["shard_to_replicate"] = sharded.redistribute(mesh, [Replicate()]).to_local().numpy()
    replicated = distribute_tensor(full, mesh, [Replicate()])
    out["replicate_to_shard1"] = replicated.redistribute(mesh, [Shard(1)]).to_local().numpy() \
        if full.shape[1] % world == 0 else None
    # Partial: every rank holds (rank + 1) * full; the sum is the real value.
    partial = DTensor.from_local(full * (rank + 1), mesh, [Partial()])
    out["partial_to_replicate"] = partial.redistribute(mesh, [Replicate()]).to_local().numpy()
    out["partial_to_shard"] = partial.redistribute(mesh, [Shard(0)]).to_local().numpy()
    avg = DTensor.from_local(full * (rank + 1), mesh, [Partial("avg")])
    out["partial_avg_to_replicate"] = avg.redistribute(mesh, [Replicate()]).to_local().numpy()
    return out


def test_dtensor_redistributes_between_shard_replicate_and_partial():
    world = 2
    full = np.arange(4 * world * 3, dtype=np.float32).reshape(4 * world, 3)
    total = sum(r + 1 for r in range(world))
    for rank, out in enumerate(run_ranks(_dtensor_redistribute, world)):
        np.testing.assert_array_equal(out["shard_local"], full[4 * rank:4 * rank + 4])
        np.testing.assert_array_equal(out["shard_to_replicate"], full)
        np.testing.assert_array_equal(out["partial_to_replicate"], full * total)
        np.testing.assert_array_equal(out["partial_to_shard"], full[4 * rank:4 * rank + 4] * total)
        np.testing.assert_allclose(out["partial_avg_to_replicate"], full * total / world)
