#!/usr/bin/env python3
"""`ringx-trace summary` at scale: wall time and peak memory on 1,024-rank traces.

Writes synthetic trace directories with bench_make_scale_trace (1,024 ranks, 8 per
host; node3 and rank 517 are the slow ones), runs `ringx-trace summary` of this
build on each, and of another build (--old: e.g. main's, which loads every event
into one store) for comparison, and prints one table. Issue 19's goal: memory that
grows with ranks and collectives, not with events.

    python3 bench/trace_summary_scale.py [--events 10000000 100000000] [--ranks 1024]
        [--old /path/to/old/ringx-trace] [--old-limit-gb 12] [--tmp /tmp] [--keep] [--docs]

Peak memory is each run's max RSS (wait4 on the child). The old build gets an
address-space limit (--old-limit-gb) so that a trace too large for it fails
alone instead of pushing the machine into swap; such a run prints as
"> N GB". Directories are deleted after their runs unless --keep (100M events
take a few GB).
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time

import docs_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))


def run(argv, limit_bytes=None):
    """(exit status, wall seconds, max RSS bytes) of one run, output discarded."""
    def limit():
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    start = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=limit)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    return child.returncode, wall, usage.ru_maxrss * 1024


def gb(n):
    return f"{n / 2**30:.2f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[10_000_000, 100_000_000])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--new", default=os.path.join(BUILD, "bin", "ringx-trace"))
    parser.add_argument("--old", help="another build's ringx-trace to compare with")
    parser.add_argument("--old-limit-gb", type=float, default=12)
    parser.add_argument("--maker", default=os.path.join(BUILD, "bin", "bench_make_scale_trace"))
    parser.add_argument("--tmp", default="/tmp")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.docs:
        docs_table.require("trace_summary_scale")

    rows = []
    for events in args.events:
        out = os.path.join(args.tmp, f"ringx-summary-scale-{args.ranks}x{events}")
        if not os.path.isdir(out):
            subprocess.run([args.maker, "--out", out, "--ranks", str(args.ranks), "--events",
                            str(events)], check=True, stdout=subprocess.DEVNULL)
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
        try:
            builds = [("new", args.new, None)]
            if args.old:
                builds.append(("old", args.old, int(args.old_limit_gb * 2**30)))
            for name, binary, limit in builds:
                status, wall, rss = run([binary, "summary", out], limit)
                memory = gb(rss) if status == 0 else f"> {args.old_limit_gb:g} GB (failed)"
                rows.append((f"{args.ranks} x {events / 1e6:g}M", gb(size), name,
                             f"{wall:.1f} s" if status == 0 else "-", memory))
                print("  ".join(rows[-1]), file=sys.stderr, flush=True)
        finally:
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)

    header = ("ranks x events", "on disk", "build", "wall", "peak RSS")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    with docs_table.table(args.docs, "trace_summary_scale"):
        for row in [header] + rows:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main()
