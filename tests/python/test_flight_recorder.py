"""The flight recorder as users meet it: real multi-process jobs with tracing off, whose
ranks dump their last collectives when one times out, when a peer is killed, on SIGUSR1
and from ringx.dump_flight_recorder(); `ringx-trace why DIR` on the dumps; ringx-viewer
opening them."""

import datetime
import json
import os
import re
import signal
import subprocess
import time

import pytest
import torch
import torch.distributed as dist

import ringx
from harness import RINGX_TRACE, VIEWER, run_ranks, viewer


def _no_tracing(dump_dir, **extra):
    """Rank environment: dumps into dump_dir, tracing off whatever the caller's shell says."""
    env = {"RINGX_DUMP_DIR": str(dump_dir), "RINGX_TRACE_DIR": "", "RINGX_TRACE_LISTEN": ""}
    env.update(extra)
    return env


def _wait_for(path, seconds=20):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _allreduce_with_timeout(tensor, ms):
    pg = dist.distributed_c10d._get_default_group()
    opts = dist.AllreduceOptions()
    opts.timeout = datetime.timedelta(milliseconds=ms)
    pg.allreduce([tensor], opts).wait()


def _rank_2_never_arrives(rank, world):
    t = torch.ones(1024)  # 4 KiB
    for _ in range(3):
        dist.all_reduce(t)
    assert not ringx.trace.enabled()
    if rank == 2:
        # Never calls the fourth collective; stays alive until a peer's failure notice
        # has made it dump (its own dump shows it never got there).
        path = os.path.join(os.environ["RINGX_DUMP_DIR"], "flight-rank-2.json")
        return ("dumped", _wait_for(path))
    try:
        _allreduce_with_timeout(t, 1500)
    except dist.DistBackendError as e:
        return ("error", str(e))
    return ("error", "no error")


@pytest.fixture(scope="module")
def hung_job(tmp_path_factory):
    dump_dir = tmp_path_factory.mktemp("flight") / "dumps"
    results = run_ranks(_rank_2_never_arrives, 3, env=_no_tracing(dump_dir))
    return dump_dir, results


def test_a_timeout_dumps_every_rank_and_the_error_names_the_dump(hung_job):
    dump_dir, results = hung_job
    for rank in (0, 1):
        kind, message = results[rank]
        assert kind == "error", message
        assert "allreduce #3" in message, message
        assert f"flight recorder written to {dump_dir}/flight-rank-{rank}.json" in message, message
        assert f"ringx-trace why {dump_dir}" in message, message
    assert results[2] == ("dumped", True)
    for rank in range(3):
        with open(dump_dir / f"flight-rank-{rank}.json") as f:
            dump = json.load(f)
        assert dump["format"] == "ringx-flight-recorder" and dump["rank"] == rank
        (world,) = dump["groups"]
        assert world["name"] == "world" and world["size"] == 3
        states = {e["seq"]: e["state"] for e in world["entries"]}
        assert all(states[s] == "finished" for s in range(3)), states
        if rank == 2:
            assert 3 not in states, states  # never issued
        else:
            assert states[3] == "failed", states
    assert not [n for n in os.listdir(dump_dir) if ".tmp" in n]  # written whole, renamed


def test_ringx_trace_why_names_the_collective_and_the_rank_that_never_arrived(hung_job):
    dump_dir, _ = hung_job
    result = subprocess.run([RINGX_TRACE, "why", str(dump_dir)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "3 of 3 ranks dumped" in out, out
    assert re.search(r"group 'world' \(3 ranks, 3 dumped\): allreduce seq 3 \(4\.0 KiB, float32, "
                     r"SUM\) did not finish on every rank", out), out
    assert "never arrived: rank 2\n" in out, out
    assert "rank 2: never arrived (its last collective was allreduce seq 2, finished)" in out, out
    assert re.search(r"rank 0: failed after .*timed out", out) or \
        re.search(r"rank 1: failed after .*timed out", out), out


def test_ringx_viewer_opens_the_dumps_in_its_collectives_panel(hung_job, tmp_path):
    if not os.path.exists(VIEWER):
        pytest.skip("ringx-viewer is not built")
    dump_dir, _ = hung_job
    shot = tmp_path / "collectives.png"
    result = viewer(dump_dir, "--panel", "collectives", "--frames", "3", "--size", "1280x720",
                    "--screenshot", shot, "--print-stats")
    assert result.returncode == 0, result.stderr
    stats = re.search(r"^ranks=(\d+) events=(\d+)", result.stdout, re.M)
    assert stats, result.stdout
    # Ranks 0 and 1: seqs 0..3; rank 2: seqs 0..2.
    assert (int(stats.group(1)), int(stats.group(2))) == (3, 4 + 4 + 3), result.stdout
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _rank_2_killed(rank, world):
    t = torch.ones(1024)
    dist.all_reduce(t)
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        dist.all_reduce(t)
    except dist.DistBackendError as e:
        return str(e)
    return "no error"


def test_a_killed_rank_has_no_dump_and_the_survivors_still_tell(tmp_path):
    dump_dir = tmp_path / "dumps"
    results = run_ranks(_rank_2_killed, 3, env=_no_tracing(dump_dir), allow_errors=True)
    assert results[2][0] == "missing"
    for rank in (0, 1):
        status, message = results[rank]
        assert status == "ok" and "flight recorder written to" in message, message
    assert sorted(os.listdir(dump_dir)) == ["flight-rank-0.json", "flight-rank-1.json"]
    result = subprocess.run([RINGX_TRACE, "why", str(dump_dir)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "2 of 3 ranks dumped" in result.stdout, result.stdout
    assert "no dump from rank 2" in result.stdout, result.stdout
    assert "allreduce seq 1 " in result.stdout, result.stdout
    assert "no dump: rank 2\n" in result.stdout, result.stdout


def _signalled_while_running(rank, world):
    t = torch.ones(256)
    for _ in range(4):
        dist.all_reduce(t)
    dumped = None
    if rank == 0:
        path = os.path.join(os.environ["RINGX_DUMP_DIR"], "flight-rank-0.json")
        os.kill(os.getpid(), signal.SIGUSR1)
        assert _wait_for(path), "no dump after SIGUSR1"
        with open(path) as f:
            dumped = json.load(f)
    dist.all_reduce(t)  # the job goes on
    return dumped, t[0].item()


def test_sigusr1_dumps_a_running_job_that_goes_on(tmp_path):
    dump_dir = tmp_path / "dumps"
    results = run_ranks(_signalled_while_running, 2, env=_no_tracing(dump_dir))
    dump, value = results[0]
    assert value == 2 ** 5  # five sums over two ranks of ones: the job ran on
    assert dump["reason"] == "SIGUSR1"
    (world,) = dump["groups"]
    assert [(e["seq"], e["op"], e["state"], e["bytes"]) for e in world["entries"]] == \
        [(s, "allreduce", "finished", 1024) for s in range(4)]
    assert not os.path.exists(dump_dir / "flight-rank-1.json")  # rank 1 was not signalled
    result = subprocess.run([RINGX_TRACE, "why", str(dump_dir)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "every collective finished on every rank that dumped (last seq 3)" in result.stdout
    assert "no dump from rank 1" in result.stdout, result.stdout


def _record_then_dump(rank, world):
    assert not ringx.trace.enabled()
    t = torch.ones(1024)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.broadcast(torch.zeros(8, dtype=torch.int64), src=1)
    out = [torch.empty(4) for _ in range(world)]
    dist.all_gather(out, torch.ones(4))
    dist.all_reduce(t, async_op=True).wait()
    path = ringx.dump_flight_recorder(os.path.join(os.environ["RINGX_DUMP_DIR"], "api"))
    with open(path) as f:
        return path, json.load(f)


def test_dump_flight_recorder_records_every_collective_with_tracing_off(tmp_path):
    dump_dir = tmp_path / "dumps"
    results = run_ranks(_record_then_dump, 2, env=_no_tracing(dump_dir))
    for rank, (path, dump) in enumerate(results):
        assert path == str(dump_dir / "api" / f"flight-rank-{rank}.json")
        assert dump["reason"] == "ringx.dump_flight_recorder()"
        (world,) = dump["groups"]
        entries = world["entries"]
        assert [e["seq"] for e in entries] == [0, 1, 2, 3]
        assert [e["op"] for e in entries] == ["allreduce", "broadcast", "allgather", "allreduce"]
        assert all(e["state"] == "finished" for e in entries), entries
        assert all(0 < e["issue_ns"] <= e["start_ns"] <= e["end_ns"] for e in entries), entries
        assert (entries[0]["bytes"], entries[0]["dtype"], entries[0]["reduce_op"]) == \
            (4096, "float32", "MAX")
        assert (entries[1]["bytes"], entries[1]["dtype"], entries[1]["root"]) == (64, "int64", 1)
        assert entries[2]["bytes"] == 4 * 4 * 2 and "reduce_op" not in entries[2]
        assert all(e.get("algorithm") for e in entries), entries


def _recorder_off(rank, world):
    dist.all_reduce(torch.ones(4))
    try:
        ringx.dump_flight_recorder()
    except RuntimeError as e:
        return str(e)
    return "dumped"


def test_zero_entries_turn_the_recorder_off(tmp_path):
    dump_dir = tmp_path / "dumps"
    results = run_ranks(_recorder_off, 2,
                        env=_no_tracing(dump_dir, RINGX_FLIGHT_RECORDER_ENTRIES="0"))
    for message in results:
        assert "RINGX_FLIGHT_RECORDER_ENTRIES=0" in message, message
    assert not os.path.exists(dump_dir)
