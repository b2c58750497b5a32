"""The c10d Backend API of torch 2.x that DTensor, FSDP2, functional collectives and the
coalescing manager call: tensor-coalesced all-gather and reduce-scatter, AVG and PREMUL_SUM,
coalescing, splitting, timeouts, sequence numbers, shutdown and abort."""

import datetime
import os
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from harness import ringx_shm_segments, run_ranks

CPU = torch.device("cpu")


def _backend():
    return dist.group.WORLD._get_backend(CPU)


def _coalesced_gathers_and_reductions(rank, world):
    pg = dist.group.WORLD
    out = {}
    # Tensor-coalesced calls straight on the process group, two dtypes in one call.
    ins = [torch.full((3,), float(rank)), torch.arange(4, dtype=torch.int64) + 10 * rank]
    outs = [torch.empty(3 * world), torch.empty(4 * world, dtype=torch.int64)]
    pg.allgather_into_tensor_coalesced(outs, ins).wait()
    out["ag"] = [o.numpy() for o in outs]
    rs_in = [torch.arange(2 * world, dtype=torch.float64) * (rank + 1),
             torch.ones(world, dtype=torch.bfloat16)]
    rs_out = [torch.empty(2, dtype=torch.float64), torch.empty(1, dtype=torch.bfloat16)]
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    pg.reduce_scatter_tensor_coalesced(rs_out, rs_in, opts).wait()
    out["rs"] = [rs_out[0].numpy(), rs_out[1].float().numpy()]
    out["rs_inputs_untouched"] = bool((rs_in[0] == torch.arange(2 * world) * (rank + 1)).all())
    # Functional collectives (what DTensor runs on).
    t = torch.full((2,), float(rank + 1))
    out["funcol_ag"] = funcol.all_gather_tensor(t, 0, pg).wait().numpy()
    out["funcol_rs"] = funcol.reduce_scatter_tensor(
        torch.arange(2 * world, dtype=torch.float32), "avg", 0, pg).wait().numpy()
    out["funcol_ar"] = funcol.all_reduce(t, "sum", pg).wait().numpy()
    # The coalescing manager over ringx's startCoalescing/endCoalescing.
    a, b = torch.full((2,), float(rank)), torch.full((5,), 2.0 * rank)
    with dist.distributed_c10d._coalescing_manager(pg, CPU, async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    out["coalesced"] = (a.numpy(), b.numpy())
    return out


def test_tensor_coalesced_collectives_functional_collectives_and_coalescing():
    world = 3
    for rank, out in enumerate(run_ranks(_coalesced_gathers_and_reductions, world)):
        np.testing.assert_array_equal(out["ag"][0], np.repeat(np.arange(world), 3))
        np.testing.assert_array_equal(
            out["ag"][1], np.concatenate([np.arange(4) + 10 * r for r in range(world)]))
        mean_factor = sum(r + 1 for r in range(world)) / world
        np.testing.assert_allclose(out["rs"][0], np.arange(2 * rank, 2 * rank + 2) * mean_factor)
        np.testing.assert_allclose(out["rs"][1], [1.0])
        assert out["rs_inputs_untouched"]
        np.testing.assert_array_equal(out["funcol_ag"], np.repeat(np.arange(1, world + 1), 2))
        np.testing.assert_allclose(out["funcol_rs"], [rank * 2, rank * 2 + 1])
        np.testing.assert_array_equal(out["funcol_ar"], [6.0, 6.0])
        np.testing.assert_array_equal(out["coalesced"][0], [3.0, 3.0])
        np.testing.assert_array_equal(out["coalesced"][1], [6.0] * 5)


def _premul_sum(rank, world):
    out = {}
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    out["allreduce_scalar"] = t.numpy()
    t = torch.full((4,), float(rank + 1), dtype=torch.bfloat16)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor([0.25])))
    out["allreduce_tensor"] = t.float().numpy()
    inp = torch.arange(2 * world, dtype=torch.float32)
    res = torch.empty(2)
    dist.reduce_scatter_tensor(res, inp, op=dist._make_nccl_premul_sum(2.0))
    out["reduce_scatter"] = res.numpy()
    out["reduce_scatter_input"] = inp.numpy()
    t = torch.full((3,), float(rank + 1))
    dist.reduce(t, dst=0, op=dist._make_nccl_premul_sum(3.0))
    out["reduce"] = t.numpy()
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist._make_nccl_premul_sum(2.0))
    except TypeError as e:  # a dtype the op does not fit
        out["int_error"] = str(e)
    return out


def test_premul_sum_scales_each_input_before_summing():
    world = 2
    for rank, out in enumerate(run_ranks(_premul_sum, world)):
        np.testing.assert_allclose(out["allreduce_scalar"], [0.5 * (1 + 2)] * 4)
        np.testing.assert_allclose(out["allreduce_tensor"], [0.25 * (1 + 2)] * 4)
        np.testing.assert_allclose(out["reduce_scatter"], [4.0 * (2 * rank), 4.0 * (2 * rank + 1)])
        np.testing.assert_array_equal(out["reduce_scatter_input"], np.arange(4))
        # reduce: the root gets the scaled sum, the other rank's tensor stays as it was
        expected = [3.0 * (1 + 2)] * 3 if rank == 0 else [float(rank + 1)] * 3
        np.testing.assert_allclose(out["reduce"], expected)
        assert "PREMUL_SUM needs a floating point" in out["int_error"]


def _batch_p2p_and_identity(rank, world):
    backend = _backend()
    right, left = (rank + 1) % world, (rank - 1) % world
    send = torch.full((5,), float(rank))
    recv = torch.empty(5)
    ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
    works = dist.batch_isend_irecv(ops)
    for w in works:
        w.wait()
    seq_before = backend._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(1))
    dist.barrier()
    return {
        "recv": recv.numpy(),
        "works": len(works),
        "supports_coalescing": backend.supports_coalescing,
        "supports_splitting": backend.supports_splitting,
        "backend_name": dist.get_backend(),
        "name": backend.name(),
        "seq_step": backend._get_sequence_number_for_group() - seq_before,
    }


def test_batch_isend_irecv_is_coalesced_and_the_backend_names_itself():
    world = 3
    for rank, out in enumerate(run_ranks(_batch_p2p_and_identity, world)):
        np.testing.assert_array_equal(out["recv"], [float((rank - 1) % world)] * 5)
        assert out["works"] == 1  # one Work for the whole coalesced batch
        assert out["supports_coalescing"] and out["supports_splitting"]
        assert out["backend_name"] == "ringx" and out["name"] == "ringx"
        assert out["seq_step"] == 2


def _split_and_subgroups(rank, world):
    world_pg = dist.group.WORLD
    out = {}
    # ProcessGroup.split_group: the C++ split that torch's split_group calls.
    evens = [r for r in range(world) if r % 2 == 0]
    split = world_pg.split_group(evens, timeout=datetime.timedelta(seconds=30),
                                 group_name=f"evens_{world}")
    if rank in evens:
        t = torch.full((2,), float(rank))
        split.allreduce([t]).wait()
        out["split"] = t.numpy()
        out["split_size"] = split.size()
        out["split_backend"] = split._get_backend(CPU).name()
    else:
        out["split"] = split
    # new_subgroups: consecutive pairs of ranks.
    mine, _ = dist.new_subgroups(group_size=2)
    t = torch.full((1,), float(rank))
    dist.all_reduce(t, group=mine)
    out["subgroup"] = (dist.get_process_group_ranks(mine), t.item())
    return out


def test_split_group_and_new_subgroups():
    world = 4
    for rank, out in enumerate(run_ranks(_split_and_subgroups, world)):
        if rank % 2 == 0:
            np.testing.assert_array_equal(out["split"], [0.0 + 2.0] * 2)
            assert out["split_size"] == 2 and out["split_backend"] == "ringx"
        else:
            assert out["split"] is None
        pair = [rank - rank % 2, rank - rank % 2 + 1]
        assert out["subgroup"] == (pair, float(sum(pair)))


def _timeouts(rank, world):
    backend = _backend()
    backend.set_timeout(datetime.timedelta(milliseconds=300))
    dist.all_reduce(torch.ones(1))  # both ranks take part: fine
    if rank == 0:
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(1))  # rank 1 never joins
        except RuntimeError as e:
            return ("error", str(e), time.monotonic() - start)
        return ("no error", "", 0)
    time.sleep(3)
    return ("slept", "", 0)


def test_set_timeout_applies_to_later_collectives():
    results = run_ranks(_timeouts, 2, allow_errors=True)
    status, (kind, message, seconds) = results[0]
    assert status == "ok" and kind == "error", results[0]
    assert "rank 1" in message and seconds < 2.5


def _shutdown_then_call(rank, world):
    pg = dist.group.WORLD
    backend = _backend()
    dist.all_reduce(torch.ones(1))
    dist.destroy_process_group()  # calls shutdown() on the backend
    try:
        backend.allreduce([torch.ones(1)])
    except RuntimeError as e:
        message = str(e)
    else:
        message = "no error"
    leftovers = ringx_shm_segments([os.getpid()])
    del pg
    # A group of one, so that the harness's own destroy_process_group has one to destroy.
    dist.init_process_group("ringx", store=dist.HashStore(), rank=0, world_size=1)
    return message, leftovers


def test_destroy_process_group_shuts_the_backend_down():
    for message, leftovers in run_ranks(_shutdown_then_call, 2):
        assert "after the group was shut down" in message
        assert leftovers == []


def _profiled_collectives(rank, world):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        dist.all_reduce(torch.ones(4))
        dist.broadcast(torch.ones(4), src=0)
    return sorted({e.name for e in prof.events() if e.name.startswith("ringx:")})


def test_a_profiler_sees_each_collective_under_ringx_s_name():
    # ringx gives c10d::Work its profiling title only while a profiler listens (work.cc)
    for names in run_ranks(_profiled_collectives, 2):
        assert names == ["ringx:all_reduce", "ringx:broadcast"]


def _abort_while_peer_waits(rank, world):
    dist.all_reduce(torch.ones(1))
    if rank == 0:
        time.sleep(0.5)
        dist.group.WORLD.abort()
        dist.init_process_group("ringx", store=dist.HashStore(), rank=0, world_size=1)
        return ("aborted", "", 0)
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1))
    except RuntimeError as e:
        return ("error", str(e), time.monotonic() - start)
    return ("no error", "", 0)


def test_abort_fails_the_peers_work_at_once():
    # The group timeout is 60 s: rank 1 must hear of the abort long before that.
    results = run_ranks(_abort_while_peer_waits, 2, allow_errors=True)
    status, (kind, message, seconds) = results[1]
    assert status == "ok" and kind == "error", results
    assert "rank 0" in message and seconds < 10, message


def _other_device_error(rank, world):
    # With devices=["cpu"], torch itself refuses other devices before ringx sees them; a
    # backend called directly says what is wrong.
    try:
        _backend().allreduce([torch.ones(1, device="meta")])
    except ValueError as e:
        return str(e)
    return "no error"


def test_a_tensor_on_another_device_gets_a_clear_error():
    for message in run_ranks(_other_device_error, 2):
        assert "ringx: allreduce: tensors is on meta, but ringx only handles CPU tensors" in message


def test_features_say_which_torch_release_features_this_build_has():
    import ringx
    features = ringx.features()
    assert features["torch"]["detail"] == f"built against torch {torch.__version__}"
    assert features["cuda"]["on"] == ringx._C.cuda_built()
    assert features["cuda"]["detail"].startswith("built" if features["cuda"]["on"] else "left out")
    # gather_single is ringx's where torch has it (2.14), and torch's call exists only there.
    assert features["gather_single"]["on"] == hasattr(dist, "gather_single")
    assert "came in torch 2.14" in features["gather_single"]["detail"]
    assert features["shrink_group"]["on"] == hasattr(dist, "shrink_group")
    assert features["reconfigure"]["on"] == hasattr(dist, "_reconfigure")


def _gather_single(rank, world):
    import warnings
    out = {}
    root = world - 1
    t = torch.arange(3, dtype=torch.float64) + 10 * rank
    whole = torch.empty(world, 3, dtype=torch.float64) if rank == root else None
    dist.gather_single(t, whole, dst=root)
    out["stacked"] = whole.numpy() if whole is not None else None
    # torch's older name for it (deprecated), into a flat tensor, asynchronous.
    flat = torch.empty(3 * world, dtype=torch.float64) if rank == 0 else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.gather_into_tensor(t, flat, dst=0, async_op=True).wait()
    out["flat"] = flat.numpy() if flat is not None else None
    out["bad_size"] = None
    if rank == 0:  # refused before anything is sent: the other ranks need not take part
        try:
            dist.gather_single(t, torch.empty(world + 1, 3, dtype=torch.float64), dst=0)
        except (ValueError, RuntimeError) as e:
            out["bad_size"] = str(e)
    return out


@pytest.mark.skipif(not hasattr(dist, "gather_single"),
                    reason=f"torch {torch.__version__} has no dist.gather_single (torch 2.14)")
def test_gather_single_fills_one_tensor_on_the_root():
    world = 3
    expected = np.stack([np.arange(3) + 10 * r for r in range(world)])
    for rank, out in enumerate(run_ranks(_gather_single, world)):
        if rank == world - 1:
            np.testing.assert_array_equal(out["stacked"], expected)
        if rank == 0:
            np.testing.assert_array_equal(out["flat"], expected.reshape(-1))
            assert "must have world_size (3) times the elements" in out["bad_size"]
