"""/dev/shm full or not writable (a container's small default, a locked-down host): ranks on
one host fall back to TCP, say so once, and compute the same results; nothing is left behind.

Each case runs the ranks in a private mount namespace whose /dev/shm is a tiny or read-only
tmpfs, so the machine's own /dev/shm is untouched. Needs root (unshare --mount); skips
otherwise, and CI runs as root."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a mount namespace")

# One rank: three allreduces (the small path, and the segmented ring), then its transports
# and results as one line. Plain processes with a file rendezvous: multiprocessing's
# queues would need /dev/shm themselves.
RANK = """
import datetime, json, sys, torch, torch.distributed as dist, ringx
rank, world, init = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("ringx", init_method=init, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
results = []
for elements in (1, 1000, 1 << 20):
    t = torch.full((elements,), float(rank + 1))
    dist.all_reduce(t)
    results.append(bool((t == world * (world + 1) / 2).all()))
print(json.dumps([ringx.transports(), results]))
dist.destroy_process_group()
"""

JOB = """
import json, os, subprocess, sys, tempfile
world = 3
with tempfile.TemporaryDirectory() as tmp:
    init = "file://" + os.path.join(tmp, "rendezvous")
    procs = [subprocess.Popen([sys.executable, "-c", sys.argv[1], str(r), str(world), init],
                              stdout=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
print(json.dumps([json.loads(out.splitlines()[-1]) for out in outs]))
print(json.dumps(sorted(os.listdir("/dev/shm"))))
"""


@pytest.mark.parametrize("mount_options", ["size=64k", "ro"], ids=["full", "read-only"])
def test_ranks_fall_back_to_tcp_when_dev_shm_is_unusable(mount_options):
    script = (f"mount -t tmpfs -o {mount_options} ringx-test /dev/shm && "
              f'exec "{sys.executable}" -c "$0" "$1"')
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                           JOB, RANK], capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for transports, results in json.loads(lines[-2]):
        assert sorted(transports) == ["self", "tcp", "tcp"], transports
        assert results == [True, True, True]
    assert "no shared memory, so ranks on this host talk over TCP" in done.stderr, done.stderr
    assert json.loads(lines[-1]) == [], f"left in /dev/shm: {lines[-1]}"
