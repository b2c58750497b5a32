"""A group remade over any set of processes (torch >= 2.14: dist._reconfigure, and
init_process_group(enable_reconfigure=True), whose group connects to no one until then):
the first members, the survivors of a death, the survivors and a newcomer, with the rank and
size the group reports following; bad handles and a member that never comes are clear errors.

make test's torch (2.13) has no reconfigure; make torch-matrix runs these on 2.15."""

import os
import signal
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

import ringx  # noqa: F401  registers the backend
from harness import run_ranks

pytestmark = pytest.mark.skipif(not hasattr(dist, "_reconfigure"),
                                reason=f"torch {torch.__version__} has no dist._reconfigure "
                                       f"(it came in 2.14)")


def _handles(store, phase, rank, members):
    """Every member's handle, exchanged through the store (out of band, as the API wants)."""
    store.set(f"test/{phase}/{rank}", dist._get_reconfigure_handle())
    return [store.get(f"test/{phase}/{r}").decode() for r in members]


def _sum_of_ranks_plus_one():
    t = torch.full((1 << 15,), float(dist.get_rank() + 1))
    dist.all_reduce(t)
    return t[0].item()


def _members_come_and_go(rank, world):
    store = dist.distributed_c10d._get_default_store()
    out = {}
    # Unconfigured: collectives are a clear error, nothing hangs.
    try:
        dist.all_reduce(torch.ones(2))
        out["before"] = "no error"
    except Exception as e:  # noqa: BLE001  what the user sees, whatever its type
        out["before"] = str(e)
    out["supports"] = dist._supports_reconfigure()
    # 1. Ranks 0-2 form the group; rank 3 waits outside, a process not yet in it.
    if rank < 3:
        handles = _handles(store, "first", rank, [0, 1, 2])
        assert dist._reconfigure(uuid=1, handles=handles).wait()
        out["first"] = (dist.get_rank(), dist.get_world_size(), _sum_of_ranks_plus_one())
        # Bad input, before anything else happens.
        for name, bad in [("gloo", handles[:2] + ["gloo:2:-1:2:127.0.0.1:1"]),
                          ("absent", [h for h in handles if h != handles[rank]]),
                          ("reused", handles)]:
            try:
                dist._reconfigure(uuid=1 if name == "reused" else 9, handles=bad)
                out[name] = "no error"
            except ValueError as e:
                out[name] = str(e)
        # 2. Rank 2 dies; the survivors reconfigure without it.
        if rank == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            dist.all_reduce(torch.ones(1 << 12))
        except dist.DistBackendError:
            pass  # the dead peer, named (test_shrink tests that text)
        started = time.monotonic()
        survivors = _handles(store, "survivors", rank, [0, 1])
        dist._reconfigure(uuid=2, handles=survivors).wait()
        out["survivors"] = (dist.get_rank(), dist.get_world_size(), _sum_of_ranks_plus_one(),
                            time.monotonic() - started)
    # 3. The newcomer joins the survivors: a set, so the backend orders the ranks (sorted).
    if rank == 3:
        store.set("test/newcomer/3", dist._get_reconfigure_handle())
    members = [store.get(f"test/{key}").decode()
               for key in ("survivors/0", "survivors/1", "newcomer/3")]
    dist._reconfigure(uuid=3, handles=set(members), timeout=timedelta(seconds=20)).wait()
    out["newcomer"] = (dist.get_rank(), sorted(members).index(dist._get_reconfigure_handle()),
                       dist.get_world_size(), _sum_of_ranks_plus_one())
    gathered = [torch.zeros(1) for _ in range(3)]
    dist.all_gather(gathered, torch.tensor([float(rank)]))
    out["gathered"] = [g.item() for g in gathered]
    # 4. A member listed but never coming: an error naming it, within the timeout; then the
    # group is remade without it.
    everyone = sorted(members)
    if dist.get_rank() == 2:
        return out  # stays out of the next two reconfigures
    work = dist._reconfigure(uuid=4, handles=everyone, timeout=timedelta(seconds=2))
    try:
        work.wait()
        out["missing"] = "no error"
    except Exception as e:  # noqa: BLE001
        out["missing"] = str(e)
    dist._reconfigure(uuid=5, handles=everyone[:2]).wait()
    out["without"] = (dist.get_world_size(), _sum_of_ranks_plus_one())
    return out


def test_a_group_is_remade_over_survivors_and_a_newcomer():
    results = run_ranks(_members_come_and_go, 4, group_timeout_s=20, allow_errors=True,
                        init_kwargs={"enable_reconfigure": True})
    assert results[2][0] == "missing"  # SIGKILLed
    outs = {}
    for rank in (0, 1, 3):
        status, out = results[rank]
        assert status == "ok", out
        outs[rank] = out
        assert out["supports"] is True
        assert "enable_reconfigure" in out["before"] and "_reconfigure" in out["before"], out
    for rank in (0, 1):
        out = outs[rank]
        assert out["first"] == (rank, 3, 1 + 2 + 3)
        assert "not a ringx handle" in out["gloo"], out["gloo"]
        assert "is not among the 2 handles" in out["absent"], out["absent"]
        assert "uuid 1 was used before" in out["reused"], out["reused"]
        rank_now, size, total, elapsed = out["survivors"]
        assert (rank_now, size, total) == (rank, 2, 1 + 2)
        assert elapsed < 10, elapsed  # never waits out the group's 20 s timeout for rank 2
    for rank in (0, 1, 3):
        new_rank, sorted_position, size, total = outs[rank]["newcomer"]
        assert new_rank == sorted_position and size == 3 and total == 1 + 2 + 3
    ranks_now = {outs[r]["newcomer"][0]: r for r in (0, 1, 3)}
    assert outs[0]["gathered"] == [float(ranks_now[i]) for i in range(3)]
    absent = ranks_now[2]
    for rank in (0, 1, 3):
        if rank == absent:
            continue
        assert "did not join" in outs[rank]["missing"] and "rank 2 (ringx:" in \
            outs[rank]["missing"], outs[rank]["missing"]
        assert outs[rank]["without"] == (2, 1 + 2)
