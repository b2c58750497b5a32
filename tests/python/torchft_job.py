"""A torchft job of replica processes (samples/torchft_ddp.py) with one replica SIGKILLed mid-run
and another started in its place: test_torchft.py checks it over ringx, bench/torchft.py times
it over ringx, torchft's ProcessGroupGloo and ProcessGroupBabyGloo."""

import os
import signal
import subprocess
import sys
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SAMPLE = os.path.join(ROOT, "samples", "torchft_ddp.py")
sys.path.insert(0, os.path.dirname(SAMPLE))
import torchft_ddp  # noqa: E402  the sample's model and batches, for the reference run


class Replica:
    def __init__(self, replica_id, lighthouse, pg, stop_file, save):
        self.id = replica_id
        self.lines = []
        self.proc = subprocess.Popen(
            [sys.executable, SAMPLE, "--lighthouse", lighthouse, "--replica-id", str(replica_id),
             "--stop-file", stop_file, "--pg", pg, "--save", save, "--min-replicas", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.stderr = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr),
                         daemon=True).start()

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append(line)

    def steps(self):
        import json
        return [json.loads(l) for l in list(self.lines) if l.startswith("{")]


def reference_weights(steps):
    """Plain SGD on the sample's batches: what every replica must hold after `steps` commits."""
    model = torchft_ddp.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(steps):
        x, y = torchft_ddp.batch(step)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    return model.state_dict()


def run(pg, tmp, replicas=4, kill_at_step=8, steps_after_join=6, heartbeat_timeout_ms=1000,
        timeout_s=240):
    """Replicas train until replica `replicas - 1`, past `kill_at_step`, is SIGKILLed and a new
    one started in its place; once the newcomer has committed a step (healed from a peer), every
    replica is told to stop `steps_after_join` steps later. Returns {"kill_time", "recovered_s"
    (kill -> the first step the survivors committed without the killed replica), "lost" (uncommitted steps of the survivors
    after the kill, most of any), "steps" (committed in all), "weights" (each replica's final
    state dict; the newcomer's last), "errors"}."""
    from torchft._torchft import LighthouseServer

    # A quorum waits for every replica that heartbeats (the killed one stops within the heartbeat
    # timeout), or join_timeout_ms after the first joined: at 100 ms a replica that a busy
    # machine held up that long was left out of a step, fell a step behind the others, and at
    # the end waited alone for a quorum that never came (one fresh clone's make test in three,
    # with a build beside it). 2 s is beyond any step's lateness here.
    lighthouse = LighthouseServer(bind="[::]:0", min_replicas=2, join_timeout_ms=2000,
                                  heartbeat_timeout_ms=heartbeat_timeout_ms)
    address = lighthouse.address()
    saves = [os.path.join(tmp, f"{pg}-{i}.pt") for i in range(replicas + 1)]
    stop_file = os.path.join(tmp, f"{pg}-stop")
    running = [Replica(i, address, pg, stop_file, saves[i]) for i in range(replicas)]
    steps = None
    victim = running[-1]
    deadline = time.monotonic() + timeout_s
    kill_time = None
    try:
        while time.monotonic() < deadline:
            done = [s for s in victim.steps() if s["committed"] and s["step"] >= kill_at_step]
            if done:
                victim.proc.send_signal(signal.SIGKILL)
                kill_time = time.time()
                victim.proc.wait()
                break
            if victim.proc.poll() is not None:
                break
            time.sleep(0.01)
        newcomer = None
        survivors = running
        if kill_time is not None:
            newcomer = Replica(replicas - 1, address, pg, stop_file, saves[replicas])
            survivors = running[:-1] + [newcomer]
            while time.monotonic() < deadline and newcomer.proc.poll() is None:
                if any(s["committed"] for s in newcomer.steps()):
                    break
                time.sleep(0.01)
        steps = max([s["step"] for r in survivors for s in r.steps()] + [0]) + steps_after_join
        with open(stop_file + ".tmp", "w") as f:
            f.write(str(steps))
        os.rename(stop_file + ".tmp", stop_file)
        for r in survivors:
            try:
                r.proc.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                r.proc.kill()  # reported below, as an exit that is not 0
                r.proc.wait()
                r.stderr.append(f"did not finish within {timeout_s} s\n")
    finally:
        for r in running + ([newcomer] if newcomer else []):
            if r.proc.poll() is None:
                r.proc.kill()
        lighthouse.shutdown()
    errors = [f"replica {r.id} exited {r.proc.returncode}: {''.join(r.stderr)[-6000:]}"
              for r in survivors if r.proc.returncode != 0]
    recovered = lost = None
    if kill_time is not None:
        after = [s for r in running[:-1] for s in r.steps() if s["time"] > kill_time]
        # The first step committed by a quorum without the killed replica (a step reduced
        # before the kill may still print its commit after it).
        commits = [s["time"] for s in after if s["committed"] and s["participants"] < replicas]
        recovered = min(commits) - kill_time if commits else None
        lost = max(sum(1 for s in r.steps() if s["time"] > kill_time and not s["committed"])
                   for r in running[:-1])
    weights = [torch.load(saves[i]) for i in range(replicas + 1) if os.path.exists(saves[i])]
    return {"kill_time": kill_time, "recovered_s": recovered, "lost": lost, "weights": weights,
            "errors": errors, "steps": steps}
