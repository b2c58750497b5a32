"""The randomized soak (soak.py) at CI size: a few thousand collectives of every kind, size
and dtype on three ranks, over overlapping subgroups with async work in flight, tracing on
and a live client attached. Each rank checks every result against its own reference as it
goes (a wrong one fails the run naming step, kind, group, dtype and size); here we check
what only the whole run shows: RSS stayed flat, and the live stream and the trace files
both hold every collective every rank ran. `make soak` is the long form, which CI does not
run."""

import collections
import os
import random

import pytest
import torch

import soak

# Well above what a healthy run of this size grows (1 to 4 MiB: heap fragmentation, the
# live server's backlog filling), well below what a leaked buffer per collective would add.
RSS_BOUND_MIB = 16
# What malloc has handed out and not had back: flat but for the live backlog (< 1 MiB here).
IN_USE_BOUND_MIB = 8


@pytest.fixture(scope="module")
def ci_soak(tmp_path_factory):
    trace_dir = tmp_path_factory.mktemp("soak") / "trace"
    figures = soak.run_soak(world_size=3, collectives=2500, seed=1, trace_dir=str(trace_dir))
    print("\n" + soak.summary(figures))
    return figures, trace_dir


def test_every_rank_ran_every_kind_sync_and_async_and_every_result_matched(ci_soak):
    figures, _ = ci_soak
    # Reaching here means no rank raised SoakMismatch: every checked result was exact.
    assert len(figures) == 3
    for f in figures:
        assert f["collectives"] > 1500, f  # each rank is in most steps' groups
        assert set(f["kinds"]) == set(soak.KINDS), f["kinds"]
        assert 0.3 < f["async"] / f["collectives"] < 0.9, f
        assert f["max_in_flight"] >= 3, f  # several works really were in flight at once
        assert f["bytes"] > 10 * soak.MiB, f


def test_rss_stays_flat_after_warm_up(ci_soak):
    figures, _ = ci_soak
    problems = [p for p in soak.check_figures(figures, RSS_BOUND_MIB) if "RSS" in p]
    assert not problems, "\n".join(problems)
    for f in figures:
        # prime() touched every shared-memory ring up front; none is mapped later.
        assert f["shmem_end"] == f["shmem_start"], f
        if f["in_use_start"] is not None:  # glibc
            grown = (f["in_use_end"] - f["in_use_start"]) / soak.MiB
            assert grown < IN_USE_BOUND_MIB, (f["rank"], grown)


def test_the_live_client_received_every_collective_of_every_rank(ci_soak):
    figures, _ = ci_soak
    live = figures[0]["live"]
    problems = [p for p in soak.check_figures(figures, RSS_BOUND_MIB) if "live" in p]
    assert not problems, "\n".join(problems)
    assert live["bytes"] > 0 and live["events"] > sum(live["expected_collectives"])
    assert sorted(live["per_rank"]) == [0, 1, 2]


def test_the_trace_files_hold_the_same_collectives_as_the_live_stream(ci_soak):
    """The files and the live socket carry the same codec bytes: decoding each rank's file
    with the live client's decoder must find the very spans the client counted."""
    figures, trace_dir = ci_soak
    live = figures[0]["live"]
    for rank in range(3):
        counter = soak.StreamCounter(f"rank-{rank}.ringx")
        with open(os.path.join(trace_dir, f"rank-{rank}.ringx"), "rb") as f:
            counter.feed(f.read())
        assert counter.rank == rank
        # The files also hold the closing barrier, run after the client detached.
        streamed = collections.Counter(live["per_rank"][rank]["collectives"])
        streamed["barrier"] += 1
        assert counter.collectives == streamed
        assert sum(counter.collectives.values()) == live["expected_collectives"][rank] + 1


def test_the_schedule_is_the_seeds_alone():
    """Ranks agree on what to issue only because the same seed draws the same steps."""
    groups = [("world", [0, 1, 2])] + [("", m) for m in soak.group_layouts(3)]
    rng_a, rng_b = random.Random(5), random.Random(5)
    a = [soak.draw_step(rng_a, i, groups, 1000) for i in range(300)]
    b = [soak.draw_step(rng_b, i, groups, 1000) for i in range(300)]
    assert a == b
    assert {s.kind for s in a} == set(soak.KINDS)
    assert {s.n for s in a} >= {0, 1}


def test_a_wrong_result_is_reported_with_everything_needed_to_replay_it():
    step = soak.Step(index=17, kind="all_reduce", group="g1:02", members=[0, 2],
                     dtype=torch.bfloat16, n=5, op="SUM", root=0, peer=2, splits=None,
                     async_op=True)
    expected = soak.reduce_reference(
        [soak.reduced_values(m, 17, 5, torch.bfloat16, "SUM") for m in (0, 2)], "SUM", 2)
    wrong = expected.clone()
    wrong[3] += 1
    with pytest.raises(soak.SoakMismatch) as failure:
        soak.check(step, 2, "tensor", wrong, expected)
    message = str(failure.value)
    for part in ("step 17", "all_reduce", "g1:02 [0, 2]", "bfloat16", "n=5", "op=SUM",
                 "rank 2", "first at [3]"):
        assert part in message, message
    soak.check(step, 2, "tensor", expected.clone(), expected)  # equal: no error


def test_small_integer_inputs_reduce_exactly_in_every_dtype():
    """The premise of checking with torch.equal: the references themselves are exact, the
    same as the float64 computation of the same reduction, on the largest soak worlds."""
    world = 8
    for dtype in soak.DTYPES:
        ops = soak.FLOAT_OPS if dtype.is_floating_point else soak.INT_OPS
        for op in ops:
            if op in ("AVG",) or (op == "PRODUCT" and dtype in (torch.int8, torch.uint8)):
                continue  # AVG rounds like ringx's own div_; 2**8 wraps a byte, by design
            inputs = [soak.reduced_values(r, 3, 64, dtype, op) for r in range(world)]
            exact = soak.reduce_reference([t.to(torch.int64 if op in ("BAND", "BOR", "BXOR")
                                                 else torch.float64) for t in inputs], op, world)
            got = soak.reduce_reference(inputs, op, world)
            assert torch.equal(got.to(exact.dtype), exact), (dtype, op)
