#!/usr/bin/env python3
"""The unchanged replay of real jobs' torch.profiler traces against their recorded steps, beside
the published replays' errors: Lumos (MLSys 2025, Kineto traces of LLM training on up to 512
H100s) 3.3% average; dPRO, its baseline, 14% average and 21.8% worst.

    .venv/bin/python bench/profiler_replay.py [--docs]

For every multi-rank set in ../shared/traces (or $RINGX_SHARED_TRACES), and the single ranks,
`ringx-trace whatif --json` (analysis/profiler_program.h) builds each rank's host, streams and
collectives from the files alone and replays them: printed per set, the recorded step, the
replayed one and the error; how far the replay starts the collectives from where they started
(the median and p90 over them: the check of the waits inferred between streams, which the step
alone cannot make where the host sets the step); the communication-free and compute-free bounds;
and where the critical path goes. --docs prints the table as docs/benchmarks.md holds it.
Nothing here is timed: the figures are the traces'."""

import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("RINGX_SHARED_TRACES") or os.path.join(ROOT, "..", "shared", "traces")
RINGX_TRACE = os.path.join(ROOT, "build", "bin", "ringx-trace")

SETS = [
    ("DLRM, 8 V100s", "nccl/param_dlrm_8rank/*.json*"),
    ("Megatron TP8, 8 A100s", "nccl/astrasim_megatron_tp8/*.json*"),
    ("HTA's 2 sampled ranks (of 128)", "hta/sampled_rank-*.json*"),
    ("B200, 1 rank", "nccl/tracelens_b200_rank0/*.json*"),
    ("MI300 (RCCL), 1 rank", "nccl/tracelens_mi300_rccl_rank0/*.json*"),
]


def ms(ns):
    return f"{ns / 1e6:.2f} ms"


def us(ns):
    return f"{ns / 1e3:.0f} us" if ns < 1e6 else ms(ns)


def replay(files):
    done = subprocess.run([RINGX_TRACE, "whatif", *files, "--json"], capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    return json.loads(done.stdout)


def path_shares(report):
    step = report["baseline"]["step_ns"]
    kinds = {}
    for s in report["baseline"]["critical_path"]:
        kinds[s["kind"]] = kinds.get(s["kind"], 0) + s["end_ns"] - s["begin_ns"]
    return ", ".join(f"{k} {100 * v / step:.0f}%" for k, v in
                     sorted(kinds.items(), key=lambda kv: -kv[1]) if v * 100 >= step)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", action="store_true", help="print the docs table")
    args = parser.parse_args()
    rows = []
    for name, pattern in SETS:
        files = sorted(glob.glob(os.path.join(SHARED, pattern)))
        if not files:
            sys.exit(f"profiler_replay: no files for {name} at {os.path.join(SHARED, pattern)}")
        r = replay(files)
        bounds = {row["change"]: row["change_share"] for row in r["rows"]}
        rows.append([name, str(r["ranks"]), str(r["steps"]), ms(r["recorded_step_ns"]),
                     ms(r["replayed_step_ns"]), f"{100 * r['baseline_error']:+.2f}%",
                     f"{us(r['start_error_median_ns'])} / {us(r['start_error_p90_ns'])}",
                     f"{100 * bounds['communication free']:+.1f}%",
                     f"{100 * bounds['compute free']:+.1f}%", path_shares(r)])
    header = ["set", "ranks", "steps", "recorded step", "replayed", "error",
              "collective starts off (median / p90)", "comm free", "compute free",
              "critical path"]
    if args.docs:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        for line in [header] + rows:
            print("  ".join(c.ljust(w) for c, w in zip(line, widths)))
    errors = [abs(float(r[5].rstrip("%"))) for r in rows]
    print(f"\nringx: mean |error| {sum(errors) / len(errors):.2f}%, worst {max(errors):.2f}% over "
          f"{len(rows)} sets; Lumos 3.3% average (published); dPRO 14% average, 21.8% worst "
          "(published, as Lumos's baseline)")


if __name__ == "__main__":
    main()
