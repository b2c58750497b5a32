"""Tracing end to end: real ranks record, ringx-trace exports Chrome JSON and summarises,
clocks skewed on purpose come out aligned, a killed rank's trace is still readable."""

import functools
import json
import os
import signal
import subprocess

import torch
import torch.distributed as dist

from harness import RINGX_TRACE, run_ranks, viewer
from test_collectives import ASKED_OPS, asked_ops


def ringx_trace(*args, check=True):
    result = subprocess.run([RINGX_TRACE, *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"ringx-trace {' '.join(args)} failed:\n{result.stderr}")
    return result


def export(trace_dir, tmp_path):
    out = tmp_path / "trace.json"
    ringx_trace("export", str(trace_dir), "-o", str(out))
    with open(out) as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def _traced_workload(rank, world):
    import ringx
    for n in (1000, 20000, 300000):
        dist.all_reduce(torch.ones(n))
    dist.broadcast(torch.ones(100), 0)
    out = [torch.empty(64) for _ in range(world)]
    dist.all_gather(out, torch.ones(64))
    dist.reduce_scatter(torch.empty(32), [torch.ones(32) for _ in range(world)])
    dist.barrier()
    with ringx.trace.span("work", batch=3, lr=0.1, tag="x"):
        pass
    ringx.trace.counter("my_bytes", 123, category="memory")
    ringx.trace.mark_step(7)
    sub = dist.new_group(list(range(world)))
    dist.all_reduce(torch.ones(8), group=sub)
    return ringx.trace.enabled()


def _by_rank(events, predicate):
    """{rank: [events]}; ringx-trace exports rank r as pid r + 1 (Perfetto reserves pid 0)."""
    out = {}
    for e in events:
        if predicate(e):
            out.setdefault(e["pid"] - 1, []).append(e)
    return out


def test_traced_job_exports_every_collective_and_user_event(tmp_path):
    trace_dir = tmp_path / "trace"
    assert run_ranks(_traced_workload, 2, env={"RINGX_TRACE_DIR": str(trace_dir)}) == [True, True]
    manifest = json.loads((trace_dir / "manifest.json").read_text())
    assert manifest["world_size"] == 2 and len(manifest["ranks"]) == 2
    events = export(trace_dir, tmp_path)

    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert sorted(names) == [1, 2]
    assert names[1].startswith("rank 0") and names[2].startswith("rank 1")
    threads = {e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert {"comm:world", "comm:1", "user", "steps", "memory"} <= threads

    collectives = _by_rank(events, lambda e: e.get("ph") == "X" and e.get("cat") == "collective")
    assert set(collectives) == {0, 1}
    for rank, spans in collectives.items():
        world = [e for e in spans if e["args"]["group"] == "world"]
        assert [e["name"] for e in world] == ["allreduce"] * 3 + [
            "broadcast", "allgather", "reduce_scatter", "barrier"]
        assert [e["args"]["seq"] for e in world] == list(range(7))
        assert [e["args"]["bytes"] for e in world[:3]] == [4000, 80000, 1200000]
        assert world[4]["args"]["bytes"] == 2 * 64 * 4  # all_gather: the gathered output
        assert world[5]["args"]["bytes"] == 2 * 32 * 4  # reduce_scatter: the whole input
        assert world[0]["args"]["transport"] == "shm"
        assert world[2]["args"]["algorithm"] == "ring"
        assert all(e["dur"] >= 0 for e in world)
        sub = [e for e in spans if e["args"]["group"] == "1"]
        assert [e["name"] for e in sub] == ["allreduce"]

    user = [e for e in events if e.get("ph") == "X" and e.get("name") == "work"]
    assert len(user) == 2
    assert user[0]["args"] == {"batch": 3, "lr": 0.1, "tag": "x"}
    counters = [e for e in events if e.get("ph") == "C" and e.get("name") == "my_bytes"]
    assert len(counters) == 2 and counters[0]["args"]["my_bytes"] == 123
    assert any(e.get("ph") == "C" and e.get("name") == "rss_bytes" for e in events)
    steps = [e for e in events if e.get("cat") == "step"]
    assert len(steps) == 2 and steps[0]["args"]["step"] == 7

    summary = ringx_trace("summary", str(trace_dir)).stdout
    assert "allreduce" in summary and "broadcast" in summary


def test_the_reduce_op_recorded_in_the_trace_is_the_one_the_caller_asked(tmp_path):
    """AVG and PREMUL_SUM run as a SUM with a scale around it; the trace's events and their
    export name the asked op, PREMUL_SUM with its factor (test_collectives.py checks the values
    and the flight recorder's dump of the same job, on every torch of make torch-matrix)."""
    trace_dir, dump_dir = tmp_path / "trace", tmp_path / "dumps"
    run_ranks(functools.partial(asked_ops, str(dump_dir)), 2,
              env={"RINGX_TRACE_DIR": str(trace_dir)})
    collectives = _by_rank(export(trace_dir, tmp_path),
                           lambda e: e.get("ph") == "X" and e.get("cat") == "collective")
    assert set(collectives) == {0, 1}
    for rank, spans in collectives.items():
        spans.sort(key=lambda e: e["args"]["seq"])  # threads' events are written apart
        assert [e["args"]["seq"] for e in spans] == list(range(len(ASKED_OPS)))
        assert [(e["name"], e["args"]["reduce_op"], e["args"].get("premul_factor"))
                for e in spans] == ASKED_OPS, rank


def _start_stop_from_code(trace_dir, rank, world):
    import ringx
    dist.all_reduce(torch.ones(10))  # before: not recorded
    ringx.trace.start(os.path.join(trace_dir, "first"))
    dist.all_reduce(torch.ones(10))
    dist.all_reduce(torch.ones(10))
    ringx.trace.stop()
    dist.all_reduce(torch.ones(10))  # between: not recorded
    ringx.trace.start(os.path.join(trace_dir, "second"))
    dist.broadcast(torch.ones(10), 1)
    ringx.trace.stop()
    return True


def test_start_and_stop_from_code_record_only_in_between(tmp_path):
    run_ranks(functools.partial(_start_stop_from_code, str(tmp_path)), 2)
    first = export(tmp_path / "first", tmp_path)
    spans = [e for e in first if e.get("cat") == "collective"]
    assert sorted((e["pid"] - 1, e["args"]["seq"]) for e in spans) == [(0, 1), (0, 2), (1, 1),
                                                                       (1, 2)]
    second = export(tmp_path / "second", tmp_path)
    spans = [e for e in second if e.get("cat") == "collective"]
    assert [e["name"] for e in spans] == ["broadcast", "broadcast"]
    assert all(e["args"]["seq"] == 4 for e in spans)


def _many_allreduces(rank, world):
    for _ in range(20):
        dist.all_reduce(torch.ones(256))
    return True


def _skewed_env(trace_dir, rank):
    return {"RINGX_TRACE_DIR": trace_dir, "RINGX_TRACE_FAKE_SKEW_NS": ["0", "5000000000"][rank]}


def test_skewed_clocks_come_out_aligned(tmp_path):
    # Rank 1's clock runs 5 s ahead; its measured offset puts it back on rank 0's axis.
    run_ranks(_many_allreduces, 2, env=functools.partial(_skewed_env, str(tmp_path / "trace")))
    events = export(tmp_path / "trace", tmp_path)
    spans = _by_rank(events, lambda e: e.get("cat") == "collective")
    begin = {pid: {e["args"]["seq"]: e["ts"] for e in s} for pid, s in spans.items()}
    end = {pid: {e["args"]["seq"]: e["ts"] + e["dur"] for e in s} for pid, s in spans.items()}
    for seq in range(20):
        # One allreduce cannot finish on one rank before it started on the other.
        assert begin[0][seq] <= end[1][seq] + 1000 and begin[1][seq] <= end[0][seq] + 1000, seq


def _killed_mid_run(rank, world):
    import ringx
    for i in range(30):
        dist.all_reduce(torch.ones(1000))
        if i == 20:
            ringx.trace.flush()
            if rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
    return True


def test_a_killed_ranks_trace_is_still_readable(tmp_path):
    trace_dir = tmp_path / "trace"
    run_ranks(_killed_mid_run, 2, env={"RINGX_TRACE_DIR": str(trace_dir)}, allow_errors=True,
              group_timeout_s=20)
    events = export(trace_dir, tmp_path)
    spans = _by_rank(events, lambda e: e.get("cat") == "collective")
    assert len(spans[1]) >= 21  # everything up to the flush survived the SIGKILL
    failed = [e for e in spans[0] if "error" in e["args"]]
    assert failed and "rank 1" in failed[-1]["args"]["error"]
    assert ringx_trace("summary", str(trace_dir)).returncode == 0


def test_cli_errors_say_what_is_wrong(tmp_path):
    missing = ringx_trace("summary", str(tmp_path / "nope"), check=False)
    assert missing.returncode == 1 and "nope" in missing.stderr
    (tmp_path / "rank-0.ringx").write_text('{"traceEvents": []}')
    foreign = ringx_trace("summary", str(tmp_path), check=False)
    assert foreign.returncode == 1 and "not a ringx trace" in foreign.stderr
    usage = ringx_trace("frobnicate", check=False)
    assert usage.returncode == 2


def _allreduces(rank, world, big_at=-1):
    """Twelve 64 KiB allreduces; the one at index big_at moves 32 MiB instead."""
    for i in range(12):
        dist.all_reduce(torch.ones((8 << 20) if i == big_at else 16384))
    return True


def test_diff_of_two_recorded_runs_ranks_the_slower_collective_first(tmp_path):
    """`ringx-trace diff A B` and `ringx-viewer --diff A B` on two real jobs: B differs from A
    in one collective (32 MiB instead of 64 KiB at seq 7), so that collective, matched by
    (group, seq), is the largest regression; the others are matched too. The viewer's first
    ranked row is that collective, and selecting it shows each run's timeline there."""
    a, b = tmp_path / "a", tmp_path / "b"
    run_ranks(_allreduces, 2, env={"RINGX_TRACE_DIR": str(a)})
    run_ranks(functools.partial(_allreduces, big_at=7), 2, env={"RINGX_TRACE_DIR": str(b)})
    out = ringx_trace("diff", str(a), str(b), "--top", "3").stdout
    assert "Collectives matched by (group, seq): 12" in out, out
    regressions = out[out.index("Largest regressions"):].splitlines()
    first = regressions[2]  # title, header, then the largest
    assert first.split()[0] == "collective" and "allreduce seq 7 (group world" in first, out

    shot = tmp_path / "diff.png"
    result = viewer("--diff", a, b, "--diff-row", "1", "--frames", "3", "--print-stats",
                    "--screenshot", shot)
    assert result.returncode == 0, result.stdout + result.stderr
    assert shot.stat().st_size > 10000
    stats = dict(field.split("=", 1) for line in result.stdout.splitlines()
                 for field in line.split(" ") if "=" in field and not field.startswith('what'))
    assert stats["matched_collectives"] == "12" and stats["selected"] == "1", result.stdout
    assert 'what="allreduce seq 7 (group world' in result.stdout, result.stdout
    assert int(stats["delta_ns"]) > 0
    # Each timeline shows its own run's seq 7, in the middle third of its view.
    for run in ("a", "b"):
        at = int(stats[f"{run}_at_ns"])
        begin, end = (int(t) for t in stats[f"{run}_view_ns"].split(":"))
        assert begin + (end - begin) // 3 - 1 <= at <= begin + (end - begin) // 2, (run, stats)


def test_a_cgroups_cpu_quota_is_read_as_the_cores_it_allows(tmp_path):
    # ringx.trace records a host's CPU quota (what `ringx-trace whatif` shares among its
    # threads): the smallest quota / period on the way up from the process's cgroup, in cgroup
    # v2's cpu.max or v1's cfs files, under the hierarchy's mount (a container's is its own).
    import ringx

    def write(path, text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    v2 = tmp_path / "v2"
    write(v2 / "job" / "cpu.max", "150000 100000\n")
    write(v2 / "job" / "rank" / "cpu.max", "max 100000\n")
    write(tmp_path / "cg2", "0::/job/rank\n")
    write(tmp_path / "mi2", f"30 25 0:26 / {v2} rw,nosuid - cgroup2 cgroup2 rw\n")
    assert ringx.trace.cpu_quota(tmp_path / "cg2", tmp_path / "mi2") == 1.5
    write(v2 / "job" / "rank" / "cpu.max", "40000 100000\n")
    assert ringx.trace.cpu_quota(tmp_path / "cg2", tmp_path / "mi2") == 0.4

    # v1 in a container: the mount's root is the container's own cgroup, /pod.
    v1 = tmp_path / "v1"
    write(v1 / "cpu.cfs_quota_us", "25000\n")
    write(v1 / "cpu.cfs_period_us", "10000\n")
    write(v1 / "rx" / "cpu.cfs_quota_us", "-1\n")
    write(v1 / "rx" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "cg1", "4:memory:/pod\n2:cpuacct:/pod/rx\n1:cpu:/pod/rx\n")
    write(tmp_path / "mi1", f"31 25 0:27 /pod {v1} rw - cgroup cgroup rw,cpu\n")
    assert ringx.trace.cpu_quota(tmp_path / "cg1", tmp_path / "mi1") == 2.5
    write(tmp_path / "cg0", "1:cpu:/\n")
    write(tmp_path / "mi0", f"31 25 0:27 / {v1 / 'rx'} rw - cgroup cgroup rw,cpu\n")
    assert ringx.trace.cpu_quota(tmp_path / "cg0", tmp_path / "mi0") is None
    assert ringx.trace.cpu_quota(tmp_path / "missing", tmp_path / "mi0") is None
