"""Collectives issued from Future callbacks, and every DDP comm hook torch ships, over ringx.

A Work's Future completes inside the collective's job, so its callbacks run there; a
collective they issue on the same group runs in place, right after the one that completed,
on every rank (backend/device/work_queue.h). Before that, such a callback waited for a
collective queued behind itself: torch's PowerSGD hook hung at its first compressed step.
Each hook trains the same model over gloo and over ringx, and the two must agree exactly
(two ranks: every sum has two terms, the same on both backends), and with single-process
training within what the hook's compression loses; ZeRO's overlap hooks (which torch
refuses on gloo) against single-process training.
"""

import functools

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import ringx

from harness import run_ranks

BATCH = 4  # per rank
STEPS = 6


# ---- the minimal patterns --------------------------------------------------------------------


def _callback_patterns(rank, world):
    r = rank + 1
    total = world * (world + 1) / 2  # the sum of every rank's r
    before = ringx.calls()

    # 1. then() + an asynchronous collective waited on inside the callback.
    def then_wait(fut):
        u = torch.full((4,), float(r))
        dist.all_reduce(u, async_op=True).wait()
        return fut.value()[0] + u

    out = dist.all_reduce(torch.full((4,), float(r)), async_op=True).get_future().then(
        then_wait).wait()
    assert torch.equal(out, torch.full((4,), 2 * total)), out

    # 2. then() + a synchronous collective (and a barrier).
    def then_sync(fut):
        u = torch.full((3,), float(r))
        dist.all_reduce(u)
        dist.barrier()
        return u

    out = dist.all_reduce(torch.ones(8), async_op=True).get_future().then(then_sync).wait()
    assert torch.equal(out, torch.full((3,), total)), out

    # 3. A callback that returns the Future of a collective it issued.
    def returns_future(fut):
        u = torch.full((2,), float(r))
        return dist.all_reduce(u, async_op=True).get_future()

    inner = dist.all_reduce(torch.ones(1), async_op=True).get_future().then(
        returns_future).wait()
    assert torch.equal(inner.wait()[0], torch.full((2,), total))

    # 4. Callbacks nested two deep: the callback's collective has a callback of its own.
    def outer(fut):
        u = torch.full((5,), float(r))

        def deeper(f):
            v = torch.full((5,), 10.0 * r)
            dist.all_reduce(v)
            return f.value()[0] + v

        return dist.all_reduce(u, async_op=True).get_future().then(deeper).wait()

    out = dist.all_reduce(torch.ones(5), async_op=True).get_future().then(outer).wait()
    assert torch.equal(out, torch.full((5,), 11 * total)), out

    # 5. A callback that waits for a collective issued after its own but before it ran: that
    # one is queued behind the callback, and runs there, in place, in issue order.
    first = dist.all_reduce(torch.ones(3), async_op=True)
    second_in = torch.full((3,), float(r))
    second = dist.all_reduce(second_in, async_op=True)
    waited = first.get_future().then(lambda fut: (second.wait(), second_in.clone())[1]).wait()
    assert torch.equal(waited, torch.full((3,), total))

    # Every rank ran the same collectives in the same order: one more, checked, must agree.
    seq = torch.tensor([float(dist.get_rank())])
    dist.all_reduce(seq)
    after = ringx.calls()
    in_place = after["in_place"] - before["in_place"]
    return in_place


def test_collectives_issued_from_future_callbacks_run_on_every_rank():
    in_place = run_ranks(_callback_patterns, 2, timeout=90, group_timeout_s=30)
    # Patterns 1, 2 (allreduce + barrier), 4 (two) ran in place on both ranks, unless a
    # collective had completed before then() was called (the callback then runs on the
    # caller). Pattern 3's is async: in place too. So at least one ran in place somewhere.
    assert all(0 <= n <= 7 for n in in_place), in_place
    assert sum(in_place) >= 1, in_place


def _callback_then_collective_on_three_ranks(rank, world):
    # Many rounds with callbacks racing the main thread's next collectives: the order
    # every rank runs must still be the same (a mismatch is an error, a hang a timeout).
    out = []
    for i in range(40):
        t = torch.full((64,), float(rank + i))

        def cb(fut, i=i):
            u = torch.full((16,), float(i))
            dist.all_reduce(u)
            return u

        fut = dist.all_reduce(t, async_op=True).get_future().then(cb)
        w = dist.all_reduce(torch.ones(32), async_op=True)
        out.append(fut.wait()[0].item())
        w.wait()
    return out


def test_callbacks_racing_the_next_collectives_keep_one_order_on_three_ranks():
    results = run_ranks(_callback_then_collective_on_three_ranks, 3, timeout=120,
                        group_timeout_s=30)
    for r in results:
        assert r == [3.0 * i for i in range(40)], r


# ---- torch's DDP comm hooks --------------------------------------------------------------------


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(),
                         nn.Linear(8, 4))


def data(world, step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(world * BATCH, 8, generator=g), torch.randn(world * BATCH, 4, generator=g)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _register(hook, ddp, world):
    """Registers `hook` on `ddp` the way its documentation says to; returns the optimizer."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as local_sgd
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

    sgd = functools.partial(torch.optim.SGD, lr=0.05)
    if hook == "allreduce":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif hook == "fp16_compress":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "bf16_compress":
        # DDP refuses the hook by its name on a torch without CUDA and NCCL (whatever the
        # backend); the same function under another name is taken.
        def bf16_hook(state, bucket):
            return default_hooks.bf16_compress_hook(state, bucket)

        ddp.register_comm_hook(None, bf16_hook)
    elif hook in ("powerSGD", "powerSGD_lossy"):
        # Full rank (each matrix's smaller side) is exact but for rounding; rank 1 is not.
        state = powersgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=8 if hook == "powerSGD" else 1,
            start_powerSGD_iter=2, min_compression_rate=0, use_error_feedback=True,
            warm_start=True, random_seed=0)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    elif hook == "batched_powerSGD":
        # torch's batched hook hands _orthogonalize one 2-D matrix, which asserts a batch
        # (3-D) since torch 2.0 (pytorch#75157): it fails the same on every backend. Give it
        # the batch of one it wants, so that its communication runs here.
        if not getattr(powersgd._orthogonalize, "accepts_2d", False):
            batch_only = powersgd._orthogonalize

            def orthogonalize(matrices, epsilon=0):
                if matrices.dim() == 2:
                    return batch_only(matrices.unsqueeze(0), epsilon)
                return batch_only(matrices, epsilon)

            orthogonalize.accepts_2d = True
            powersgd._orthogonalize = orthogonalize
        # One bucket of 316 values: an 18 x 18 matrix, so rank 18 is exact.
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=18,
                                       start_powerSGD_iter=2, min_compression_rate=0,
                                       random_seed=0)
        ddp.register_comm_hook(state, powersgd.batched_powerSGD_hook)
    elif hook == "post_localSGD":
        from torch.distributed.algorithms.model_averaging import averagers
        from torch.distributed.optim import PostLocalSGDOptimizer

        # Local groups of the whole world (a ringx subgroup), and model averaging every 2
        # steps: the same updates as plain DDP, through the hook's subgroup path.
        subgroup, _ = dist.new_subgroups(group_size=world)
        state = local_sgd.PostLocalSGDState(process_group=None, subgroup=subgroup,
                                            start_localSGD_iter=2)
        ddp.register_comm_hook(state, local_sgd.post_localSGD_hook)
        return PostLocalSGDOptimizer(
            optim=sgd(ddp.parameters()),
            averager=averagers.PeriodicModelAverager(period=2, warmup_steps=2))
    else:
        raise ValueError(hook)
    return sgd(ddp.parameters())


# Each hook's tolerance against single-process training (relative, on the parameters): what
# its compression loses. None: lossy by design, compared with gloo only.
SINGLE_PROCESS_TOLERANCE = {
    "allreduce": 1e-6,
    "fp16_compress": 2e-3,
    "bf16_compress": 2e-2,
    "powerSGD": 1e-4,
    "powerSGD_lossy": None,
    "batched_powerSGD": 1e-4,
    "post_localSGD": 1e-6,
}


def _train_with_hook(rank, world, hook, bucket_cap_mb):
    model = make_model()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
    opt = _register(hook, ddp, world)
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    steps = []
    for step in range(STEPS):
        x, y = data(world, step)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
        opt.step()
        steps.append(flat(model).numpy().copy())
    return steps


def single_process(world, warmup=0):
    """The parameters after each step of training on every rank's data at once; the first
    `warmup` steps do not update (as ZeRO's overlap does while DDP settles its buckets)."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = []
    for step in range(STEPS):
        x, y = data(world, step)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        if step >= warmup:
            opt.step()
        steps.append(flat(model).clone())
    return steps


@pytest.mark.parametrize("hook", sorted(SINGLE_PROCESS_TOLERANCE))
def test_torch_ddp_comm_hook_matches_gloo_and_single_process_training(hook):
    world = 2
    # Against gloo: one bucket. With several, gloo's PowerSGD times out (its callbacks issue
    # collectives in an order that differs between ranks, and gloo pairs them by tags given
    # in issue order), while ringx runs them in place, in one order.
    one_bucket = functools.partial(_train_with_hook, hook=hook, bucket_cap_mb=25)
    ringx_steps = run_ranks(one_bucket, world, timeout=150, group_timeout_s=60)
    gloo_steps = run_ranks(one_bucket, world, timeout=150, group_timeout_s=60, backend="gloo")
    for step in range(STEPS):
        ours, theirs = ringx_steps[0][step], gloo_steps[0][step]
        assert (ours == ringx_steps[1][step]).all(), (hook, step)
        assert (ours == theirs).all(), (hook, step, abs(ours - theirs).max())
    # Against single-process training: several buckets (each hook runs per bucket, and the
    # callbacks of one interleave with the next buckets' collectives), except batched
    # PowerSGD, whose exact rank needs one bucket.
    if hook != "batched_powerSGD":
        many = functools.partial(_train_with_hook, hook=hook, bucket_cap_mb=0.0005)
        ringx_steps = run_ranks(many, world, timeout=150, group_timeout_s=60)
    reference = single_process(world)
    tolerance = SINGLE_PROCESS_TOLERANCE[hook]
    for step in range(STEPS):
        ours = torch.from_numpy(ringx_steps[0][step])
        assert torch.equal(ours, torch.from_numpy(ringx_steps[1][step])), (hook, step)
        if tolerance is not None:
            error = ((ours - reference[step]).norm() / reference[step].norm()).item()
            assert error <= tolerance, (hook, step, error)
    # Every hook, the lossy one too, trained the model.
    assert torch.isfinite(ours).all()
    assert not torch.equal(ours, flat(make_model()))


def _train_zero_overlap(rank, world, interleaved):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import (
        hook_with_zero_step, hook_with_zero_step_interleaved)
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = make_model()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0005)
    zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD,
                                   overlap_with_ddp=True, lr=0.05)
    wrap = hook_with_zero_step_interleaved if interleaved else hook_with_zero_step
    ddp.register_comm_hook(None, wrap(default_hooks.allreduce_hook, ddp, zero))
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    steps = []
    for step in range(STEPS):
        x, y = data(world, step)
        ddp.zero_grad()
        nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()  # the hook steps
        steps.append(flat(model).numpy().copy())
    return steps


@pytest.mark.parametrize("interleaved", [False, True])
def test_zero_overlap_hooks_match_single_process_training(interleaved):
    # torch refuses these hooks on gloo ("may meet hangs"): the anchor is single-process
    # training, whose first two steps do not update (ZeRO waits for DDP's buckets to settle).
    fn = functools.partial(_train_zero_overlap, interleaved=interleaved)
    steps = run_ranks(fn, 2, timeout=150, group_timeout_s=60)
    reference = single_process(2, warmup=2)
    for step in range(STEPS):
        ours = torch.from_numpy(steps[0][step])
        assert torch.equal(ours, torch.from_numpy(steps[1][step])), (interleaved, step)
        error = ((ours - reference[step]).norm() / reference[step].norm()).item()
        assert error <= 1e-6, (interleaved, step, error)
    assert not torch.equal(ours, flat(make_model()))  # it trained
