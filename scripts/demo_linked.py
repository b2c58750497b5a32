"""`make demo`'s what-if across two hosts: samples/train_ddp.py with torch's DDP over ringx, one
rank on each of two network-namespace hosts joined by a link of a set rate
(tests/python/netns_hosts.py), on a model whose allreduce takes about as long as its backward at
that rate, so that the bucket plan moves the step by more than the machine's noise. It prints
`ringx-trace whatif` of the recorded step, then runs the bucket cap the table says moves the step
most (outside the noise) for real on the same hosts, twice, and the base once more, and a line
under the table: the measured step beside the prediction (means of the two).

    scripts/demo_linked.py BUILD_DIR TRACE_DIR

Where the hosts cannot be made (no root, no tc) it prints why in one line and exits 3: the demo
then shows the one-host job's table instead.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "tests", "python"), os.path.join(sys.argv[1], "python")]
import netns_hosts  # noqa: E402  (the test harness's hosts; it finds ringx in BUILD_DIR)

RATE_MBIT = 1000
# 4 hidden Linear(1024): 17 MB of gradients, at 1 Gbit/s a ring allreduce about as long as
# backward; a bucket a layer (4 MB) overlaps them, one bucket (25 MB) does not.
MODEL = ["--engine", "torch", "--width", "1024", "--layers", "4", "--batch", "128",
         "--steps", "30"]
BASE_CAP = 4
CANNOT = 3  # the exit status that says the hosts cannot be made here


def train(hosts, names, trace, cap, build):
    """samples/train_ddp.py on every host, traced into `trace`; raises with a rank's output if
    one fails."""
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), OMP_NUM_THREADS="1",
               MASTER_ADDR=hosts.address[names[0]], MASTER_PORT="29500",
               WORLD_SIZE=str(len(names)), LOCAL_WORLD_SIZE="1", LOCAL_RANK="0")
    procs = [hosts.start(name, [sys.executable, os.path.join(ROOT, "samples", "train_ddp.py"),
                                *MODEL, "--bucket-cap-mb", f"{cap:g}", "--trace", trace],
                         dict(env, RANK=str(r)))
             for r, name in enumerate(names)]
    outs = [p.communicate(timeout=600) for p in procs]
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            raise RuntimeError(f"rank {r} on host {names[r]} exited {p.returncode}:\n{out}\n{err}")
    return outs[0][0]


def whatif(build, trace, *flags):
    command = [os.path.join(build, "bin", "ringx-trace"), "whatif", trace, *flags]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return result.stdout


def step_of(build, trace):
    return json.loads(whatif(build, trace, "--json", "--no-bounds"))["recorded_step_ns"]


def main():
    build, trace = sys.argv[1], sys.argv[2]
    reason = netns_hosts.why_unshaped()
    if reason:
        print(f"the what-if across two hosts cannot run here: {reason}; the one-host job's "
              "table instead")
        return CANNOT
    names = ["a", "b"]
    with netns_hosts.Hosts(names, rate_mbit=RATE_MBIT) as hosts:
        print(f"two hosts (network namespaces), one rank each, the link shaped to {RATE_MBIT} "
              f"Mbit/s each way; torch DDP over ringx on 4 x Linear(1024), bucket_cap_mb={BASE_CAP}")
        sys.stdout.write(train(hosts, names, trace, BASE_CAP, build))
        print(f"\n$ ringx-trace whatif {trace}\n")
        sys.stdout.write(whatif(build, trace))
        answer = json.loads(whatif(build, trace, "--json", "--no-bounds"))
        caps = [row for row in answer["rows"]
                if row["change"].startswith("bucket_cap_mb=") and not row["within_noise"]]
        if not caps:
            print("\nno bucket cap moves the step outside the noise on these hosts: nothing to "
                  "run for real")
            return 0
        base = answer["recorded_step_ns"]
        row = max(caps, key=lambda row: abs(row["predicted_step_ns"] - base))
        label, cap = row["change"], float(row["change"].split("=")[1])
        # The change twice, then the base again (ABBA): a spell of the machine's noise (it has
        # doubled a forward for a whole run) falls on both sides.
        measured = []
        for r in range(2):
            again = f"{trace}-cap{cap:g}-{r}"
            train(hosts, names, again, cap, build)
            measured.append(step_of(build, again))
        train(hosts, names, f"{trace}-again", BASE_CAP, build)
        answer = json.loads(whatif(build, f"{trace}-again", "--json", "--no-bounds",
                                   "--bucket-cap-mb", f"{cap:g}"))
        again_row = next(r for r in answer["rows"] if r["change"] == label)
    predicted = (row["predicted_step_ns"] + again_row["predicted_step_ns"]) / 2
    got = sum(measured) / 2
    print(f"\n{label} run for real on the same hosts, twice between two runs of the base "
          f"({trace}-cap{cap:g}-0, -1): step {got / 1e6:.1f} ms measured, {predicted / 1e6:.1f} ms "
          f"predicted ({(predicted / got - 1) * 100:+.1f}%; means of the two)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
