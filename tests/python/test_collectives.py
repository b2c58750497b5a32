"""Every c10d collective through torch.distributed on backend="ringx", multi-process."""

import functools
import json

import pytest
import torch
import torch.distributed as dist

from harness import reduce_reference, run_ranks

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
          torch.complex128, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.bool]


def _allreduce_every_dtype_and_op(rank, world):
    ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT,
           "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND,
           "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}
    checked = []
    for dtype in DTYPES:
        for name, op in ops.items():
            if dtype.is_complex and name != "SUM":
                continue  # torch.distributed itself allows only SUM on complex tensors
            if (dtype.is_floating_point or dtype.is_complex) and name in ("BAND", "BOR", "BXOR"):
                continue
            for n in (1, 7, 100003):  # direct and ring algorithms
                values = [((torch.arange(n) * 3 + r) % 5 + 1) for r in range(world)]
                inputs = [v.to(dtype) if dtype != torch.bool else (v % 2 == 0) for v in values]
                t = inputs[rank].clone()
                dist.all_reduce(t, op=op)
                expected = reduce_reference(inputs, name, world)
                assert torch.equal(t, expected), (dtype, name, n)
                checked.append((str(dtype), name))
    return len(set(checked))


def test_allreduce_every_dtype_and_op():
    counts = run_ranks(_allreduce_every_dtype_and_op, 3)
    assert counts[0] == counts[1] == counts[2] > 50


def _allreduce_avg_and_noncontiguous(rank, world):
    t = torch.full((4, 6), float(rank + 1))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.allclose(t, torch.full((4, 6), (world + 1) / 2))
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (rank + 1)
    view = base.t()  # non-contiguous
    assert not view.is_contiguous()
    dist.all_reduce(view)
    total = sum(r + 1 for r in range(world))
    assert torch.equal(base, torch.arange(24, dtype=torch.float32).reshape(4, 6) * total)
    return True


def test_allreduce_avg_and_noncontiguous():
    run_ranks(_allreduce_avg_and_noncontiguous, 2)


def _avg_is_sum_divided_by_torch(rank, world):
    """AVG divides inside the collective (the ring's last reducing step, or right after the
    small algorithms): its bits must be those of the same SUM divided by torch, for every
    floating dtype, in allreduce (direct and ring sizes, a coalesced list) and reduce_scatter."""
    checked = 0
    # Complex tensors keep torch's division after the collective (torch divides those through
    # a reciprocal, in a way that depends on where an element falls in its vector loop).
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for n in (5, 3 * 40009):  # the direct algorithm, the ring (in segments)
            gen = torch.Generator().manual_seed(1000 * rank + n)
            base = torch.randn(n, generator=gen, dtype=torch.float64) * 100
            x = base.to(dtype)
            summed, averaged = x.clone(), x.clone()
            dist.all_reduce(summed, op=dist.ReduceOp.SUM)
            dist.all_reduce(averaged, op=dist.ReduceOp.AVG)
            assert torch.equal(averaged, summed.div(world)), (dtype, n)
            parts = [x[: n // 3].clone(), x[n // 3:].clone()]
            dist.all_reduce_coalesced(parts, op=dist.ReduceOp.AVG)
            assert torch.equal(torch.cat(parts), summed.div(world)), ("coalesced", dtype, n)
            share = n // world
            out_sum = torch.empty(share, dtype=dtype)
            out_avg = torch.empty(share, dtype=dtype)
            whole = x[: share * world].contiguous()
            dist.reduce_scatter_tensor(out_sum, whole, op=dist.ReduceOp.SUM)
            dist.reduce_scatter_tensor(out_avg, whole, op=dist.ReduceOp.AVG)
            assert torch.equal(out_avg, out_sum.div(world)), ("reduce_scatter", dtype, n)
            checked += 1
    return checked


@pytest.mark.parametrize("world", [2, 3])
def test_avg_is_sum_divided_by_torch(world):
    assert run_ranks(_avg_is_sum_divided_by_torch, world) == [8] * world


def _async_work_and_future(rank, world):
    t = torch.ones(1 << 16) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    assert work.is_completed() and work.is_success()
    value = fut.wait()
    assert isinstance(value, list) and value[0] is not None
    assert torch.equal(value[0], t)
    chained = dist.all_reduce(torch.ones(3), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.full((3,), 2.0 * world))
    # Many in flight: they run in issue order on the communication thread.
    works, tensors = [], []
    for i in range(20):
        x = torch.full((100 + i,), float(i))
        tensors.append(x)
        works.append(dist.all_reduce(x, async_op=True))
    for i, (w, x) in enumerate(zip(works, tensors)):
        w.wait()
        assert torch.equal(x, torch.full((100 + i,), float(i * world)))
    return True


def test_async_work_and_future():
    run_ranks(_async_work_and_future, 3)


def _broadcast_reduce_gather_scatter(rank, world):
    for root in range(world):
        t = torch.arange(3_000_001, dtype=torch.float32) if rank == root else torch.zeros(3_000_001)
        dist.broadcast(t, root)
        assert torch.equal(t, torch.arange(3_000_001, dtype=torch.float32))

        t = torch.full((1000,), float(rank + 1))
        dist.reduce(t, root, op=dist.ReduceOp.MAX)
        if rank == root:
            assert torch.equal(t, torch.full((1000,), float(world)))
        else:
            assert torch.equal(t, torch.full((1000,), float(rank + 1)))

        mine = torch.full((5,), float(rank))
        gathered = [torch.zeros(5) for _ in range(world)] if rank == root else None
        dist.gather(mine, gathered, dst=root)
        if rank == root:
            assert all(torch.equal(g, torch.full((5,), float(i))) for i, g in enumerate(gathered))

        out = torch.zeros(7, dtype=torch.int64)
        pieces = [torch.full((7,), i * 10, dtype=torch.int64) for i in range(world)]
        dist.scatter(out, pieces if rank == root else None, src=root)
        assert torch.equal(out, torch.full((7,), rank * 10, dtype=torch.int64))
    return True


def test_broadcast_reduce_gather_scatter():
    run_ranks(_broadcast_reduce_gather_scatter, 3)


def _gathers_and_scatters(rank, world):
    outs = [torch.empty(6, dtype=torch.float16) for _ in range(world)]
    dist.all_gather(outs, torch.full((6,), rank, dtype=torch.float16))
    assert all(torch.equal(o, torch.full((6,), i, dtype=torch.float16)) for i, o in enumerate(outs))

    flat = torch.empty(world * 4, dtype=torch.int32)
    dist._all_gather_base(flat, torch.full((4,), rank, dtype=torch.int32))
    assert torch.equal(flat, torch.arange(world, dtype=torch.int32).repeat_interleave(4))

    inputs = [torch.full((2,), float(rank)), torch.full((3, 2), float(rank)).t()]
    lists = [[torch.empty(2), torch.empty(2, 3)] for _ in range(world)]
    dist.all_gather_coalesced(lists, inputs)
    for r, (a, b) in enumerate(lists):
        assert torch.equal(a, torch.full((2,), float(r)))
        assert torch.equal(b, torch.full((2, 3), float(r)))

    out = torch.empty(5)
    dist.reduce_scatter(out, [torch.full((5,), float(rank * 10 + i)) for i in range(world)])
    assert torch.equal(out, torch.full((5,), float(sum(r * 10 + rank for r in range(world)))))

    out = torch.empty(3)
    dist._reduce_scatter_base(out, torch.arange(world * 3, dtype=torch.float32))
    assert torch.equal(out, torch.arange(rank * 3, rank * 3 + 3, dtype=torch.float32) * world)

    tensors = [torch.full((4,), float(rank)), torch.full((2, 3), float(rank)).t()]
    dist.all_reduce_coalesced(tensors)
    total = float(sum(range(world)))
    assert torch.equal(tensors[0], torch.full((4,), total))
    assert torch.equal(tensors[1], torch.full((3, 2), total))
    return True


def test_gathers_and_scatters():
    run_ranks(_gathers_and_scatters, 3)


def _alltoall(rank, world):
    # Uneven splits: rank r sends (r + p + 1) rows to rank p.
    send_splits = [rank + p + 1 for p in range(world)]
    recv_splits = [p + rank + 1 for p in range(world)]
    inp = torch.cat([torch.full((s, 2), float(rank * 100 + p)) for p, s in enumerate(send_splits)])
    out = torch.empty(sum(recv_splits), 2)
    dist.all_to_all_single(out, inp, recv_splits, send_splits)
    expected = torch.cat([torch.full((s, 2), float(p * 100 + rank)) for p, s in enumerate(recv_splits)])
    assert torch.equal(out, expected)

    even_in = torch.arange(world * 2, dtype=torch.float32) + rank * 1000
    even_out = torch.empty(world * 2)
    dist.all_to_all_single(even_out, even_in)
    expected = torch.cat([torch.arange(rank * 2, rank * 2 + 2, dtype=torch.float32) + p * 1000
                          for p in range(world)])
    assert torch.equal(even_out, expected)

    ins = [torch.full((p + 1,), float(rank)) for p in range(world)]
    outs = [torch.empty(rank + 1) for _ in range(world)]
    dist.all_to_all(outs, ins)
    assert all(torch.equal(o, torch.full((rank + 1,), float(p))) for p, o in enumerate(outs))
    return True


def test_alltoall():
    run_ranks(_alltoall, 3)


def _point_to_point(rank, world):
    if rank == 0:
        for dst in range(1, world):
            dist.send(torch.full((10,), float(dst)), dst, tag=dst)
        # any-source receives report who sent
        sources = set()
        for _ in range(world - 1):
            t = torch.empty(3)
            src = dist.recv(t)
            assert torch.equal(t, torch.full((3,), float(src)))
            sources.add(src)
        assert sources == set(range(1, world))
    else:
        t = torch.empty(10)
        dist.recv(t, 0, tag=rank)
        assert torch.equal(t, torch.full((10,), float(rank)))
        dist.send(torch.full((3,), float(rank)), 0)
    # isend/irecv both ways at once, large enough to fill socket buffers
    peer = (rank + 1) % world
    prev = (rank - 1) % world
    out = torch.full((4 << 20,), float(rank))
    inc = torch.empty(4 << 20)
    # A tag of its own: rank 0 may still be in its any-source receives above,
    # which must not match this message (they match any sender with tag 0).
    reqs = [dist.isend(out, peer, tag=7), dist.irecv(inc, prev, tag=7)]
    for r in reqs:
        r.wait()
    assert torch.equal(inc, torch.full((4 << 20,), float(prev)))
    ops = [dist.P2POp(dist.isend, torch.full((2,), float(rank)), peer),
           dist.P2POp(dist.irecv, inc[:2], prev)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    assert torch.equal(inc[:2], torch.full((2,), float(prev)))
    dist.barrier()
    return True


def test_point_to_point():
    run_ranks(_point_to_point, 3)


def _broadcast_coalesced(rank, world):
    import ringx
    tensors = [torch.full((1000,), float(rank)), torch.full((10,), rank, dtype=torch.int64),
               torch.full((300_000,), float(rank)), torch.full((3, 3), float(rank)).t()]
    ringx.broadcast_coalesced(tensors, src=1, bucket_bytes=4096)
    assert torch.equal(tensors[0], torch.ones(1000))
    assert torch.equal(tensors[1], torch.ones(10, dtype=torch.int64))
    assert torch.equal(tensors[2], torch.ones(300_000))
    assert torch.equal(tensors[3], torch.ones(3, 3))
    with pytest.raises(ValueError):
        ringx.broadcast_coalesced(tensors, src=0, bucket_bytes=0)
    return True


def test_broadcast_coalesced():
    run_ranks(_broadcast_coalesced, 3)


def _backend_name(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    return pg.getBackendName() if hasattr(pg, "getBackendName") else str(dist.get_backend())


def test_backend_name_is_ringx():
    names = run_ranks(_backend_name, 1)
    assert names[0].lower() == "ringx"


def _object_collectives(rank, world):
    # The pickling collectives of torch.distributed are built on broadcast/allgather/
    # gather/scatter; they run unchanged on ringx.
    objs = [{"rank": rank, "payload": list(range(rank + 3))}]
    gathered = [None] * world
    dist.all_gather_object(gathered, objs[0])
    assert [g["rank"] for g in gathered] == list(range(world))
    lst = [f"from root {i}" for i in range(3)] if rank == 1 else [None] * 3
    dist.broadcast_object_list(lst, src=1)
    assert lst == [f"from root {i}" for i in range(3)]
    out = [None] * world if rank == 0 else None
    dist.gather_object(("obj", rank), out, dst=0)
    if rank == 0:
        assert out == [("obj", r) for r in range(world)]
    got = [None]
    dist.scatter_object_list(got, [f"piece {i}" for i in range(world)] if rank == 2 else None,
                             src=2)
    assert got == [f"piece {rank}"]
    return True


def test_object_collectives():
    run_ranks(_object_collectives, 3)


# Every collective that takes a ReduceOp, asked AVG or PREMUL_SUM (which ringx runs as a SUM
# with a scale around it), then one MAX: (name, reduce_op, premul_factor) as recorded, by seq.
ASKED_OPS = [("reduce_scatter", "AVG", None), ("reduce_scatter", "PREMUL_SUM", 0.5),
             ("allreduce", "AVG", None), ("allreduce", "PREMUL_SUM", 0.25),
             ("allreduce", "AVG", None), ("reduce", "PREMUL_SUM", 2.0),
             ("reduce_scatter", "AVG", None), ("reduce_scatter", "PREMUL_SUM", 0.5),
             ("reduce_scatter", "PREMUL_SUM", 0.5), ("allreduce", "MAX", None)]


def asked_ops(dump_dir, rank, world):
    import ringx
    avg, pg = dist.ReduceOp.AVG, dist.group.WORLD
    x, out = torch.arange(2.0 * world) + rank, torch.empty(2)
    dist.reduce_scatter_tensor(out, x, op=avg)  # _reduce_scatter_base
    dist.reduce_scatter_tensor(out, x, op=dist._make_nccl_premul_sum(0.5))
    values = {"rs_premul": out.tolist()}
    t = torch.ones(4)
    dist.all_reduce(t, op=avg)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor([0.25])))  # a tensor factor
    values["ar_premul"] = t.tolist()
    opts = dist.AllreduceCoalescedOptions()
    opts.reduceOp = avg
    pg.allreduce_coalesced([torch.ones(2), torch.ones(3)], opts).wait()
    dist.reduce(torch.ones(2), dst=0, op=dist._make_nccl_premul_sum(2.0))
    dist.reduce_scatter(out, [torch.ones(2)] * world, op=avg)
    rs = dist.ReduceScatterOptions()
    rs.reduceOp = dist._make_nccl_premul_sum(0.5)
    pg.reduce_scatter_tensor_coalesced([torch.empty(1), torch.empty(2)],
                                       [torch.ones(world), torch.ones(2 * world)], rs).wait()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    with open(ringx.dump_flight_recorder(dump_dir)) as f:
        return values, json.load(f)


def test_avg_and_premul_sum_give_their_values_and_are_recorded_as_asked(tmp_path):
    """AVG and PREMUL_SUM (FSDP2's reduce-scatters; a factor given as a number or a tensor) run
    as a SUM with a scale around it: the values are the asked op's, and the flight recorder
    names the asked op, PREMUL_SUM with its factor, not the SUM that ran it (test_trace.py
    checks the trace's events of the same job)."""
    results = run_ranks(functools.partial(asked_ops, str(tmp_path / "dumps")), 2)
    for rank, (values, dump) in enumerate(results):
        assert values["rs_premul"] == [0.5 * (2 * (2 * rank + i) + 1) for i in range(2)]
        assert values["ar_premul"] == [0.5] * 4  # (1 + 1) * 0.25
        (world,) = dump["groups"]
        assert [(e["op"], e["reduce_op"], e.get("premul_factor")) for e in world["entries"]] == \
            ASKED_OPS
