"""Faults between real hosts: ranks in network namespaces joined by a veth pair (netns_hosts),
talking TCP between hosts and shared memory within one. A link taken down mid-collective is a
partition with no RST: every rank, on both sides, including the side cut off from the store,
must raise torch.distributed.DistBackendError naming the collective, its seq and a peer within
the group's timeout plus 2 s, and then exit cleanly, leaving nothing in /dev/shm.

Skips where namespaces cannot be made (not root); CI runs as root, so it runs there."""

import json
import os
import select
import signal
import sys
import time

import pytest

import netns_hosts

REASON = netns_hosts.why_unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 4.0  # the group's timeout
LARGE = 8 << 20  # float32 elements: 32 MiB, the segmented ring
SMALL = 256  # 1 KiB, the small-message path


def _shm_segments():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith("ringx-"))


def _read_ready(procs, deadline):
    """Waits until every process printed READY; returns False if one failed first."""
    waiting = {p.stdout.fileno(): p for p in procs}
    while waiting and time.monotonic() < deadline:
        ready, _, _ = select.select(list(waiting), [], [], 0.2)
        for fd in ready:
            line = waiting[fd].stdout.readline()
            if line.strip() == "READY":
                del waiting[fd]
            elif line == "":
                return False
    return not waiting


def run_job(layout, elements, subgroup=False, cut=None, signal_rank=None, sig=None):
    """Runs one job; `layout` maps host name -> number of ranks (ranks numbered host by host).
    Once every rank is running collectives, the fault strikes: with `cut`, that host's side
    of the link goes down; with `signal_rank`, that rank gets `sig` (SIGKILL: dead; SIGSTOP:
    stuck, continued once the others have their errors). Returns (the time of the fault,
    [each rank's report, None for a killed rank])."""
    shm_before = _shm_segments()
    with netns_hosts.Hosts(list(layout)) as hosts:
        first = list(layout)[0]
        init = f"tcp://{hosts.address[first]}:29500"
        world = sum(layout.values())
        env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1")
        procs, rank = [], 0
        for host, count in layout.items():
            for _ in range(count):
                argv = [sys.executable, os.path.join(HERE, "netns_worker.py"), "--rank",
                        str(rank), "--world", str(world), "--init", init, "--timeout",
                        str(TIMEOUT_S), "--elements", str(elements),
                        "--iterations", "20" if cut is None and sig is None else "0"]
                if subgroup:
                    argv.append("--subgroup")
                procs.append(hosts.start(host, argv, env))
                rank += 1
        started = _read_ready(procs, time.monotonic() + 90)
        cut_at = None
        if started and (cut is not None or sig is not None):
            time.sleep(0.5)  # collectives in flight on every rank
            cut_at = time.monotonic()
            if cut is not None:
                hosts.cut(cut)
            else:  # `ip netns exec`, unshare and sh all exec: the pid is the rank's python
                os.kill(procs[signal_rank].pid, sig)
        reports = []
        order = [r for r in range(len(procs)) if r != signal_rank] + (
            [signal_rank] if signal_rank is not None else [])
        for r in order:
            p = procs[r]
            if r == signal_rank and sig == signal.SIGKILL:
                p.wait()
                reports.append((r, None))
                continue
            if r == signal_rank and sig == signal.SIGSTOP:
                os.kill(p.pid, signal.SIGCONT)  # the others have their errors: let it go on
            try:
                out, err = p.communicate(timeout=TIMEOUT_S + 30)
            except Exception:  # noqa: BLE001  a hang is the failure this test exists for
                p.kill()
                out, err = p.communicate()
                pytest.fail(f"rank {r} did not exit within {TIMEOUT_S + 30} s of the fault\n{err}")
            lines = [l for l in out.splitlines() if l.startswith("{")]
            assert p.returncode == 0 and lines, f"rank {r} exited {p.returncode}:\n{out}\n{err}"
            reports.append((r, json.loads(lines[-1])))
    assert _shm_segments() == shm_before, "shared-memory segments left behind"
    return cut_at, [report for _, report in sorted(reports, key=lambda item: item[0])]


def test_two_hosts_one_rank_each_talk_tcp():
    _, reports = run_job({"a": 1, "b": 1}, SMALL)
    for r, report in enumerate(reports):
        assert report["correct"]
        assert report["error_type"] is None, report
        assert report["transports"] == (["self", "tcp"] if r == 0 else ["tcp", "self"])


def test_two_hosts_two_ranks_each_use_shm_within_and_tcp_between():
    _, reports = run_job({"a": 2, "b": 2}, LARGE)
    assert [r["transports"] for r in reports] == [
        ["self", "shm", "tcp", "tcp"],
        ["shm", "self", "tcp", "tcp"],
        ["tcp", "tcp", "self", "shm"],
        ["tcp", "tcp", "shm", "self"],
    ]
    assert all(r["correct"] and r["error_type"] is None for r in reports)


def _check_partition(cut_at, reports, late_ranks=()):
    """Every rank's error is a DistBackendError naming the collective, its seq and a peer,
    within the timeout + 2 s of the fault (a rank in `late_ranks` was stopped: its error comes
    after it is continued), and the rank then shuts down cleanly."""
    for report in reports:
        if report is None:  # killed
            continue
        rank = report["rank"]
        assert "DistBackendError" in report["error_mro"], report
        message = report["message"]
        assert "allreduce #" in message, message  # the collective and its seq
        assert "rank " in message, message  # the peer
        took = report["error_at"] - cut_at
        print(f"rank {rank}: {report['error_type']} {took:.2f} s after the fault: {message}")
        if rank in late_ranks:
            continue
        assert took <= TIMEOUT_S + 2, f"rank {rank}: error {took:.1f} s after the cut: {message}"
        assert report["destroy_error"] is None, report
        assert report["destroy_s"] < TIMEOUT_S + 2, report


@pytest.mark.parametrize("elements", [LARGE, SMALL], ids=["large", "small"])
@pytest.mark.parametrize("side", ["a", "b"], ids=["store-side-cut", "far-side-cut"])
def test_link_down_is_an_error_on_both_sides_within_the_timeout(elements, side):
    cut_at, reports = run_job({"a": 1, "b": 1}, elements, cut=side)
    _check_partition(cut_at, reports)


@pytest.mark.parametrize("subgroup", [False, True], ids=["default-group", "subgroup"])
def test_link_down_between_two_hosts_of_two_ranks(subgroup):
    cut_at, reports = run_job({"a": 2, "b": 2}, LARGE, subgroup=subgroup, cut="b")
    _check_partition(cut_at, reports)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
@pytest.mark.parametrize("victim", [0, 1], ids=["store-host-rank", "far-rank"])
def test_a_dead_or_stuck_rank_on_another_host_is_an_error_within_the_timeout(sig, victim):
    # Killing rank 0 also takes the store down with it (torch's TCPStore lives in rank 0).
    cut_at, reports = run_job({"a": 1, "b": 1}, LARGE, signal_rank=victim, sig=sig)
    assert (reports[victim] is None) == (sig == signal.SIGKILL)
    _check_partition(cut_at, reports, late_ranks=[victim])
