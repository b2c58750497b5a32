"""torchrun restarts over ringx, with torchrun's defaults.

torch 2.13's elastic agent keeps one TCPStore across attempts and gives workers no
per-attempt key prefix, so a restarted group finds everything the last attempt's group wrote
(addresses, token) under the same keys. ringx agrees on a fresh generation through the
store's counters before it reads any key (backend/store/generation.h), so the stale keys are
never read. Before that, attempt 1 failed in 7 of 7 tries ("rank 1 refused the connection").
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "restart_worker.py")


def torchrun(tmp_path, plan, restarts, nproc=2, backend="ringx"):
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ)
    env.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)  # the default: one shared store
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc-per-node={nproc}", f"--max-restarts={restarts}", WORKER, backend, plan,
         str(out)],
        env=env, capture_output=True, text=True, timeout=240)
    return run, sorted(os.listdir(out))


def test_the_attempt_after_a_rank_raised_completes(tmp_path):
    run, done = torchrun(tmp_path, "1:after", restarts=1)
    assert run.returncode == 0, run.stderr[-3000:]
    assert done == ["attempt-1-rank-0", "attempt-1-rank-1"], run.stderr[-3000:]


def test_restarts_each_over_every_earlier_attempts_keys(tmp_path):
    # Ranks fail at every point: before joining (the other waits in the agreement and is
    # killed half way), right after joining (the other waits in a collective), after one
    # collective; on either rank. Each attempt's store holds the keys of all earlier ones.
    # The first six attempts fail at each point once; RINGX_RESTARTS=10 (make test-faults)
    # runs all ten, a job restarted ten times.
    plan = ["1:after", "0:before", "1:before", "0:joined", "1:joined", "0:after", "1:before",
            "0:before", "1:joined", "0:after"][:int(os.environ.get("RINGX_RESTARTS", "6"))]
    run, done = torchrun(tmp_path, ",".join(plan), restarts=len(plan))
    assert run.returncode == 0, run.stderr[-3000:]
    # (A root whose broadcast was buffered may finish an attempt its peer failed.)
    last = len(plan)
    assert {f"attempt-{last}-rank-0", f"attempt-{last}-rank-1"} <= set(done), (
        done, run.stderr[-3000:])
