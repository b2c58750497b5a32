#!/usr/bin/env python3
"""torchft's Manager over ringx beside torchft's own gloo groups: a DDP job of 4 replica
processes (samples/torchft_ddp.py), one SIGKILLed after step 8 and another started in its
place (tests/python/torchft_job.py), the Lighthouse's heartbeat timeout 1 s. Per process group,
from one run, alternating: the time from the kill to the first step the survivors committed
without the killed replica, the
survivors' uncommitted steps after it, the steps committed in all, and whether every replica
(the newcomer too) ends with plain SGD's weights over those steps.

    python3 bench/torchft_recovery.py [--rounds 1] [--docs]

ProcessGroupGloo runs gloo in the training process; ProcessGroupBabyGloo in a child process
(gloo cannot abort, so torchft kills the child on a reconfigure); ringx aborts natively."""

import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "python"))
import docs_table  # noqa: E402
import torchft_job  # noqa: E402

GROUPS = [("ringx", "ringx.torchft.ProcessGroupRingx"), ("gloo", "ProcessGroupGloo"),
          ("babygloo", "ProcessGroupBabyGloo")]


def agrees(result):
    if len(result["weights"]) != 4:
        return False
    reference = torchft_job.reference_weights(result["steps"])
    return all(torch.allclose(w[k], v, rtol=1e-5, atol=1e-6)
               for w in result["weights"] for k, v in reference.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.docs:
        docs_table.require("torchft_recovery")
    with docs_table.table(args.docs, "torchft_recovery"):
        print(f"{'process group':<34} {'round':>5} {'kill -> commit':>15} {'steps lost':>11} "
              f"{'steps':>6} {'weights':>8} {'errors':>7}")
        for r in range(args.rounds):
            for kind, label in GROUPS:
                with tempfile.TemporaryDirectory() as tmp:
                    result = torchft_job.run(kind, tmp, timeout_s=90)
                recovered = result["recovered_s"]
                print(f"{label:<34} {r:>5} "
                      f"{(f'{recovered:.2f} s' if recovered is not None else 'none'):>15} "
                      f"{str(result['lost']):>11} {str(result['steps']):>6} "
                      f"{('equal' if agrees(result) else 'differ'):>8} "
                      f"{len(result['errors']):>7}", flush=True)
                for e in result["errors"]:
                    print("   " + e.strip().splitlines()[-1][:200], file=sys.stderr)


if __name__ == "__main__":
    main()
