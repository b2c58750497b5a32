#!/usr/bin/env python3
"""ringx-viewer at scale: time to the first frame, load time, frames per second and memory.

Two tables, each from runs under one Xvfb display (Mesa's llvmpipe, like CI) at 1600x900:

1. Chrome Trace Event JSON of 1M and 10M events (4 ranks x 3 lanes,
   bench/make_viewer_trace.py), fully zoomed out and zoomed in to 5 ms.
2. ringx trace directories of 1,024 ranks on 128 hosts (bench_make_scale_trace: DDP
   steps, allreduces, a slow host and a slow rank) of 10M events, which load whole and
   show aggregate lanes, and of 100M events, which open as an index (--index-above):
   zoomed out, and zoomed in to 50 ms with the slow host (node3) expanded into its ranks.

Traces are cached in build/bench-viewer/ (the 100M one takes 3 GB). The goals of issue
19 on this 2-core machine: 10M events to a first frame in <= 1 s and loaded in <= 4 s;
at most 64 B per event; 1,024 ranks and 100M events at >= 30 fps in <= 4 GB.

    python3 bench/viewer.py [--sizes 1000000 10000000] [--scale-events 10000000 100000000]
                            [--frames 60] [--before OLD_VIEWER] [--docs]

"fps area" is the frame rate with the Statistics panel showing an area of every track of every
rank over the whole trace (--area; "area" is the time its aggregate took, once, in the first
frame after the load: the frames after it draw the table). With --before VIEWER, every figure is
measured with that build first and this one second, alternating, on the same traces (the
"build" column); a build without --area shows "-" there.

"first frame" is ringx-viewer's first_frame_ms (construction to the first frame on
screen: the window opens before the trace loads); "load" its load_ms, and "reopen" the
same for a second open, which reads the index file the first left (traces opened as an
index; the others load as before); peak RSS is the
viewer process's max RSS (wait4); memory per event subtracts the RSS of the same viewer
with no trace.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

import docs_table

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from virtual_display import VirtualDisplay  # noqa: E402  the tests' own display

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))
VIEWER = os.path.join(BUILD, "bin", "ringx-viewer")
STATS = re.compile(r"ranks=(\d+) events=(\d+) load_ms=(\d+) fps=([\d.]+)")
FIRST_FRAME = re.compile(r"first_frame_ms=(\d+) lanes=(\d+) indexed=(\d)")
AREA = re.compile(r"area_tracks=(\d+) area_rows=(\d+) area_ms=([\d.]+)")
SCALE_TRACE = os.path.join(BUILD, "bin", "bench_make_scale_trace")


def measured(display, args, env=None, viewer=VIEWER):
    """Runs the viewer as a direct child so that its own peak RSS can be read."""
    env = dict(env or os.environ, DISPLAY=display)
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        out = os.open(args[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(fd, 2)
        os.execve(viewer, [viewer, *args[1:], "--size", "1600x900", "--print-stats"], env)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"ringx-viewer failed: {os.waitstatus_to_exitcode(status)}")
    with open(args[0]) as f:
        text = f.read()
    m = STATS.search(text)
    first = FIRST_FRAME.search(text)
    stats = {"ranks": int(m.group(1)), "events": int(m.group(2)), "load_ms": int(m.group(3)),
             "fps": float(m.group(4)), "first_frame_ms": int(first.group(1)),
             "indexed": first.group(3) == "1"}
    area = AREA.search(text)
    if area:
        stats["area_ms"] = float(area.group(3))
    return stats, usage.ru_maxrss * 1024


def has_area(viewer):
    """Whether this build of the viewer has --area (a --before build may not)."""
    result = subprocess.run([viewer, "--help"], capture_output=True, text=True)
    return "--area" in result.stdout


def area_cells(stats):
    """The "fps area" and "area" cells of a row: '-' where the build has no --area."""
    if stats is None:
        return f"{'-':>9} {'-':>7}"
    return f"{stats['fps']:>9.1f} {stats['area_ms'] / 1e3:>6.2f}s"


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000000, 10000000],
                        help="Chrome JSON traces (events)")
    parser.add_argument("--scale-events", type=int, nargs="*", default=[10000000, 100000000],
                        help="1,024-rank ringx traces (events)")
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--before", metavar="VIEWER",
                        help="another build's ringx-viewer, measured beside this one's")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.docs:
        docs_table.require("viewer")
    for tool in (VIEWER, SCALE_TRACE, *([args.before] if args.before else [])):
        if not os.path.exists(tool):
            sys.exit(f"{tool} is missing: run `make` first")
    cache = os.path.join(BUILD, "bench-viewer")
    os.makedirs(cache, exist_ok=True)
    with VirtualDisplay() as xvfb, docs_table.table(args.docs, "viewer"):
        tables(args, cache, xvfb.name)


def tables(args, cache, display):
    out = os.path.join(cache, "stats.txt")
    frames = ["--frames", str(args.frames)]
    builds = [("before", args.before), ("after", VIEWER)] if args.before else [("this", VIEWER)]
    areas = {viewer: has_area(viewer) for _, viewer in builds}
    _, empty_rss = measured(display, [out, "--frames", "5"])
    print(f"ringx-viewer at 1600x900 under Xvfb + llvmpipe, {args.frames} frames per figure; "
          f"an empty viewer holds {empty_rss / 2**20:.0f} MiB")
    if args.sizes:
        print("\nChrome JSON, 4 ranks x 3 lanes")
        print(f"{'events':>10} {'build':>6} {'file':>9} {'first frame':>12} {'load':>8} "
              f"{'fps out':>8} {'fps in':>8} {'fps area':>9} {'area':>7} {'peak RSS':>9} "
              f"{'per event':>10}")
    for size in args.sizes:
        path = os.path.join(cache, f"trace-{size}.json")
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_viewer_trace.py"),
                            "--events", str(size), "--ranks", "4", "--lanes", "3", "--out",
                            path], check=True, stdout=subprocess.DEVNULL)
        for build, viewer in builds:
            zoomed_out, rss = measured(display, [out, path, *frames], viewer=viewer)
            # Zoomed in: 5 ms, one second into the trace.
            stats_in, _ = measured(display, [out, path, *frames, "--zoom", "1000:1005"],
                                   viewer=viewer)
            area = None
            if areas[viewer]:
                area, rss_area = measured(display, [out, path, *frames, "--area", "0-3"],
                                          viewer=viewer)
                rss = max(rss, rss_area)
            per_event = (rss - empty_rss) / max(zoomed_out["events"], 1)
            print(f"{zoomed_out['events']:>10} {build:>6} "
                  f"{os.path.getsize(path) / 2**20:>7.0f}MB "
                  f"{zoomed_out['first_frame_ms'] / 1e3:>11.2f}s "
                  f"{zoomed_out['load_ms'] / 1e3:>7.2f}s {zoomed_out['fps']:>8.1f} "
                  f"{stats_in['fps']:>8.1f} {area_cells(area)} {rss / 2**20:>7.0f}MiB "
                  f"{per_event:>8.0f} B", flush=True)
    if args.scale_events:
        print(f"\nringx trace directories, {args.ranks} ranks on {args.ranks // 8} hosts "
              f"(aggregate lanes; 'index': opened as an index, ranks load on expand, and "
              f"an area needs its ranks loaded)")
        print(f"{'events':>10} {'build':>6} {'files':>9} {'mode':>6} {'first frame':>12} "
              f"{'load':>8} {'reopen':>8} {'fps out':>8} {'fps host':>9} {'fps area':>9} "
              f"{'area':>7} {'peak RSS':>9} {'per event':>10}")
    for events in args.scale_events:
        path = os.path.join(cache, f"scale-{args.ranks}-{events}")
        if not os.path.exists(os.path.join(path, "manifest.json")):
            subprocess.run([SCALE_TRACE, "--out", path, "--ranks", str(args.ranks),
                            "--events", str(events)], check=True, stdout=subprocess.DEVNULL)
        for build, viewer in builds:
            scale_row(args, path, events, build, viewer, areas[viewer], cache, out, frames,
                      display, empty_rss)


def scale_row(args, path, events, build, viewer, area_flag, cache, out, frames, display,
              empty_rss):
    # A cache directory of this run's own: the first open makes the index file (for a trace
    # opened as an index), the second ("reopen") reads it.
    index_dir = os.path.join(cache, f"index-files-{os.getpid()}-{events}")
    shutil.rmtree(index_dir, ignore_errors=True)
    env = dict(os.environ, RINGX_VIEWER_CACHE_DIR=index_dir)
    zoomed_out, rss = measured(display, [out, path, *frames], env, viewer)
    # One host expanded into its ranks (they load then, for an index), 50 ms ten seconds in
    # (or the middle of a shorter trace).
    span_ms = 10000 if events >= 50000000 else 1000
    stats_host, rss_host = measured(display, [out, path, *frames, "--expand", "node3", "--zoom",
                                              f"{span_ms}:{span_ms + 50}"], env, viewer)
    area, rss_area = None, 0
    if area_flag and not zoomed_out["indexed"]:
        area, rss_area = measured(display, [out, path, *frames, "--area",
                                            f"0-{args.ranks - 1}"], env, viewer)
    shutil.rmtree(index_dir, ignore_errors=True)
    peak = max(rss, rss_host, rss_area)
    per_event = (peak - empty_rss) / max(zoomed_out["events"], 1)
    mode = "index" if zoomed_out["indexed"] else "whole"
    print(f"{zoomed_out['events']:>10} {build:>6} {dir_bytes(path) / 2**20:>7.0f}MB {mode:>6} "
          f"{zoomed_out['first_frame_ms'] / 1e3:>11.2f}s "
          f"{zoomed_out['load_ms'] / 1e3:>7.2f}s {stats_host['load_ms'] / 1e3:>7.2f}s "
          f"{zoomed_out['fps']:>8.1f} {stats_host['fps']:>9.1f} {area_cells(area)} "
          f"{peak / 2**20:>7.0f}MiB {per_event:>8.1f} B", flush=True)


if __name__ == "__main__":
    main()
