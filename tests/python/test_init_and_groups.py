"""Rendezvous methods (file://, tcp://, env://) and subgroups."""

import os
import subprocess
import sys
import textwrap

import torch
import torch.distributed as dist

from harness import free_port, run_ranks

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


WORKER = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist
    import ringx
    init = sys.argv[1]
    if init == "env://":
        dist.init_process_group("ringx")          # MASTER_ADDR/PORT, RANK, WORLD_SIZE
    else:
        dist.init_process_group("ringx", init_method=init,
                                rank=int(sys.argv[2]), world_size=int(sys.argv[3]))
    t = torch.ones(5) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    print("RESULT", dist.get_rank(), dist.get_world_size(), t.sum().item(), flush=True)
    dist.destroy_process_group()
""")


def _launch(init, world, extra_env=None):
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        env.update(extra_env(rank) if extra_env else {})
        procs.append(subprocess.Popen(
            [sys.executable, "-c", WORKER, init, str(rank), str(world)], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out
    expected = 5 * sum(r + 1 for r in range(world))
    for rank, out in enumerate(outputs):
        line = [l for l in out.splitlines() if l.startswith("RESULT")][0]
        _, r, w, total = line.split()
        assert (int(r), int(w), float(total)) == (rank, world, expected)


def test_tcp_init_method():
    _launch(f"tcp://127.0.0.1:{free_port()}", 3)


def test_env_init_method_as_torchrun_sets_it():
    port = free_port()
    _launch("env://", 2, lambda rank: {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                                        "RANK": str(rank), "WORLD_SIZE": "2",
                                        "LOCAL_RANK": str(rank)})


def _subgroups(rank, world):
    # Several ringx groups alive at once, with overlapping members, used concurrently.
    g01 = dist.new_group([0, 1], backend="ringx")
    g12 = dist.new_group([1, 2], backend="ringx")
    g02 = dist.new_group([0, 2], backend="ringx")
    works = []
    mine = {}
    for name, group, members in (("g01", g01, [0, 1]), ("g12", g12, [1, 2]),
                                 ("g02", g02, [0, 2])):
        if rank in members:
            t = torch.full((50_000,), float(rank + 1))
            mine[name] = (t, float(sum(m + 1 for m in members)))
            works.append(dist.all_reduce(t, group=group, async_op=True))
    full = torch.ones(1000)
    works.append(dist.all_reduce(full, async_op=True))
    for w in works:
        w.wait()
    for name, (t, expected) in mine.items():
        assert torch.equal(t, torch.full((50_000,), expected)), name
    assert torch.equal(full, torch.full((1000,), float(world)))
    # Group-relative ranks: global rank 2 is rank 0 of... no: rank 1 of g12.
    if rank in (1, 2):
        assert dist.get_rank(g12) == rank - 1
        b = torch.full((3,), float(rank))
        dist.broadcast(b, src=2, group=g12)  # src is a global rank
        assert torch.equal(b, torch.full((3,), 2.0))
    dist.barrier(group=g02) if rank in (0, 2) else None
    return len(mine)


def test_subgroups_alive_at_once_and_used_concurrently():
    assert run_ranks(_subgroups, 3) == [2, 2, 2]


def test_the_port_a_job_is_given_is_free_and_below_the_ephemeral_range():
    """spawn_ranks.free_port (the samples' and the tests' rendezvous port): from below the
    range the kernel hands out for bind(0) and for connections, so no other process's next
    connection can take it before rank 0 listens; and nothing holds it now."""
    import socket

    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral = int(f.read().split()[0])
    ports = {free_port() for _ in range(3)}
    for port in ports:
        if ephemeral >= 10000 + 1024:  # else there is no room below it, and bind(0) chooses
            assert 10000 <= port < ephemeral, (port, ephemeral)
        with socket.socket() as s:
            s.bind(("", port))  # raises if something held it
